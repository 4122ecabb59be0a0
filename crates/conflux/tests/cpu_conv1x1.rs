//! The 1×1 NCHW / NHWC forward driver with output channels in the vector lanes
//! (`backend/cpu/conv1x1.rs`), every tile this machine can run, against an f64 loop: positions
//! per image that leave 1..13 for the last tile, partial channel panels, several K blocks,
//! tiles of one task spanning images, forced small splits, gaps after every channel and image
//! row that must stay untouched, bias and ReLU, exact small-integer data bit for bit. NCHW
//! cases also run the positions-in-lanes driver (`conv1x1_pos.rs`), with W in place and
//! packed by row blocks. The solver around it is covered in `cpu_solvers.rs` (`gemm1x1_*`).

mod support;

use conflux::backend::cpu::clamp::Clamp;
use conflux::backend::cpu::x86::amx;
use conflux::backend::cpu::conv1x1::channels::{forward_with, pack_all, packed_len, Problem, Split};
use conflux::backend::cpu::conv1x1::amx::{self as conv1x1_amx, AmxSplit, SplitW, Walk as AmxWalk};
use conflux::backend::cpu::conv1x1::channels_kernel::available;
use conflux::backend::cpu::conv1x1::positions::{self as conv1x1_pos, PackedWalk, PosSplit};
use conflux::backend::cpu::conv1x1::positions_kernel as conv1x1_pos_kernel;
use conflux::reference::fill::{fill_normal, fill_small_int};
use support::{Pick, SplitMix64};

struct Case {
    n: usize,
    c: usize,
    k: usize,
    hw: usize,
    /// Unused elements after each channel (NCHW) or position (NHWC), x and y, and after each
    /// image.
    gap: usize,
    bias: bool,
    /// None, ReLU, or ReLU capped (CLIPPEDRELU).
    relu: Clamp,
    /// Channels consecutive (x and y NHWC) instead of positions.
    nhwc: bool,
}

