//! Fusion plans without a convolution, on every device, against the f64 reference:
//! batch-norm inference + activation (NA) over types, layouts, ranks and shapes that do and
//! do not take the vectorized GPU paths; other pointwise chains (B, N, A, Z in any order, up
//! to 8 ops); activation backward alone; batch-norm forward training (+ activation) with its
//! saved and running statistics; batch-norm backward (+ activation backward).
//!
//! Every output is NaN-poisoned before the run, every comparison is over the logical
//! elements with the reference tolerance of the output's type, and outputs with gaps must
//! keep their gaps unwritten.

mod support;

use conflux::batchnorm::derive_bn_desc;
use conflux::reference::{self as r, compare::tolerance, fill::Fill};
use conflux::{
    ActivationDesc, ActivationMode, BnMode, DataType, DevPtr, FusionDirection, FusionPlan, Handle, OpArg, OpArgs, TensorDesc,
};
use support::*;

const TYPES: [DataType; 3] = [DataType::Float, DataType::Half, DataType::BFloat16];

/// One op of a pointwise chain.
#[derive(Clone, Copy, Debug)]
enum Pw {
    /// Bias 1×C×1×1(×1) of the given type.
    Bias(DataType),
    /// Batch-norm inference with parameters of the given type.
    Bn(BnMode, DataType),
    /// The same with every parameter array starting one element past a 16-byte boundary.
    BnShifted(BnMode, DataType),
    Act(ActivationMode),
    /// Residual add of a z tensor arranged as given (α = 0.5).
    Add(Lay),
}

fn packed_like(d: &TensorDesc) -> TensorDesc {
    TensorDesc::new(d.dtype(), d.lens()).unwrap()
}

/// Build the plan `ops` over `x_desc`, run it on a poisoned output and compare with the
/// reference composition of the unfused reference operators.
fn run_chain(h: &Handle, x_desc: &TensorDesc, ops: &[Pw], seed: u64) {
    let dt = x_desc.dtype();
    let c = x_desc.c();
    let pk = packed_like(x_desc);
    let label = format!("{} ops {:?} on {}", x_desc.key(), ops, h.device().name());
    let x = random(h, x_desc, Fill::Normal, seed);
    let mut cur = logical(x_desc, &x.host);
    let mut plan = FusionPlan::new(FusionDirection::Vertical, x_desc.clone());
    let mut args = OpArgs::new();
    let mut keep = Vec::new(); // device buffers must outlive execute
    for (i, op) in ops.iter().enumerate() {
        let s = seed + 100 + 10 * i as u64;
        match *op {
            Pw::Bias(bdt) => {
                let mut lens = vec![1; x_desc.rank()];
                lens[1] = c;
                let bd = TensorDesc::new(bdt, &lens).unwrap();
                let b = random(h, &bd, Fill::Normal, s);
                assert_eq!(plan.add_bias(&bd).unwrap(), i);
                args.set(i, OpArg::Bias { b: b.ptr() });
                r::bias_forward(&pk, &mut cur, &bd, &b.host).unwrap();
                keep.push(b);
            }
            Pw::Bn(mode, pdt) | Pw::BnShifted(mode, pdt) => {
                let pd = derive_bn_desc(x_desc, mode).unwrap().with_dtype(pdt).unwrap();
                let sc = random(h, &pd, Fill::Normal, s);
                let bi = random(h, &pd, Fill::Normal, s + 1);
                let mu = random(h, &pd, Fill::Normal, s + 2);
                let var = random(h, &pd, Fill::Uniform(0.5, 2.0), s + 3);
                assert_eq!(plan.add_bn_inference(mode, &pd).unwrap(), i);
                let eps = 1e-5;
                let prev = cur.clone();
                r::bn_inference(mode, &pk, &prev, &pk, &mut cur, &sc.host, &bi.host, &mu.host, &var.host, eps).unwrap();
                let mut ptrs = [sc.ptr(), bi.ptr(), mu.ptr(), var.ptr()];
                if matches!(op, Pw::BnShifted(..)) {
                    for (p, t) in ptrs.iter_mut().zip([&sc, &bi, &mu, &var]) {
                        let (copy, shifted) = misaligned_copy(h, t);
                        *p = shifted;
                        keep.push(copy);
                    }
                }
                let [scale, bias, mean, var_p] = ptrs;
                args.set(i, OpArg::BnInference { scale, bias, mean, var: var_p, eps });
                keep.extend([sc, bi, mu, var]);
            }
            Pw::Act(mode) => {
                let (a, b, g) = act_params(mode);
                assert_eq!(plan.add_activation(mode).unwrap(), i);
                // Alpha/beta of the op-args API are not activation parameters; conflux's
                // OpArg carries only the activation's own α, β, γ.
                args.set(i, OpArg::Activation { alpha: a, beta: b, gamma: g });
                let prev = cur.clone();
                r::activation_forward(&ActivationDesc::new(mode, a, b, g), &pk, &prev, &pk, &mut cur).unwrap();
            }
            Pw::Add(lay) => {
                let zd = desc(dt, x_desc.lens(), lay);
                let z = random(h, &zd, Fill::Normal, s);
                assert_eq!(plan.add_tensor_add(&zd).unwrap(), i);
                args.set(i, OpArg::AddTensor { z: z.ptr(), alpha: 0.5 });
                let zl = logical(&zd, &z.host);
                cur.iter_mut().zip(&zl).for_each(|(v, zv)| *v += 0.5 * zv);
                keep.push(z);
            }
        }
    }
    // Pointwise ops keep the descriptor: the plan's output is its input descriptor.
    assert_eq!(plan.output_desc(), x_desc, "{label}");
    plan.compile(h).unwrap_or_else(|e| panic!("compile {label}: {e}"));
    let y = poisoned(h, x_desc);
    plan.execute(h, x_desc, x.ptr(), x_desc, y.ptr(), &args).unwrap_or_else(|e| panic!("execute {label}: {e}"));
    let out = download(h, &y);
    assert_close(&label, &logical(x_desc, &out), &cur, tolerance(dt));
    assert_gaps_untouched(&label, x_desc, &out);
    // The input is never written.
    assert_unchanged(&format!("{label}: input"), h, &x);
}

