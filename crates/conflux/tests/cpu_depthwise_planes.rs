//! The channels-first depthwise forward solver (whole planes split into stride phases): random
//! geometries (filters 1×1 to 7×7 and non-square, strides 1–3, padding up to past the filter,
//! dilation, channel multipliers 1–3, planes from 1×1 to 40×40), f32 / f16 / bf16, packed and
//! gapped NCHW, through `check_solver` (f64 reference, poisoned output, bit-identical rerun, gaps
//! untouched) with exact and α/β data; immediate mode picks it for channels-first depthwise
//! forward; a fused bias + ReLU6 plan runs on it; its refusals name their cause. Then the same
//! for the AVX-512 16-channel-block solver, both layouts.

mod support;

use conflux::reference::fill::Fill;
use conflux::{ActivationMode, ConvDesc, ConvMode, DataType, FusionDirection, FusionPlan, Handle, OpArg, OpArgs};
use support::depthwise::{avx512_solver_runs, bias_act_plan};
use support::*;

const SOLVER: &str = "CpuConvDepthwisePlanes";

#[allow(clippy::too_many_arguments)]
fn case(dt: DataType, lx: [usize; 4], mult: usize, f: [usize; 2], pad: [i64; 2], stride: [i64; 2], dil: [i64; 2], lay: Lay) -> Option<ConvCase> {
    let mut conv = ConvDesc::new(ConvMode::Convolution, &pad, &stride, &dil).ok()?;
    conv.set_groups(lx[1] as i64).ok()?;
    let x = desc(dt, &lx, lay);
    let w = desc(dt, &[lx[1] * mult, 1, f[0], f[1]], Lay::Packed);
    let y = desc(dt, conv.output_desc(&x, &w).ok()?.lens(), lay);
    Some(ConvCase::new(&conv, &x, &w, &y))
}

#[test]
fn random_geometries_types_and_layouts() {
    let h = Handle::cpu();
    let id = solution_id(SOLVER);
    let mut r = SplitMix64::new(1818);
    let mut ran = 0u64;
    while ran < 40 {
        let f = [r.range(1, 7), r.range(1, 7)];
        let stride = [r.range(1, 3) as i64, r.range(1, 3) as i64];
        let dil = [r.pick(&[1, 1, 2]) as i64, r.pick(&[1, 1, 3]) as i64];
        let pad = [r.range(0, f[0]) as i64, r.range(0, f[1]) as i64];
        let lx = [r.range(1, 2), r.range(2, 12), r.range(1, 40), r.range(1, 40)];
        let dt = r.pick(&[DataType::Float, DataType::Float, DataType::Half, DataType::BFloat16]);
        let lay = r.pick(&[Lay::Packed, Lay::Gapped]);
        let Some(c) = case(dt, lx, r.range(1, 3), f, pad, stride, dil, lay) else { continue };
        // One-pixel planes have channel stride 1 in either layout: the channels-last solver's.
        if c.x.lens()[2] * c.x.lens()[3] == 1 || c.y.lens()[2] * c.y.lens()[3] == 1 {
            continue;
        }
        // The AVX-512 block solver goes first where it applies (small f32 planes).
        let chosen = conflux::search::choose(&h, &c.fused(Dir::Forward), conflux::conv::Choice::Auto, 0).unwrap();
        assert!([SOLVER, BLOCKS].contains(&chosen.name()), "{} for {c:?}", chosen.name());
        check_exact_and_scaled(&h, &c, Dir::Forward, id, 100 + 10 * ran);
        ran += 1;
    }
}

/// The late-stage layers it is for: 7×7 and 14×14 planes, stride 1 and 2, 3×3 / 5×5 / 7×7.
#[test]
fn small_planes_of_real_networks() {
    let h = Handle::cpu();
    let id = solution_id(SOLVER);
    let specs: [([usize; 4], [usize; 2], i64, i64); 7] = [
        ([1, 4, 56, 56], [3, 3], 1, 2),
        ([1, 4, 28, 28], [3, 3], 1, 1),
        ([1, 40, 7, 7], [3, 3], 1, 1),
        ([2, 24, 14, 14], [3, 3], 1, 2),
        ([1, 16, 14, 14], [5, 5], 2, 2),
        ([1, 32, 7, 7], [7, 7], 3, 1),
        ([1, 8, 28, 28], [5, 5], 2, 1),
    ];
    for (i, &(lx, f, p, s)) in specs.iter().enumerate() {
        let c = case(DataType::Float, lx, 1, f, [p, p], [s, s], [1, 1], Lay::Packed).unwrap();
        check_exact_and_scaled(&h, &c, Dir::Forward, id, 7000 + 10 * i as u64);
    }
}

