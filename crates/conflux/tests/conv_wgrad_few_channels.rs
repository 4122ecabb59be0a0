//! Backward-weights of depthwise, small-group and few-channel stem convolutions on the
//! few-channels kernel: depthwise 3×3 / 7×7 at strides 1 and 2, a channel multiplier of 2,
//! ResNeXt-like groups of 4, 8 and 16, a 3-channel 7×7 stride-2 stem, dilation, a filter wider than an
//! item's columns; f16, bf16 and f32; NHWC, NCHW and gapped tensors; through `check_solver`
//! (f64 reference, poisoned output, bit-identical rerun, gaps untouched) with exact
//! small-integer data and with α/β; refusals name the cause; immediate choice takes it.

mod support;

use conflux::{DataType, Handle};
use support::*;

const SOLVER: &str = "CudaConvBwdWeightsFewChannels";

type Spec = GroupedSpec;

const CASES: [Spec; 12] = [
    (DataType::Half, &[2, 40, 14, 14], &[40, 1, 3, 3], 40, 1, 1, 1, Lay::ChannelsLast),
    (DataType::Half, &[2, 32, 14, 13], &[32, 1, 3, 3], 32, 1, 2, 1, Lay::ChannelsLast),
    (DataType::BFloat16, &[1, 24, 9, 10], &[24, 1, 7, 7], 24, 3, 1, 1, Lay::ChannelsLast),
    (DataType::Float, &[2, 16, 11, 11], &[16, 1, 5, 5], 16, 2, 2, 1, Lay::Packed),
    (DataType::Half, &[1, 16, 9, 9], &[32, 1, 3, 3], 16, 1, 1, 1, Lay::ChannelsLast),
    (DataType::Half, &[2, 64, 10, 10], &[64, 4, 3, 3], 16, 1, 1, 1, Lay::ChannelsLast),
    (DataType::Float, &[2, 32, 12, 11], &[32, 4, 3, 3], 8, 1, 2, 1, Lay::ChannelsLast),
    (DataType::Half, &[2, 3, 23, 22], &[64, 3, 7, 7], 1, 3, 2, 1, Lay::ChannelsLast),
    (DataType::Half, &[2, 16, 12, 12], &[16, 1, 3, 3], 16, 2, 1, 2, Lay::Gapped),
    (DataType::Float, &[1, 8, 9, 30], &[8, 1, 3, 11], 8, 1, 1, 1, Lay::GappedChannelsLast),
    (DataType::Half, &[2, 64, 9, 9], &[64, 16, 3, 3], 4, 1, 2, 1, Lay::ChannelsLast),
    (DataType::Float, &[1, 64, 7, 7], &[64, 8, 3, 3], 8, 1, 1, 1, Lay::Packed),
];

fn case(spec: &Spec) -> ConvCase { grouped_case(spec) }

cuda_tests!(every_case, |h: &Handle| {
    let id = solution_id(SOLVER);
    for (i, spec) in CASES.iter().enumerate() {
        check_exact_and_scaled(h, &case(spec), Dir::BackwardWeights, id, 900 + i as u64);
    }
});

cuda_tests!(refusals_name_the_cause, |h: &Handle| {
    let s = solver(SOLVER);
    let check = |spec: &Spec, d: Dir| s.check(&case(spec).fused(d), h.device().info()).unwrap_err();
    let wide = (DataType::Half, &[2, 64, 8, 8][..], &[64, 32, 3, 3][..], 2, 1, 1, 1, Lay::ChannelsLast);
    let why = check(&wide, Dir::BackwardWeights);
    assert!(why.contains("channels per group"), "{why}");
    let why = check(&CASES[0], Dir::Forward);
    assert!(why.contains("backward-weights only"), "{why}");
});

cuda_tests!(chosen_for_depthwise_and_stems, |h: &Handle| {
    // Stems go to the im2col GEMM ahead of it where cuBLASLt loads.
    let im2col = solver("CudaConvBwdWeightsIm2colLt");
    for spec in [&CASES[0], &CASES[7]] {
        let fp = case(spec).fused(Dir::BackwardWeights);
        let chosen = conflux::search::choose(h, &fp, conflux::conv::Choice::Auto, 0).unwrap();
        let want = if im2col.check(&fp, h.device().info()).is_ok() { im2col.name() } else { SOLVER };
        assert_eq!(chosen.name(), want);
    }
});