/// Shapes for the NA matrix: `vec` shapes take the 16-byte GPU paths (packed NCHW with
/// D·H·W divisible by 8, packed NHWC with C divisible by 8); the others do not (odd
/// sizes, or the same shapes with gaps between rows).
fn na_shape(rank: usize, channels_last: bool, vec: bool) -> Vec<usize> {
    match (rank, channels_last, vec) {
        (4, false, true) => vec![2, 3, 4, 6],     // D·H·W = 24
        (5, false, true) => vec![2, 3, 2, 2, 4],  // D·H·W = 16
        (4, true, true) => vec![2, 16, 3, 5],     // C = 16
        (5, true, true) => vec![2, 8, 2, 3, 3],   // C = 8
        (4, false, false) => vec![3, 5, 3, 5],    // D·H·W = 15
        (5, false, false) => vec![2, 3, 3, 1, 5], // D·H·W = 15
        (4, true, false) => vec![2, 5, 3, 3],     // C = 5
        _ => vec![1, 3, 2, 3, 5],                 // C = 3
    }
}

device_tests!(na_inference_matrix, |h: &Handle| {
    let modes = ActivationMode::ALL;
    let mut case = 0usize;
    for dt in TYPES {
        for bn in [BnMode::Spatial, BnMode::PerActivation] {
            for cl in [false, true] {
                for rank in [4, 5] {
                    for variant in 0..3 {
                        // 0: vectorizable packed; 1: odd packed; 2: vectorizable shape with gaps.
                        let lens = na_shape(rank, cl, variant != 1);
                        let lay = match (variant, cl) {
                            (2, false) => Lay::Gapped,
                            (2, true) => Lay::GappedChannelsLast,
                            (_, false) => Lay::Packed,
                            (_, true) => Lay::ChannelsLast,
                        };
                        let xd = desc(dt, &lens, lay);
                        // Parameters are Float (the derived BN type) mostly; sometimes of the
                        // data type, or Half with Float data.
                        let pdt = match (case % 4, dt) {
                            (3, DataType::Float) => DataType::Half,
                            (3, _) => dt,
                            _ => DataType::Float,
                        };
                        let act = modes[case % modes.len()];
                        run_chain(h, &xd, &[Pw::Bn(bn, pdt), Pw::Act(act)], 1000 + case as u64);
                        case += 1;
                    }
                }
            }
        }
    }
    // Every activation mode ran with every type.
    assert!(case >= 3 * modes.len());
});

