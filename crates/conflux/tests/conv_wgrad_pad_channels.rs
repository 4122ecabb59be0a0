//! Backward-weights through channel-padded copies of x on the tensor-core kernel, for what the
//! TMA kernel does not take itself: f32 channel counts off its 32-channel boxes (1×1 layers of
//! 40 and 144 channels, a 2×2 stride-2 downsampling of 80, a 3×3 of 48, strict f32 on split TF32
//! products), and groups that neither fill 64-channel boxes nor merge into them (24 and 48
//! channels, three groups of 32); through `check_solver` (f64 reference, poisoned output,
//! bit-identical rerun, gaps untouched) with exact small-integer data and with α/β; refusals
//! name the cause; immediate choice takes it. A 3-D 16-bit layer of 23 channels.

mod support;

use conflux::{ConvDesc, ConvMode, DataType, Handle};
use support::*;

const SOLVER: &str = "CudaConvBwdWeightsPadChannels";

/// (dtype, x lengths, w lengths, pad, stride, layout)
type Spec = (DataType, &'static [usize], &'static [usize], i64, i64, Lay);

const CASES: [Spec; 8] = [
    (DataType::Float, &[2, 144, 12, 12], &[24, 144, 1, 1], 0, 1, Lay::ChannelsLast),
    (DataType::Float, &[1, 40, 9, 9], &[16, 40, 1, 1], 0, 1, Lay::ChannelsLast),
    (DataType::Float, &[2, 80, 10, 10], &[64, 80, 2, 2], 0, 2, Lay::ChannelsLast),
    (DataType::Float, &[1, 48, 9, 8], &[64, 48, 3, 3], 1, 1, Lay::ChannelsLast),
    (DataType::Float, &[1, 48, 9, 8], &[64, 48, 3, 3], 1, 1, Lay::GappedChannelsLast),
    // 3-D, 16-bit, an odd width (R(2+1)D's 230 channels, scaled down): x padded to 24.
    (DataType::Half, &[1, 23, 4, 6, 5], &[64, 23, 3, 3, 3], 1, 1, Lay::Packed),
    // Odd output channels: dy padded too (2-D 64 → 23, 3-D 32 → 46).
    (DataType::Half, &[2, 64, 9, 9], &[23, 64, 3, 3], 1, 1, Lay::ChannelsLast),
    (DataType::BFloat16, &[1, 32, 3, 8, 8], &[46, 32, 3, 3, 3], 1, 2, Lay::ChannelsLast),
];

fn case(&(dt, lx, lw, pad, stride, lay): &Spec) -> ConvCase {
    let nd = lx.len() - 2;
    let conv = ConvDesc::new(ConvMode::Convolution, &vec![pad; nd], &vec![stride; nd], &vec![1; nd]).unwrap();
    let x = desc(dt, lx, lay);
    let w = desc(dt, lw, Lay::ChannelsLast);
    let y = desc(dt, conv.output_desc(&x, &w).unwrap().lens(), Lay::ChannelsLast);
    ConvCase::new(&conv, &x, &w, &y)
}

cuda_tests!(every_case, |h: &Handle| {
    let id = solution_id(SOLVER);
    for (i, spec) in CASES.iter().enumerate() {
        check_exact_and_scaled(h, &case(spec), Dir::BackwardWeights, id, 1100 + i as u64);
    }
});

/// Groups whose channels neither fill a box nor merge into one: three groups of 32 (each
/// padded to 64, the output rows of the next group computed and dropped), 48 per group with
/// stride 2, 24 per group with 16 outputs.
const GROUPED: [GroupedSpec; 3] = [
    (DataType::Half, &[2, 96, 10, 10], &[96, 32, 3, 3], 3, 1, 1, 1, Lay::ChannelsLast),
    (DataType::BFloat16, &[1, 96, 9, 9], &[96, 48, 3, 3], 2, 1, 2, 1, Lay::ChannelsLast),
    (DataType::Half, &[2, 96, 8, 8], &[64, 24, 1, 1], 4, 0, 1, 1, Lay::ChannelsLast),
];

cuda_tests!(grouped_cases, |h: &Handle| {
    let id = solution_id(SOLVER);
    for (i, spec) in GROUPED.iter().enumerate() {
        check_exact_and_scaled(h, &grouped_case(spec), Dir::BackwardWeights, id, 1200 + i as u64);
    }
    let chosen = conflux::search::choose(h, &grouped_case(&GROUPED[0]).fused(Dir::BackwardWeights), conflux::conv::Choice::Auto, 0).unwrap();
    assert_eq!(chosen.name(), SOLVER);
});

cuda_tests!(refusals_name_the_cause, |h: &Handle| {
    let s = solver(SOLVER);
    let check = |spec: &Spec, d: Dir| s.check(&case(spec).fused(d), h.device().info()).unwrap_err();
    let whole = (DataType::Half, &[2, 128, 8, 8][..], &[64, 128, 1, 1][..], 0, 1, Lay::ChannelsLast);
    let why = check(&whole, Dir::BackwardWeights);
    assert!(why.contains("whole boxes"), "{why}");
    // 16-bit: one group of 96 reads zeros past its channels, groups of 32 merge into boxes.
    let tail = (DataType::Half, &[2, 96, 8, 8][..], &[64, 96, 3, 3][..], 1, 1, Lay::ChannelsLast);
    let why = check(&tail, Dir::BackwardWeights);
    assert!(why.contains("without a padded copy"), "{why}");
    let merged = grouped_case(&(DataType::Half, &[2, 128, 8, 8], &[128, 32, 3, 3], 4, 1, 1, 1, Lay::ChannelsLast));
    let why = s.check(&merged.fused(Dir::BackwardWeights), h.device().info()).unwrap_err();
    assert!(why.contains("without a padded copy"), "{why}");
    let why = check(&CASES[0], Dir::Forward);
    assert!(why.contains("backward-weights only"), "{why}");
    let stem = (DataType::Half, &[2, 3, 16, 16][..], &[64, 3, 7, 7][..], 3, 2, Lay::ChannelsLast);
    let why = check(&stem, Dir::BackwardWeights);
    assert!(why.contains("3 channels"), "{why}");
    // 12 outputs per group: the copy engine cannot start a group's dy box at channel 12.
    let odd = grouped_case(&(DataType::Half, &[2, 96, 8, 8], &[48, 24, 1, 1], 4, 0, 1, 1, Lay::ChannelsLast));
    let why = s.check(&odd.fused(Dir::BackwardWeights), h.device().info()).unwrap_err();
    assert!(why.contains("16-byte alignment"), "{why}");
});

// 1×1 stride-1 layers go to the cuBLASLt GEMM first; the strided f32 2×2 of 80 channels comes here.
cuda_tests!(chosen_for_narrow_channels, |h: &Handle| {
    let c = case(&CASES[3]);
    let chosen = conflux::search::choose(h, &c.fused(Dir::BackwardWeights), conflux::conv::Choice::Auto, 0).unwrap();
    assert_eq!(chosen.name(), SOLVER);
});