/// conv + bias + ReLU6 stored straight from the flat sums: every store path (7 wide at stride
/// 2, 56 and 112 wide, a width with no fixed-size code, a strided 30-wide output), and on
/// AVX-512 the stride-2 row kernel (56 and 29 wide outputs: whole and partial chunks).
/// Wide output rows (24 columns and more) of the filters networks use, 3 × 3 and 5 × 5 at
/// stride 1 and 2 and 7 × 7 at stride 1: row counts that are not a multiple of four, widths that
/// are not a multiple of 16 or 32, column dilation, f32 and f16, packed and gapped tensors.
#[test]
fn wide_rows_in_register_blocks() {
    let h = Handle::cpu();
    let id = solution_id(SOLVER);
    let mut seed = 9100;
    for (f, s) in [(3usize, 1i64), (3, 2), (5, 1), (5, 2), (7, 1)] {
        let shapes: &[(usize, usize)] = if s == 1 { &[(24, 9), (41, 6), (57, 5)] } else { &[(48, 13), (81, 7), (113, 10)] };
        for (i, &(w, hgt)) in shapes.iter().enumerate() {
            let (dt, lay, dil) = match i {
                0 => (DataType::Float, Lay::Packed, 1),
                1 => (DataType::Half, Lay::Gapped, 1),
                _ => (DataType::Float, Lay::Packed, 2),
            };
            let pad = (f / 2) as i64 * dil;
            let c = case(dt, [1, 3, hgt, w], 1, [f, f], [(f / 2) as i64, pad], [s, s], [1, dil], lay).unwrap();
            assert!(c.y.lens()[3] >= 24, "{c:?}");
            check_exact_and_scaled(&h, &c, Dir::Forward, id, seed);
            seed += 10;
        }
    }
}

#[test]
fn fused_bias_relu6_plan() {
    let h = Handle::cpu();
    let specs: [([usize; 4], i64); 7] =
        [([2, 16, 14, 14], 2), ([1, 3, 56, 56], 1), ([1, 2, 112, 112], 1), ([1, 5, 30, 30], 1), ([1, 3, 60, 60], 2), ([1, 3, 112, 112], 2), ([1, 2, 57, 57], 2)];
    for (lx, stride) in specs {
        let c = case(DataType::Float, lx, 1, [3, 3], [1, 1], [stride, stride], [1, 1], Lay::Packed).unwrap();
        let k = lx[1];
        let b = conflux::TensorDesc::new(DataType::Float, &[1, k, 1, 1]).unwrap();
        let fill = Fill::SmallInt(-2, 2);
        let (x, w, bias) = (random(&h, &c.x, fill, 1), random(&h, &c.w, fill, 2), random(&h, &b, fill, 3));
        let mut want = vec![0.0; c.y.element_space()];
        conflux::reference::conv::conv_forward(&c.conv, &c.x, &x.host, &c.w, &w.host, &c.y, &mut want).unwrap();
        let plane = c.y.element_space() / (lx[0] * k);
        for (i, v) in want.iter_mut().enumerate() {
            *v = (*v + bias.host[(i / plane) % k]).clamp(0.0, 6.0);
        }
        let mut plan = FusionPlan::new(FusionDirection::Vertical, c.x.clone());
        plan.add_conv_forward(&c.conv, &c.w).unwrap();
        plan.add_bias(&b).unwrap();
        plan.add_activation(ActivationMode::ClippedRelu).unwrap();
        // Pinned: the block solver would take the 7 × 7 outputs on AVX-512.
        plan.set_solution(Some(solution_id(SOLVER)));
        plan.compile(&h).unwrap();
        assert_eq!(plan.solver_name(), Some(SOLVER));
        let mut args = OpArgs::new();
        args.set(0, OpArg::Conv { w: w.ptr(), alpha: 1.0, beta: 0.0 });
        args.set(1, OpArg::Bias { b: bias.ptr() });
        args.set(2, OpArg::Activation { alpha: 6.0, beta: 0.0, gamma: 0.0 });
        let y = poisoned(&h, &c.y);
        plan.execute(&h, &c.x, x.ptr(), &c.y, y.ptr(), &args).unwrap();
        assert_close(&format!("depthwise planes {lx:?} stride {stride} + bias + ReLU6"), &download(&h, &y), &want, 0.0);
    }
}