fn run(cs: &Case, split: Option<Split>, exact: bool, seed: u64) {
    let Case { n, c, k, hw, gap, bias, relu, nhwc } = *cs;
    // (channel stride, position stride, image stride) of x and y.
    let ([xs1, xp, xs0], [ys1, yp, ys0]) = if nhwc {
        ([1, c + gap, hw * (c + gap) + gap], [1, k + gap, hw * (k + gap) + gap])
    } else {
        ([hw + gap, 1, c * (hw + gap) + gap], [hw + gap, 1, k * (hw + gap) + gap])
    };
    let ws0 = c + gap;
    let vals = |s: u64, len: usize| -> Vec<f32> {
        let v = if exact { fill_small_int(s, len, -3, 3) } else { fill_normal(s, len) };
        v.into_iter().map(|x| x as f32).collect()
    };
    let x = vals(seed, n * xs0);
    let w = vals(seed + 1, k * ws0);
    let b = vals(seed + 2, k);
    let mut want = vec![f64::NAN; n * ys0];
    for ni in 0..n {
        for ki in 0..k {
            for p in 0..hw {
                let mut s = if bias { b[ki] as f64 } else { 0.0 };
                for ci in 0..c {
                    s += x[ni * xs0 + ci * xs1 + p * xp] as f64 * w[ki * ws0 + ci] as f64;
                }
                want[ni * ys0 + ki * ys1 + p * yp] = if relu.on { s.max(0.0).min(relu.hi as f64) } else { s };
            }
        }
    }
    let check = |y: &[f32], what: &str| {
        for (i, (g, want)) in y.iter().zip(&want).enumerate() {
            let g = *g as f64;
            if want.is_nan() {
                // A gap: never written.
                assert!(g.is_nan(), "{what}: gap element {i} written ({g})");
            } else if exact {
                assert_eq!(g, *want, "{what}: element {i}");
            } else {
                let tol = 1e-5 * (c as f64).sqrt().max(1.0) * (1.0 + want.abs());
                assert!((g - want).abs() <= tol, "{what}: element {i}: {g} vs {want}");
            }
        }
    };
    let problem = |y: &mut [f32]| Problem {
        n,
        c,
        k,
        hw,
        x: x.as_ptr(),
        xs: [xs0, xs1],
        xp,
        w: w.as_ptr(),
        ws0,
        wc: 1,
        y: y.as_mut_ptr(),
        ys: [ys0, ys1],
        yp,
        bias: if bias { b.as_ptr() } else { std::ptr::null() },
        relu,
    };
    for kern in available() {
        let mut y = vec![f32::NAN; n * ys0];
        let p = problem(&mut y);
        let split = split.unwrap_or_else(|| Split::choose(&p, 2));
        // SAFETY: the vectors cover every stride above; y is separate.
        unsafe { forward_with(&p, &kern, split, None) };
        check(&y, &format!("{} n{n} c{c} k{k} hw{hw} gap{gap} bias {bias} relu {relu:?} nhwc {nhwc} {split:?}", kern.name));
        // W packed whole beforehand (constant weights; the first tile of a panel prefetches).
        let mut packed = vec![f32::NAN; packed_len(&p)];
        y.fill(f32::NAN);
        // SAFETY: as above; `packed` holds packed_len values.
        unsafe {
            pack_all(&p, &kern, &mut packed);
            forward_with(&p, &kern, split, Some(&packed));
        }
        check(&y, &format!("packed {} n{n} c{c} k{k} hw{hw} gap{gap} bias {bias} relu {relu:?} nhwc {nhwc} {split:?}", kern.name));
    }
    // The AMX driver (bf16×6) on the same problem: the chosen split and walk, the
    // caller's split with chunks of one and three tiles, and x split whole first.
    if amx::available() {
        let mut y = vec![f32::NAN; n * ys0];
        let p = problem(&mut y);
        let mut buf = vec![0xffffu16; conv1x1_amx::packed_len(&p) + amx::ALIGN_SLACK];
        let skip = amx::skip_to_64(buf.as_ptr());
        let packed = &mut buf[skip..skip + conv1x1_amx::packed_len(&p)];
        // SAFETY: as above; `packed` holds packed_len values; AMX implies AVX-512.
        unsafe { conv1x1_amx::pack_w(&p, packed) };
        let packed = &*packed;
        let forced = split.map_or(AmxSplit { tile_blocks: 1, filter_groups: 1, shared_x: false }, |s| AmxSplit { tile_blocks: s.mb, filter_groups: s.gp, shared_x: false });
        let shared = AmxSplit { shared_x: true, ..forced };
        for (split, walk) in [(AmxSplit::choose(&p, 2), AmxWalk::choose(&p)), (forced, AmxWalk { chunk: 1 }), (forced, AmxWalk { chunk: 3 }), (shared, AmxWalk { chunk: 1 })] {
            y.fill(f32::NAN);
            // SAFETY: as above.
            unsafe { conv1x1_amx::forward(&p, SplitW::Packed(packed), split, walk) };
            check(&y, &format!("amx n{n} c{c} k{k} hw{hw} gap{gap} bias {bias} relu {relu:?} nhwc {nhwc} {split:?} {walk:?}"));
        }
        // W split by the tasks themselves (NCHW, one tile block): one and several filter groups,
        // chunks of one tile (each block split on the first chunk, reused on the others).
        if !nhwc {
            for groups in [1, 3] {
                let split = AmxSplit { tile_blocks: 1, filter_groups: groups, shared_x: false };
                y.fill(f32::NAN);
                // SAFETY: as above; W is read in place.
                unsafe { conv1x1_amx::forward(&p, SplitW::PerTask, split, AmxWalk { chunk: 1 }) };
                check(&y, &format!("amx W per task n{n} c{c} k{k} hw{hw} gap{gap} bias {bias} relu {relu:?} {split:?}"));
            }
        }
    }
    if nhwc {
        return;
    }
    // The positions-in-lanes driver on the same NCHW problem, whatever `suits` says: the
    // chosen split, and the caller's split read as (tile blocks, row groups).
    for kern in conv1x1_pos_kernel::available() {
        let mut y = vec![f32::NAN; n * ys0];
        let p = problem(&mut y);
        let split = split.map_or_else(|| PosSplit::choose(&p, 2), |s| PosSplit { tile_blocks: s.mb, row_groups: s.gp });
        // SAFETY: as above.
        unsafe { conv1x1_pos::forward(&p, &kern, split) };
        check(&y, &format!("positions {} n{n} c{c} k{k} hw{hw} gap{gap} bias {bias} relu {relu:?} {split:?}", kern.name));
        // W packed by row blocks (constant weights): the chosen walk, and chunks of one and
        // two tiles with K blocks of 7 channels (several copy passes per task).
        let mut packed = vec![f32::NAN; conv1x1_pos::packed_rows_len(&p)];
        // SAFETY: as above; `packed` holds packed_rows_len values.
        unsafe { conv1x1_pos::pack_rows(&p, &mut packed) };
        for walk in [PackedWalk::choose(&p), PackedWalk { chunk: 1, kc: 7 }, PackedWalk { chunk: 2, kc: 7 }] {
            y.fill(f32::NAN);
            // SAFETY: as above.
            unsafe { conv1x1_pos::forward_packed(&p, &kern, split, walk, &packed) };
            check(&y, &format!("positions packed {} n{n} c{c} k{k} hw{hw} gap{gap} bias {bias} relu {relu:?} {split:?} {walk:?}", kern.name));
        }
    }
}

