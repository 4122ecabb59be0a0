//! The AVX-512 flat depthwise solver (stride 1 or 2, ≤ 9 taps, channels-first planes read in
//! place or split into stride phases; masked loads where the input lies): random geometries
//! (filters 1×1 to 3×3 and non-square, dilation, padding, channel multipliers 1–3, planes up to
//! 40 × 40, batch 2) with packed or gapped outputs through `check_solver` (f64 reference,
//! poisoned output, bit-identical rerun, gaps untouched) on exact and α/β data; the layers of
//! real networks choose it; fused bias + ReLU6 / leaky ReLU / SiLU plans; its refusals name
//! their cause. On a CPU without AVX-512 its check must say so.

mod support;

use conflux::{ActivationMode, ConvDesc, ConvMode, DataType, Handle};
use support::depthwise::{avx512_solver_runs, bias_act_plan};
use support::*;

const FLAT: &str = "CpuConvDepthwiseFlat";

/// A depthwise f32 case: x `xl`, y `yl`, `mult` outputs per channel.
#[allow(clippy::too_many_arguments)]
fn case(lx: [usize; 4], mult: usize, f: [usize; 2], pad: [i64; 2], stride: [i64; 2], dil: [i64; 2], xl: Lay, yl: Lay) -> Option<ConvCase> {
    let mut conv = ConvDesc::new(ConvMode::Convolution, &pad, &stride, &dil).ok()?;
    conv.set_groups(lx[1] as i64).ok()?;
    let x = desc(DataType::Float, &lx, xl);
    let w = desc(DataType::Float, &[lx[1] * mult, 1, f[0], f[1]], Lay::Packed);
    let y = desc(DataType::Float, conv.output_desc(&x, &w).ok()?.lens(), yl);
    Some(ConvCase::new(&conv, &x, &w, &y))
}

/// `want` random geometries the flat solver takes in direction `dir` (filters up to 3 × 3,
/// stride 1 or 2 on rows 31–40 wide, dilation, padding mostly keeping each output row as wide as
/// the input's stride phase, multipliers 1–3, batch 1–2), at least `min_strided` of them strided,
/// through `check_exact_and_scaled`; forward outputs packed or gapped (backward-weights refuses
/// gapped dy, `backward_weights_over_the_flat_planes`). Geometries it leaves to other solvers
/// are skipped (their causes: `refusals_name_the_cause`).
fn random_flat_cases(h: &Handle, dir: Dir, seed: u64, want: u64, min_strided: usize) {
    let id = solution_id(FLAT);
    let mut r = SplitMix64::new(seed);
    let (mut ran, mut strided) = (0u64, 0);
    while ran < want {
        let f = [r.range(1, 3), r.range(1, 3)];
        let stride = r.pick(&[1, 1, 2]) as i64;
        let dil = [r.pick(&[1, 1, 2]) as i64, r.pick(&[1, 1, 3]) as i64];
        let same = |k: usize, d: i64| ((k as i64 - 1) * d + 1) / 2;
        let pad = [r.pick(&[same(f[0], dil[0]), 0, 1]), if r.range(0, 5) == 0 { 0 } else { same(f[1], dil[1]) }];
        let wide = if stride == 2 { r.range(31, 40) } else { r.range(1, 40) };
        let lx = [r.range(1, 2), r.range(1, 24), r.range(1, 30), wide];
        let yl = if dir == Dir::Forward { r.pick(&[Lay::Packed, Lay::Gapped]) } else { Lay::Packed };
        let Some(c) = case(lx, r.range(1, 3), f, pad, [stride, stride], dil, Lay::Packed, yl) else { continue };
        if solver(FLAT).check(&c.fused(dir), h.device().info()).is_err() {
            continue;
        }
        check_exact_and_scaled(h, &c, dir, id, seed * 10 + 10 * ran);
        strided += usize::from(stride == 2);
        ran += 1;
    }
    assert!(strided >= min_strided, "{dir:?}: only {strided} strided cases ran");
}

/// Whether this CPU runs the solver; elsewhere its check must say it needs AVX-512.
fn runs_here(h: &Handle) -> bool {
    avx512_solver_runs(h, FLAT, &case([1, 16, 14, 14], 1, [3, 3], [1, 1], [1, 1], [1, 1], Lay::Packed, Lay::Packed).unwrap())
}

#[test]
fn random_geometries_and_outputs() {
    let h = Handle::cpu();
    if !runs_here(&h) {
        return;
    }
    random_flat_cases(&h, Dir::Forward, 2929, 48, 8);
}

