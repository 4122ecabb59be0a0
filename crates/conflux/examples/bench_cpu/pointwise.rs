//! `bench_cpu pointwise LIST N [reps]`: bandwidth of the CPU pointwise paths on the output
//! shapes (N×K×Ho×Wo) of a conv problem list, f32 and f16, NCHW and NHWC. Each column is
//! GB/s = (bytes read + bytes written) / median time; memcpy (rayon threads, same bytes as a
//! one-input op: x read, y written) is measured on the same buffers in the same run as the
//! ceiling. Parameter vectors (bias, BN) are not counted: they are ≤ 0.1 % of the traffic.

use conflux::element::encode;
use conflux::reference::fill::fill_normal;
use conflux::{ActivationDesc, ActivationMode, BnMode, Buffer, DataType, FusionDirection, FusionPlan, Handle, Layout, OpArg, OpArgs, TensorDesc};
use rayon::prelude::*;
use std::time::{Duration, Instant};

/// Median seconds of `f` (3 warm-up runs, then ≥ `reps` runs or ~0.25 s).
fn time_s(reps: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..3 {
        f();
    }
    let mut t = Vec::new();
    let start = Instant::now();
    while t.len() < reps || (start.elapsed() < Duration::from_millis(250) && t.len() < 400) {
        let t0 = Instant::now();
        f();
        t.push(t0.elapsed().as_secs_f64());
    }
    super::median(t)
}

fn upload(h: &Handle, d: &TensorDesc, seed: u64, map: impl Fn(f64) -> f64) -> Buffer {
    let vals: Vec<f64> = fill_normal(seed, d.element_space()).into_iter().map(map).collect();
    let mut b = h.alloc(d.num_bytes()).unwrap();
    h.write(&mut b, &encode(d.dtype(), &vals)).unwrap();
    b
}

/// A compiled pointwise plan (`ops` is a short label: "A", "BA", "NA") with its arguments.
struct Chain {
    plan: FusionPlan,
    args: OpArgs,
    _params: Vec<Buffer>,
}

fn chain(h: &Handle, xd: &TensorDesc, ops: &str) -> Chain {
    let mut plan = FusionPlan::new(FusionDirection::Vertical, xd.clone());
    let mut args = OpArgs::new();
    let mut params = Vec::new();
    let pd = TensorDesc::new(xd.dtype(), &[1, xd.c(), 1, 1]).unwrap();
    for (i, op) in ops.chars().enumerate() {
        match op {
            'B' => {
                plan.add_bias(&pd).unwrap();
                params.push(upload(h, &pd, 10, |v| v * 0.1));
                args.set(i, OpArg::Bias { b: params[params.len() - 1].ptr() });
            }
            'N' => {
                plan.add_bn_inference(BnMode::Spatial, &pd).unwrap();
                let p: Vec<Buffer> = (0..4).map(|s| upload(h, &pd, 20 + s, |v| if s == 3 { 1.0 + v.abs() } else { v })).collect();
                args.set(i, OpArg::BnInference { scale: p[0].ptr(), bias: p[1].ptr(), mean: p[2].ptr(), var: p[3].ptr(), eps: 1e-5 });
                params.extend(p);
            }
            _ => {
                plan.add_activation(activation_mode()).unwrap();
                args.set(i, OpArg::Activation { alpha: 0.0, beta: 0.0, gamma: 0.0 });
            }
        }
    }
    plan.compile(h).unwrap();
    Chain { plan, args, _params: params }
}

/// The activation of the "A" columns (and of `bench_cpu one`'s plan): `BENCH_ACT=silu|gelu|
/// tanh|logistic`, else ReLU.
pub fn activation_mode() -> ActivationMode {
    match std::env::var("BENCH_ACT").unwrap_or_default().as_str() {
        "silu" => ActivationMode::Silu,
        "gelu" => ActivationMode::Gelu,
        "tanh" => ActivationMode::Tanh,
        "logistic" => ActivationMode::Logistic,
        _ => ActivationMode::Relu,
    }
}