#[test]
fn every_tile_remainder_and_panel_edge() {
    // hw 1..=29 leaves every remainder 1..13 (and none) for the last tile; k around 32.
    let mut r = SplitMix64::new(1);
    for hw in 1..=29 {
        for nhwc in [false, true] {
            let cs = Case { n: r.range(1, 3), c: r.range(1, 20), k: r.pick(&[1, 31, 32, 33, 64, 70]), hw, gap: hw % 3, bias: hw % 2 == 0, relu: [Clamp::RELU, Clamp { on: true, hi: 2.5 }, Clamp::NONE, Clamp::NONE][hw % 4], nhwc };
            run(&cs, None, hw % 2 == 1, hw as u64);
        }
    }
}

#[test]
fn several_k_blocks_and_forced_splits() {
    // c > 256 (two and three K blocks with partial sums), c > 64 with channel rows of 4 KiB
    // and more (blocks of at most 64 channels: three of 50 here), tasks of one tile and one
    // panel, tasks whose tiles span images, and the chosen split.
    let cases = [
        Case { n: 2, c: 300, k: 70, hw: 49, gap: 1, bias: true, relu: Clamp { on: true, hi: 6.0 }, nhwc: false },
        Case { n: 3, c: 520, k: 33, hw: 15, gap: 0, bias: false, relu: Clamp::RELU, nhwc: false },
        Case { n: 1, c: 257, k: 96, hw: 196, gap: 2, bias: true, relu: Clamp::NONE, nhwc: false },
        Case { n: 1, c: 150, k: 40, hw: 1030, gap: 3, bias: true, relu: Clamp { on: true, hi: 6.0 }, nhwc: false },
        Case { n: 2, c: 300, k: 70, hw: 49, gap: 1, bias: true, relu: Clamp::RELU, nhwc: true },
        Case { n: 3, c: 520, k: 33, hw: 15, gap: 2, bias: false, relu: Clamp::NONE, nhwc: true },
    ];
    for (i, cs) in cases.iter().enumerate() {
        for split in [None, Some(Split { mb: 1, gp: 1 }), Some(Split { mb: 3, gp: 2 }), Some(Split { mb: 1000, gp: 1000 })] {
            run(cs, split, i != 1 && i != 3, 10 + i as u64);
            run(cs, split, true, 20 + i as u64);
        }
    }
}

