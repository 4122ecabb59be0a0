//! Backward-data of depthwise and few-channels-per-group convolutions on the few-channels
//! kernel, by phases: depthwise 3×3 / 5×5 / 7×7 at strides 1 and 2 (even and odd sizes), a
//! channel multiplier of 2, ResNeXt-like groups of 4 channels at strides 1 and 2, dilation;
//! ungrouped 3-channel stems (7×7 s2, 4×4 s4, 3×3 s2) on the few-outputs kernel;
//! f16, bf16 and f32; NHWC, NCHW and gapped tensors; through `check_solver` (f64 reference,
//! poisoned output, bit-identical rerun, gaps untouched) with exact small-integer data and
//! with α/β; refusals name the cause; immediate choice takes it for stems and groups.
//! Then the one-launch depthwise backward-data kernel (strided layers) on the same depthwise cases and more
//! strides (4×4 patches at stride 4, odd widths at stride 3), channel counts off the 16-byte
//! vector, every configuration of its tuning space; immediate choice takes it for depthwise.

mod support;

use conflux::{DataType, Handle};
use support::*;

const SOLVER: &str = "CudaConvBwdDataFewChannels";
const DEPTHWISE: &str = "CudaConvBwdDataDepthwise";

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
    // Stride-1 depthwise stays on the phase solver (one forward convolution); strided goes to
    // the one-launch kernel.
    for (spec, want) in [(&CASES[0], SOLVER), (&CASES[1], DEPTHWISE), (&CASES[10], SOLVER), (&CASES[11], SOLVER)] {
        let c = case(spec);
        let chosen = conflux::search::choose(h, &c.fused(Dir::BackwardData), conflux::conv::Choice::Auto, 0).unwrap();
        assert_eq!(chosen.name(), want, "{c:?}");
    }
});

/// Strided depthwise cases beyond CASES' (whose strided depthwise ones it also runs): strides 3
/// and 4, a 2×2 stride-2 patch layer, channel counts of 12 (4-element vectors) and 20
/// (2-element), batch 3, 7×7 stride 2, dilation 2, a 7 × 7 image.
const DEPTHWISE_CASES: [Spec; 7] = [
    (DataType::Half, &[3, 12, 13, 14], &[12, 1, 3, 3], 12, 1, 3, 1, Lay::ChannelsLast),
    (DataType::Half, &[2, 16, 16, 16], &[16, 1, 4, 4], 16, 0, 4, 1, Lay::ChannelsLast),
    (DataType::BFloat16, &[2, 32, 14, 14], &[32, 1, 2, 2], 32, 0, 2, 1, Lay::ChannelsLast),
    (DataType::Half, &[1, 20, 15, 15], &[20, 1, 7, 7], 20, 3, 2, 1, Lay::ChannelsLast),
    (DataType::Float, &[2, 24, 12, 13], &[24, 1, 5, 5], 24, 2, 2, 2, Lay::ChannelsLast),
    (DataType::Half, &[2, 8, 11, 11], &[8, 1, 3, 3], 8, 1, 2, 1, Lay::Packed),
    (DataType::Half, &[2, 64, 7, 7], &[64, 1, 3, 3], 64, 1, 2, 1, Lay::ChannelsLast),
];

cuda_tests!(depthwise_every_case, |h: &Handle| {
    let id = solution_id(DEPTHWISE);
    let depthwise = CASES.iter().filter(|s| s.3 > 1 && s.2[0] == s.1[1] && s.2[1] == 1 && s.5 > 1);
    for (i, spec) in depthwise.chain(DEPTHWISE_CASES.iter()).enumerate() {
        check_exact_and_scaled(h, &case(spec), Dir::BackwardData, id, 1700 + 10 * i as u64);
    }
});

cuda_tests!(depthwise_every_configuration, |h: &Handle| {
    for spec in [&CASES[1], &DEPTHWISE_CASES[0], &DEPTHWISE_CASES[3]] {
        check_every_configuration_in(h, &case(spec), Dir::BackwardData, DEPTHWISE, 2);
    }
});

cuda_tests!(depthwise_refusals_name_the_cause, |h: &Handle| {
    let s = solver(DEPTHWISE);
    let check = |spec: &Spec, d: Dir| s.check(&case(spec).fused(d), h.device().info()).unwrap_err();
    assert!(check(&CASES[1], Dir::Forward).contains("backward-data only"));
    assert!(check(&CASES[0], Dir::BackwardData).contains("stride 1"));
    assert!(check(&CASES[4], Dir::BackwardData).contains("one output channel per group"));
    assert!(check(&CASES[5], Dir::BackwardData).contains("one output channel per group"));
    let wide = (DataType::Half, &[1, 16, 40, 40][..], &[16, 1, 3, 17][..], 16, 1, 2, 1, Lay::ChannelsLast);
    assert!(check(&wide, Dir::BackwardData).contains("filter width"));
});
