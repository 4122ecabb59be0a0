//! Conv-based fusion plans (C followed by any chain of B, N, A, Z) on every device, against
//! the f64 reference chain and against the same ops run one by one through conflux, on random
//! geometries, types and layouts.

mod support;

use conflux::reference::{activation, batchnorm, bias, compare::tolerance, conv as rconv, fill::Fill};
use conflux::{
    ActivationDesc, ActivationMode, BnMode, ConvAlgorithm, ConvDesc, ConvMode, DataType, FusionDirection, FusionPlan, Handle, Layout, OpArg, OpArgs,
    TensorDesc,
};
use support::*;

#[derive(Clone, Copy, Debug)]
enum Op {
    Bias,
    Bn(BnMode),
    Act(ActivationMode),
    Add,
}

fn act_params(mode: ActivationMode) -> (f64, f64, f64) {
    match mode {
        ActivationMode::Tanh => (0.8, 1.3, 0.0),
        ActivationMode::Power => (1.0, 0.3, 2.0),
        ActivationMode::ClippedRelu => (1.5, 0.0, 0.0),
        ActivationMode::LeakyRelu => (0.1, 0.0, 0.0),
        ActivationMode::Elu => (0.7, 0.0, 0.0),
        _ => (0.0, 0.0, 0.0),
    }
}

/// A packed tensor descriptor in NCHW-family or channels-last order.
fn tensor(dt: DataType, lens: &[usize], channels_last: bool) -> TensorDesc {
    let layout = match (lens.len(), channels_last) {
        (4, false) => Layout::NCHW,
        (4, true) => Layout::NHWC,
        (5, false) => Layout::NCDHW,
        _ => Layout::NDHWC,
    };
    TensorDesc::with_layout(dt, layout, lens).unwrap()
}

struct Case {
    dt: DataType,
    conv: ConvDesc,
    x: TensorDesc,
    w: TensorDesc,
    ops: Vec<Op>,
    exact: bool,
}

fn random_case(r: &mut SplitMix64, dt: DataType) -> Case {
    let nd = if r.range(0, 3) == 0 { 3 } else { 2 };
    let g = r.pick(&[1, 1, 2, 3]);
    let (cg, kg) = (r.range(1, 4), r.range(1, 4));
    let depthwise = r.range(0, 5) == 0;
    let (g, cg, kg) = if depthwise { (cg * 2, 1, 1) } else { (g, cg, kg) };
    let n = r.range(1, 2);
    let mut lens_x = vec![n, g * cg];
    let mut lens_w = vec![g * kg, cg];
    let (mut pads, mut strides, mut dils) = (vec![], vec![], vec![]);
    for _ in 0..nd {
        lens_x.push(r.range(if nd == 3 { 2 } else { 3 }, if nd == 3 { 5 } else { 9 }));
        lens_w.push(r.range(1, 3));
        pads.push(r.range(0, 2) as i64);
        strides.push(r.range(1, 2) as i64);
        dils.push(r.range(1, 2) as i64);
    }
    let transpose = r.range(0, 6) == 0;
    let mut conv = ConvDesc::new(if transpose { ConvMode::Transpose } else { ConvMode::Convolution }, &pads, &strides, &dils).unwrap();
    if transpose {
        // Transpose weights are C_in × C_out/G × filter.
        lens_w[0] = g * cg;
        lens_w[1] = kg;
        let adj: Vec<i64> = strides.iter().map(|&s| r.range(0, s as usize - 1) as i64).collect();
        conv.set_groups(g as i64).unwrap();
        conv.set_out_pads(&adj).unwrap();
    } else {
        conv.set_groups(g as i64).unwrap();
    }
    let cl = r.range(0, 1) == 1;
    let x = tensor(dt, &lens_x, cl);
    let w = tensor(dt, &lens_w, cl);
    let len = r.range(0, 4);
    let modes = ActivationMode::ALL;
    let ops = (0..len)
        .map(|_| match r.range(0, 4) {
            0 => Op::Bias,
            1 => Op::Bn(r.pick(&[BnMode::Spatial, BnMode::PerActivation])),
            2 => Op::Add,
            _ => Op::Act(r.pick(modes)),
        })
        .collect();
    Case { dt, conv, x, w, ops, exact: false }
}

/// Build, compile, execute the plan; compare with the reference chain.
fn run_case(h: &Handle, c: &Case, seed: u64) {
    run_case_algo(h, c, seed, None)
}