#[test]
fn relu_turns_nan_into_zero_like_the_generic_path() {
    // A NaN weight makes every output of its filter NaN before ReLU; max(v, 0) with v first
    // gives 0, as the generic ReLU does.
    let (n, c, k, hw) = (1, 3, 32, 14);
    let x = vec![1.0f32; c * hw];
    let mut w = vec![1.0f32; k * c];
    w[5 * c] = f32::NAN;
    for kern in available() {
        let mut y = vec![-1.0f32; k * hw];
        let p = Problem { n, c, k, hw, x: x.as_ptr(), xs: [c * hw, hw], xp: 1, w: w.as_ptr(), ws0: c, wc: 1, y: y.as_mut_ptr(), ys: [k * hw, hw], yp: 1, bias: std::ptr::null(), relu: Clamp::RELU };
        // SAFETY: as above.
        unsafe { forward_with(&p, &kern, Split::choose(&p, 2), None) };
        assert!(y[5 * hw..6 * hw].iter().all(|v| *v == 0.0), "{}: {:?}", kern.name, &y[5 * hw..6 * hw]);
        assert!(y[..5 * hw].iter().all(|v| *v == 3.0), "{}", kern.name);
    }
    // The AMX driver: the NaN weight's hi part stays NaN.
    if amx::available() {
        let mut y = vec![-1.0f32; k * hw];
        let p = Problem { n, c, k, hw, x: x.as_ptr(), xs: [c * hw, hw], xp: 1, w: w.as_ptr(), ws0: c, wc: 1, y: y.as_mut_ptr(), ys: [k * hw, hw], yp: 1, bias: std::ptr::null(), relu: Clamp::RELU };
        let mut buf = vec![0u16; conv1x1_amx::packed_len(&p) + amx::ALIGN_SLACK];
        let skip = amx::skip_to_64(buf.as_ptr());
        let packed = &mut buf[skip..skip + conv1x1_amx::packed_len(&p)];
        // SAFETY: as above.
        unsafe {
            conv1x1_amx::pack_w(&p, packed);
            conv1x1_amx::forward(&p, SplitW::Packed(packed), AmxSplit::choose(&p, 2), AmxWalk::choose(&p));
        }
        assert!(y[5 * hw..6 * hw].iter().all(|v| *v == 0.0), "amx: {:?}", &y[5 * hw..6 * hw]);
        assert!(y[..5 * hw].iter().all(|v| *v == 3.0), "amx");
    }
}

#[test]
fn split_choice_keeps_both_threads_busy() {
    let p = |n, c, k, hw| Problem { n, c, k, hw, x: std::ptr::null(), xs: [0, 0], xp: 1, w: std::ptr::null(), ws0: 0, wc: 1, y: std::ptr::null_mut(), ys: [0, 0], yp: 1, bias: std::ptr::null(), relu: Clamp::NONE };
    for (n, c, k, hw) in [(1, 2048, 512, 49), (1, 64, 64, 3025), (8, 256, 1024, 196), (1, 3, 1, 1)] {
        let pr = p(n, c, k, hw);
        let s = Split::choose(&pr, 2);
        let tasks = (n * hw.div_ceil(14)).div_ceil(s.mb) * k.div_ceil(32).div_ceil(s.gp);
        let most = n * hw.div_ceil(14) * k.div_ceil(32);
        assert!(tasks >= 6.min(most), "{n} {c} {k} {hw}: {s:?} gives {tasks} tasks");
    }
    // W-heavy layers split by channel panels (W packed once), x-heavy ones by positions.
    assert_eq!(Split::choose(&p(1, 2048, 512, 49), 2).mb, 4);
    assert_eq!(Split::choose(&p(1, 64, 64, 3025), 2).gp, 2);
}