device_tests!(other_pointwise_chains, |h: &Handle| {
    use ActivationMode::*;
    let f = DataType::Float;
    let chains: Vec<Vec<Pw>> = vec![
        vec![Pw::Bias(f)],
        vec![Pw::Act(Elu)],
        vec![Pw::Bn(BnMode::PerActivation, f)],
        vec![Pw::Add(Lay::Packed)],
        vec![Pw::Bias(f), Pw::Act(Relu)],
        vec![Pw::Act(Tanh), Pw::Act(LeakyRelu)],
        vec![Pw::Act(Logistic), Pw::Act(Power)],
        vec![Pw::Bn(BnMode::Spatial, f), Pw::Bias(f), Pw::Act(ClippedRelu)],
        vec![Pw::Add(Lay::ChannelsLast), Pw::Act(SoftRelu)],
        vec![Pw::Bias(f), Pw::Add(Lay::Gapped), Pw::Act(Abs)],
        // Eight ops, the longest chain conflux fuses.
        vec![
            Pw::Bias(f),
            Pw::Act(Elu),
            Pw::Bn(BnMode::Spatial, f),
            Pw::Add(Lay::ChannelsLast),
            Pw::Act(LeakyRelu),
            Pw::Bias(f),
            Pw::Bn(BnMode::PerActivation, f),
            Pw::Act(Tanh),
        ],
        vec![
            Pw::Act(Abs),
            Pw::Add(Lay::Gapped),
            Pw::Act(SoftRelu),
            Pw::Bn(BnMode::PerActivation, f),
            Pw::Bias(f),
            Pw::Act(Logistic),
            Pw::Add(Lay::Packed),
            Pw::Act(PassThru),
        ],
    ];
    let mut seed = 5000;
    for (ci, chain) in chains.iter().enumerate() {
        for dt in TYPES {
            // Bias and BN parameters in the data type for 16-bit data on odd chains.
            let chain: Vec<Pw> = chain
                .iter()
                .map(|op| match *op {
                    Pw::Bias(_) if ci % 2 == 1 => Pw::Bias(dt),
                    Pw::Bn(m, _) if ci % 2 == 1 => Pw::Bn(m, dt),
                    o => o,
                })
                .collect();
            for (lens, lay) in [
                (vec![2, 3, 4, 4], Lay::Packed),          // NCHW vector path
                (vec![2, 8, 3, 3], Lay::ChannelsLast),    // NHWC vector path
                (vec![2, 3, 3, 1, 5], Lay::Gapped),       // generic, 5-D, gaps
                (vec![3, 5, 1, 7], Lay::ChannelsLast),    // generic NHWC (odd C)
            ] {
                run_chain(h, &desc(dt, &lens, lay), &chain, seed);
                seed += 1;
            }
        }
    }
    // Chains without batch norm also run on 2-D and 3-D tensors (N, C(, W)).
    for dt in TYPES {
        for (lens, lay) in [(vec![3, 5], Lay::Packed), (vec![2, 4, 7], Lay::ChannelsLast), (vec![2, 3, 5], Lay::Gapped)] {
            for chain in [
                vec![Pw::Bias(DataType::Float), Pw::Act(Elu)],
                vec![Pw::Add(Lay::Gapped), Pw::Act(Tanh), Pw::Bias(dt)],
            ] {
                run_chain(h, &desc(dt, &lens, lay), &chain, seed);
                seed += 1;
            }
        }
    }
});