/// As `run_case`, restricted to one algorithm's solvers (so every solver gets exercised).
fn run_case_algo(h: &Handle, c: &Case, seed: u64, algo: Option<ConvAlgorithm>) {
    let mut plan = FusionPlan::new(FusionDirection::Vertical, c.x.clone());
    if let Some(a) = algo {
        plan.set_algo(a);
    }
    plan.add_conv_forward(&c.conv, &c.w).unwrap();
    let ydesc = plan.output_desc().clone();
    let k = ydesc.c();
    let fill = if c.exact { Fill::SmallInt(-2, 2) } else { Fill::Normal };
    let x = random(h, &c.x, fill, seed);
    let w = random(h, &c.w, fill, seed + 1);
    let mut args = OpArgs::new();
    args.set(0, OpArg::Conv { w: w.ptr(), alpha: 1.0, beta: 0.0 });
    // Reference: packed logical f64 through the chain.
    let ypacked = TensorDesc::new(c.dt, ydesc.lens()).unwrap();
    let mut cur = vec![0.0; ypacked.element_space()];
    rconv::conv_forward(&c.conv, &c.x, &x.host, &c.w, &w.host, &ypacked, &mut cur).unwrap();
    let mut keep = Vec::new(); // device buffers must outlive execute
    let mut unfused = Vec::new(); // the same chain as separate conflux calls
    for (i, op) in c.ops.iter().enumerate() {
        let s = seed + 10 + i as u64 * 7;
        match *op {
            Op::Bias => {
                let bd = TensorDesc::new(c.dt, &[&[1, k][..], &vec![1; ydesc.rank() - 2]].concat()).unwrap();
                let b = random(h, &bd, if c.exact { Fill::SmallInt(-2, 2) } else { Fill::Normal }, s);
                plan.add_bias(&bd).unwrap();
                args.set(i + 1, OpArg::Bias { b: b.ptr() });
                bias::bias_forward(&ypacked, &mut cur, &bd, &b.host).unwrap();
                unfused.push(Unfused::Bias(bd, b.ptr()));
                keep.push(b);
            }
            Op::Bn(mode) => {
                let pd = conflux::batchnorm::derive_bn_desc(&ydesc, mode).unwrap();
                let sc = random(h, &pd, Fill::Normal, s);
                let bi = random(h, &pd, Fill::Normal, s + 1);
                let mu = random(h, &pd, Fill::Normal, s + 2);
                let var = random(h, &pd, Fill::Uniform(0.5, 2.0), s + 3);
                plan.add_bn_inference(mode, &pd).unwrap();
                args.set(i + 1, OpArg::BnInference { scale: sc.ptr(), bias: bi.ptr(), mean: mu.ptr(), var: var.ptr(), eps: 1e-5 });
                let prev = cur.clone();
                batchnorm::bn_inference(mode, &ypacked, &prev, &ypacked, &mut cur, &sc.host, &bi.host, &mu.host, &var.host, 1e-5).unwrap();
                let bn = conflux::ops::BnInferenceArgs { scale: sc.ptr(), bias: bi.ptr(), mean: mu.ptr(), var: var.ptr(), eps: 1e-5 };
                unfused.push(Unfused::Bn(mode, pd, bn));
                keep.extend([sc, bi, mu, var]);
            }
            Op::Act(mode) => {
                let (a, b, g) = act_params(mode);
                plan.add_activation(mode).unwrap();
                args.set(i + 1, OpArg::Activation { alpha: a, beta: b, gamma: g });
                let prev = cur.clone();
                activation::activation_forward(&ActivationDesc::new(mode, a, b, g), &ypacked, &prev, &ypacked, &mut cur).unwrap();
                unfused.push(Unfused::Act(ActivationDesc::new(mode, a, b, g)));
            }
            Op::Add => {
                let z = random(h, &ydesc, Fill::Normal, s);
                plan.add_tensor_add(&ydesc).unwrap();
                args.set(i + 1, OpArg::AddTensor { z: z.ptr(), alpha: 0.5 });
                let zl = logical(&ydesc, &z.host);
                cur.iter_mut().zip(&zl).for_each(|(v, zv)| *v += 0.5 * zv);
                unfused.push(Unfused::Add(z.ptr()));
                keep.push(z);
            }
        }
    }
    plan.compile(h).unwrap_or_else(|e| panic!("compile {:?}: {e}", c.ops));
    let y = poisoned(h, &ydesc);
    plan.execute(h, &c.x, x.ptr(), &ydesc, y.ptr(), &args).unwrap();
    let got = logical(&ydesc, &download(h, &y));
    let tol = if c.exact { 0.0 } else { tolerance(c.dt) };
    let what = format!("{} x {} w {} {} ops {:?} on {}", c.dt.short(), c.x.key(), c.w.key(), c.conv.key(), c.ops, h.device().name());
    assert_close(&what, &got, &cur, tol);
    if algo.is_none() {
        // Unfused results round to the data type between ops, hence the wider tolerance.
        let separate = run_unfused(h, c, x.ptr(), w.ptr(), &ydesc, &unfused);
        assert_close(&format!("{what}: fused vs unfused"), &got, &separate, if c.exact { 0.0 } else { 4.0 * tolerance(c.dt) });
    }
}

