//! The AVX-512 flat grouped solver (≥ 2 input and 4·m output channels per group, or stems of
//! ≤ 4 input channels; stride 1 or 2, channels-first planes read in place or split into stride
//! phases): random geometries
//! (filters 1×1 to 5×5 and non-square, dilation, padding, 2–9 input and 4–16 output channels
//! per group, planes up to 40 × 40, batch 2) with packed or gapped outputs through
//! `check_solver` (f64 reference, poisoned output, bit-identical rerun, gaps untouched) on
//! exact and α/β data; ResNeXt's grouped layers and stems choose it; fused plans; its refusals name
//! their cause. On a CPU without AVX-512 its check must say so.

mod support;

use conflux::{ActivationMode, ConvDesc, ConvMode, DataType, Handle};
use support::depthwise::{avx512_solver_runs, bias_act_plan};
use support::*;

const SOLVER: &str = "CpuConvGroupedFlat";

/// A grouped f32 case: `groups` groups of `cg` → `kg` channels, x packed NCHW, y `yl`.
#[allow(clippy::too_many_arguments)]
fn case(n: usize, groups: usize, cg: usize, kg: usize, hw: [usize; 2], f: [usize; 2], pad: [i64; 2], stride: i64, dil: [i64; 2], yl: Lay) -> Option<ConvCase> {
    let mut conv = ConvDesc::new(ConvMode::Convolution, &pad, &[stride, stride], &dil).ok()?;
    conv.set_groups(groups as i64).ok()?;
    let x = desc(DataType::Float, &[n, groups * cg, hw[0], hw[1]], Lay::Packed);
    let w = desc(DataType::Float, &[groups * kg, cg, f[0], f[1]], Lay::Packed);
    let y = desc(DataType::Float, conv.output_desc(&x, &w).ok()?.lens(), yl);
    Some(ConvCase::new(&conv, &x, &w, &y))
}

/// Whether this CPU runs the solver; elsewhere its check must say it needs AVX-512.
fn runs_here(h: &Handle) -> bool {
    avx512_solver_runs(h, SOLVER, &case(1, 4, 4, 4, [7, 7], [3, 3], [1, 1], 1, [1, 1], Lay::Packed).unwrap())
}

#[test]
fn random_geometries_and_outputs() {
    let h = Handle::cpu();
    if !runs_here(&h) {
        return;
    }
    let id = solution_id(SOLVER);
    let mut r = SplitMix64::new(3131);
    let (mut ran, mut strided) = (0u64, 0);
    while ran < 40 {
        let f = [r.range(1, 5), r.range(1, 5)];
        let stride = r.pick(&[1, 1, 2]) as i64;
        let dil = [r.pick(&[1, 1, 2]) as i64, r.pick(&[1, 1, 3]) as i64];
        let same = |k: usize, d: i64| ((k as i64 - 1) * d + 1) / 2;
        let pad = [r.pick(&[same(f[0], dil[0]), 0, 2]), if r.range(0, 5) == 0 { 0 } else { same(f[1], dil[1]) }];
        let hw = [r.range(1, 30), r.range(1, 40)];
        // A stem (one group of ≤ 4 input channels) one time in four.
        let (groups, cg, kg) = if r.range(0, 3) == 0 { (1, r.range(1, 4), 4 * r.range(1, 6)) } else { (r.range(2, 5), r.range(2, 9), 4 * r.range(1, 4)) };
        let yl = r.pick(&[Lay::Packed, Lay::Gapped]);
        let Some(c) = case(r.range(1, 2), groups, cg, kg, hw, f, pad, stride, dil, yl) else { continue };
        if solver(SOLVER).check(&c.fused(Dir::Forward), h.device().info()).is_err() {
            continue;
        }
        check_exact_and_scaled(&h, &c, Dir::Forward, id, 31000 + 10 * ran);
        strided += usize::from(stride == 2);
        ran += 1;
    }
    assert!(strided >= 6, "only {strided} strided cases ran");
}

/// ResNeXt-50 32×4d's grouped 3 × 3 layers (4 to 32 channels per group, stride 1 and 2),
/// scaled down in channels where the plane is large: the heuristic picks this solver.
#[test]
fn resnext_layers() {
    let h = Handle::cpu();
    if !runs_here(&h) {
        return;
    }
    let id = solution_id(SOLVER);
    let specs: [(usize, usize, usize, i64); 6] = [(8, 4, 56, 1), (8, 8, 56, 2), (8, 8, 28, 1), (4, 16, 28, 2), (4, 16, 14, 1), (2, 32, 7, 1)];
    for (i, &(groups, cg, hw, s)) in specs.iter().enumerate() {
        let c = case(1, groups, cg, cg, [hw, hw], [3, 3], [1, 1], s, [1, 1], Lay::Packed).unwrap();
        let chosen = conflux::search::choose(&h, &c.fused(Dir::Forward), conflux::conv::Choice::Auto, 0).unwrap();
        assert_eq!(chosen.name(), SOLVER, "{c:?}");
        check_exact_and_scaled(&h, &c, Dir::Forward, id, 31500 + 10 * i as u64);
    }
}