// Activation backward alone, dy → dx, for every mode: with y given and with y NULL (then
// recomputed from x), and with x NULL where the mode's derivative does not read x.
device_tests!(activation_backward_all_modes, |h: &Handle| {
    let shapes = [
        (vec![2, 3, 4, 4], Lay::Packed),
        (vec![2, 5, 3, 3], Lay::ChannelsLast),
        (vec![2, 3, 2, 3, 3], Lay::Gapped),
    ];
    let mut seed = 9000;
    for (mi, &mode) in ActivationMode::ALL.iter().enumerate() {
        let (a, b, g) = act_params(mode);
        let act = ActivationDesc::new(mode, a, b, g);
        for (ti, dt) in TYPES.into_iter().enumerate() {
            let (lens, lay) = &shapes[(mi + ti) % shapes.len()];
            let dd = desc(dt, lens, *lay);
            let pk = packed_like(&dd);
            let mut plan = FusionPlan::new(FusionDirection::Vertical, dd.clone());
            plan.add_activation_backward(mode).unwrap();
            assert_eq!(plan.output_desc(), &dd);
            plan.compile(h).unwrap();
            let dy = random(h, &dd, Fill::Normal, seed);
            let x = random(h, &dd, Fill::Normal, seed + 1);
            // y = f(x) in f64; the uploaded y is rounded to the data type.
            let mut y_exact = vec![0.0; dd.element_space()];
            r::activation_forward(&act, &dd, &x.host, &dd, &mut y_exact).unwrap();
            let y = upload(h, &dd, &y_exact);
            seed += 2;
            let mut variants = vec![("y given", x.ptr(), y.ptr(), &y.host), ("y NULL", x.ptr(), DevPtr::NULL, &y_exact)];
            if !act.backward_needs_x() {
                variants.push(("x NULL", DevPtr::NULL, y.ptr(), &y.host));
            }
            for (what, xp, yp, y_ref) in variants {
                let label = format!("{mode:?} backward ({what}) {} {} on {}", dt.short(), dd.key(), h.device().name());
                let mut want = vec![0.0; pk.element_space()];
                r::activation_backward(&act, &dd, y_ref, &dd, &dy.host, &dd, &x.host, &pk, &mut want).unwrap();
                let mut args = OpArgs::new();
                args.set(0, OpArg::ActivationBackward { y: yp, x: xp, alpha: a, beta: b, gamma: g });
                let dx = poisoned(h, &dd);
                plan.execute(h, &dd, dy.ptr(), &dd, dx.ptr(), &args).unwrap_or_else(|e| panic!("{label}: {e}"));
                let out = download(h, &dx);
                assert_close(&label, &logical(&dd, &out), &want, tolerance(dt));
                assert_gaps_untouched(&label, &dd, &out);
            }
        }
    }
});

/// Which optional outputs a BN-training run asks for.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Stats {
    /// Saved mean/inv-var and running mean/var (op created with running = true).
    All,
    /// Running statistics only: both saved pointers NULL.
    NoSaved,
    /// Only the saved mean pointer: neither saved output may be written.
    HalfSaved,
    /// Op created with running = false: running pointers given but never touched.
    NotRunning,
    /// Op created with running = false and NULL running pointers.
    NotRunningNull,
}

