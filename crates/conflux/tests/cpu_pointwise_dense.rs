//! The CPU pointwise fast path (dense tensors walked in f32 chunks: `backend/cpu/dense.rs`)
//! against the per-element path and the f64 reference. Every case runs twice on the same
//! logical data: on dense NCHW/NHWC tensors (fast path) and on the same shape with gaps
//! (per-element fallback). The two outputs must be bit-identical, both must match the
//! reference (exactly on small-integer data with exact ops), outputs are NaN-poisoned before
//! each run, NaN never passes, gaps stay unwritten and inputs unchanged.
//!
//! Shapes make chunks cross every boundary: planes longer than a chunk (S = 1640 > 256) and
//! more than one parallel task; channels-last rows with C = 300 > 256 (chunks inside one
//! pixel) and C = 7 (chunks spanning pixels); 5-D.

mod support;

use conflux::batchnorm::derive_bn_desc;
use conflux::conv::bias::forward_bias;
use conflux::reference::{self as r, compare::tolerance, fill::Fill, strided::scatter};
use conflux::{ActivationDesc, ActivationMode, BnMode, DataType, DevPtr, FusionDirection, FusionPlan, Handle, OpArg, OpArgs, TensorDesc};
use support::*;

const TYPES: [DataType; 3] = [DataType::Float, DataType::Half, DataType::BFloat16];
const SHAPES: [&[usize]; 3] = [&[3, 5, 40, 41], &[2, 300, 3, 5], &[2, 7, 2, 3, 11]];
/// (fast path, fallback) arrangements.
const LAYOUTS: [(Lay, Lay); 2] = [(Lay::Packed, Lay::Gapped), (Lay::ChannelsLast, Lay::GappedChannelsLast)];

/// Logical values k/4 for k in −8..=8: exact in bf16, f16 and f32, and so are their sums
/// with other such values.
fn quarters(count: usize, seed: u64) -> Vec<f64> {
    let mut rng = SplitMix64::new(seed);
    (0..count).map(|_| (rng.range(0, 16) as f64 - 8.0) * 0.25).collect()
}

/// Upload logical `values` arranged as `d` (gaps NaN).
fn put(h: &Handle, d: &TensorDesc, values: &[f64]) -> Dev {
    upload(h, d, &scatter(d, values))
}

/// Activation parameters; LEAKYRELU's slope 0.5 keeps quarter data exact.
fn params(mode: ActivationMode) -> (f64, f64, f64) {
    if mode == ActivationMode::LeakyRelu { (0.5, 0.0, 0.0) } else { act_params(mode) }
}

/// Modes whose forward value on quarter data is exact in every type (f(x) ∈ quarters ∪ {0}).
fn exact_forward(mode: ActivationMode) -> bool {
    use ActivationMode::*;
    matches!(mode, PassThru | Relu | Abs | ClippedRelu | LeakyRelu)
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Bias,
    Bn(BnMode),
    Act(ActivationMode),
    /// Residual add (α = 0.5) of z arranged like x (`true`) or in the other arrangement.
    Add(bool),
}

/// One chain on one arrangement (`other` is the other arrangement, for `Add(false)`): the
/// logical output, after checking gaps and the input.
fn run_chain(h: &Handle, xd: &TensorDesc, other: &TensorDesc, x: &[f64], ops: &[Op], p: &Params, label: &str) -> Vec<f64> {
    let xb = put(h, xd, x);
    let mut plan = FusionPlan::new(FusionDirection::Vertical, xd.clone());
    let mut args = OpArgs::new();
    let mut keep = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        match *op {
            Op::Bias => {
                plan.add_bias(&p.bd).unwrap();
                keep.push(put(h, &p.bd, &p.bias));
                args.set(i, OpArg::Bias { b: keep.last().unwrap().ptr() });
            }
            Op::Bn(mode) => {
                let pd = derive_bn_desc(xd, mode).unwrap();
                plan.add_bn_inference(mode, &pd).unwrap();
                let v = p.bn_of(mode);
                let b: Vec<Dev> = v.iter().map(|vals| put(h, &pd, vals)).collect();
                args.set(i, OpArg::BnInference { scale: b[0].ptr(), bias: b[1].ptr(), mean: b[2].ptr(), var: b[3].ptr(), eps: 1e-5 });
                keep.extend(b);
            }
            Op::Act(mode) => {
                plan.add_activation(mode).unwrap();
                let (a, b, g) = params(mode);
                args.set(i, OpArg::Activation { alpha: a, beta: b, gamma: g });
            }
            Op::Add(same) => {
                let zd = if same { xd } else { other };
                plan.add_tensor_add(zd).unwrap();
                keep.push(put(h, zd, &p.z));
                args.set(i, OpArg::AddTensor { z: keep.last().unwrap().ptr(), alpha: 0.5 });
            }
        }
    }
    plan.compile(h).unwrap_or_else(|e| panic!("compile {label}: {e}"));
    let y = poisoned(h, xd);
    plan.execute(h, xd, xb.ptr(), xd, y.ptr(), &args).unwrap_or_else(|e| panic!("execute {label}: {e}"));
    let out = download(h, &y);
    assert_gaps_untouched(label, xd, &out);
    assert_unchanged(&format!("{label}: input"), h, &xb);
    logical(xd, &out)
}

