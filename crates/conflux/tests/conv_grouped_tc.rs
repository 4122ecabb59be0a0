//! The grouped tensor-core kernel (groups of 2–32 channels, several whole groups per block):
//! f16 and bf16, groups of 2 / 4 (merged into block-diagonal groups of 8) / 8 / 16 / 24 / 32
//! channels, 4 → 8 and 8 → 16 outputs per group, a group count
//! that leaves the last block part empty, 1×1 to 5×5, stride, padding, dilation, 3-D, α/β,
//! through `check_solver` (f64 reference, poisoned output, bit-identical rerun), exact
//! small-integer data bit for bit; every configuration of the tuning space; misaligned pointers
//! take the CUDA-core kernel; a fused bias + leaky-ReLU plan; immediate choice prefers it.

mod support;

use conflux::{DataType, Handle};
use support::cba::check_chosen_fused_plans;
use support::*;

const SOLVER: &str = "CudaConvGroupedTensorCore";

const CASES: [GroupedSpec; 12] = [
    // ResNeXt's groups of 8 (one m16n8k16 step spans two taps), stride 1 and 2.
    (DataType::Half, &[2, 64, 10, 9], &[64, 8, 3, 3], 8, 1, 1, 1, Lay::ChannelsLast),
    (DataType::Half, &[2, 128, 11, 12], &[128, 8, 3, 3], 16, 1, 2, 1, Lay::ChannelsLast),
    // Groups of 16 and 32 (bf16: sums of products of [-1, 1] stay exact).
    (DataType::BFloat16, &[2, 64, 9, 9], &[64, 16, 3, 3], 4, 1, 2, 1, Lay::ChannelsLast),
    (DataType::Half, &[1, 64, 7, 7], &[64, 32, 3, 3], 2, 1, 1, 1, Lay::ChannelsLast),
    // Twelve groups of 8: the second block of groups holds four.
    (DataType::Half, &[1, 96, 6, 7], &[96, 8, 3, 3], 12, 1, 1, 1, Lay::ChannelsLast),
    // Groups of 24 (three chunks per tap), 16 outputs per group of 8, dilation 2 on 5×5.
    (DataType::Half, &[2, 48, 8, 8], &[48, 24, 3, 3], 2, 1, 1, 1, Lay::ChannelsLast),
    (DataType::Half, &[2, 32, 11, 11], &[64, 8, 5, 5], 4, 2, 1, 2, Lay::ChannelsLast),
    // 1×1 groups of 8: one real tap and one zero tap per stage.
    (DataType::Half, &[2, 64, 5, 5], &[64, 8, 1, 1], 8, 0, 1, 1, Lay::ChannelsLast),
    // Three pixel tiles with a partial last one.
    (DataType::Half, &[3, 64, 9, 10], &[64, 8, 3, 3], 8, 1, 1, 1, Lay::ChannelsLast),
    // ResNeXt's groups of 4 (pairs merged), 4 → 8 outputs with stride 2, groups of 2 (fours merged).
    (DataType::Half, &[2, 64, 10, 9], &[64, 4, 3, 3], 16, 1, 1, 1, Lay::ChannelsLast),
    (DataType::BFloat16, &[2, 32, 9, 8], &[64, 4, 3, 3], 8, 1, 2, 1, Lay::ChannelsLast),
    (DataType::Half, &[1, 16, 7, 7], &[16, 2, 3, 3], 8, 1, 1, 1, Lay::ChannelsLast),
];

cuda_tests!(every_geometry_and_type, |h: &Handle| {
    let id = solution_id(SOLVER);
    for (i, spec) in CASES.iter().enumerate() {
        check_exact_and_scaled(h, &grouped_case(spec), Dir::Forward, id, 100 + 10 * i as u64);
    }
    // 3-D: groups of 8, 3×3×3.
    let mut conv = conflux::ConvDesc::new(conflux::ConvMode::Convolution, &[1, 1, 1], &[1, 2, 1], &[1, 1, 1]).unwrap();
    conv.set_groups(4).unwrap();
    let x = desc(DataType::Half, &[1, 32, 4, 6, 5], Lay::ChannelsLast);
    let w = desc(DataType::Half, &[32, 8, 3, 3, 3], Lay::ChannelsLast);
    let y = desc(DataType::Half, conv.output_desc(&x, &w).unwrap().lens(), Lay::ChannelsLast);
    check_exact_and_scaled(h, &ConvCase::new(&conv, &x, &w, &y), Dir::Forward, id, 300);
    // A planar y: values stored from registers instead of staged 16-byte rows.
    let c = grouped_case(&CASES[0]);
    let y = desc(DataType::Half, c.y.lens(), Lay::Packed);
    check_exact_and_scaled(h, &ConvCase::new(&c.conv, &c.x, &c.w, &y), Dir::Forward, id, 400);
});

cuda_tests!(every_configuration, |h: &Handle| {
    for spec in [&CASES[0], &CASES[3], &CASES[4], &CASES[5], &CASES[9], &CASES[11]] {
        check_every_configuration(h, &grouped_case(spec), SOLVER, 4);
    }
});

cuda_tests!(refusals_name_the_cause, |h: &Handle| {
    let s = solver(SOLVER);
    let refused = |spec: &GroupedSpec, needle: &str| check_refuses(h, SOLVER, spec, needle);
    refused(&(DataType::Half, &[1, 64, 8, 8], &[64, 64, 3, 3], 1, 1, 1, 1, Lay::ChannelsLast), "ungrouped");
    refused(&(DataType::Half, &[1, 128, 8, 8], &[128, 64, 3, 3], 2, 1, 1, 1, Lay::ChannelsLast), "input channels per group");
    refused(&(DataType::Half, &[1, 64, 8, 8], &[96, 8, 3, 3], 8, 1, 1, 1, Lay::ChannelsLast), "output channels per group");
    refused(&(DataType::Half, &[1, 32, 8, 8], &[32, 1, 3, 3], 32, 1, 1, 1, Lay::ChannelsLast), "not a multiple of 8");
    refused(&(DataType::Half, &[1, 48, 8, 8], &[48, 6, 3, 3], 8, 1, 1, 1, Lay::ChannelsLast), "not a multiple of 8");
    refused(&(DataType::Half, &[1, 12, 8, 8], &[12, 4, 3, 3], 3, 1, 1, 1, Lay::ChannelsLast), "do not merge");
    refused(&(DataType::Half, &[1, 32, 8, 8], &[32, 4, 3, 3], 8, 1, 1, 1, Lay::Packed), "channels-last");
    refused(&(DataType::Float, &[1, 64, 8, 8], &[64, 8, 3, 3], 8, 1, 1, 1, Lay::ChannelsLast), "f16 or bf16");
    refused(&(DataType::Half, &[1, 64, 8, 8], &[64, 8, 3, 3], 8, 1, 1, 1, Lay::Packed), "channels-last");
    let c = grouped_case(&CASES[0]);
    let why = s.check(&c.fused(Dir::BackwardData), h.device().info()).unwrap_err();
    assert!(why.contains("forward only"), "{why}");
});

cuda_tests!(misaligned_pointers_take_the_cuda_core_kernel, |h: &Handle| {
    check_misaligned_forward(h, &grouped_case(&CASES[0]), SOLVER);
    check_misaligned_forward(h, &grouped_case(&CASES[9]), SOLVER);
});

cuda_tests!(fused_bias_leaky_relu_and_chosen, |h: &Handle| {
    check_chosen_fused_plans(h, &[&CASES[0], &CASES[2], &CASES[6], &CASES[9]], SOLVER, 60);
});