/// Bias then an activation the stores cannot clamp (SiLU, GELU, ELU): the planes solver stores
/// conv + bias and runs the activation over each stored plane, the blocks solver (where AVX-512
/// is) over its channels-last block before the planes store. Against the f64 reference on random data (the activations are not exact on
/// small integers).
#[test]
fn fused_bias_and_other_activations() {
    let h = Handle::cpu();
    let modes = [(ActivationMode::Silu, 0.0), (ActivationMode::Gelu, 0.0), (ActivationMode::Elu, 0.7)];
    let mut cases = vec![(SOLVER, [1, 3, 56, 56], 1, Lay::Packed), (SOLVER, [2, 2, 30, 31], 2, Lay::Packed), (SOLVER, [1, 4, 14, 14], 1, Lay::Packed)];
    if blocks_run_here(&h) {
        cases.extend([(BLOCKS, [1, 40, 7, 7], 1, Lay::Packed), (BLOCKS, [2, 20, 14, 14], 2, Lay::Packed), (BLOCKS, [1, 24, 9, 11], 1, Lay::Packed)]);
    }
    for (i, (name, lx, stride, lay)) in cases.into_iter().enumerate() {
        let (mode, alpha) = modes[i % modes.len()];
        let c = case(DataType::Float, lx, 1, [3, 3], [1, 1], [stride, stride], [1, 1], lay).unwrap();
        let b = conflux::TensorDesc::new(DataType::Float, &[1, lx[1], 1, 1]).unwrap();
        let (x, w, bias) = (random(&h, &c.x, Fill::Normal, 11 + i as u64), random(&h, &c.w, Fill::Normal, 12), random(&h, &b, Fill::Normal, 13));
        let act = conflux::ActivationDesc::new(mode, alpha, 0.0, 0.0);
        let mut want = vec![0.0; c.y.element_space()];
        conflux::reference::fused::conv_bias_act_forward(1.0, &c.conv, &c.x, &x.host, &c.w, &w.host, 0.0, None, Some((&b, &bias.host)), &act, &c.y, &mut want).unwrap();
        let mut plan = FusionPlan::new(FusionDirection::Vertical, c.x.clone());
        plan.add_conv_forward(&c.conv, &c.w).unwrap();
        plan.add_bias(&b).unwrap();
        plan.add_activation(mode).unwrap();
        plan.set_solution(Some(solution_id(name)));
        plan.compile(&h).unwrap();
        assert_eq!(plan.solver_name(), Some(name));
        let mut args = OpArgs::new();
        args.set(0, OpArg::Conv { w: w.ptr(), alpha: 1.0, beta: 0.0 });
        args.set(1, OpArg::Bias { b: bias.ptr() });
        args.set(2, OpArg::Activation { alpha, beta: 0.0, gamma: 0.0 });
        let y = poisoned(&h, &c.y);
        plan.execute(&h, &c.x, x.ptr(), &c.y, y.ptr(), &args).unwrap();
        assert_close(&format!("{name} {lx:?} {lay:?} stride {stride} + bias + {mode:?}"), &download(&h, &y), &want, 1e-5);
    }
}

#[test]
fn refusals_name_the_cause() {
    let h = Handle::cpu();
    let s = solver(SOLVER);
    let info = h.device().info();
    let nhwc = case(DataType::Float, [1, 8, 7, 7], 1, [3, 3], [1, 1], [1, 1], [1, 1], Lay::ChannelsLast).unwrap();
    assert!(s.check(&nhwc.fused(Dir::Forward), info).unwrap_err().contains("channels-last"));
    let nchw = case(DataType::Float, [1, 8, 7, 7], 1, [3, 3], [1, 1], [1, 1], [1, 1], Lay::Packed).unwrap();
    assert!(s.check(&nchw.fused(Dir::BackwardData), info).unwrap_err().contains("forward only"));
    let mut conv = ConvDesc::new(ConvMode::Convolution, &[1, 1], &[1, 1], &[1, 1]).unwrap();
    conv.set_groups(4).unwrap();
    let x = desc(DataType::Float, &[1, 8, 6, 6], Lay::Packed);
    let w = desc(DataType::Float, &[8, 2, 3, 3], Lay::Packed);
    let y = desc(DataType::Float, conv.output_desc(&x, &w).unwrap().lens(), Lay::Packed);
    assert!(s.check(&ConvCase::new(&conv, &x, &w, &y).fused(Dir::Forward), info).unwrap_err().contains("one input channel per group"));
    let huge = case(DataType::Float, [1, 2, 4, 4], 1, [3, 3], [1 << 20, 1 << 20], [1, 1], [1, 1], Lay::Packed).unwrap();
    assert!(s.check(&huge.fused(Dir::Forward), info).unwrap_err().contains("exceed"));
}

// The AVX-512 16-channel-block solver (either layout in and out; bands of staged rows).

