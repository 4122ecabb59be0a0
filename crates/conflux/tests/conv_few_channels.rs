//! The few-channels-per-group CUDA kernel (depthwise, channel multipliers, ResNeXt-like
//! groups, 3-channel 3×3 stems): every type, 2-D and 3-D, filters 1×1 to 7×7 and 1×7, stride,
//! padding, dilation, NCHW / NHWC / gapped tensors, α/β, through `check_solver` (f64
//! reference, poisoned output, bit-identical rerun, gaps untouched), exact small-integer data
//! bit for bit; misaligned pointers take the element-wise kernel; fused epilogues through a
//! plan; immediate choice prefers it over the generic kernels.

mod support;

use conflux::reference::compare::tolerance;
use conflux::reference::fill::Fill;
use conflux::{ConvDesc, ConvMode, DataType, Handle};
use support::*;

const SOLVER: &str = "CudaConvFewChannels";

/// (dtype, x lengths, w lengths, groups, pad, stride, dilation, layout)
type Spec = (DataType, &'static [usize], &'static [usize], usize, i64, i64, i64, Lay);

const CASES: [Spec; 17] = [
    // Depthwise 3×3, stride 1 and 2, channels-last vectors (f16: 8 lanes, f32: 4).
    (DataType::Half, &[2, 32, 12, 13], &[32, 1, 3, 3], 32, 1, 1, 1, Lay::ChannelsLast),
    (DataType::Float, &[2, 24, 11, 10], &[24, 1, 3, 3], 24, 1, 2, 1, Lay::ChannelsLast),
    (DataType::BFloat16, &[1, 16, 9, 9], &[16, 1, 5, 5], 16, 2, 1, 1, Lay::ChannelsLast),
    // ConvNeXt-like 7×7, padding 3.
    (DataType::Half, &[1, 40, 14, 14], &[40, 1, 7, 7], 40, 3, 1, 1, Lay::ChannelsLast),
    // Planar (NCHW) depthwise, odd widths, dilation 2.
    (DataType::Float, &[2, 6, 13, 17], &[6, 1, 3, 3], 6, 2, 1, 2, Lay::Packed),
    (DataType::Half, &[1, 5, 8, 7], &[5, 1, 5, 5], 5, 2, 2, 1, Lay::Packed),
    // Channel multiplier 2, channels not a multiple of the vector.
    (DataType::Float, &[2, 6, 9, 8], &[12, 1, 3, 3], 6, 1, 1, 1, Lay::ChannelsLast),
    // ResNeXt-like groups of 4 channels, 4 filters each.
    (DataType::Half, &[2, 32, 10, 9], &[32, 4, 3, 3], 8, 1, 1, 1, Lay::ChannelsLast),
    (DataType::Float, &[1, 16, 8, 8], &[24, 4, 3, 3], 4, 1, 2, 1, Lay::Packed),
    // A 3-channel 3×3 stem, stride 2; groups of 2 in gapped channels-last tensors (inputs
    // shared across the group, element loads).
    (DataType::Half, &[2, 3, 15, 16], &[32, 3, 3, 3], 1, 1, 2, 1, Lay::ChannelsLast),
    (DataType::Float, &[1, 8, 7, 9], &[8, 2, 3, 3], 4, 1, 1, 1, Lay::GappedChannelsLast),
    // Groups of 3 channels, 7×7 stride 2.
    (DataType::Half, &[2, 6, 23, 21], &[16, 3, 7, 7], 2, 3, 2, 1, Lay::ChannelsLast),
    // Groups of 4 inside an f16 vector of 8 channels, stride 2.
    (DataType::Half, &[2, 64, 9, 10], &[64, 4, 3, 3], 16, 1, 2, 1, Lay::ChannelsLast),
    // 1×7 and gapped tensors.
    (DataType::Float, &[1, 8, 9, 12], &[8, 1, 1, 7], 8, 0, 1, 1, Lay::Gapped),
    (DataType::BFloat16, &[2, 16, 7, 9], &[16, 1, 3, 3], 16, 1, 1, 1, Lay::GappedChannelsLast),
    // 3-D depthwise 3×3×3.
    (DataType::Float, &[1, 8, 5, 6, 7], &[8, 1, 3, 3, 3], 8, 1, 1, 1, Lay::ChannelsLast),
    // Output narrower than a thread's column tile.
    (DataType::Half, &[1, 16, 5, 3], &[16, 1, 3, 3], 16, 1, 1, 1, Lay::ChannelsLast),
];