/// One op of the chain as its own conflux call.
enum Unfused {
    Bias(TensorDesc, conflux::DevPtr),
    Bn(BnMode, TensorDesc, conflux::ops::BnInferenceArgs),
    Act(ActivationDesc),
    Add(conflux::DevPtr),
}

/// The convolution (immediate choice, no workspace), then each op in place on y.
fn run_unfused(h: &Handle, c: &Case, x: conflux::DevPtr, w: conflux::DevPtr, yd: &TensorDesc, ops: &[Unfused]) -> Vec<f64> {
    use conflux::conv::{self, Choice, Workspace};
    let y = poisoned(h, yd);
    conv::forward(h, &c.conv, &c.x, x, &c.w, w, yd, y.ptr(), 1.0, 0.0, Choice::Auto, Workspace::default()).unwrap();
    for op in ops {
        match op {
            Unfused::Bias(bd, b) => conv::bias::forward_bias(h, 1.0, bd, *b, 0.0, yd, y.ptr()).unwrap(),
            Unfused::Bn(mode, pd, a) => conflux::ops::bn_forward_inference(h, *mode, yd, y.ptr(), yd, y.ptr(), &[pd, pd], a).unwrap(),
            Unfused::Act(act) => conflux::ops::activation_forward(h, act, yd, y.ptr(), yd, y.ptr()).unwrap(),
            Unfused::Add(z) => conflux::ops::op_tensor(h, conflux::TensorOp::Add, 1.0, yd, y.ptr(), 0.5, yd, *z, 0.0, yd, y.ptr()).unwrap(),
        }
    }
    logical(yd, &download(h, &y))
}

device_tests!(random_conv_chains, |h: &Handle| {
    let mut r = SplitMix64::new(7);
    for (i, dt) in [DataType::Float, DataType::Half, DataType::BFloat16].into_iter().enumerate() {
        for j in 0..25 {
            let c = random_case(&mut r, dt);
            // Every other case forces the direct solvers, so both forward paths are checked.
            let algo = if j % 2 == 1 { Some(ConvAlgorithm::Direct) } else { None };
            run_case_algo(h, &c, (i * 1000 + j) as u64, algo);
        }
    }
});

device_tests!(exact_small_integers_cba, |h: &Handle| {
    // Small integers make f32 convolution exact: results must match bit for bit.
    for (layout_cl, nd) in [(false, 2), (true, 2), (false, 3)] {
        let lens: Vec<usize> = if nd == 2 { vec![2, 5, 7, 6] } else { vec![1, 3, 4, 5, 4] };
        let wl: Vec<usize> = if nd == 2 { vec![4, 5, 3, 3] } else { vec![4, 3, 3, 2, 3] };
        let conv = ConvDesc::new(ConvMode::Convolution, &vec![1; nd], &vec![1; nd], &vec![1; nd]).unwrap();
        let c = Case {
            dt: DataType::Float,
            conv,
            x: tensor(DataType::Float, &lens, layout_cl),
            w: tensor(DataType::Float, &wl, layout_cl),
            ops: vec![Op::Bias, Op::Act(ActivationMode::Relu)],
            exact: true,
        };
        run_case(h, &c, 99);
    }
});

device_tests!(resnet_like_layers, |h: &Handle| {
    // A few realistic shapes (small batch) in each type and both layouts.
    for dt in [DataType::Float, DataType::Half, DataType::BFloat16] {
        for cl in [false, true] {
            for (c, hw, k, f, p, s) in [(16, 14, 32, 3, 1, 1), (32, 7, 16, 1, 0, 1), (8, 15, 8, 3, 1, 2)] {
                let conv = ConvDesc::new(ConvMode::Convolution, &[p, p], &[s, s], &[1, 1]).unwrap();
                let case = Case {
                    dt,
                    conv,
                    x: tensor(dt, &[2, c, hw, hw], cl),
                    w: tensor(dt, &[k, c, f as usize, f as usize], cl),
                    ops: vec![Op::Bias, Op::Bn(BnMode::Spatial), Op::Act(ActivationMode::Relu)],
                    exact: false,
                };
                run_case(h, &case, 5);
            }
        }
    }
});