const BLOCKS: &str = "CpuConvDepthwiseBlocks";

/// Whether this CPU runs the block solver; elsewhere its check must say it needs AVX-512.
fn blocks_run_here(h: &Handle) -> bool {
    avx512_solver_runs(h, BLOCKS, &case(DataType::Float, [1, 16, 7, 7], 1, [3, 3], [1, 1], [1, 1], [1, 1], Lay::Packed).unwrap())
}

/// A depthwise f32 case with x and y in their own layouts.
fn blocks_case(lx: [usize; 4], f: [usize; 2], pad: [i64; 2], stride: [i64; 2], dil: [i64; 2], xl: Lay, yl: Lay) -> Option<ConvCase> {
    let mut conv = ConvDesc::new(ConvMode::Convolution, &pad, &stride, &dil).ok()?;
    conv.set_groups(lx[1] as i64).ok()?;
    let x = desc(DataType::Float, &lx, xl);
    let w = desc(DataType::Float, &[lx[1], 1, f[0], f[1]], Lay::Packed);
    let y = desc(DataType::Float, conv.output_desc(&x, &w).ok()?.lens(), yl);
    Some(ConvCase::new(&conv, &x, &w, &y))
}

/// Random geometries (filters 1×1 to 7×7 and non-square, strides 1–3, dilation, padding up to
/// the filter, channel counts off 16, planes 1×1 to 30×30) with x and y each packed or gapped,
/// channels-first or channels-last: exact and α/β data against the f64 reference.
#[test]
fn blocks_random_geometries_and_layouts() {
    let h = Handle::cpu();
    if !blocks_run_here(&h) {
        return;
    }
    let id = solution_id(BLOCKS);
    let lays = [Lay::Packed, Lay::ChannelsLast, Lay::Gapped, Lay::GappedChannelsLast];
    let mut r = SplitMix64::new(2323);
    let mut ran = 0u64;
    while ran < 48 {
        let f = [r.range(1, 7), r.range(1, 7)];
        let stride = [r.range(1, 3) as i64, r.range(1, 3) as i64];
        let dil = [r.pick(&[1, 1, 2]) as i64, r.pick(&[1, 1, 3]) as i64];
        let pad = [r.range(0, f[0]) as i64, r.range(0, f[1]) as i64];
        let lx = [r.range(1, 2), r.range(2, 40), r.range(1, 30), r.range(1, 30)];
        let Some(c) = blocks_case(lx, f, pad, stride, dil, r.pick(&lays), r.pick(&lays)) else { continue };
        // Geometries it leaves to the older solvers (checked in blocks_refusals_name_the_cause).
        if solver(BLOCKS).check(&c.fused(Dir::Forward), h.device().info()).is_err() {
            continue;
        }
        check_exact_and_scaled(&h, &c, Dir::Forward, id, 9000 + 10 * ran);
        ran += 1;
    }
}

/// The layers of real networks, both layouts: small planes in one band, 56- and 112-wide
/// planes in several bands, batch 2.
#[test]
fn blocks_layers_of_real_networks() {
    let h = Handle::cpu();
    if !blocks_run_here(&h) {
        return;
    }
    let id = solution_id(BLOCKS);
    let both: &[Lay] = &[Lay::Packed, Lay::ChannelsLast];
    let specs: [([usize; 4], usize, i64, i64, &[Lay]); 9] = [
        ([1, 48, 7, 7], 3, 1, 1, both),
        ([1, 16, 16, 16], 5, 2, 1, both),
        ([1, 32, 7, 7], 7, 3, 1, both),
        ([2, 24, 14, 14], 5, 2, 2, both),
        ([1, 40, 14, 14], 3, 1, 2, both),
        ([1, 16, 28, 28], 7, 3, 1, both),
        ([1, 16, 56, 56], 7, 3, 1, both),
        ([1, 32, 112, 112], 3, 1, 1, &[Lay::ChannelsLast]),
        ([2, 8, 28, 28], 3, 1, 1, &[Lay::ChannelsLast]),
    ];
    for (i, &(lx, f, p, s, lays)) in specs.iter().enumerate() {
        for &lay in lays {
            let c = blocks_case(lx, [f, f], [p, p], [s, s], [1, 1], lay, lay).unwrap();
            let chosen = conflux::search::choose(&h, &c.fused(Dir::Forward), conflux::conv::Choice::Auto, 0).unwrap();
            assert_eq!(chosen.name(), BLOCKS, "{c:?}");
            check_exact_and_scaled(&h, &c, Dir::Forward, id, 9500 + 10 * i as u64);
        }
    }
}