/// Bias then an activation the tiles cannot clamp (SiLU, GELU, Mish) through a fusion plan on
/// `CpuConvGemm1x1`: the tiles store conv + bias and the activation runs over y after; NCHW
/// images the channels driver takes (7×7) and the positions one (28×28), NHWC, two groups;
/// α ≠ 1 goes through the generic GEMM inside the solver. Against the f64 reference.
#[test]
fn bias_then_other_activations_through_a_plan() {
    use conflux::{ActivationDesc, ActivationMode, ConvDesc, ConvMode, DataType, FusionDirection, FusionPlan, Handle, OpArg, OpArgs, TensorDesc};
    use conflux::reference::fill::Fill;
    use support::{assert_close, desc, download, poisoned, random, solution_id, Lay};
    // The solver needs AVX-512 (its refusal elsewhere is checked in cpu_solvers.rs).
    if conflux::backend::cpu::conv1x1::channels_kernel::best().is_none() {
        return;
    }
    let h = Handle::cpu();
    let modes = [ActivationMode::Silu, ActivationMode::Gelu, ActivationMode::Mish];
    let cases: [([usize; 4], usize, Lay, f64); 5] = [
        ([1, 40, 7, 7], 24, Lay::Packed, 1.0),
        ([1, 24, 28, 28], 72, Lay::Packed, 1.0),
        ([2, 16, 9, 10], 40, Lay::ChannelsLast, 1.0),
        ([1, 16, 7, 7], 24, Lay::Packed, -1.0),
        ([1, 16, 7, 7], 24, Lay::Packed, 0.75),
    ];
    for (i, (lx, k, lay, alpha)) in cases.into_iter().enumerate() {
        let mode = modes[i % modes.len()];
        // α = -1 marks the two-group case (run at α = 1).
        let groups = if alpha < 0.0 { 2 } else { 1 };
        let alpha = alpha.abs();
        let mut conv = ConvDesc::new(ConvMode::Convolution, &[0, 0], &[1, 1], &[1, 1]).unwrap();
        conv.set_groups(groups as i64).unwrap();
        let x = desc(DataType::Float, &lx, lay);
        let w = desc(DataType::Float, &[k, lx[1] / groups, 1, 1], if lay == Lay::ChannelsLast { Lay::ChannelsLast } else { Lay::Packed });
        let y = desc(DataType::Float, conv.output_desc(&x, &w).unwrap().lens(), lay);
        let b = TensorDesc::new(DataType::Float, &[1, k, 1, 1]).unwrap();
        let (xv, wv, bv) = (random(&h, &x, Fill::Normal, 31 + i as u64), random(&h, &w, Fill::Normal, 32), random(&h, &b, Fill::Normal, 33));
        let act = ActivationDesc::new(mode, 0.0, 0.0, 0.0);
        let mut want = vec![0.0; y.element_space()];
        conflux::reference::fused::conv_bias_act_forward(alpha, &conv, &x, &xv.host, &w, &wv.host, 0.0, None, Some((&b, &bv.host)), &act, &y, &mut want).unwrap();
        let mut plan = FusionPlan::new(FusionDirection::Vertical, x.clone());
        plan.add_conv_forward(&conv, &w).unwrap();
        plan.add_bias(&b).unwrap();
        plan.add_activation(mode).unwrap();
        plan.set_solution(Some(solution_id("CpuConvGemm1x1")));
        plan.compile(&h).unwrap();
        assert_eq!(plan.solver_name(), Some("CpuConvGemm1x1"));
        let mut args = OpArgs::new();
        args.set(0, OpArg::Conv { w: wv.ptr(), alpha, beta: 0.0 });
        args.set(1, OpArg::Bias { b: bv.ptr() });
        args.set(2, OpArg::Activation { alpha: 0.0, beta: 0.0, gamma: 0.0 });
        let out = poisoned(&h, &y);
        plan.execute(&h, &x, xv.ptr(), &y, out.ptr(), &args).unwrap();
        let what = format!("1x1 {lx:?} -> {k} {lay:?} groups {groups} alpha {alpha} + bias + {mode:?}");
        assert_close(&what, &download(&h, &out), &want, 1e-5);
    }
}