/// Parameters shared by both arrangements of a case (logical values).
struct Params {
    bd: TensorDesc,
    bias: Vec<f64>,
    /// Per BN mode: scale, bias, mean, variance.
    bn: Vec<(BnMode, [Vec<f64>; 4])>,
    z: Vec<f64>,
}

impl Params {
    fn bn_of(&self, mode: BnMode) -> &[Vec<f64>; 4] {
        &self.bn.iter().find(|(m, _)| *m == mode).unwrap().1
    }
}

fn params_for(xd: &TensorDesc, seed: u64) -> Params {
    let mut bl = vec![1; xd.rank()];
    bl[1] = xd.c();
    let bd = TensorDesc::new(xd.dtype(), &bl).unwrap();
    let bn = [BnMode::PerActivation, BnMode::Spatial]
        .into_iter()
        .map(|m| {
            let n = derive_bn_desc(xd, m).unwrap().element_count();
            let var: Vec<f64> = quarters(n, seed + 3).iter().map(|v| 1.0 + v.abs()).collect();
            (m, [quarters(n, seed), quarters(n, seed + 1), quarters(n, seed + 2), var])
        })
        .collect();
    Params { bd: bd.clone(), bias: quarters(bd.element_count(), seed + 4), bn, z: quarters(xd.element_count(), seed + 5) }
}

/// The f64 reference of a chain on logical (packed) data.
fn reference(pk: &TensorDesc, x: &[f64], ops: &[Op], p: &Params) -> Vec<f64> {
    let mut cur = x.to_vec();
    for op in ops {
        let prev = cur.clone();
        match *op {
            Op::Bias => r::bias_forward(pk, &mut cur, &p.bd, &p.bias).unwrap(),
            Op::Bn(mode) => {
                let v = p.bn_of(mode);
                let pd = derive_bn_desc(pk, mode).unwrap();
                assert_eq!(pd.element_count(), v[0].len());
                r::bn_inference(mode, pk, &prev, pk, &mut cur, &v[0], &v[1], &v[2], &v[3], 1e-5).unwrap();
            }
            Op::Act(mode) => {
                let (a, b, g) = params(mode);
                r::activation_forward(&ActivationDesc::new(mode, a, b, g), pk, &prev, pk, &mut cur).unwrap();
            }
            Op::Add(_) => cur.iter_mut().zip(&p.z).for_each(|(v, z)| *v += 0.5 * z),
        }
    }
    cur
}

/// Bit-identical (as decoded f64) and never NaN.
#[track_caller]
fn assert_same_bits(label: &str, fast: &[f64], slow: &[f64]) {
    assert_eq!(fast.len(), slow.len(), "{label}");
    for (i, (a, b)) in fast.iter().zip(slow).enumerate() {
        assert!(!a.is_nan() && a.to_bits() == b.to_bits(), "{label}: element {i}: fast path {a}, per-element path {b}");
    }
}

