//! Backward-weights and backward-data of 1×1 convolutions as one cuBLASLt GEMM each (the same
//! cases for both): channels-last x (dx) and dy of a
//! batch, channels-first ones of one image (and one of each), narrow and wide channel counts,
//! columns off 16-byte boundaries,
//! f16, bf16, strict f32 and TF32-allowed f32, dw packed or channels-last; through
//! `check_solver` (f64 reference, poisoned output, bit-identical rerun) with exact
//! small-integer data and with α/β; refusals name the cause; immediate mode takes it.
//! Also backward-weights of few-channel stems as one GEMM over an explicit im2col of x
//! (`CudaConvBwdWeightsIm2colLt`): 7×7 / 3×3 stride 2, 4×4 stride 4, one channel, any x layout,
//! the pixel reduction whole and split.

mod support;

use conflux::reference::compare::{tolerance, TF32_TOLERANCE};
use conflux::reference::fill::Fill;
use conflux::types::ConvAttrib;
use conflux::{ConvDesc, ConvMode, DataType, Handle};
use support::*;

/// The solver of each direction.
const SOLVERS: [(Dir, &str); 2] = [(Dir::BackwardWeights, "CudaConvBwdWeightsGemmLt"), (Dir::BackwardData, "CudaConvBwdDataGemmLt")];