/// A 1×1 stride-1 layer: n images of g groups of cg → kg channels on an hh × ww map, every
/// tensor in layout `lay`.
fn pointwise_case(n: usize, g: usize, cg: usize, kg: usize, (hh, ww): (usize, usize), lay: support::Lay) -> support::ConvCase {
    use conflux::{ConvDesc, ConvMode, DataType};
    let mut conv = ConvDesc::new(ConvMode::Convolution, &[0, 0], &[1, 1], &[1, 1]).unwrap();
    conv.set_groups(g as i64).unwrap();
    let x = support::desc(DataType::Float, &[n, g * cg, hh, ww], lay);
    let w = support::desc(DataType::Float, &[g * kg, cg, 1, 1], lay);
    let y = support::desc(DataType::Float, conv.output_desc(&x, &w).unwrap().lens(), lay);
    support::ConvCase::new(&conv, &x, &w, &y)
}

/// Backward-data of 1×1 stride-1 layers through `CpuConv1x1BwdData` (the positions tiles on dy
/// with W transposed by its strides): random groups, channels (1–40 each side, several row
/// blocks and K blocks) and maps (one position to several tiles per image), packed
/// channels-first tensors, exact small integers bit for bit and α/β (the GEMM fallback); the
/// registry's choice for such a layer; channels-last and row-gapped tensors refused with the
/// reason.
#[test]
fn transposed_backward_data() {
    use conflux::search::Choice;
    use conflux::Handle;
    use support::{check_exact_and_scaled, solution_id, solver, Dir, Lay};
    let h = Handle::cpu();
    let name = "CpuConv1x1BwdData";
    let probe = pointwise_case(1, 1, 16, 32, (9, 9), Lay::Packed);
    if let Err(why) = solver(name).check(&probe.fused(Dir::BackwardData), h.device().info()) {
        assert!(why.contains("AVX-512"), "{name}: {why}");
        return;
    }
    assert_eq!(conflux::search::choose(&h, &probe.fused(Dir::BackwardData), Choice::Auto, 0).unwrap().name(), name);
    for lay in [Lay::ChannelsLast, Lay::Gapped] {
        let c = pointwise_case(1, 1, 16, 32, (9, 9), lay);
        let why = solver(name).check(&c.fused(Dir::BackwardData), h.device().info()).unwrap_err();
        assert!(why.contains("positions consecutive"), "{why}");
    }
    // Several K blocks: 300 dy channels in blocks of 256, and of 64 where dy's channel rows
    // are 4 KiB or longer (33 × 35 positions).
    for (i, map) in [(7, 7), (33, 35)].into_iter().enumerate() {
        check_exact_and_scaled(&h, &pointwise_case(2, 1, 20, 300, map, Lay::Packed), Dir::BackwardData, solution_id(name), 6000 + 10 * i as u64);
    }
    // Filters in other layouts (the fuzzer's seed 1714 found the second one wrong): filters
    // consecutive (the transposed read is then in place) taken, neither consecutive refused.
    for (ws, takes) in [([1, 6, 1, 1], true), ([12, 4, 2, 1], false)] {
        let base = pointwise_case(2, 1, 3, 6, (5, 7), Lay::Packed);
        let w = conflux::TensorDesc::with_strides(conflux::DataType::Float, &[6, 3, 1, 1], &ws).unwrap();
        let mut conv = conflux::ConvDesc::new(conflux::ConvMode::Convolution, &[0, 0], &[1, 1], &[1, 1]).unwrap();
        conv.set_groups(1).unwrap();
        let c = support::ConvCase::new(&conv, &base.x, &w, &base.y);
        match solver(name).check(&c.fused(Dir::BackwardData), h.device().info()) {
            Ok(()) => {
                assert!(takes, "{ws:?}");
                check_exact_and_scaled(&h, &c, Dir::BackwardData, solution_id(name), 6500);
            }
            Err(why) => assert!(!takes && why.contains("neither its channels nor its filters"), "{ws:?}: {why}"),
        }
    }
    let mut r = SplitMix64::new(41);
    for i in 0..20 {
        let (g, cg, kg, n) = (r.pick(&[1, 1, 2, 3]), r.range(1, 40), r.range(1, 40), r.range(1, 3));
        let map = r.pick(&[(1, 1), (7, 7), (14, 14), (5, 13), (33, 35), (3, 70)]);
        let c = pointwise_case(n, g, cg, kg, map, Lay::Packed);
        check_exact_and_scaled(&h, &c, Dir::BackwardData, solution_id(name), 7000 + 10 * i as u64);
    }
}