fn bn_train_case(h: &Handle, xd: &TensorDesc, mode: BnMode, act: Option<ActivationMode>, stats: Stats, factor: f64, seed: u64) {
    let dt = xd.dtype();
    let pk = packed_like(xd);
    let pd = derive_bn_desc(xd, mode).unwrap();
    assert_eq!(pd.dtype(), DataType::Float);
    let label = format!("BN train {mode:?} {act:?} {stats:?} factor {factor} {} on {}", xd.key(), h.device().name());
    let running = matches!(stats, Stats::All | Stats::NoSaved | Stats::HalfSaved);
    let mut plan = FusionPlan::new(FusionDirection::Vertical, xd.clone());
    plan.add_bn_forward(mode, running).unwrap();
    let (a, b, g) = act.map(act_params).unwrap_or_default();
    if let Some(m) = act {
        plan.add_activation(m).unwrap();
    }
    plan.compile(h).unwrap_or_else(|e| panic!("compile {label}: {e}"));

    // Data with a non-zero mean and non-unit spread, so the statistics matter.
    let x = random(h, xd, Fill::Uniform(-1.0, 3.0), seed);
    let scale = random(h, &pd, Fill::Uniform(0.5, 1.5), seed + 1);
    let bias = random(h, &pd, Fill::Normal, seed + 2);
    let rm = random(h, &pd, Fill::Uniform(-1.0, 1.0), seed + 3);
    let rv = random(h, &pd, Fill::Uniform(0.5, 2.0), seed + 4);
    let sm = poisoned(h, &pd);
    let si = poisoned(h, &pd);
    let eps = 1e-5;
    let (smp, sip) = match stats {
        Stats::All | Stats::NotRunning | Stats::NotRunningNull => (sm.ptr(), si.ptr()),
        Stats::NoSaved => (DevPtr::NULL, DevPtr::NULL),
        Stats::HalfSaved => (sm.ptr(), DevPtr::NULL),
    };
    let (rmp, rvp) = if stats == Stats::NotRunningNull { (DevPtr::NULL, DevPtr::NULL) } else { (rm.ptr(), rv.ptr()) };
    let mut args = OpArgs::new();
    args.set(
        0,
        OpArg::BnForward {
            scale: scale.ptr(),
            bias: bias.ptr(),
            saved_mean: smp,
            saved_inv_var: sip,
            running_mean: rmp,
            running_var: rvp,
            exp_avg_factor: factor,
            eps,
        },
    );
    if act.is_some() {
        args.set(1, OpArg::Activation { alpha: a, beta: b, gamma: g });
    }
    let y = poisoned(h, xd);
    plan.execute(h, xd, x.ptr(), xd, y.ptr(), &args).unwrap_or_else(|e| panic!("execute {label}: {e}"));

    // Reference: BN training (all statistics) then the activation.
    let np = pd.element_count();
    let (mut want_rm, mut want_rv) = (rm.host.clone(), rv.host.clone());
    let (mut want_sm, mut want_si) = (vec![0.0; np], vec![0.0; np]);
    let mut want = vec![0.0; pk.element_space()];
    r::bn_forward_training(
        mode,
        xd,
        &x.host,
        &pk,
        &mut want,
        &scale.host,
        &bias.host,
        factor,
        eps,
        Some(&mut want_rm),
        Some(&mut want_rv),
        Some(&mut want_sm),
        Some(&mut want_si),
    )
    .unwrap();
    if let Some(m) = act {
        let prev = want.clone();
        r::activation_forward(&ActivationDesc::new(m, a, b, g), &pk, &prev, &pk, &mut want).unwrap();
    }
    let out = download(h, &y);
    assert_close(&format!("{label}: y"), &logical(xd, &out), &want, tolerance(dt));
    assert_gaps_untouched(&label, xd, &out);
    let ftol = tolerance(DataType::Float);
    match stats {
        Stats::All | Stats::NotRunning | Stats::NotRunningNull => {
            assert_close(&format!("{label}: saved mean"), &download(h, &sm), &want_sm, ftol);
            assert_close(&format!("{label}: saved inv-var"), &download(h, &si), &want_si, ftol);
        }
        Stats::NoSaved | Stats::HalfSaved => {
            assert_unchanged(&format!("{label}: saved mean"), h, &sm);
            assert_unchanged(&format!("{label}: saved inv-var"), h, &si);
        }
    }
    if running {
        assert_close(&format!("{label}: running mean"), &download(h, &rm), &want_rm, ftol);
        assert_close(&format!("{label}: running var"), &download(h, &rv), &want_rv, ftol);
    } else {
        assert_unchanged(&format!("{label}: running mean"), h, &rm);
        assert_unchanged(&format!("{label}: running var"), h, &rv);
    }
    assert_unchanged(&format!("{label}: input"), h, &x);
}