/// (dtype, TF32 allowed, x lengths, output channels, layout of x, of dy, of dw)
type Spec = (DataType, bool, &'static [usize], usize, Lay, Lay, Lay);

const CASES: [Spec; 9] = [
    // MobileNetV2's narrow layers: a long reduction into a 16 × 32 output.
    (DataType::Half, false, &[3, 32, 11, 10], 16, Lay::ChannelsLast, Lay::ChannelsLast, Lay::ChannelsLast),
    (DataType::BFloat16, false, &[2, 144, 9, 9], 24, Lay::ChannelsLast, Lay::ChannelsLast, Lay::ChannelsLast),
    (DataType::Half, false, &[2, 24, 7, 6], 144, Lay::ChannelsLast, Lay::ChannelsLast, Lay::Packed),
    // One image channels-first: its pixels are one run per channel.
    (DataType::Half, false, &[1, 64, 7, 9], 40, Lay::Packed, Lay::Packed, Lay::Packed),
    (DataType::Half, false, &[1, 16, 5, 8], 48, Lay::Packed, Lay::ChannelsLast, Lay::ChannelsLast),
    // Columns off 16-byte boundaries: 12 channels (8-byte), a 21-class head (2-byte).
    (DataType::Half, false, &[2, 12, 7, 9], 40, Lay::ChannelsLast, Lay::ChannelsLast, Lay::ChannelsLast),
    (DataType::Half, false, &[2, 64, 6, 5], 21, Lay::ChannelsLast, Lay::ChannelsLast, Lay::Packed),
    (DataType::Float, false, &[2, 24, 6, 7], 48, Lay::ChannelsLast, Lay::ChannelsLast, Lay::ChannelsLast),
    (DataType::Float, true, &[1, 40, 6, 5], 24, Lay::Packed, Lay::ChannelsLast, Lay::Packed),
];

/// Strided backward-data (dx zeroed, one GEMM per output row): (dtype, dx lengths, output
/// channels, stride, layout of w). dx and dy channels-last.
const STRIDED: [(DataType, &[usize], usize, i64, Lay); 4] = [
    (DataType::Half, &[2, 64, 14, 14], 128, 2, Lay::ChannelsLast),
    (DataType::BFloat16, &[2, 32, 8, 8], 48, 2, Lay::Packed),
    // One image: its odd row count needs no even spacing between images.
    (DataType::Half, &[1, 24, 9, 11], 40, 2, Lay::ChannelsLast),
    (DataType::Float, &[2, 32, 9, 9], 16, 3, Lay::ChannelsLast),
];

fn strided_case(&(dt, lx, k, stride, lay_w): &(DataType, &[usize], usize, i64, Lay), lay_x: Lay) -> ConvCase {
    let conv = conv_desc(false, stride);
    let x = desc(dt, lx, lay_x);
    let w = desc(dt, &[k, lx[1], 1, 1], lay_w);
    let y = desc(dt, conv.output_desc(&x, &w).unwrap().lens(), Lay::ChannelsLast);
    ConvCase::new(&conv, &x, &w, &y)
}

// β = 0 runs the GEMMs; β ≠ 0 (the second pass) runs the phase solver in their place.
cuda_tests!(strided_backward_data, |h: &Handle| {
    let id = solution_id("CudaConvBwdDataGemmLt");
    for (i, spec) in STRIDED.iter().enumerate() {
        check_exact_and_scaled(h, &strided_case(spec, Lay::ChannelsLast), Dir::BackwardData, id, 2300 + i as u64);
    }
    let s = solver("CudaConvBwdDataGemmLt");
    let why = |c: &ConvCase| s.check(&c.fused(Dir::BackwardData), h.device().info()).unwrap_err();
    let gapped = strided_case(&STRIDED[0], Lay::GappedChannelsLast);
    assert!(why(&gapped).contains("without gaps"));
    let odd_rows = strided_case(&(DataType::Half, &[2, 24, 9, 11], 40, 2, Lay::ChannelsLast), Lay::ChannelsLast);
    assert!(why(&odd_rows).contains("evenly spaced"));
    let planar = strided_case(&STRIDED[0], Lay::Packed);
    assert!(why(&planar).contains("channels-last"));
});

fn conv_desc(tf32: bool, stride: i64) -> ConvDesc {
    let mut conv = ConvDesc::new(ConvMode::Convolution, &[0, 0], &[stride, stride], &[1, 1]).unwrap();
    conv.set_attribute(ConvAttrib::AllowTf32, tf32 as i64).unwrap();
    conv
}

fn case(&(dt, tf32, lx, k, lay_x, lay_y, lay_w): &Spec) -> ConvCase {
    let conv = conv_desc(tf32, 1);
    let x = desc(dt, lx, lay_x);
    let w = desc(dt, &[k, lx[1], 1, 1], lay_w);
    let y = desc(dt, conv.output_desc(&x, &w).unwrap().lens(), lay_y);
    ConvCase::new(&conv, &x, &w, &y)
}

cuda_tests!(every_case, |h: &Handle| {
    for (d, name) in SOLVERS {
        let id = solution_id(name);
        for (i, spec) in CASES.iter().enumerate() {
            let (c, seed) = (case(spec), 2100 + i as u64);
            // Every sum stays within the output type's exact integers (bf16: 256).
            let exact = if spec.0 == DataType::BFloat16 { Fill::SmallInt(-1, 1) } else { Fill::SmallInt(-2, 2) };
            assert!(check_solver(h, &c, d, id, (1.0, 0.0), exact, 0.0, seed), "{name} refused {c:?}");
            let tol = if spec.1 { TF32_TOLERANCE } else { tolerance(spec.0) };
            assert!(check_solver(h, &c, d, id, (0.75, 0.5), Fill::Normal, tol, seed + 1000), "{name} refused {c:?}");
        }
    }
});

cuda_tests!(refusals_name_the_cause, |h: &Handle| {
    for (d, name) in SOLVERS {
        refusals(h, d, name);
    }
});

fn refusals(h: &Handle, d: Dir, name: &str) {
    let s = solver(name);
    let why = |c: &ConvCase, d: Dir| s.check(&c.fused(d), h.device().info()).unwrap_err();
    assert!(why(&case(&CASES[0]), Dir::Forward).contains("only"));
    // Two channels-first images: pixels of one channel are not one evenly spaced run.
    let two_images = case(&(DataType::Half, false, &[2, 64, 7, 9], 40, Lay::Packed, Lay::Packed, Lay::Packed));
    assert!(why(&two_images, d).contains("evenly spaced"));
    let gapped = case(&(DataType::Half, false, &[2, 64, 7, 9], 40, Lay::GappedChannelsLast, Lay::ChannelsLast, Lay::ChannelsLast));
    assert!(why(&gapped, d).contains("evenly spaced"));
    let conv = conv_desc(false, 2);
    let x = desc(DataType::Half, &[2, 64, 8, 8], Lay::ChannelsLast);
    let w = desc(DataType::Half, &[32, 64, 1, 1], Lay::ChannelsLast);
    let y = desc(DataType::Half, conv.output_desc(&x, &w).unwrap().lens(), Lay::ChannelsLast);
    let strided = ConvCase::new(&conv, &x, &w, &y);
    if d == Dir::BackwardWeights {
        assert!(why(&strided, d).contains("stride-1"));
    }
    let grouped = grouped_case(&(DataType::Half, &[2, 64, 8, 8], &[64, 32, 1, 1], 2, 0, 1, 1, Lay::ChannelsLast));
    assert!(why(&grouped, d).contains("one group"));
}

cuda_tests!(chosen_in_immediate_mode, |h: &Handle| {
    for (d, name) in SOLVERS {
        for spec in [&CASES[0], &CASES[6]] {
            let chosen = conflux::search::choose(h, &case(spec).fused(d), conflux::conv::Choice::Auto, 0).unwrap();
            assert_eq!(chosen.name(), name);
        }
    }
});

/// Stems: (dtype, TF32 allowed, x lengths, w lengths, pad, stride, layout of x, of dy, of dw).
type StemSpec = (DataType, bool, &'static [usize], &'static [usize], i64, i64, Lay, Lay, Lay);

const STEMS: [StemSpec; 9] = [
    (DataType::Half, false, &[2, 3, 23, 21], &[16, 3, 7, 7], 3, 2, Lay::ChannelsLast, Lay::ChannelsLast, Lay::Packed),
    (DataType::BFloat16, false, &[2, 3, 17, 17], &[24, 3, 3, 3], 0, 2, Lay::ChannelsLast, Lay::ChannelsLast, Lay::ChannelsLast),
    (DataType::Half, false, &[2, 3, 16, 16], &[32, 3, 4, 4], 0, 4, Lay::ChannelsLast, Lay::ChannelsLast, Lay::ChannelsLast),
    (DataType::Float, false, &[2, 3, 13, 11], &[8, 3, 3, 3], 1, 2, Lay::ChannelsLast, Lay::ChannelsLast, Lay::Packed),
    (DataType::Float, true, &[2, 4, 9, 10], &[12, 4, 3, 3], 1, 1, Lay::Packed, Lay::ChannelsLast, Lay::Packed),
    // One channels-first image: dy's pixels are one run per channel.
    (DataType::Half, false, &[1, 3, 15, 15], &[16, 3, 3, 3], 1, 1, Lay::Packed, Lay::Packed, Lay::Packed),
    (DataType::Half, false, &[2, 1, 12, 12], &[8, 1, 5, 5], 2, 1, Lay::ChannelsLast, Lay::ChannelsLast, Lay::ChannelsLast),
    // Enough pixels to split the reduction: 4 and 16 GEMMs whose f32 products are added up.
    (DataType::Half, false, &[2, 3, 48, 48], &[8, 3, 3, 3], 1, 1, Lay::ChannelsLast, Lay::ChannelsLast, Lay::Packed),
    (DataType::Float, false, &[4, 3, 64, 64], &[16, 3, 3, 3], 1, 1, Lay::ChannelsLast, Lay::ChannelsLast, Lay::ChannelsLast),
];

fn stem_case(&(dt, tf32, lx, lw, pad, stride, lay_x, lay_y, lay_w): &StemSpec) -> ConvCase {
    let mut conv = ConvDesc::new(ConvMode::Convolution, &[pad, pad], &[stride, stride], &[1, 1]).unwrap();
    conv.set_attribute(ConvAttrib::AllowTf32, tf32 as i64).unwrap();
    let x = desc(dt, lx, lay_x);
    let w = desc(dt, lw, lay_w);
    let y = desc(dt, conv.output_desc(&x, &w).unwrap().lens(), lay_y);
    ConvCase::new(&conv, &x, &w, &y)
}

cuda_tests!(stem_backward_weights_through_im2col, |h: &Handle| {
    let name = "CudaConvBwdWeightsIm2colLt";
    let id = solution_id(name);
    for (i, spec) in STEMS.iter().enumerate() {
        let (c, seed) = (stem_case(spec), 2400 + i as u64);
        let exact = if spec.0 == DataType::BFloat16 { Fill::SmallInt(-1, 1) } else { Fill::SmallInt(-2, 2) };
        assert!(check_solver(h, &c, Dir::BackwardWeights, id, (1.0, 0.0), exact, 0.0, seed), "{name} refused {c:?}");
        let tol = if spec.1 { TF32_TOLERANCE } else { tolerance(spec.0) };
        assert!(check_solver(h, &c, Dir::BackwardWeights, id, (0.75, 0.5), Fill::Normal, tol, seed + 1000), "{name} refused {c:?}");
    }
    let chosen = conflux::search::choose(h, &stem_case(&STEMS[0]).fused(Dir::BackwardWeights), conflux::conv::Choice::Auto, 0).unwrap();
    assert_eq!(chosen.name(), name, "immediate mode");
    let s = solver(name);
    let why = |c: &ConvCase| s.check(&c.fused(Dir::BackwardWeights), h.device().info()).unwrap_err();
    let wide = stem_case(&(DataType::Half, false, &[2, 8, 9, 9], &[16, 8, 3, 3], 1, 1, Lay::ChannelsLast, Lay::ChannelsLast, Lay::Packed));
    assert!(why(&wide).contains("input channels"));
    let grouped = grouped_case(&(DataType::Half, &[2, 4, 8, 8], &[8, 2, 3, 3], 2, 1, 1, 1, Lay::ChannelsLast));
    assert!(why(&grouped).contains("one group"));
    assert!(s.check(&stem_case(&STEMS[0]).fused(Dir::Forward), h.device().info()).unwrap_err().contains("only"));
});