/// Backward-weights of 1×1 stride-1 layers through `CpuConv1x1BwdWeights`: on maps of ≥ 256
/// positions dot products of dy and x rows (ragged tiles of 4 dy × 6 x rows, blocks past 64, a
/// masked last vector, whole images or runs of positions per chunk), on smaller ones (1 × 1 to
/// 14 × 14) the positions tiles with x's channels in the lanes (partial channel tiles, several
/// row blocks); random groups and channels, packed channels-first tensors, exact small integers
/// bit for bit and α/β (on small maps through the GEMM); the registry's choice; channels-last,
/// row-gapped, wide and small-map contracting layers refused with the reason; the portable dot-product kernels agree
/// with the ones this CPU runs.
#[test]
fn dot_product_backward_weights() {
    use conflux::backend::cpu::conv1x1::weights::{self, Span, WeightsProblem, WeightsSplit};
    use conflux::search::Choice;
    use conflux::Handle;
    use support::{check_exact_and_scaled, solution_id, solver, Dir, Lay};
    let h = Handle::cpu();
    let name = "CpuConv1x1BwdWeights";
    // The portable kernels against the vector ones (when there are): ragged rows, a masked
    // tail, two images.
    let (xv, dv): (Vec<f32>, Vec<f32>) = ((0..2 * 6 * 37).map(|i| (i % 7) as f32 - 3.0).collect(), (0..2 * 4 * 37).map(|i| (i % 5) as f32 - 2.0).collect());
    let run = |kern: weights::WeightsKernels| {
        let mut acc = vec![0.0f32; 4 * 6 * 16];
        let (dr, xr): ([*const f32; 4], [*const f32; 6]) = (std::array::from_fn(|i| dv[i * 37..].as_ptr()), std::array::from_fn(|j| xv[j * 37..].as_ptr()));
        // SAFETY: every row holds 37 values in each of two images (4 and 6 rows apart), acc 4·6·16.
        unsafe { (kern.tile)(acc.as_mut_ptr(), &dr, &xr, Span { len: 37, images: 2, dy_image: 4 * 37, x_image: 6 * 37 }) };
        let mut sums = vec![0.0f32; 24];
        (kern.lane_sums)(&acc, &mut sums);
        sums
    };
    let want = run(weights::PORTABLE);
    if let Some(k) = weights::best() {
        assert_eq!(run(k), want);
    }
    let probe = pointwise_case(1, 1, 16, 32, (16, 16), Lay::Packed);
    if let Err(why) = solver(name).check(&probe.fused(Dir::BackwardWeights), h.device().info()) {
        assert!(why.contains("AVX-512"), "{name}: {why}");
        // The driver on the portable tile still matches a plain loop.
        let (n, c, k, hw) = (2, 7, 5, 40);
        let x: Vec<f32> = (0..n * c * hw).map(|i| (i % 5) as f32 - 2.0).collect();
        let dy: Vec<f32> = (0..n * k * hw).map(|i| (i % 3) as f32 - 1.0).collect();
        let mut dw = vec![0.0f32; k * c];
        let p = WeightsProblem { n, c, k, hw, x: x.as_ptr(), xs: [c * hw, hw], dy: dy.as_ptr(), ys: [k * hw, hw], dw: dw.as_mut_ptr(), dws: [c, 1], alpha: 1.0, beta: 0.0 };
        // SAFETY: the vectors hold the tensors p describes.
        unsafe { weights::backward_weights(&p, weights::PORTABLE, WeightsSplit::choose(&p, 2)) };
        for (kc, v) in dw.iter().enumerate() {
            let (kk, cc) = (kc / c, kc % c);
            let s: f32 = (0..n).flat_map(|ni| (0..hw).map(move |q| (ni, q))).map(|(ni, q)| dy[(ni * k + kk) * hw + q] * x[(ni * c + cc) * hw + q]).sum();
            assert_eq!(*v, s);
        }
        return;
    }
    assert_eq!(conflux::search::choose(&h, &probe.fused(Dir::BackwardWeights), Choice::Auto, 0).unwrap().name(), name);
    for (lay, map, cg, needle) in [(Lay::ChannelsLast, (16, 16), 16, "positions consecutive"), (Lay::Gapped, (16, 16), 16, "positions consecutive"), (Lay::Packed, (16, 16), 160, "both over 128"), (Lay::Packed, (7, 7), 60, "fewer output channels")] {
        let c = pointwise_case(2, 1, cg, if cg > 128 { 130 } else { 32 }, map, lay);
        let why = solver(name).check(&c.fused(Dir::BackwardWeights), h.device().info()).unwrap_err();
        assert!(why.contains(needle), "{why}");
    }
    // Blocks of 64 dy rows and more x rows than one block takes; several chunks of positions.
    for (i, (cg, kg, map)) in [(150, 120, (16, 17)), (20, 300, (33, 35)), (70, 9, (64, 70)), (45, 70, (7, 7)), (20, 300, (14, 14))].into_iter().enumerate() {
        check_exact_and_scaled(&h, &pointwise_case(2, 1, cg, kg, map, Lay::Packed), Dir::BackwardWeights, solution_id(name), 8000 + 10 * i as u64);
    }
    let mut r = SplitMix64::new(43);
    for i in 0..30 {
        let (g, cg, kg, n) = (r.pick(&[1, 1, 2, 3]), r.range(1, 40), r.range(1, 40), r.range(1, 4));
        let map = r.pick(&[(1, 1), (4, 4), (7, 7), (14, 14), (5, 13), (16, 16), (17, 19), (5, 53), (33, 35), (3, 90)]);
        // Small maps of contracting layers stay on the GEMM path (refused below).
        let (cg, kg) = if map.0 * map.1 < 256 { (cg.min(kg), cg.max(kg)) } else { (cg, kg) };
        check_exact_and_scaled(&h, &pointwise_case(n, g, cg, kg, map, Lay::Packed), Dir::BackwardWeights, solution_id(name), 9000 + 10 * i as u64);
    }
}