/// Depthwise 3 × 3 layers of MobileNet / EfficientNet (12 × 12 to 112 × 112 planes at stride 1,
/// 32- to 112-wide at stride 2), and a 1 × 3 / 3 × 1 pair: the heuristic picks this solver.
#[test]
fn layers_of_real_networks() {
    let h = Handle::cpu();
    if !runs_here(&h) {
        return;
    }
    let id = solution_id(FLAT);
    let specs: [([usize; 4], [usize; 2], [i64; 2], i64); 8] = [
        ([1, 40, 12, 12], [3, 3], [1, 1], 1),
        ([2, 24, 14, 14], [3, 3], [1, 1], 1),
        ([1, 16, 28, 28], [3, 3], [1, 1], 1),
        ([1, 8, 112, 112], [3, 3], [1, 1], 1),
        ([1, 16, 112, 112], [3, 3], [1, 1], 2),
        ([2, 8, 56, 56], [3, 3], [1, 1], 2),
        ([1, 20, 17, 17], [1, 3], [0, 1], 1),
        ([1, 20, 17, 17], [3, 1], [1, 0], 1),
    ];
    for (i, &(lx, f, p, s)) in specs.iter().enumerate() {
        let c = case(lx, 1, f, p, [s, s], [1, 1], Lay::Packed, Lay::Packed).unwrap();
        let chosen = conflux::search::choose(&h, &c.fused(Dir::Forward), conflux::conv::Choice::Auto, 0).unwrap();
        assert_eq!(chosen.name(), FLAT, "{c:?}");
        check_exact_and_scaled(&h, &c, Dir::Forward, id, 29500 + 10 * i as u64);
    }
}

/// Bias + ReLU6 and bias + leaky ReLU stored from registers or finished over the stored plane
/// (SiLU), at both strides, and a channel multiplier through the general store.
#[test]
fn fused_plans() {
    let h = Handle::cpu();
    if !runs_here(&h) {
        return;
    }
    let specs = [
        ([1, 40, 12, 12], 1, 1, ActivationMode::ClippedRelu),
        ([2, 16, 40, 40], 1, 2, ActivationMode::ClippedRelu),
        ([1, 20, 9, 11], 1, 1, ActivationMode::LeakyRelu),
        ([1, 12, 33, 34], 1, 2, ActivationMode::Silu),
        ([1, 6, 12, 12], 2, 1, ActivationMode::Relu),
    ];
    for (i, (lx, mult, s, mode)) in specs.into_iter().enumerate() {
        let c = case(lx, mult, [3, 3], [1, 1], [s, s], [1, 1], Lay::Packed, Lay::Packed).unwrap();
        assert_eq!(bias_act_plan(&h, &c, mode, 2990 + 10 * i as u64), FLAT, "{lx:?} ×{mult} stride {s} {mode:?}");
    }
}

