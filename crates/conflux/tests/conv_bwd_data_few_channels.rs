//! Backward-data of depthwise and few-channels-per-group convolutions on the few-channels
//! kernel, by phases: depthwise 3×3 / 5×5 / 7×7 at strides 1 and 2 (even and odd sizes), a
//! channel multiplier of 2, ResNeXt-like groups of 4 channels at strides 1 and 2, dilation;
//! ungrouped 3-channel stems (7×7 s2, 4×4 s4, 3×3 s2) on the few-outputs kernel;
//! f16, bf16 and f32; NHWC, NCHW and gapped tensors; through `check_solver` (f64 reference,
//! poisoned output, bit-identical rerun, gaps untouched) with exact small-integer data and
//! with α/β; refusals name the cause; immediate choice takes it for depthwise layers.

mod support;

use conflux::{DataType, Handle};
use support::*;

const SOLVER: &str = "CudaConvBwdDataFewChannels";

/// (dtype, dx lengths, w lengths, groups, pad, stride, dilation, layout)
type Spec = (DataType, &'static [usize], &'static [usize], usize, i64, i64, i64, Lay);

const CASES: [Spec; 13] = [
    (DataType::Half, &[2, 32, 14, 14], &[32, 1, 3, 3], 32, 1, 1, 1, Lay::ChannelsLast),
    (DataType::Half, &[2, 32, 14, 13], &[32, 1, 3, 3], 32, 1, 2, 1, Lay::ChannelsLast),
    (DataType::BFloat16, &[2, 24, 11, 12], &[24, 1, 7, 7], 24, 3, 1, 1, Lay::ChannelsLast),
    (DataType::Float, &[2, 16, 11, 11], &[16, 1, 5, 5], 16, 2, 2, 1, Lay::Packed),
    (DataType::Half, &[1, 16, 9, 9], &[32, 1, 3, 3], 16, 1, 1, 1, Lay::ChannelsLast),
    (DataType::Half, &[2, 32, 10, 10], &[32, 4, 3, 3], 8, 1, 1, 1, Lay::ChannelsLast),
    (DataType::BFloat16, &[2, 32, 12, 11], &[32, 4, 3, 3], 8, 1, 2, 1, Lay::ChannelsLast),
    (DataType::Half, &[2, 16, 12, 12], &[16, 1, 3, 3], 16, 2, 1, 2, Lay::Gapped),
    (DataType::Float, &[1, 8, 9, 10], &[8, 1, 3, 3], 8, 1, 2, 1, Lay::GappedChannelsLast),
    (DataType::Half, &[2, 16, 9, 9], &[16, 1, 3, 3], 16, 0, 3, 1, Lay::Packed),
    // Ungrouped 3-channel stems (their phases on the few-outputs kernel): 7×7 stride 2 with
    // odd and even sizes, 4×4 stride 4 patches on planar tensors, 3×3 stride 2.
    (DataType::Half, &[2, 3, 23, 22], &[16, 3, 7, 7], 1, 3, 2, 1, Lay::ChannelsLast),
    (DataType::Float, &[1, 3, 16, 16], &[8, 3, 4, 4], 1, 0, 4, 1, Lay::Packed),
    (DataType::BFloat16, &[2, 3, 15, 15], &[32, 3, 3, 3], 1, 1, 2, 1, Lay::ChannelsLast),
];

fn case(spec: &Spec) -> ConvCase { grouped_case(spec) }

cuda_tests!(every_case, |h: &Handle| {
    let id = solution_id(SOLVER);
    for (i, spec) in CASES.iter().enumerate() {
        check_exact_and_scaled(h, &case(spec), Dir::BackwardData, id, 700 + i as u64);
    }
});

cuda_tests!(refusals_name_the_cause, |h: &Handle| {
    let s = solver(SOLVER);
    let check = |spec: &Spec, d: Dir| s.check(&case(spec).fused(d), h.device().info()).unwrap_err();
    let dense = (DataType::Half, &[2, 64, 8, 8][..], &[64, 64, 3, 3][..], 1, 1, 2, 1, Lay::ChannelsLast);
    let why = check(&dense, Dir::BackwardData);
    assert!(why.contains("output channels"), "{why}");
    let why = check(&CASES[0], Dir::Forward);
    assert!(why.contains("backward-data only"), "{why}");
    let wide = (DataType::Half, &[2, 64, 8, 8][..], &[64, 16, 3, 3][..], 4, 1, 1, 1, Lay::ChannelsLast);
    let why = check(&wide, Dir::BackwardData);
    assert!(why.contains("channels per group"), "{why}");
});

cuda_tests!(chosen_for_depthwise_layers_and_stems, |h: &Handle| {
    for spec in [&CASES[0], &CASES[1], &CASES[10], &CASES[11]] {
        let c = case(spec);
        let chosen = conflux::search::choose(h, &c.fused(Dir::BackwardData), conflux::conv::Choice::Auto, 0).unwrap();
        assert_eq!(chosen.name(), SOLVER);
    }
});