/// The GEMM solver's backward-weights with few im2col rows per group runs as dot products of
/// dy's rows and the explicit im2col's rows (`im2col::backward`, `conv1x1::weights`) when dy's
/// positions are consecutive and the output has ≥ 256 of them: 7×7 and 3×3 stride-2 and 4×4
/// patch stems, groups of 4 channels, several images per im2col matrix, against the reference
/// exactly and with α/β; channels-last and row-gapped dy (the GEMM path) in the same cases.
#[test]
fn few_im2col_rows_backward_weights_as_dot_products() {
    use conflux::Handle;
    use support::{check_exact_and_scaled, grouped_case, solution_id, Dir, Lay};
    let h = Handle::cpu();
    let id = solution_id("CpuConvGemm");
    let specs: [(&'static [usize], &'static [usize], usize, i64, i64); 5] = [
        (&[2, 3, 40, 40], &[8, 3, 7, 7], 1, 3, 2),
        (&[3, 3, 33, 35], &[5, 3, 3, 3], 1, 1, 2),
        (&[2, 3, 64, 68], &[6, 3, 4, 4], 1, 0, 4),
        (&[1, 4, 20, 20], &[130, 4, 3, 3], 1, 1, 1),
        // Groups of 4 channels (ResNeXt): 36 im2col rows per group.
        (&[2, 16, 18, 18], &[12, 4, 3, 3], 4, 1, 1),
    ];
    for (i, (lx, lw, groups, pad, stride)) in specs.into_iter().enumerate() {
        for lay in [Lay::Packed, Lay::ChannelsLast, Lay::Gapped] {
            let c = grouped_case(&(conflux::DataType::Float, lx, lw, groups, pad, stride, 1, lay));
            check_exact_and_scaled(&h, &c, Dir::BackwardWeights, id, 9500 + 10 * i as u64);
        }
    }
}