#[test]
fn refusals_name_the_cause() {
    let h = Handle::cpu();
    if !runs_here(&h) {
        return;
    }
    let (s, info) = (solver(FLAT), h.device().info());
    let ok = |c: &ConvCase| s.check(&c.fused(Dir::Forward), info);
    let c = case([1, 8, 14, 14], 1, [3, 3], [1, 1], [1, 1], [1, 1], Lay::Packed, Lay::Packed).unwrap();
    assert!(ok(&c).is_ok());
    assert!(s.check(&c.fused(Dir::BackwardData), info).unwrap_err().contains("backward-data: CpuConvDepthwiseBwdData"));
    let small = case([1, 8, 7, 7], 1, [3, 3], [1, 1], [1, 1], [1, 1], Lay::Packed, Lay::Packed).unwrap();
    assert!(ok(&small).unwrap_err().contains("fill 49 of 64 lanes"));
    let long = case([1, 8, 14, 14], 1, [5, 5], [2, 2], [1, 1], [1, 1], Lay::Packed, Lay::Packed).unwrap();
    assert!(ok(&long).unwrap_err().contains("at most 9 taps"));
    let s3 = case([1, 8, 30, 30], 1, [3, 3], [1, 1], [3, 3], [1, 1], Lay::Packed, Lay::Packed).unwrap();
    assert!(ok(&s3).unwrap_err().contains("strides 1 and 2"));
    let narrow = case([1, 8, 28, 28], 1, [3, 3], [1, 1], [2, 2], [1, 1], Lay::Packed, Lay::Packed).unwrap();
    assert!(ok(&narrow).unwrap_err().contains("at least 16"));
    let valid = case([1, 8, 20, 20], 1, [3, 3], [0, 0], [1, 1], [1, 1], Lay::Packed, Lay::Packed).unwrap();
    assert!(ok(&valid).unwrap_err().contains("as wide as"));
    let gapped = case([1, 8, 20, 20], 1, [3, 3], [1, 1], [1, 1], [1, 1], Lay::Gapped, Lay::Packed).unwrap();
    assert!(ok(&gapped).unwrap_err().contains("dense input planes"));
    let nhwc = case([1, 8, 20, 20], 1, [3, 3], [1, 1], [1, 1], [1, 1], Lay::ChannelsLast, Lay::ChannelsLast).unwrap();
    assert!(ok(&nhwc).unwrap_err().contains("channels-first"));
    let mut conv = ConvDesc::new(ConvMode::Convolution, &[1, 1], &[1, 1], &[1, 1]).unwrap();
    conv.set_groups(4).unwrap();
    let x = desc(DataType::Float, &[1, 8, 6, 6], Lay::Packed);
    let w = desc(DataType::Float, &[8, 2, 3, 3], Lay::Packed);
    let y = desc(DataType::Float, conv.output_desc(&x, &w).unwrap().lens(), Lay::Packed);
    assert!(ok(&ConvCase::new(&conv, &x, &w, &y)).unwrap_err().contains("one input channel per group"));
    let half = ConvCase::new(&c.conv, &desc(DataType::Half, c.x.lens(), Lay::Packed), &desc(DataType::Half, c.w.lens(), Lay::Packed), &desc(DataType::Half, c.y.lens(), Lay::Packed));
    assert!(ok(&half).unwrap_err().contains("f32 only"));
    // Padding that makes the plane 2²⁰ rows tall: too many masks, refused at once.
    let tall = case([1, 2, 4, 4], 1, [3, 3], [1 << 20, 1], [1, 1], [1, 1], Lay::Packed, Lay::Packed).unwrap();
    assert!(ok(&tall).unwrap_err().contains("masks"));
}

/// Stride-1 depthwise backward-data runs as the forward convolution with reversed taps
/// (`CpuConvDepthwiseBwdData`) on whichever forward solver takes it: 3×3, 5×5 with a channel
/// multiplier, dilation, 7×7, channels-last and gapped tensors, exact and α/β data; immediate
/// mode picks it for MobileNetV2's layer; strided layers and other directions are refused.
#[test]
fn backward_data_through_the_forward_kernels() {
    let h = Handle::cpu();
    let id = solution_id("CpuConvDepthwiseBwdData");
    let cases = [
        case([2, 24, 30, 33], 1, [3, 3], [1, 1], [1, 1], [1, 1], Lay::Packed, Lay::Packed),
        case([2, 8, 17, 16], 2, [5, 5], [2, 2], [1, 1], [1, 1], Lay::Packed, Lay::Packed),
        case([1, 16, 20, 21], 1, [3, 3], [2, 2], [1, 1], [2, 2], Lay::Packed, Lay::Gapped),
        case([2, 16, 14, 14], 1, [7, 7], [3, 3], [1, 1], [1, 1], Lay::Packed, Lay::Packed),
        case([2, 32, 12, 13], 1, [3, 3], [1, 1], [1, 1], [1, 1], Lay::ChannelsLast, Lay::ChannelsLast),
        // Unpadded: dx's border is reached by fewer taps (padding 2 in the forward rewrite).
        case([1, 16, 9, 11], 1, [3, 3], [0, 0], [1, 1], [1, 1], Lay::Packed, Lay::Packed),
    ];
    for (i, c) in cases.into_iter().enumerate() {
        check_exact_and_scaled(&h, &c.unwrap(), Dir::BackwardData, id, 31000 + 10 * i as u64);
    }
    // Under the constant-weights promise, filters at different addresses through one compiled
    // solution each give their own dx (w' is a fresh copy per call, often at the previous
    // call's address: the rewrite drops the promise for its inner solver).
    for lay in [Lay::Packed, Lay::ChannelsLast] {
        let mut c = case([2, 16, 14, 14], 1, [7, 7], [3, 3], [1, 1], [1, 1], lay, lay).unwrap();
        c.conv.set_attribute(conflux::types::ConvAttrib::ConstantWeights, 1).unwrap();
        for seed in [31100, 31200, 31300] {
            check_exact_and_scaled(&h, &c, Dir::BackwardData, id, seed);
        }
    }
    let mbv2 = case([1, 144, 56, 56], 1, [3, 3], [1, 1], [1, 1], [1, 1], Lay::Packed, Lay::Packed).unwrap();
    let chosen = conflux::search::choose(&h, &mbv2.fused(Dir::BackwardData), conflux::conv::Choice::Auto, 0).unwrap();
    assert_eq!(chosen.name(), "CpuConvDepthwiseBwdData");
    let s = solver("CpuConvDepthwiseBwdData");
    let why = s.check(&mbv2.fused(Dir::Forward), h.device().info()).unwrap_err();
    assert!(why.contains("backward-data only"), "{why}");
    let strided = case([1, 16, 14, 14], 1, [3, 3], [1, 1], [2, 2], [1, 1], Lay::Packed, Lay::Packed).unwrap();
    let why = s.check(&strided.fused(Dir::BackwardData), h.device().info()).unwrap_err();
    assert!(why.contains("stride"), "{why}");
}