fn chains() -> Vec<(Vec<Op>, bool)> {
    use ActivationMode::*;
    // (ops, exact on quarter data)
    let mut v: Vec<(Vec<Op>, bool)> = ActivationMode::ALL.iter().map(|&m| (vec![Op::Act(m)], exact_forward(m))).collect();
    v.push((vec![Op::Bias, Op::Act(Relu)], true));
    v.push((vec![Op::Bn(BnMode::Spatial), Op::Act(LeakyRelu)], false));
    v.push((vec![Op::Bn(BnMode::PerActivation), Op::Act(Relu)], false));
    v.push((vec![Op::Bias, Op::Bn(BnMode::Spatial), Op::Add(true), Op::Act(ClippedRelu)], false));
    v.push((vec![Op::Add(true), Op::Bias, Op::Act(Abs)], true));
    // z arranged differently from x and y: the whole chain falls back to the per-element path.
    v.push((vec![Op::Bias, Op::Add(false), Op::Act(Relu)], true));
    v
}

#[test]
fn chains_fast_path_matches_per_element_and_reference() {
    isolate_cache();
    let h = Handle::cpu();
    let mut seed = 1;
    for dt in TYPES {
        for lens in SHAPES {
            for (fast, slow) in LAYOUTS {
                let (fd, sd) = (desc(dt, lens, fast), desc(dt, lens, slow));
                let pk = TensorDesc::new(dt, lens).unwrap();
                let x = quarters(pk.element_count(), seed);
                let p = params_for(&pk, seed + 10);
                seed += 20;
                for (ops, exact) in chains() {
                    let label = format!("{ops:?} {} {fast:?}", fd.key());
                    let got_fast = run_chain(&h, &fd, &sd, &x, &ops, &p, &label);
                    let got_slow = run_chain(&h, &sd, &fd, &x, &ops, &p, &format!("{ops:?} {} {slow:?}", sd.key()));
                    assert_same_bits(&label, &got_fast, &got_slow);
                    let tol = if exact { 0.0 } else { tolerance(dt) };
                    assert_close(&label, &got_fast, &reference(&pk, &x, &ops, &p), tol);
                }
            }
        }
    }
}

/// Activation forward through `ops` with x and y in different arrangements (never dense
/// together: per-element path) and in the same one (fast path).
#[test]
fn activation_forward_mixed_layouts() {
    isolate_cache();
    let h = Handle::cpu();
    for dt in TYPES {
        let lens = SHAPES[0];
        let pk = TensorDesc::new(dt, lens).unwrap();
        let x = quarters(pk.element_count(), 77);
        let act = ActivationDesc::new(ActivationMode::LeakyRelu, 0.5, 0.0, 0.0);
        let mut want = vec![0.0; x.len()];
        r::activation_forward(&act, &pk, &x, &pk, &mut want).unwrap();
        for (xl, yl) in [(Lay::Packed, Lay::ChannelsLast), (Lay::ChannelsLast, Lay::Packed), (Lay::ChannelsLast, Lay::ChannelsLast)] {
            let (xd, yd) = (desc(dt, lens, xl), desc(dt, lens, yl));
            let xb = put(&h, &xd, &x);
            let y = poisoned(&h, &yd);
            conflux::ops::activation_forward(&h, &act, &xd, xb.ptr(), &yd, y.ptr()).unwrap();
            assert_close(&format!("leaky ReLU {xl:?} → {yl:?} {}", dt.short()), &logical(&yd, &download(&h, &y)), &want, 0.0);
        }
    }
}

