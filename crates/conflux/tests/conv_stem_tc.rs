//! The stem tensor-core kernel (ungrouped 16-bit convolutions of fewer than 8 input channels,
//! several taps per 16-byte chunk): 7×7 stride 2, 4×4 stride 4, 3×3 stride 2 and 3, 1 / 2 / 3 /
//! 5 channels, dilation, more than 128 outputs (two filter tiles), NHWC / NCHW / gapped
//! tensors, 3-D, f16 and bf16, through `check_solver` (f64 reference, poisoned output,
//! bit-identical rerun) with exact small-integer data and α/β; every configuration of the
//! tuning space; a misaligned y takes the CUDA-core kernel; a fused bias + leaky-ReLU plan; immediate
//! choice takes it for stems.

mod support;

use conflux::{DataType, Handle};
use support::cba::check_chosen_fused_plans;
use support::*;

const SOLVER: &str = "CudaConvStemTensorCore";

const CASES: [GroupedSpec; 9] = [
    // ResNet's 7×7 stride 2 (two taps of 4 channel slots per chunk).
    (DataType::Half, &[2, 3, 23, 21], &[64, 3, 7, 7], 1, 3, 2, 1, Lay::ChannelsLast),
    // ConvNeXt's 4×4 stride 4 patchify, planar.
    (DataType::BFloat16, &[2, 3, 16, 12], &[96, 3, 4, 4], 1, 0, 4, 1, Lay::Packed),
    // One channel (8 taps per chunk), dilation 2.
    (DataType::Half, &[1, 1, 11, 13], &[16, 1, 5, 5], 1, 2, 1, 2, Lay::ChannelsLast),
    // Five channels (a tap per chunk), gapped.
    (DataType::Half, &[2, 5, 9, 10], &[24, 5, 3, 3], 1, 1, 1, 1, Lay::Gapped),
    (DataType::BFloat16, &[1, 3, 14, 14], &[32, 3, 7, 7], 1, 3, 2, 1, Lay::GappedChannelsLast),
    // Inception's unpadded 3×3 stride 2 on an odd image.
    (DataType::Half, &[2, 3, 19, 17], &[32, 3, 3, 3], 1, 0, 2, 1, Lay::ChannelsLast),
    // Two channels, stride 3, 136 outputs: two filter tiles, the second part empty.
    (DataType::Half, &[1, 2, 10, 9], &[136, 2, 3, 3], 1, 1, 3, 1, Lay::ChannelsLast),
    // Several pixel tiles per block, a partial last tile row and column.
    (DataType::Half, &[3, 3, 40, 37], &[64, 3, 7, 7], 1, 3, 2, 1, Lay::ChannelsLast),
    // A planar stem of 6 outputs (channels past K are computed and not stored).
    (DataType::Half, &[1, 3, 12, 12], &[6, 3, 3, 3], 1, 1, 1, 1, Lay::Packed),
];

cuda_tests!(every_geometry_and_type, |h: &Handle| {
    let id = solution_id(SOLVER);
    for (i, spec) in CASES.iter().enumerate() {
        check_exact_and_scaled(h, &grouped_case(spec), Dir::Forward, id, 100 + 10 * i as u64);
    }
    // 3-D: a 3×7×7 stem with stride (1, 2, 2).
    let conv = conflux::ConvDesc::new(conflux::ConvMode::Convolution, &[1, 3, 3], &[1, 2, 2], &[1, 1, 1]).unwrap();
    let x = desc(DataType::Half, &[1, 3, 4, 13, 12], Lay::ChannelsLast);
    let w = desc(DataType::Half, &[16, 3, 3, 7, 7], Lay::ChannelsLast);
    let y = desc(DataType::Half, conv.output_desc(&x, &w).unwrap().lens(), Lay::ChannelsLast);
    check_exact_and_scaled(h, &ConvCase::new(&conv, &x, &w, &y), Dir::Forward, id, 300);
});

cuda_tests!(every_configuration, |h: &Handle| {
    for spec in [&CASES[0], &CASES[1], &CASES[2], &CASES[6]] {
        check_every_configuration(h, &grouped_case(spec), SOLVER, 8);
    }
});

cuda_tests!(refusals_name_the_cause, |h: &Handle| {
    let s = solver(SOLVER);
    let refused = |spec: &GroupedSpec, needle: &str| check_refuses(h, SOLVER, spec, needle);
    refused(&(DataType::Half, &[1, 8, 9, 9], &[16, 8, 3, 3], 1, 1, 1, 1, Lay::ChannelsLast), "input channels");
    refused(&(DataType::Half, &[1, 6, 9, 9], &[16, 3, 3, 3], 2, 1, 1, 1, Lay::ChannelsLast), "ungrouped");
    refused(&(DataType::Float, &[1, 3, 9, 9], &[16, 3, 3, 3], 1, 1, 1, 1, Lay::ChannelsLast), "f16 or bf16");
    let why = s.check(&grouped_case(&CASES[0]).fused(Dir::BackwardData), h.device().info()).unwrap_err();
    assert!(why.contains("forward only"), "{why}");
});

cuda_tests!(misaligned_pointers_take_the_cuda_core_kernel, |h: &Handle| {
    check_misaligned_forward(h, &grouped_case(&CASES[0]), SOLVER);
});

cuda_tests!(chosen_for_stems_and_fused_bias_leaky_relu, |h: &Handle| {
    check_chosen_fused_plans(h, &[&CASES[0], &CASES[1], &CASES[5]], SOLVER, 70);
});