/// Stems (ungrouped, 1–4 input channels): ResNet's 7 × 7 s2 and MobileNet's 3 × 3 s2 on
/// smaller images, a 4-channel stride-1 3 × 3, a 1-channel 5 × 5; batch 2 for one.
#[test]
fn stems() {
    let h = Handle::cpu();
    if !runs_here(&h) {
        return;
    }
    let id = solution_id(SOLVER);
    let specs: [(usize, usize, usize, usize, i64, i64); 4] = [(1, 3, 64, 7, 3, 2), (2, 3, 32, 3, 1, 2), (1, 4, 16, 3, 1, 1), (1, 1, 8, 5, 2, 1)];
    for (i, &(n, c, k, f, p, s)) in specs.iter().enumerate() {
        let cs = case(n, 1, c, k, [40, 46], [f, f], [p, p], s, [1, 1], Lay::Packed).unwrap();
        let chosen = conflux::search::choose(&h, &cs.fused(Dir::Forward), conflux::conv::Choice::Auto, 0).unwrap();
        assert_eq!(chosen.name(), SOLVER, "{cs:?}");
        check_exact_and_scaled(&h, &cs, Dir::Forward, id, 31700 + 10 * i as u64);
    }
}

/// Bias + ReLU6 / leaky ReLU / SiLU from the kernel's store or over the stored planes, blocks of
/// 8 and 4 outputs, both strides; and through the general store (α, β in the random cases).
#[test]
fn fused_plans() {
    let h = Handle::cpu();
    if !runs_here(&h) {
        return;
    }
    let specs = [(4, 4, 8, 9, 1, ActivationMode::ClippedRelu), (3, 6, 4, 33, 2, ActivationMode::LeakyRelu), (2, 8, 12, 14, 1, ActivationMode::Silu)];
    for (i, (groups, cg, kg, hw, s, mode)) in specs.into_iter().enumerate() {
        let c = case(2, groups, cg, kg, [hw, hw], [3, 3], [1, 1], s, [1, 1], Lay::Packed).unwrap();
        assert_eq!(bias_act_plan(&h, &c, mode, 3190 + 10 * i as u64), SOLVER, "{groups}×{cg}→{kg} stride {s} {mode:?}");
    }
}

#[test]
fn refusals_name_the_cause() {
    let h = Handle::cpu();
    if !runs_here(&h) {
        return;
    }
    let (s, info) = (solver(SOLVER), h.device().info());
    let ok = |c: &ConvCase| s.check(&c.fused(Dir::Forward), info);
    let c = case(1, 4, 4, 4, [14, 14], [3, 3], [1, 1], 1, [1, 1], Lay::Packed).unwrap();
    assert!(ok(&c).is_ok());
    assert!(s.check(&c.fused(Dir::BackwardData), info).unwrap_err().contains("forward only"));
    let odd = case(1, 4, 4, 6, [14, 14], [3, 3], [1, 1], 1, [1, 1], Lay::Packed).unwrap();
    assert!(ok(&odd).unwrap_err().contains("multiple of 4"));
    let depthwise = case(1, 8, 1, 4, [14, 14], [3, 3], [1, 1], 1, [1, 1], Lay::Packed).unwrap();
    assert!(ok(&depthwise).unwrap_err().contains("at least 2 input channels"));
    let dense = case(1, 1, 8, 8, [14, 14], [3, 3], [1, 1], 1, [1, 1], Lay::Packed).unwrap();
    assert!(ok(&dense).unwrap_err().contains("ungrouped with at most 4"));
    let s3 = case(1, 4, 4, 4, [30, 30], [3, 3], [1, 1], 3, [1, 1], Lay::Packed).unwrap();
    assert!(ok(&s3).unwrap_err().contains("strides 1 and 2"));
    let valid = case(1, 4, 4, 4, [20, 20], [3, 3], [0, 0], 1, [1, 1], Lay::Packed).unwrap();
    assert!(ok(&valid).unwrap_err().contains("as wide as"));
    let half = ConvCase::new(&c.conv, &desc(DataType::Half, c.x.lens(), Lay::Packed), &desc(DataType::Half, c.w.lens(), Lay::Packed), &desc(DataType::Half, c.y.lens(), Lay::Packed));
    assert!(ok(&half).unwrap_err().contains("f32 only"));
    let mut conv = ConvDesc::new(ConvMode::Convolution, &[1, 1], &[1, 1], &[1, 1]).unwrap();
    conv.set_groups(4).unwrap();
    let (x, w) = (desc(DataType::Float, &[1, 16, 9, 9], Lay::ChannelsLast), desc(DataType::Float, &[16, 4, 3, 3], Lay::Packed));
    let y = desc(DataType::Float, conv.output_desc(&x, &w).unwrap().lens(), Lay::ChannelsLast);
    assert!(ok(&ConvCase::new(&conv, &x, &w, &y)).unwrap_err().contains("channels-first"));
}