device_tests!(bn_forward_training_with_activation, |h: &Handle| {
    let stats = [Stats::All, Stats::NoSaved, Stats::HalfSaved, Stats::NotRunning, Stats::NotRunningNull];
    let shapes = [
        (vec![3, 4, 3, 5], Lay::Packed),
        (vec![4, 8, 2, 3], Lay::ChannelsLast),
        (vec![2, 3, 2, 3, 4], Lay::Gapped),
        (vec![3, 5, 2, 2, 3], Lay::ChannelsLast),
    ];
    let modes = ActivationMode::ALL;
    let mut case = 0usize;
    for dt in TYPES {
        for bn in [BnMode::Spatial, BnMode::PerActivation] {
            for (si, &st) in stats.iter().enumerate() {
                let (lens, lay) = &shapes[(si + case) % shapes.len()];
                // Every third case without an activation (a plain N(train) plan).
                let act = if case % 3 == 2 { None } else { Some(modes[case % modes.len()]) };
                bn_train_case(h, &desc(dt, lens, *lay), bn, act, st, 0.3, 20_000 + 10 * case as u64);
                case += 1;
            }
        }
        // Edge cases: one sample per statistic (per-activation with N = 1: variance 0, no
        // unbiasing) and expAvgFactor = 1 (the running statistics are overwritten).
        bn_train_case(h, &desc(dt, &[1, 3, 2, 5], Lay::Packed), BnMode::PerActivation, Some(ActivationMode::Elu), Stats::All, 1.0, 29_000);
        bn_train_case(h, &desc(dt, &[2, 3, 2, 5], Lay::ChannelsLast), BnMode::Spatial, None, Stats::All, 1.0, 29_100);
    }
});

/// How a BN-backward run is set up.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Bwd {
    /// BN backward alone with the saved statistics (and bias NULL: not needed without an
    /// activation).
    Alone,
    /// BN backward alone, saved statistics NULL: recomputed from x with ε.
    AloneRecompute,
    /// With activation backward; the activation's forward output y is given.
    ActY,
    /// With activation backward; y NULL, recomputed from the BN output.
    ActRecompute,
}