fn case(&(dt, lx, lw, groups, pad, stride, dil, lay): &Spec) -> ConvCase {
    let nd = lx.len() - 2;
    let mut conv = ConvDesc::new(ConvMode::Convolution, &vec![pad; nd], &vec![stride; nd], &vec![dil; nd]).unwrap();
    conv.set_groups(groups as i64).unwrap();
    let x = desc(dt, lx, lay);
    let w = desc(dt, lw, lay);
    let y = desc(dt, conv.output_desc(&x, &w).unwrap().lens(), lay);
    ConvCase::new(&conv, &x, &w, &y)
}

cuda_tests!(every_geometry_and_type, |h: &Handle| {
    let id = solution_id(SOLVER);
    for (i, spec) in CASES.iter().enumerate() {
        let c = case(spec);
        // Exact data only where every sum is an exact value of the type.
        let exact = spec.0 != DataType::BFloat16;
        let (fill, tol) = if exact { (Fill::SmallInt(-2, 2), 0.0) } else { (Fill::Normal, tolerance(spec.0)) };
        let applied = check_solver(h, &c, Dir::Forward, id, (1.0, 0.0), fill, tol, 100 + i as u64);
        assert!(applied, "{SOLVER} refused {c:?}");
        // α/β with random data.
        let applied = check_solver(h, &c, Dir::Forward, id, (0.75, 0.5), Fill::Normal, tolerance(spec.0), 200 + i as u64);
        assert!(applied, "{SOLVER} refused {c:?}");
    }
});

cuda_tests!(refusals_name_the_cause, |h: &Handle| {
    let s = solver(SOLVER);
    let wide = case(&(DataType::Float, &[1, 32, 8, 8], &[32, 8, 3, 3], 4, 1, 1, 1, Lay::Packed));
    let why = s.check(&wide.fused(Dir::Forward), h.device().info()).unwrap_err();
    assert!(why.contains("input channels per group"), "{why}");
    let stem = case(&(DataType::Half, &[1, 3, 16, 16], &[8, 3, 7, 7], 1, 3, 2, 1, Lay::ChannelsLast));
    let why = s.check(&stem.fused(Dir::Forward), h.device().info()).unwrap_err();
    assert!(why.contains("products per output"), "{why}");
    let planar_stem = case(&(DataType::Float, &[1, 3, 16, 16], &[8, 3, 3, 3], 1, 1, 2, 1, Lay::Packed));
    let why = s.check(&planar_stem.fused(Dir::Forward), h.device().info()).unwrap_err();
    assert!(why.contains("planar"), "{why}");
    let dw = case(&CASES[0]);
    let why = s.check(&dw.fused(Dir::BackwardData), h.device().info()).unwrap_err();
    assert!(why.contains("forward only"), "{why}");
});

cuda_tests!(misaligned_pointers_take_the_element_kernel, |h: &Handle| {
    check_misaligned_forward(h, &case(&CASES[0]), SOLVER);
});

cuda_tests!(chosen_for_depthwise_and_small_groups, |h: &Handle| {
    // 16-bit channels-last groups of 4 (CASES[7]) go to the grouped tensor-core kernel and
    // 16-bit 3-channel stems (CASES[8]) to the stem tensor-core kernel.
    for spec in [&CASES[0], &CASES[4]] {
        let c = case(spec);
        let chosen = conflux::search::choose(h, &c.fused(Dir::Forward), conflux::conv::Choice::Auto, 0).unwrap();
        assert_eq!(chosen.name(), SOLVER, "{c:?}");
    }
});

cuda_tests!(every_column_tile, |h: &Handle| {
    for spec in [&CASES[0], &CASES[2], &CASES[4], &CASES[7], &CASES[13]] {
        check_every_configuration(h, &case(spec), SOLVER, 2);
    }
});
