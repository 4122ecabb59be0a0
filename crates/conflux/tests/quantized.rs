//! int8 and fp8 forward convolutions (`quant.rs`): exact int32 results against the f64
//! reference on every geometry family and layout, requantization edges, float outputs with
//! α/β, fused epilogues, fp8 convolutions, and refusals (status, reason, untouched outputs).
//! Every body runs on both devices; the CUDA-only tests at the end pin the tensor-core kernel
//! (TMA + wgmma s8 / fp8) on the shapes it takes and check its fallback.

mod support;

use conflux::conv::api::{self, Choice, Workspace};
use conflux::reference::{self as r, fill::Fill, ChainOp};
use conflux::types::ConvAttrib;
use conflux::{ActivationDesc, ActivationMode, BnMode, ConvDesc, ConvMode, DataType, FusionDirection, FusionPlan, Handle, Layout, OpArg, OpArgs, Status, TensorDesc};
use support::*;

/// Lengths, filter, groups, pad, stride, dilation of one geometry family.
type Geo = (&'static str, &'static [usize], &'static [usize], usize, usize, usize, usize);

const GEOMETRIES: &[Geo] = &[
    ("1x1", &[2, 32, 7, 7], &[16, 32, 1, 1], 1, 0, 1, 1),
    ("3x3", &[1, 20, 9, 9], &[24, 20, 3, 3], 1, 1, 1, 1),
    ("depthwise", &[2, 16, 10, 10], &[16, 1, 3, 3], 16, 1, 1, 1),
    ("grouped", &[1, 24, 8, 8], &[12, 6, 3, 3], 4, 1, 1, 1),
    ("strided", &[1, 8, 11, 11], &[8, 8, 3, 3], 1, 1, 2, 1),
    ("dilated", &[1, 8, 12, 12], &[8, 8, 3, 3], 1, 2, 1, 2),
    ("5x5 stride 3", &[1, 3, 13, 10], &[5, 3, 5, 5], 1, 2, 3, 1),
    ("3-D", &[1, 4, 5, 6, 6], &[6, 4, 3, 3, 3], 1, 1, 1, 1),
    ("wide rows", &[2, 8, 5, 37], &[12, 8, 3, 3], 1, 1, 1, 1),
    ("wide rows 1x1", &[1, 16, 3, 40], &[9, 16, 1, 1], 1, 0, 1, 1),
    ("wide rows dilated", &[1, 8, 9, 33], &[4, 8, 3, 3], 1, 2, 1, 2),
    ("1x1 small planes", &[2, 8, 6, 6], &[96, 8, 1, 1], 1, 0, 1, 1),
];

fn desc(dt: DataType, lens: &[usize], channels_last: bool) -> TensorDesc {
    if !channels_last {
        return TensorDesc::new(dt, lens).unwrap();
    }
    TensorDesc::with_layout(dt, if lens.len() == 5 { Layout::NDHWC } else { Layout::NHWC }, lens).unwrap()
}

fn conv_of(&(_, x, _, g, p, s, d): &Geo) -> ConvDesc {
    let nd = x.len() - 2;
    let mut c = ConvDesc::new(ConvMode::Convolution, &vec![p as i64; nd], &vec![s as i64; nd], &vec![d as i64; nd]).unwrap();
    c.set_groups(g as i64).unwrap();
    c
}

/// (conv, x, w, y) descriptors of a geometry with the given types.
fn case(geo: &Geo, xt: DataType, wt: DataType, yt: DataType, cl: bool) -> (ConvDesc, TensorDesc, TensorDesc, TensorDesc) {
    let conv = conv_of(geo);
    let (x, w) = (desc(xt, geo.1, cl), desc(wt, geo.2, cl));
    let y = desc(yt, &conv.output_lens(&x, &w).unwrap(), cl);
    (conv, x, w, y)
}

fn is_cuda(h: &Handle) -> bool { h.device().cuda().is_some() }

#[allow(clippy::too_many_arguments)]
fn forward(h: &Handle, conv: &ConvDesc, x: &Dev, w: &Dev, y: &Dev, alpha: f64, beta: f64) -> conflux::Result<()> {
    api::forward(h, conv, &x.desc, x.ptr(), &w.desc, w.ptr(), &y.desc, y.ptr(), alpha, beta, Choice::Auto, Workspace::default())
}

/// The reference result of y = α·conv + β·y_old (logical order).
fn reference(conv: &ConvDesc, x: &Dev, w: &Dev, y: &Dev, alpha: f64, beta: f64, ops: &mut [ChainOp]) -> Vec<f64> {
    let mut out = y.host.clone();
    r::quantized_conv_forward(alpha, beta, conv, &x.desc, &x.host, &w.desc, &w.host, ops, &y.desc, &mut out).unwrap();
    logical(&y.desc, &out)
}

device_tests!(int8_int32_outputs_are_exact_on_every_geometry, |h: &Handle| {
    for (i, geo) in GEOMETRIES.iter().enumerate() {
        for cl in [false, true] {
            let (conv, xd, wd, yd) = case(geo, DataType::Int8, DataType::Int8, DataType::Int32, cl);
            let x = random(h, &xd, Fill::SmallInt(-128, 127), 10 + i as u64);
            let w = random(h, &wd, Fill::SmallInt(-128, 127), 20 + i as u64);
            let y = sentinel(h, &yd, -1234567.0);
            forward(h, &conv, &x, &w, &y, 1.0, 0.0).unwrap();
            let got = logical(&yd, &download(h, &y));
            assert_eq!(got, reference(&conv, &x, &w, &y, 1.0, 0.0, &mut []), "{} channels-last {cl}", geo.0);
            assert_gaps_untouched_if_any(h, &y);
        }
    }
});

/// Packed outputs have no gaps; kept as a call so strided cases can be added without edits.
fn assert_gaps_untouched_if_any(_h: &Handle, y: &Dev) { assert!(y.desc.is_packed()); }

device_tests!(int8_extreme_values_accumulate_exactly, |h: &Handle| {
    // 64 channels × 3×3 of (−128)·(−128): 9,437,184 per interior output, beyond f32's 2^24.
    let geo: Geo = ("extremes", &[1, 64, 6, 6], &[3, 64, 3, 3], 1, 1, 1, 1);
    for (xv, wv) in [(-128.0, -128.0), (127.0, -128.0), (127.0, 127.0)] {
        let (conv, xd, wd, yd) = case(&geo, DataType::Int8, DataType::Int8, DataType::Int32, false);
        let (x, w) = (sentinel(h, &xd, xv), sentinel(h, &wd, wv));
        let y = poisoned(h, &yd);
        forward(h, &conv, &x, &w, &y, 1.0, 0.0).unwrap();
        let got = logical(&yd, &download(h, &y));
        assert_eq!(got, reference(&conv, &x, &w, &y, 1.0, 0.0, &mut []));
        assert_eq!(got[7], 576.0 * xv * wv);
    }
});

device_tests!(int8_requantization_rounds_half_to_even_and_saturates, |h: &Handle| {
    // y = α·x·1 over every int8 value: α = 1/2 gives ties at odd x, α = 4 saturates.
    let xd = TensorDesc::new(DataType::Int8, &[1, 1, 16, 16]).unwrap();
    let wd = TensorDesc::new(DataType::Int8, &[1, 1, 1, 1]).unwrap();
    let yd = TensorDesc::new(DataType::Int8, &[1, 1, 16, 16]).unwrap();
    let conv = ConvDesc::new_2d(ConvMode::Convolution, [0, 0], [1, 1], [1, 1]).unwrap();
    let x = upload(h, &xd, &(0..256).map(|v| v as f64 - 128.0).collect::<Vec<_>>());
    let w = upload(h, &wd, &[1.0]);
    for alpha in [0.5, 0.25, 4.0, 1.0, -1.0] {
        let y = poisoned(h, &yd);
        forward(h, &conv, &x, &w, &y, alpha, 0.0).unwrap();
        let got = download(h, &y);
        for (i, &g) in got.iter().enumerate() {
            let v = (i as f64 - 128.0) * alpha;
            assert_eq!(g, v.round_ties_even().clamp(-128.0, 127.0), "α {alpha} x {}", i as f64 - 128.0);
        }
        assert_eq!(got, reference(&conv, &x, &w, &y, alpha, 0.0, &mut []));
    }
    // Spot checks of the rule: 0.5 → 0, 1.5 → 2, −2.5 → −2, 127·4 → 127, −128·(−1) → 127.
    let y = poisoned(h, &yd);
    forward(h, &conv, &x, &w, &y, 0.5, 0.0).unwrap();
    let got = download(h, &y);
    assert_eq!([got[129], got[131], got[123]], [0.0, 2.0, -2.0]);
    forward(h, &conv, &x, &w, &y, -1.0, 0.0).unwrap();
    assert_eq!(download(h, &y)[0], 127.0);
});

device_tests!(int8_float_outputs_with_alpha_beta, |h: &Handle| {
    for (i, geo) in GEOMETRIES.iter().enumerate().step_by(2) {
        for yt in [DataType::Float, DataType::Half, DataType::BFloat16, DataType::Int32, DataType::Int8] {
            let (conv, xd, wd, yd) = case(geo, DataType::Int8, DataType::Int8, yt, i % 4 == 0);
            let x = random(h, &xd, Fill::SmallInt(-128, 127), 30 + i as u64);
            let w = random(h, &wd, Fill::SmallInt(-128, 127), 40 + i as u64);
            // α a power of two keeps int outputs exact in f32; β blends the old output.
            let (alpha, beta) = if matches!(yt, DataType::Int8 | DataType::Int32) { (1.0 / 256.0, 2.0) } else { (0.37, -0.5) };
            let y = random(h, &yd, Fill::SmallInt(-20, 20), 50 + i as u64);
            let want = reference(&conv, &x, &w, &y, alpha, beta, &mut []);
            forward(h, &conv, &x, &w, &y, alpha, beta).unwrap();
            let got = logical(&yd, &download(h, &y));
            let tol = if matches!(yt, DataType::Int8 | DataType::Int32) { 0.0 } else { r::tolerance(yt) };
            assert_close(&format!("{} → {yt:?}", geo.0), &got, &want, tol);
        }
    }
});

/// A small plan geometry (the CUDA-core kernel) and one the tensor-core kernel takes (with a
/// channels-last filter).
const PLAN_SMALL: Geo = ("fused", &[2, 12, 7, 7], &[10, 12, 3, 3], 1, 1, 1, 1);
const PLAN_WIDE: Geo = ("fused wide", &[2, 128, 9, 9], &[96, 128, 3, 3], 1, 1, 1, 1);

/// int8 or fp8 x and w through a fusion plan with `ops` (B bias, N BN inference, A ReLU,
/// L logistic, Z residual add); the plan's output is Float for int8 x (MIOpen's output type)
/// unless `out` names one (set after the first op: later ops keep it).
fn fused_plan(h: &Handle, geo: &Geo, (xt, wt, out): (DataType, DataType, Option<DataType>), ops: &str, seed: u64) {
    let conv = conv_of(geo);
    let (xd, wd) = (desc(xt, geo.1, true), desc(wt, geo.2, geo.0 == PLAN_WIDE.0));
    let fill = if xt == DataType::Int8 { Fill::SmallInt(-128, 127) } else { Fill::Normal };
    let (x, w) = (random(h, &xd, fill, seed), random(h, &wd, fill, seed + 1));
    let mut plan = FusionPlan::new(FusionDirection::Vertical, xd.clone());
    plan.add_conv_forward(&conv, &wd).unwrap();
    if let Some(t) = out {
        plan.set_output_type(t).unwrap();
    }
    let yd = plan.output_desc().clone().with_dtype(DataType::Float).unwrap();
    let mut args = OpArgs::new();
    args.set(0, OpArg::Conv { w: w.ptr(), alpha: 1.0, beta: 0.0 });
    let mut keep = Vec::new();
    let k = yd.c();
    let bd = TensorDesc::new(DataType::Float, &[1, k, 1, 1]).unwrap();
    let pd = conflux::batchnorm::derive_bn_desc(&yd, BnMode::Spatial).unwrap().with_dtype(DataType::Float).unwrap();
    let zd = yd.clone();
    for (i, op) in ops.chars().enumerate() {
        let s = seed + 10 + 7 * i as u64;
        match op {
            'B' => {
                plan.add_bias(&bd).unwrap();
                keep.push(random(h, &bd, Fill::Uniform(-500.0, 500.0), s));
                args.set(i + 1, OpArg::Bias { b: keep.last().unwrap().ptr() });
            }
            'N' => {
                plan.add_bn_inference(BnMode::Spatial, &pd).unwrap();
                for (j, f) in [Fill::Uniform(0.001, 0.01), Fill::Normal, Fill::Uniform(-100.0, 100.0), Fill::Uniform(0.5, 2.0)].into_iter().enumerate() {
                    keep.push(random(h, &pd, f, s + j as u64));
                }
                let p = |j: usize| keep[keep.len() - 4 + j].ptr();
                args.set(i + 1, OpArg::BnInference { scale: p(0), bias: p(1), mean: p(2), var: p(3), eps: 1e-5 });
            }
            'A' | 'L' => {
                plan.add_activation(if op == 'A' { ActivationMode::Relu } else { ActivationMode::Logistic }).unwrap();
                args.set(i + 1, OpArg::Activation { alpha: 0.0, beta: 0.0, gamma: 0.0 });
            }
            'Z' => {
                plan.add_tensor_add(&zd).unwrap();
                keep.push(random(h, &zd, Fill::Normal, s));
                args.set(i + 1, OpArg::AddTensor { z: keep.last().unwrap().ptr(), alpha: 0.5 });
            }
            _ => unreachable!(),
        }
    }
    let yd = plan.output_desc().clone();
    let y = poisoned(h, &yd);
    plan.compile(h).unwrap();
    plan.execute(h, &xd, x.ptr(), &yd, y.ptr(), &args).unwrap();
    // The reference chain: the same ops on the f64 values.
    let mut it = keep.iter();
    let mut chain = Vec::new();
    for op in ops.chars() {
        chain.push(match op {
            'B' => ChainOp::Bias { b_desc: &bd, b: &it.next().unwrap().host },
            'N' => {
                let p: Vec<&Dev> = (0..4).map(|_| it.next().unwrap()).collect();
                ChainOp::BnInference { mode: BnMode::Spatial, scale: &p[0].host, bias: &p[1].host, mean: &p[2].host, var: &p[3].host, eps: 1e-5 }
            }
            'A' => ChainOp::Activation(ActivationDesc::new(ActivationMode::Relu, 0.0, 0.0, 0.0)),
            'L' => ChainOp::Activation(ActivationDesc::new(ActivationMode::Logistic, 0.0, 0.0, 0.0)),
            _ => ChainOp::AddTensor { z_desc: &zd, z: &it.next().unwrap().host, alpha: 0.5 },
        });
    }
    let want = reference(&conv, &x, &w, &y, 1.0, 0.0, &mut chain);
    let got = logical(&yd, &download(h, &y));
    let tol = match yd.dtype() {
        DataType::Float => 1e-5,
        // One f32 rounding of the epilogue may move an int8 result across a rounding tie.
        DataType::Int8 => 1.0,
        t => r::tolerance(t),
    };
    assert_close(&format!("{xt:?} plan C+{ops}"), &got, &want, tol);
}

device_tests!(int8_fusion_plans_apply_the_epilogue_in_f32, |h: &Handle| {
    for (i, ops) in ["", "B", "BA", "NA", "BNL", "ZA", "BZNA"].iter().enumerate() {
        let out = [None, Some(DataType::Half), Some(DataType::Int8)][i % 3];
        fused_plan(h, &PLAN_SMALL, (DataType::Int8, DataType::Int8, out), ops, 100 + 20 * i as u64);
        if i % 2 == 1 {
            fused_plan(h, &PLAN_WIDE, (DataType::Int8, DataType::Int8, out), ops, 500 + 20 * i as u64);
        }
    }
});

device_tests!(fp8_convolutions, |h: &Handle| {
    use DataType::*;
    for (i, geo) in GEOMETRIES.iter().enumerate() {
        let (xt, wt) = [(Float8, Float8), (Float8, BFloat8), (BFloat8, BFloat8)][i % 3];
        for yt in [Float, Half, BFloat16, Float8, BFloat8] {
            let (mut conv, xd, wd, yd) = case(geo, xt, wt, yt, i % 2 == 1);
            let x = random(h, &xd, Fill::Normal, 60 + i as u64);
            let w = random(h, &wd, Fill::Normal, 70 + i as u64);
            let y = poisoned(h, &yd);
            for mode in [0, 1] {
                conv.set_attribute(ConvAttrib::Fp8RoundingMode, mode).unwrap();
                forward(h, &conv, &x, &w, &y, 1.0, 0.0).unwrap();
                let got = logical(&yd, &download(h, &y));
                let want = reference(&conv, &x, &w, &y, 1.0, 0.0, &mut []);
                // f32 sums against exact ones; an fp8 output may land one code away at a boundary.
                let tol = match yt { Float => 1e-5, Float8 => 0.07, BFloat8 => 0.13, t => r::tolerance(t) };
                assert_close(&format!("{} {xt:?}×{wt:?} → {yt:?} rounding {mode}", geo.0), &got, &want, tol);
            }
        }
        if i % 3 == 0 {
            fused_plan(h, &PLAN_SMALL, (xt, wt, Some(DataType::Half)), "BA", 200 + i as u64);
        }
    }
});

device_tests!(quantized_refusals_write_nothing, |h: &Handle| {
    let geo = &GEOMETRIES[1];
    let (conv, xd, wd, yd) = case(geo, DataType::Int8, DataType::Int8, DataType::Int32, false);
    let x = random(h, &xd, Fill::SmallInt(-128, 127), 1);
    let w = random(h, &wd, Fill::SmallInt(-128, 127), 2);
    let y = sentinel(h, &yd, 7.0);
    let none = Workspace::default();
    // Backward directions: BadParm naming the direction, nothing written.
    let e = api::backward_data(h, &conv, &yd, y.ptr(), &wd, w.ptr(), &xd, x.ptr(), 1.0, 0.0, Choice::Auto, none);
    expect_err("int8 backward-data", e, Status::BadParm, &["forward only", "backward-data"]);
    let e = api::backward_weights(h, &conv, &yd, y.ptr(), &xd, x.ptr(), &wd, w.ptr(), 1.0, 0.0, Choice::Auto, none);
    expect_err("int8 backward-weights", e, Status::BadParm, &["forward only", "backward-weights"]);
    assert_unchanged("x", h, &x);
    assert_unchanged("w", h, &w);
    // Mismatched types.
    let (hd, fy) = (wd.with_dtype(DataType::Half).unwrap(), yd.with_dtype(DataType::Float).unwrap());
    let hw = random(h, &hd, Fill::Normal, 3);
    let fyv = sentinel(h, &fy, 7.0);
    let e = api::forward(h, &conv, &xd, x.ptr(), &hd, hw.ptr(), &fy, fyv.ptr(), 1.0, 0.0, Choice::Auto, none);
    expect_err("int8 x with f16 w", e, Status::BadParm, &["Int8", "Half"]);
    let f8y = yd.with_dtype(DataType::Float8).unwrap();
    let f8 = sentinel(h, &f8y, 1.0);
    let e = api::forward(h, &conv, &xd, x.ptr(), &wd, w.ptr(), &f8y, f8.ptr(), 1.0, 0.0, Choice::Auto, none);
    expect_err("int8 → fp8 output", e, Status::BadParm, &["output type Float8"]);
    assert_unchanged("y", h, &fyv);
    assert_unchanged("y", h, &f8);
    // A transpose forward is a backward-data of the normal convolution.
    let mut t = ConvDesc::new_2d(ConvMode::Transpose, [1, 1], [1, 1], [1, 1]).unwrap();
    t.set_groups(1).unwrap();
    let tw = TensorDesc::new(DataType::Int8, &[20, 24, 3, 3]).unwrap();
    let tws = random(h, &tw, Fill::SmallInt(-3, 3), 4);
    let ty = TensorDesc::new(DataType::Int32, &[1, 24, 9, 9]).unwrap();
    let tyv = sentinel(h, &ty, 7.0);
    let e = api::forward(h, &t, &xd, x.ptr(), &tw, tws.ptr(), &ty, tyv.ptr(), 1.0, 0.0, Choice::Auto, none);
    expect_err("int8 transpose", e, Status::BadParm, &["forward only"]);
    assert_unchanged("transpose y", h, &tyv);
    // Solution 17 by id on a float problem refuses; float solvers by id refuse int8.
    let s = solution_id("CpuConvQuantized");
    let fx = random(h, &xd.with_dtype(DataType::Float).unwrap(), Fill::Normal, 5);
    let fw = random(h, &wd.with_dtype(DataType::Float).unwrap(), Fill::Normal, 6);
    let fyd = yd.with_dtype(DataType::Float).unwrap();
    let fyo = sentinel(h, &fyd, 7.0);
    if !is_cuda(h) {
        let e = api::forward(h, &conv, &fx.desc, fx.ptr(), &fw.desc, fw.ptr(), &fyd, fyo.ptr(), 1.0, 0.0, Choice::Solution(s), none);
        assert!(e.is_err(), "the quantized solver refuses f32");
        let naive = solution_id("CpuConvNaive");
        let e = api::forward(h, &conv, &xd, x.ptr(), &wd, w.ptr(), &yd, y.ptr(), 1.0, 0.0, Choice::Solution(naive), none);
        let e = e.expect_err("the naive solver refuses int8");
        assert!(e.reason.contains("quantized solvers"), "{}", e.reason);
    }
    assert_unchanged("f32 y", h, &fyo);
    assert_unchanged("int32 y", h, &y);
});

/// A channels-last case of `types` that the tensor-core kernel takes: x lengths, w lengths,
/// padding, stride.
type TcCase = (&'static str, (DataType, DataType, DataType), [usize; 4], [usize; 4], usize, usize);

const TENSOR_CORE_CASES: &[TcCase] = &[
    ("3x3 → i32", (DataType::Int8, DataType::Int8, DataType::Int32), [2, 128, 14, 14], [128, 128, 3, 3], 1, 1),
    ("3x3 s2 → i8", (DataType::Int8, DataType::Int8, DataType::Int8), [2, 256, 15, 15], [256, 256, 3, 3], 1, 2),
    ("1x1 → f16", (DataType::Int8, DataType::Int8, DataType::Half), [4, 256, 14, 14], [192, 256, 1, 1], 0, 1),
    ("64 channels (64-byte rows) → bf16", (DataType::Int8, DataType::Int8, DataType::BFloat16), [2, 64, 16, 16], [64, 64, 3, 3], 1, 1),
    ("192 channels → i8", (DataType::Int8, DataType::Int8, DataType::Int8), [2, 192, 10, 10], [128, 192, 3, 3], 1, 1),
    ("96-channel tail → f16", (DataType::Int8, DataType::Int8, DataType::Half), [2, 96, 12, 12], [64, 96, 3, 3], 1, 1),
    ("e4m3, 64 channels → f16", (DataType::Float8, DataType::Float8, DataType::Half), [2, 64, 12, 12], [64, 64, 3, 3], 1, 1),
    ("batch 1, split-K → i32", (DataType::Int8, DataType::Int8, DataType::Int32), [1, 512, 7, 7], [512, 512, 3, 3], 1, 1),
    ("1x1 → f32", (DataType::Int8, DataType::Int8, DataType::Float), [2, 128, 9, 9], [96, 128, 1, 1], 0, 1),
    ("e4m3 → f16", (DataType::Float8, DataType::Float8, DataType::Half), [2, 256, 10, 10], [128, 256, 3, 3], 1, 1),
    ("e4m3 × e5m2 → f32, batch 1", (DataType::Float8, DataType::BFloat8, DataType::Float), [1, 256, 7, 7], [256, 256, 3, 3], 1, 1),
    ("e5m2 → e4m3", (DataType::BFloat8, DataType::BFloat8, DataType::Float8), [2, 128, 8, 8], [128, 128, 3, 3], 1, 1),
];

fn tc_case(&(_, (xt, wt, yt), xl, wl, pad, stride): &TcCase) -> (ConvDesc, TensorDesc, TensorDesc, TensorDesc) {
    let conv = ConvDesc::new_2d(ConvMode::Convolution, [pad as i64; 2], [stride as i64; 2], [1, 1]).unwrap();
    let (x, w) = (desc(xt, &xl, true), desc(wt, &wl, true));
    let y = desc(yt, &conv.output_lens(&x, &w).unwrap(), true);
    (conv, x, w, y)
}

cuda_tests!(int8_and_fp8_run_on_tensor_cores_exactly, |h: &Handle| {
    let tma = Choice::Solution(solution_id("CudaConvImplicitGemmTma"));
    for (i, case) in TENSOR_CORE_CASES.iter().enumerate() {
        let (conv, xd, wd, yd) = tc_case(case);
        let int8 = xd.dtype() == DataType::Int8;
        // Integers small enough for every sum to be exact in f32 (fp8 holds them exactly), so
        // each output is one rounding of the exact value on both sides: bit-equal results.
        let fill = if int8 { Fill::SmallInt(-128, 127) } else { Fill::SmallInt(-6, 6) };
        let x = random(h, &xd, fill, 300 + i as u64);
        let w = random(h, &wd, fill, 310 + i as u64);
        let alpha = if matches!(yd.dtype(), DataType::Int32 | DataType::Float) { 1.0 } else { 1.0 / 256.0 };
        let y = poisoned(h, &yd);
        let none = Workspace::default();
        api::forward(h, &conv, &xd, x.ptr(), &wd, w.ptr(), &yd, y.ptr(), alpha, 0.0, tma, none).unwrap();
        let want = reference(&conv, &x, &w, &y, alpha, 0.0, &mut []);
        assert_eq!(logical(&yd, &download(h, &y)), want, "{}", case.0);
        // β blends the old output (a power-of-two α keeps int outputs exact).
        let (alpha, beta) = (1.0 / 64.0, -2.0);
        let y = random(h, &yd, Fill::SmallInt(-20, 20), 320 + i as u64);
        let want = reference(&conv, &x, &w, &y, alpha, beta, &mut []);
        api::forward(h, &conv, &xd, x.ptr(), &wd, w.ptr(), &yd, y.ptr(), alpha, beta, tma, none).unwrap();
        let tol = if matches!(yd.dtype(), DataType::Int8 | DataType::Int32 | DataType::Float) { 0.0 } else { r::tolerance(yd.dtype()) };
        assert_close(&format!("{} with β", case.0), &logical(&yd, &download(h, &y)), &want, tol);
        // Pointers the copy engine cannot use go to the CUDA-core kernel, same answer.
        if i % 3 == 0 {
            let (_keep, xp) = misaligned_copy(h, &x);
            let y = poisoned(h, &yd);
            api::forward(h, &conv, &xd, xp, &wd, w.ptr(), &yd, y.ptr(), 1.0, 0.0, tma, none).unwrap();
            assert_eq!(logical(&yd, &download(h, &y)), reference(&conv, &x, &w, &y, 1.0, 0.0, &mut []), "{} misaligned", case.0);
        }
    }
});

cuda_tests!(int8_fp8_stochastic_rounding_matches_the_reference_bits, |h: &Handle| {
    // fp8 outputs under MIOpen's default (stochastic) rounding take the bits of each element's
    // logical index: the kernel's choices equal the reference's on exact sums.
    let case: TcCase = ("e4m3 → e5m2", (DataType::Float8, DataType::Float8, DataType::BFloat8), [2, 128, 9, 9], [128, 128, 3, 3], 1, 1);
    let (mut conv, xd, wd, yd) = tc_case(&case);
    conv.set_attribute(ConvAttrib::Fp8RoundingMode, 1).unwrap();
    let x = random(h, &xd, Fill::SmallInt(-5, 5), 401);
    let w = random(h, &wd, Fill::SmallInt(-5, 5), 402);
    for choice in [Choice::Solution(solution_id("CudaConvImplicitGemmTma")), Choice::Solution(solution_id("CudaConvQuantizedDirect"))] {
        let y = poisoned(h, &yd);
        api::forward(h, &conv, &xd, x.ptr(), &wd, w.ptr(), &yd, y.ptr(), 0.25, 0.0, choice, Workspace::default()).unwrap();
        assert_eq!(logical(&yd, &download(h, &y)), reference(&conv, &x, &w, &y, 0.25, 0.0, &mut []), "{choice:?}");
    }
});

/// Under the constant-weights promise the CPU keeps its int8 filter rows per address: a second
/// call reuses them, and new values written at the same address are noticed (sampled words).
#[test]
fn int8_constant_weights_are_kept_and_rewritten_weights_noticed() {
    on_cpu(|h| {
        for (i, geo) in [GEOMETRIES[1], GEOMETRIES[9], GEOMETRIES[0]].iter().enumerate() {
            for cl in [false, true] {
                let (mut conv, xd, wd, yd) = case(geo, DataType::Int8, DataType::Int8, DataType::Float, cl);
                conv.set_attribute(ConvAttrib::ConstantWeights, 1).unwrap();
                let x = random(h, &xd, Fill::SmallInt(-128, 127), 600 + i as u64);
                let mut w = random(h, &wd, Fill::SmallInt(-128, 127), 610 + i as u64);
                for round in 0..3 {
                    if round == 2 {
                        // Other values at the same address.
                        let new = random(h, &wd, Fill::SmallInt(-128, 127), 620 + i as u64);
                        h.write(&mut w.buf, &conflux::element::encode(DataType::Int8, &new.host)).unwrap();
                        w.host = new.host;
                    }
                    let y = poisoned(h, &yd);
                    forward(h, &conv, &x, &w, &y, 1.0, 0.0).unwrap();
                    let got = logical(&yd, &download(h, &y));
                    assert_eq!(got, reference(&conv, &x, &w, &y, 1.0, 0.0, &mut []), "{} channels-last {cl} round {round}", geo.0);
                }
            }
        }
    });
}