fn bn_bwd_case(h: &Handle, dd: &TensorDesc, mode: BnMode, act_mode: ActivationMode, how: Bwd, seed: u64) {
    let dt = dd.dtype();
    let pk = packed_like(dd);
    let pd = derive_bn_desc(dd, mode).unwrap();
    let with_act = matches!(how, Bwd::ActY | Bwd::ActRecompute);
    let label = format!(
        "BN backward {mode:?} {how:?}{} {} on {}",
        if with_act { format!(" {act_mode:?}") } else { String::new() },
        dd.key(),
        h.device().name()
    );
    let mut plan = FusionPlan::new(FusionDirection::Vertical, dd.clone());
    plan.add_bn_backward(mode).unwrap();
    let (a, b, g) = act_params(act_mode);
    let act = ActivationDesc::new(act_mode, a, b, g);
    if with_act {
        plan.add_activation_backward(act_mode).unwrap();
    }
    assert_eq!(plan.output_desc(), dd);
    plan.compile(h).unwrap_or_else(|e| panic!("compile {label}: {e}"));

    let eps = 1e-5;
    let x = random(h, dd, Fill::Uniform(-1.0, 3.0), seed);
    let dy = random(h, dd, Fill::Normal, seed + 1);
    let scale = random(h, &pd, Fill::Uniform(0.5, 1.5), seed + 2);
    let bias = random(h, &pd, Fill::Normal, seed + 3);
    // Saved statistics of x as the forward pass would have stored them (Float).
    let (mean, var) = r::bn_batch_stats(mode, dd, &x.host).unwrap();
    let inv: Vec<f64> = var.iter().map(|v| 1.0 / (v + eps).sqrt()).collect();
    let sm = upload(h, &pd, &mean);
    let si = upload(h, &pd, &inv);
    let dscale = poisoned(h, &pd);
    let dbias = poisoned(h, &pd);
    let saved = how != Bwd::AloneRecompute;
    let np = pd.element_count();
    let (mut want_ds, mut want_db) = (vec![0.0; np], vec![0.0; np]);
    let mut want = vec![0.0; pk.element_space()];
    let mut keep = Vec::new();
    let mut act_y_ptr = DevPtr::NULL;
    if with_act {
        // ŷ = γ·(x − savedMean)·savedInvVar + β, the BN output the activation saw (from the
        // stored statistics, as the plan recomputes it), and its activation y = f(ŷ).
        let mut yhat = Vec::with_capacity(dd.element_count());
        conflux::tensor::for_each_index(dd.lens(), |idx| {
            let p = conflux::batchnorm::param_index(dd.lens(), idx, mode);
            yhat.push(scale.host[p] * (x.host[dd.offset(idx)] - sm.host[p]) * si.host[p] + bias.host[p]);
        });
        let mut ya_exact = vec![0.0; pk.element_space()];
        r::activation_forward(&act, &pk, &yhat, &pk, &mut ya_exact).unwrap();
        // The activation output has dy's descriptor.
        let ya = upload(h, dd, &r::strided::scatter(dd, &ya_exact));
        let (ya_desc, ya_ref): (&TensorDesc, Vec<f64>) =
            if how == Bwd::ActY { (dd, ya.host.clone()) } else { (&pk, ya_exact.clone()) };
        if how == Bwd::ActY {
            act_y_ptr = ya.ptr();
        }
        r::bn_bwd_act_backward(
            mode, &act, dd, &x.host, ya_desc, &ya_ref, dd, &dy.host, &pk, &mut want, &scale.host, &bias.host, &mut want_ds,
            &mut want_db, &sm.host, &si.host,
        )
        .unwrap();
        keep.push(ya);
    } else {
        let stats = if saved { Some((&sm.host[..], &si.host[..])) } else { None };
        r::bn_backward(mode, dd, &x.host, dd, &dy.host, &pk, &mut want, &scale.host, &mut want_ds, &mut want_db, eps, stats).unwrap();
    }
    let mut args = OpArgs::new();
    args.set(
        0,
        OpArg::BnBackward {
            x: x.ptr(),
            scale: scale.ptr(),
            bias: if with_act { bias.ptr() } else { DevPtr::NULL },
            dscale: dscale.ptr(),
            dbias: dbias.ptr(),
            saved_mean: if saved { sm.ptr() } else { DevPtr::NULL },
            saved_inv_var: if saved { si.ptr() } else { DevPtr::NULL },
            eps,
        },
    );
    if with_act {
        // x (MIOpen's `reserved`) is ignored in a BN-backward plan.
        args.set(1, OpArg::ActivationBackward { y: act_y_ptr, x: DevPtr::NULL, alpha: a, beta: b, gamma: g });
    }
    let dx = poisoned(h, dd);
    plan.execute(h, dd, dy.ptr(), dd, dx.ptr(), &args).unwrap_or_else(|e| panic!("execute {label}: {e}"));
    let out = download(h, &dx);
    assert_close(&format!("{label}: dx"), &logical(dd, &out), &want, tolerance(dt));
    assert_gaps_untouched(&label, dd, &out);
    let ftol = tolerance(DataType::Float);
    assert_close(&format!("{label}: dscale"), &download(h, &dscale), &want_ds, ftol);
    assert_close(&format!("{label}: dbias"), &download(h, &dbias), &want_db, ftol);
    for (what, t) in [("dy", &dy), ("x", &x), ("saved mean", &sm), ("saved inv-var", &si)] {
        assert_unchanged(&format!("{label}: {what}"), h, t);
    }
}

