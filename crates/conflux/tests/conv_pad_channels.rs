//! The channel-padding tensor-core solver (3-channel stems and other ungrouped 16-bit
//! convolutions whose channels are not a multiple of 8): 7×7 stride 2 and 4×4 stride 4 stems,
//! 1 and 5 channels, 23 and 70 channels (odd widths, R(2+1)D), NHWC / NCHW / gapped x, f16 and bf16, through `check_solver` (f64 reference,
//! poisoned output, bit-identical rerun, gaps untouched) with exact small-integer data and
//! α/β; refusals name the cause; immediate choice takes the stem kernel ahead of it.

mod support;

use conflux::reference::compare::tolerance;
use conflux::reference::fill::Fill;
use conflux::{ConvDesc, ConvMode, DataType, Handle};
use support::*;

const SOLVER: &str = "CudaConvTensorCorePadChannels";

/// (dtype, x lengths, w lengths, pad, stride, layout)
type Spec = (DataType, &'static [usize], &'static [usize], i64, i64, Lay);

const CASES: [Spec; 7] = [
    (DataType::Half, &[2, 3, 23, 21], &[64, 3, 7, 7], 3, 2, Lay::ChannelsLast),
    (DataType::BFloat16, &[2, 3, 16, 12], &[96, 3, 4, 4], 0, 4, Lay::Packed),
    (DataType::Half, &[1, 1, 11, 13], &[16, 1, 5, 5], 2, 1, Lay::ChannelsLast),
    (DataType::Half, &[2, 5, 9, 10], &[24, 5, 3, 3], 1, 1, Lay::Gapped),
    (DataType::BFloat16, &[1, 3, 14, 14], &[32, 3, 7, 7], 3, 2, Lay::GappedChannelsLast),
    (DataType::Half, &[2, 23, 7, 9], &[21, 23, 3, 3], 1, 1, Lay::ChannelsLast),
    (DataType::Half, &[1, 70, 6, 5], &[64, 70, 3, 1], 1, 1, Lay::Packed),
];

fn case(&(dt, lx, lw, pad, stride, lay): &Spec) -> ConvCase {
    let conv = ConvDesc::new(ConvMode::Convolution, &[pad, pad], &[stride, stride], &[1, 1]).unwrap();
    let x = desc(dt, lx, lay);
    let w = desc(dt, lw, lay);
    let y = desc(dt, conv.output_desc(&x, &w).unwrap().lens(), lay);
    ConvCase::new(&conv, &x, &w, &y)
}

cuda_tests!(every_case, |h: &Handle| {
    let id = solution_id(SOLVER);
    for (i, spec) in CASES.iter().enumerate() {
        let c = case(spec);
        let applied = check_solver(h, &c, Dir::Forward, id, (1.0, 0.0), Fill::SmallInt(-2, 2), 0.0, 300 + i as u64);
        assert!(applied, "{SOLVER} refused {c:?}");
        let applied = check_solver(h, &c, Dir::Forward, id, (0.75, 0.5), Fill::Normal, tolerance(spec.0), 400 + i as u64);
        assert!(applied, "{SOLVER} refused {c:?}");
    }
});

cuda_tests!(refusals_name_the_cause, |h: &Handle| {
    let s = solver(SOLVER);
    let refusal = |spec: &Spec| s.check(&case(spec).fused(Dir::Forward), h.device().info()).unwrap_err();
    let why = refusal(&(DataType::Half, &[1, 8, 9, 9], &[16, 8, 3, 3], 1, 1, Lay::ChannelsLast));
    assert!(why.contains("input channels"), "{why}");
    let why = refusal(&(DataType::Half, &[1, 96, 9, 9], &[16, 96, 3, 3], 1, 1, Lay::ChannelsLast));
    assert!(why.contains("fill 16-byte chunks"), "{why}");
    let why = refusal(&(DataType::Half, &[32, 20, 1, 1], &[480, 20, 1, 1], 0, 1, Lay::ChannelsLast));
    assert!(why.contains("squeeze-excitation"), "{why}");
    let why = refusal(&(DataType::Float, &[1, 3, 9, 9], &[16, 3, 3, 3], 1, 1, Lay::ChannelsLast));
    assert!(why.contains("f16 or bf16"), "{why}");
    let why = s.check(&case(&CASES[0]).fused(Dir::BackwardData), h.device().info()).unwrap_err();
    assert!(why.contains("forward only"), "{why}");
});

cuda_tests!(the_stem_kernel_is_chosen_ahead_of_it, |h: &Handle| {
    let c = case(&CASES[0]);
    let chosen = conflux::search::choose(h, &c.fused(Dir::Forward), conflux::conv::Choice::Auto, 0).unwrap();
    assert_eq!(chosen.name(), "CudaConvStemTensorCore");
});

// Backward-data with output channels (dy's) off 16-byte chunks (`CudaConvBwdDataPadChannels`):
// dy and w padded with zero channels and filters, run on the tensor-core backward-data paths:
// stride 2 (phases), stride 1 (one forward convolution), NCHW, and 3-D (R(2+1)D's 1 × 3 × 3
// stride (1, 2, 2) over 46 channels); refusals name the cause.
cuda_tests!(backward_data_with_odd_output_channels, |h: &Handle| {
    let id = solution_id("CudaConvBwdDataPadChannels");
    let cases = [
        (DataType::Half, vec![2, 64, 11, 10], vec![23, 64, 3, 3], vec![1, 1], vec![2, 2], Lay::ChannelsLast),
        (DataType::BFloat16, vec![1, 32, 7, 9], vec![70, 32, 3, 3], vec![1, 1], vec![1, 1], Lay::Packed),
        (DataType::Half, vec![1, 32, 3, 9, 8], vec![46, 32, 1, 3, 3], vec![0, 1, 1], vec![1, 2, 2], Lay::ChannelsLast),
    ];
    for (i, (dt, lx, lw, pad, stride, lay)) in cases.into_iter().enumerate() {
        let conv = ConvDesc::new(ConvMode::Convolution, &pad, &stride, &vec![1; pad.len()]).unwrap();
        let (x, w) = (desc(dt, &lx, lay), desc(dt, &lw, lay));
        let y = desc(dt, conv.output_desc(&x, &w).unwrap().lens(), lay);
        let c = ConvCase::new(&conv, &x, &w, &y);
        check_exact_and_scaled(h, &c, Dir::BackwardData, id, 600 + 10 * i as u64);
    }
    let s = solver("CudaConvBwdDataPadChannels");
    let even = case(&(DataType::Half, &[1, 64, 9, 9], &[64, 64, 3, 3], 1, 1, Lay::ChannelsLast));
    let why = s.check(&even.fused(Dir::BackwardData), h.device().info()).unwrap_err();
    assert!(why.contains("not a multiple of 8"), "{why}");
    let why = s.check(&case(&CASES[5]).fused(Dir::Forward), h.device().info()).unwrap_err();
    assert!(why.contains("backward-data only"), "{why}");
});