/// Backward-weights on the flat planes: random geometries of the forward test (stride 1 and 2,
/// dilation, padding, multipliers 1–3) through `check_solver` on exact and α/β data; dy planes
/// with gaps are refused, and so is backward-data.
#[test]
fn backward_weights_over_the_flat_planes() {
    let h = Handle::cpu();
    if !runs_here(&h) {
        return;
    }
    random_flat_cases(&h, Dir::BackwardWeights, 3131, 24, 4);
    let gapped = case([1, 16, 32, 32], 1, [3, 3], [1, 1], [1, 1], [1, 1], Lay::Packed, Lay::Gapped).unwrap();
    let why = solver(FLAT).check(&gapped.fused(Dir::BackwardWeights), h.device().info()).unwrap_err();
    assert!(why.contains("dense dy"), "{why}");
    let why = solver(FLAT).check(&gapped.fused(Dir::BackwardData), h.device().info()).unwrap_err();
    assert!(why.contains("backward-data"), "{why}");
}

/// Stride-2 depthwise backward-data by phases on the flat kernel, interleaved into dx
/// (`CpuConvDepthwiseBwdPhases`): 3×3 and 5×5 on even planes, square and not, a gapped dx, exact
/// and α/β data; immediate mode picks it for MobileNetV2's stride-2 layer; odd planes, stride 1
/// and tap-less phases are refused with the cause.
#[test]
fn strided_backward_data_by_phases() {
    let h = Handle::cpu();
    if !runs_here(&h) {
        return;
    }
    let s = solver("CpuConvDepthwiseBwdPhases");
    let id = solution_id("CpuConvDepthwiseBwdPhases");
    let mut ran = 0;
    for (lx, f, pad, yl) in [
        ([2, 16, 64, 64], [3, 3], [1, 1], Lay::Packed),
        ([1, 24, 56, 48], [5, 5], [2, 2], Lay::Packed),
        ([2, 8, 33, 35], [3, 3], [1, 1], Lay::Packed),
        ([1, 16, 40, 64], [3, 3], [1, 1], Lay::Gapped),
    ] {
        let c = case(lx, 1, f, pad, [2, 2], [1, 1], yl, Lay::Packed).unwrap();
        match s.check(&c.fused(Dir::BackwardData), h.device().info()) {
            Ok(()) => {
                check_exact_and_scaled(&h, &c, Dir::BackwardData, id, 35000 + 10 * ran);
                ran += 1;
            }
            Err(why) => println!("{c:?}: {why}"),
        }
    }
    assert!(ran >= 3, "only {ran} geometries ran");
    let mbv2 = case([1, 96, 112, 112], 1, [3, 3], [1, 1], [2, 2], [1, 1], Lay::Packed, Lay::Packed).unwrap();
    let chosen = conflux::search::choose(&h, &mbv2.fused(Dir::BackwardData), conflux::conv::Choice::Auto, 0).unwrap();
    assert_eq!(chosen.name(), "CpuConvDepthwiseBwdPhases");
    let stride1 = case([1, 16, 32, 32], 1, [3, 3], [1, 1], [1, 1], [1, 1], Lay::Packed, Lay::Packed).unwrap();
    assert!(s.check(&stride1.fused(Dir::BackwardData), h.device().info()).unwrap_err().contains("stride 2 only"));
    let one = case([1, 16, 32, 32], 1, [1, 1], [0, 0], [2, 2], [1, 1], Lay::Packed, Lay::Packed).unwrap();
    assert!(s.check(&one.fused(Dir::BackwardData), h.device().info()).unwrap_err().contains("no taps"));
}
