//! The small-groups CPU solver (4, 8, 16 or 32 output channels and up to 32 input channels per
//! group: ResNeXt's grouped 3×3 layers): strides 1 and 2, padding, dilation, 1×1 and 5×5
//! filters, rows wide enough for the four-output blocks and their borders, four groups of
//! 4 → 4 channels per vector, NCHW / NHWC /
//! gapped tensors, through `check_solver` (f64 reference, poisoned output, bit-identical rerun,
//! gaps untouched) with exact and α/β data; immediate choice takes it; refusals name the cause.

mod support;

use conflux::{DataType, Handle};
use support::*;

const SOLVER: &str = "CpuConvSmallGroups";

const CASES: [GroupedSpec; 10] = [
    (DataType::Float, &[2, 32, 9, 14], &[32, 8, 3, 3], 4, 1, 1, 1, Lay::Packed),
    (DataType::Float, &[1, 64, 12, 17], &[64, 8, 3, 3], 8, 1, 2, 1, Lay::ChannelsLast),
    (DataType::Float, &[2, 16, 8, 13], &[16, 4, 3, 3], 4, 1, 1, 1, Lay::Gapped),
    (DataType::Float, &[1, 32, 10, 19], &[32, 16, 3, 3], 2, 2, 1, 2, Lay::GappedChannelsLast),
    (DataType::Float, &[2, 12, 7, 11], &[16, 3, 5, 5], 4, 2, 1, 1, Lay::Packed),
    (DataType::Float, &[1, 24, 6, 9], &[48, 2, 1, 1], 12, 0, 1, 1, Lay::ChannelsLast),
    (DataType::Float, &[1, 16, 5, 3], &[32, 8, 3, 3], 2, 1, 2, 1, Lay::Packed),
    // Four groups of 4 → 4 per vector (eight groups), stride 2; groups of 8 → 8 (six groups),
    // a dilated 5×5.
    (DataType::Float, &[1, 32, 10, 11], &[32, 4, 3, 3], 8, 1, 2, 1, Lay::ChannelsLast),
    (DataType::Float, &[1, 48, 9, 13], &[48, 8, 5, 5], 6, 2, 1, 2, Lay::Packed),
    // ResNeXt's last stage: 32 in and 32 out per group, stride 2.
    (DataType::Float, &[1, 64, 11, 13], &[64, 32, 3, 3], 2, 1, 2, 1, Lay::Packed),
];

/// Every case runs on this solver; immediate mode picks it, or for channels-first tensors on
/// AVX-512 the flat grouped solver ahead of it.
#[test]
fn every_case() {
    let h = Handle::cpu();
    let id = solution_id(SOLVER);
    for (i, spec) in CASES.iter().enumerate() {
        let c = grouped_case(spec);
        let chosen = conflux::search::choose(&h, &c.fused(Dir::Forward), conflux::conv::Choice::Auto, 0).unwrap();
        assert!([SOLVER, "CpuConvGroupedFlat"].contains(&chosen.name()), "{} for {c:?}", chosen.name());
        check_exact_and_scaled(&h, &c, Dir::Forward, id, 7000 + 10 * i as u64);
    }
}

#[test]
fn refusals_name_the_cause() {
    let h = Handle::cpu();
    let s = solver(SOLVER);
    let check = |spec: &GroupedSpec, d: Dir| s.check(&grouped_case(spec).fused(d), h.device().info()).unwrap_err();
    assert!(check(&(DataType::Float, &[1, 128, 8, 8], &[128, 64, 3, 3], 2, 1, 1, 1, Lay::Packed), Dir::Forward).contains("channels per group"));
    assert!(check(&(DataType::Float, &[1, 16, 8, 8], &[24, 8, 3, 3], 2, 1, 1, 1, Lay::Packed), Dir::Forward).contains("channels per group"));
    assert!(check(&(DataType::Float, &[1, 16, 8, 8], &[8, 16, 3, 3], 1, 1, 1, 1, Lay::Packed), Dir::Forward).contains("ungrouped"));
    assert!(check(&(DataType::Half, &[1, 16, 8, 8], &[16, 8, 3, 3], 2, 1, 1, 1, Lay::Packed), Dir::Forward).contains("f32 only"));
    assert!(check(&CASES[0], Dir::BackwardData).contains("forward only"));
}