device_tests!(bn_backward_with_activation_backward, |h: &Handle| {
    let shapes = [
        (vec![3, 4, 3, 5], Lay::Packed),
        (vec![4, 8, 2, 3], Lay::ChannelsLast),
        (vec![2, 3, 2, 3, 4], Lay::Gapped),
        (vec![3, 5, 2, 2, 3], Lay::ChannelsLast),
    ];
    let modes = ActivationMode::ALL;
    let mut case = 0usize;
    for dt in TYPES {
        for bn in [BnMode::Spatial, BnMode::PerActivation] {
            for how in [Bwd::Alone, Bwd::AloneRecompute, Bwd::ActY, Bwd::ActRecompute] {
                let (lens, lay) = &shapes[case % shapes.len()];
                bn_bwd_case(h, &desc(dt, lens, *lay), bn, modes[case % modes.len()], how, 40_000 + 10 * case as u64);
                case += 1;
            }
        }
    }
});

device_tests!(na_batch_chunk_boundaries, |h: &Handle| {
    // The NCHW chain kernel walks the batch in chunks of 4 (8 with per-element BN
    // parameters): a batch of 37 ends inside a chunk of either size.
    for dt in [DataType::Float, DataType::Half, DataType::BFloat16] {
        for mode in [BnMode::Spatial, BnMode::PerActivation] {
            let xd = desc(dt, &[37, 3, 4, 4], Lay::Packed);
            run_chain(h, &xd, &[Pw::Bn(mode, DataType::Float), Pw::Act(ActivationMode::Relu)], 4242);
        }
    }
});

device_tests!(na_vectors_across_planes, |h: &Handle| {
    // Planes that are not a whole number of 16-byte vectors while images are (14×14 and odd
    // planes of 16-bit data, 15-element planes of f32): on the GPU a vector then holds the end
    // of one channel's plane and the start of the next. Per-channel, per-element and
    // per-pixel (residual add, gapped) operands must each see the right channel; a batch
    // that ends inside a chunk of images.
    use ActivationMode::*;
    let f = DataType::Float;
    let mut seed = 7100;
    for (dt, lens) in [
        (DataType::Half, vec![3, 8, 3, 6]),
        (DataType::BFloat16, vec![5, 8, 14, 14]),
        (DataType::Float, vec![2, 4, 3, 5]),
        (DataType::Half, vec![17, 16, 7, 7]),
    ] {
        let xd = desc(dt, &lens, Lay::Packed);
        for chain in [
            vec![Pw::Bn(BnMode::Spatial, f), Pw::Act(Relu)],
            vec![Pw::Bn(BnMode::PerActivation, f), Pw::Act(Elu)],
            vec![Pw::Bias(dt), Pw::Add(Lay::Gapped), Pw::Act(LeakyRelu)],
            vec![Pw::Add(Lay::Packed), Pw::Bn(BnMode::Spatial, dt)],
        ] {
            run_chain(h, &xd, &chain, seed);
            seed += 1;
        }
    }
});

device_tests!(na_per_element_parameters_any_alignment, |h: &Handle| {
    // The NCHW chain kernel reads per-element BN parameters as 16-byte vectors when every such
    // array is 16-byte aligned, else one by one: aligned, shifted and mixed chains, every
    // parameter type on every data type, whole-plane and across-plane vectors.
    use ActivationMode::*;
    let pe = BnMode::PerActivation;
    let mut seed = 7300;
    for dt in TYPES {
        for lens in [vec![5, 8, 4, 4], vec![3, 8, 14, 14]] {
            let xd = desc(dt, &lens, Lay::Packed);
            for pdt in TYPES {
                for chain in [
                    vec![Pw::Bn(pe, pdt), Pw::Act(Relu)],
                    vec![Pw::BnShifted(pe, pdt), Pw::Act(Tanh)],
                    vec![Pw::Bn(pe, pdt), Pw::BnShifted(pe, pdt)],
                ] {
                    run_chain(h, &xd, &chain, seed);
                    seed += 1;
                }
            }
        }
    }
});