#[test]
fn activation_backward_fast_path_matches_per_element_and_reference() {
    isolate_cache();
    let h = Handle::cpu();
    let mut seed = 5000;
    for &mode in ActivationMode::ALL {
        let (a, b, g) = params(mode);
        let act = ActivationDesc::new(mode, a, b, g);
        for dt in TYPES {
            for (si, lens) in SHAPES.iter().enumerate() {
                let (fast, slow) = LAYOUTS[si % 2];
                let pk = TensorDesc::new(dt, lens).unwrap();
                let n = pk.element_count();
                // Normal data (the derivatives of the smooth modes are not exact anyway).
                let dy = r::fill::fill_for(&pk, Fill::Normal, seed);
                let x = r::fill::fill_for(&pk, Fill::Normal, seed + 1);
                seed += 2;
                let rt = |v: &[f64]| v.iter().map(|&v| conflux::element::round_to(dt, v)).collect::<Vec<f64>>();
                let (dy, x) = (rt(&dy), rt(&x));
                let mut y_exact = vec![0.0; n];
                r::activation_forward(&act, &pk, &x, &pk, &mut y_exact).unwrap();
                let y = rt(&y_exact);
                let mut variants = vec![("y given", true, true), ("y NULL", true, false)];
                if !act.backward_needs_x() {
                    variants.push(("x NULL", false, true));
                }
                for (what, has_x, has_y) in variants {
                    let y_ref = if has_y { &y } else { &y_exact };
                    let mut want = vec![0.0; n];
                    r::activation_backward(&act, &pk, y_ref, &pk, &dy, &pk, &x, &pk, &mut want).unwrap();
                    let mut outs = Vec::new();
                    for lay in [fast, slow] {
                        let d = desc(dt, lens, lay);
                        let label = format!("{mode:?} backward ({what}) {} {lay:?}", d.key());
                        let (dyb, xb, yb) = (put(&h, &d, &dy), put(&h, &d, &x), put(&h, &d, &y));
                        let mut plan = FusionPlan::new(FusionDirection::Vertical, d.clone());
                        plan.add_activation_backward(mode).unwrap();
                        plan.compile(&h).unwrap();
                        let mut args = OpArgs::new();
                        let xp = if has_x { xb.ptr() } else { DevPtr::NULL };
                        let yp = if has_y { yb.ptr() } else { DevPtr::NULL };
                        args.set(0, OpArg::ActivationBackward { y: yp, x: xp, alpha: a, beta: b, gamma: g });
                        let dx = poisoned(&h, &d);
                        plan.execute(&h, &d, dyb.ptr(), &d, dx.ptr(), &args).unwrap_or_else(|e| panic!("{label}: {e}"));
                        let out = download(&h, &dx);
                        assert_gaps_untouched(&label, &d, &out);
                        let got = logical(&d, &out);
                        assert_close(&label, &got, &want, tolerance(dt));
                        outs.push(got);
                    }
                    assert_same_bits(&format!("{mode:?} backward ({what}) {} {fast:?}", pk.key()), &outs[0], &outs[1]);
                }
            }
        }
    }
}

#[test]
fn forward_bias_fast_path_matches_per_element_and_reference() {
    isolate_cache();
    let h = Handle::cpu();
    let mut seed = 9000;
    for dt in TYPES {
        for lens in SHAPES {
            for (fast, slow) in LAYOUTS {
                let pk = TensorDesc::new(dt, lens).unwrap();
                // b per channel (fast), one scalar (fast, broadcast everywhere) and per (n, c)
                // (varies along N: per-element path even on dense y).
                let mut per_c = vec![1; lens.len()];
                per_c[1] = lens[1];
                let mut per_nc = per_c.clone();
                per_nc[0] = lens[0];
                for (bl, (alpha, beta)) in [(per_c, (1.0, 0.0)), (vec![1; lens.len()], (0.5, -2.0)), (per_nc, (-1.0, 1.5))] {
                    let bd = TensorDesc::new(dt, &bl).unwrap();
                    let bv = quarters(bd.element_count(), seed);
                    let yv = quarters(pk.element_count(), seed + 1);
                    seed += 2;
                    let mut plus = yv.clone();
                    r::bias_forward(&pk, &mut plus, &bd, &bv).unwrap();
                    let want: Vec<f64> = plus.iter().zip(&yv).map(|(p, old)| alpha * p + beta * old).collect();
                    let b = put(&h, &bd, &bv);
                    let mut outs = Vec::new();
                    for lay in [fast, slow] {
                        let yd = desc(dt, lens, lay);
                        let label = format!("forward bias {bl:?} α={alpha} β={beta} {} {lay:?}", yd.key());
                        let y = put(&h, &yd, &yv);
                        forward_bias(&h, alpha, &bd, b.ptr(), beta, &yd, y.ptr()).unwrap();
                        let out = download(&h, &y);
                        assert_gaps_untouched(&label, &yd, &out);
                        assert_unchanged(&format!("{label}: b"), &h, &b);
                        let got = logical(&yd, &out);
                        assert_close(&label, &got, &want, 0.0);
                        outs.push(got);
                    }
                    assert_same_bits(&format!("forward bias {bl:?} {} {fast:?}", pk.key()), &outs[0], &outs[1]);
                }
            }
        }
    }
}