/// Fused plans: bias + ReLU6 from registers (channels-first dense planes through transposes,
/// channels-last stored in place, gapped x staged element by element), and bias + leaky ReLU
/// (the general epilogue) on channels-first output; 5 × 5 filters where channels-first 3 × 3
/// ones go to the flat solver. Gapped outputs (the general store) are in the random cases.
#[test]
fn blocks_fused_plans() {
    let h = Handle::cpu();
    if !blocks_run_here(&h) {
        return;
    }
    let specs = [
        ([1, 40, 7, 7], 5, Lay::Packed, ActivationMode::ClippedRelu),
        ([2, 24, 14, 14], 3, Lay::ChannelsLast, ActivationMode::ClippedRelu),
        ([1, 20, 9, 11], 3, Lay::Gapped, ActivationMode::ClippedRelu),
        ([1, 20, 9, 11], 5, Lay::Packed, ActivationMode::LeakyRelu),
    ];
    for (i, (lx, f, lay, mode)) in specs.into_iter().enumerate() {
        // A plan's output is packed in x's order: gapped x, packed y.
        let yl = if lay == Lay::Gapped { Lay::Packed } else { lay };
        let p = (f as i64 - 1) / 2;
        let c = blocks_case(lx, [f, f], [p, p], [1, 1], [1, 1], lay, yl).unwrap();
        assert_eq!(bias_act_plan(&h, &c, mode, 11 + 10 * i as u64), BLOCKS, "{lx:?} {lay:?} {mode:?}");
    }
}

#[test]
fn blocks_refusals_name_the_cause() {
    let h = Handle::cpu();
    if !blocks_run_here(&h) {
        return;
    }
    let (s, info) = (solver(BLOCKS), h.device().info());
    let c = case(DataType::Float, [1, 8, 7, 7], 1, [3, 3], [1, 1], [1, 1], [1, 1], Lay::Packed).unwrap();
    assert!(s.check(&c.fused(Dir::BackwardData), info).unwrap_err().contains("forward only"));
    let half = case(DataType::Half, [1, 8, 7, 7], 1, [3, 3], [1, 1], [1, 1], [1, 1], Lay::Packed).unwrap();
    assert!(s.check(&half.fused(Dir::Forward), info).unwrap_err().contains("f32 only"));
    let doubled = case(DataType::Float, [1, 8, 7, 7], 2, [3, 3], [1, 1], [1, 1], [1, 1], Lay::Packed).unwrap();
    assert!(s.check(&doubled.fused(Dir::Forward), info).unwrap_err().contains("one output channel per group"));
    let huge = blocks_case([1, 2, 4, 4], [3, 3], [1 << 20, 1 << 20], [1, 1], [1, 1], Lay::ChannelsLast, Lay::ChannelsLast).unwrap();
    assert!(s.check(&huge.fused(Dir::Forward), info).unwrap_err().contains("exceed"));
    // Padding that makes the output 2³¹ rows tall over 1000-pixel rows (wider than a band): the
    // check plans its bands in closed form, at once.
    let tall = blocks_case([1, 16, 4, 1000], [3, 3], [1 << 30, 1], [1, 1], [1, 1], Lay::ChannelsLast, Lay::ChannelsLast).unwrap();
    let start = std::time::Instant::now();
    assert!(s.check(&tall.fused(Dir::Forward), info).is_ok());
    assert!(start.elapsed().as_secs() < 1, "planning {:?}", start.elapsed());
    let large = case(DataType::Float, [1, 8, 56, 56], 1, [3, 3], [1, 1], [1, 1], [1, 1], Lay::Packed).unwrap();
    assert!(s.check(&large.fused(Dir::Forward), info).unwrap_err().contains("without transposes"));
    let strided = blocks_case([1, 8, 56, 56], [3, 3], [1, 1], [2, 2], [1, 1], Lay::ChannelsLast, Lay::ChannelsLast).unwrap();
    assert!(s.check(&strided.fused(Dir::Forward), info).unwrap_err().contains("in place"));
    // Channels-last output with an epilogue the kernel does not apply from registers.
    let nhwc = blocks_case([1, 8, 7, 7], [3, 3], [1, 1], [1, 1], [1, 1], Lay::ChannelsLast, Lay::ChannelsLast).unwrap();
    let mut plan = FusionPlan::new(FusionDirection::Vertical, nhwc.x.clone());
    plan.add_conv_forward(&nhwc.conv, &nhwc.w).unwrap();
    plan.add_activation(ActivationMode::LeakyRelu).unwrap();
    plan.compile(&h).unwrap();
    assert_eq!(plan.solver_name(), Some("CpuConvDepthwiseNhwc"));
}