/// memcpy of `bytes` from `src` to `dst` split over the rayon threads.
fn par_memcpy(src: &Buffer, dst: &mut Buffer, bytes: usize) {
    let threads = rayon::current_num_threads();
    let part = bytes.div_ceil(threads);
    let s = src.ptr().0 as usize;
    let d = dst.ptr().0 as usize;
    (0..threads).into_par_iter().for_each(|t| {
        let (a, b) = (t * part, ((t + 1) * part).min(bytes));
        if a < b {
            // SAFETY: both buffers hold ≥ `bytes` bytes and do not overlap; each thread copies
            // its own byte range.
            unsafe { std::ptr::copy_nonoverlapping((s + a) as *const u8, (d + a) as *mut u8, b - a) };
        }
    });
}

pub fn run(a: &[String]) {
    let list = std::fs::read_to_string(&a[0]).expect("problem list");
    let n: usize = a[1].parse().expect("N");
    let reps: usize = a.get(2).map(|s| s.parse().unwrap()).unwrap_or(20);
    let h = Handle::cpu();
    println!("threads: {}", rayon::current_num_threads());
    println!("| output N×K×H×W | type | layout | MB x | memcpy | ReLU | bias+ReLU | BN+ReLU | bias (y+=b) | ReLU bwd |");
    println!("|---|---|---|---:|---:|---:|---:|---:|---:|---:|");
    let mut sums = [0f64; 6];
    let mut rows = 0;
    for line in list.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let cfg: Vec<usize> = line.split('-').map(|t| t.parse().unwrap()).collect();
        let (k, ho, wo) = (cfg[3], cfg[1] + 2 * cfg[6] + 1 - cfg[4], cfg[2] + 2 * cfg[7] + 1 - cfg[5]);
        for dt in [DataType::Float, DataType::Half] {
            for layout in [Layout::NCHW, Layout::NHWC] {
                let xd = TensorDesc::with_layout(dt, layout, &[n, k, ho, wo]).unwrap();
                let bytes = xd.num_bytes();
                let x = upload(&h, &xd, 1, |v| v);
                let x2 = upload(&h, &xd, 2, |v| v);
                let mut y = upload(&h, &xd, 3, |v| v);
                let gbs = |s: f64, traffic: usize| traffic as f64 / s * 1e-9;
                let mut r = [0f64; 6];
                r[0] = gbs(time_s(reps, || par_memcpy(&x, &mut y, bytes)), 2 * bytes);
                for (j, ops) in ["A", "BA", "NA"].iter().enumerate() {
                    let c = chain(&h, &xd, ops);
                    r[1 + j] = gbs(time_s(reps, || c.plan.execute(&h, &xd, x.ptr(), &xd, y.ptr(), &c.args).unwrap()), 2 * bytes);
                }
                let bd = TensorDesc::new(dt, &[1, k, 1, 1]).unwrap();
                let b = upload(&h, &bd, 4, |v| v * 1e-3);
                r[4] = gbs(time_s(reps, || conflux::conv::bias::forward_bias(&h, 1.0, &bd, b.ptr(), 0.0, &xd, y.ptr()).unwrap()), 2 * bytes);
                // ReLU backward reads dy and x (y is not needed for ReLU) and writes dx.
                let act = ActivationDesc::relu();
                r[5] = gbs(
                    time_s(reps, || {
                        conflux::ops::activation_backward(&h, &act, &xd, x2.ptr(), &xd, x.ptr(), &xd, x2.ptr(), &xd, y.ptr()).unwrap()
                    }),
                    3 * bytes,
                );
                println!(
                    "| {n}×{k}×{ho}×{wo} | {} | {layout:?} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} |",
                    if dt == DataType::Float { "f32" } else { "f16" },
                    bytes as f64 / 1e6,
                    r[0],
                    r[1],
                    r[2],
                    r[3],
                    r[4],
                    r[5]
                );
                for (s, v) in sums.iter_mut().zip(r) {
                    *s += v.ln();
                }
                rows += 1;
            }
        }
    }
    let g: Vec<String> = sums.iter().map(|s| format!("{:.1}", (s / rows as f64).exp())).collect();
    println!("| geomean | | | | {} |", g.join(" | "));
}
