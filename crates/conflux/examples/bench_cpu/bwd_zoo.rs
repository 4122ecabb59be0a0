//! `bench_cpu bwdzoo LIST N DNNL_BWD [MODELS]`: training's two backward convolutions, f32 NCHW,
//! for every distinct layer of a zoo list (`N-C-H-W-K-fy-fx-py-px-sy-sx-g-dy-dx  # model xcount`,
//! the list's N replaced by the argument), conflux against oneDNN's backward primitives
//! (`bench/cpu-peer-bwd/dnnl_bwd`) in the same run, interleaved per layer. conflux: immediate
//! mode's choice (the registry's first applicable solver), α = 1, β = 0; oneDNN: the faster of its
//! "any" and NCHW variants (weights reordered outside its timing). Each side's faster of `ROUNDS`
//! rounds. Prints a row per layer (dx and dw), then per model Σ count × time for dx, dw and both,
//! with the three layers that add most to the model's gap.

use super::conv::time_us_for;
use super::zoo::parse;
use conflux::conv::{api, Choice, Workspace};
use conflux::element::encode;
use conflux::reference::fill::fill_normal;
use conflux::{ConvDesc, ConvMode, DataType, Handle, TensorDesc};
use std::collections::BTreeMap;

/// Milliseconds each direction is timed per round.
const TIMING_MS: u64 = 120;
/// Rounds per layer (conflux and oneDNN alternating); each side's fastest counts.
const ROUNDS: usize = 2;

/// oneDNN's fastest variant per direction ("data", "weights") in µs, from dnnl_bwd's CSV.
fn onednn(bin: &str, n: usize, cfg: &str) -> (f64, f64) {
    let out = std::process::Command::new(bin).args([&n.to_string(), "5", "0.15", cfg]).output().expect("run dnnl_bwd");
    let (mut data, mut weights) = (f64::INFINITY, f64::INFINITY);
    for l in String::from_utf8_lossy(&out.stdout).lines().skip(1) {
        let f: Vec<&str> = l.split(',').collect();
        let us = f.get(4).and_then(|v| v.parse::<f64>().ok()).unwrap_or(f64::INFINITY);
        match f.get(2) {
            Some(&"data") => data = data.min(us),
            Some(&"weights") => weights = weights.min(us),
            _ => {}
        }
    }
    (data, weights)
}

/// Per model: Σ count × (ours dx, ours dw, peer dx, peer dw), and per layer its added gap.
#[derive(Default)]
struct Sums {
    t: [f64; 4],
    gaps: Vec<(f64, String)>,
}

pub fn run(a: &[String]) {
    let list = std::fs::read_to_string(&a[0]).expect("zoo list");
    let n: usize = a[1].parse().expect("N");
    let peer = a.get(2).expect("path of dnnl_bwd");
    let keep: Vec<&str> = a.get(3).map(|m| m.split(',').collect()).unwrap_or_default();
    let h = Handle::cpu();
    let dt = DataType::Float;
    println!("| layer (C-H-W-K-fy-fx-py-px-sy-sx-g-dy-dx) | models | dx conflux µs | dx oneDNN µs | dx ratio | dw conflux µs | dw oneDNN µs | dw ratio |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    let mut models: BTreeMap<String, Sums> = BTreeMap::new();
    for layer in parse(&list, &keep) {
        let v: Vec<usize> = layer.cfg.split('-').map(|t| t.parse().expect("number")).collect();
        let (c, hh, ww, k, fy, fx, py, px, sy, sx, g, dy, dxl) = (v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12]);
        let mut conv = ConvDesc::new(ConvMode::Convolution, &[py as i64, px as i64], &[sy as i64, sx as i64], &[dy as i64, dxl as i64]).expect("conv");
        conv.set_groups(g as i64).expect("groups");
        let x = TensorDesc::new(dt, &[n, c, hh, ww]).expect("x");
        let w = TensorDesc::new(dt, &[k, c / g, fy, fx]).expect("w");
        let y = conv.output_desc(&x, &w).expect("y");
        let up = |d: &TensorDesc, seed| {
            let mut b = h.alloc(d.num_bytes()).expect("alloc");
            h.write(&mut b, &encode(dt, &fill_normal(seed, d.element_space()))).expect("write");
            b
        };
        let (xb, wb, yb) = (up(&x, 1), up(&w, 2), up(&y, 3));
        let (dxb, dwb) = (up(&x, 4), up(&w, 5));
        let data = || api::backward_data(&h, &conv, &y, yb.ptr(), &w, wb.ptr(), &x, dxb.ptr(), 1.0, 0.0, Choice::Auto, Workspace::default()).expect("backward-data");
        let weights = || api::backward_weights(&h, &conv, &y, yb.ptr(), &x, xb.ptr(), &w, dwb.ptr(), 1.0, 0.0, Choice::Auto, Workspace::default()).expect("backward-weights");
        let mut t = [f64::INFINITY; 4];
        for _ in 0..ROUNDS {
            t[0] = t[0].min(time_us_for(&data, TIMING_MS));
            t[1] = t[1].min(time_us_for(&weights, TIMING_MS));
            let (pd, pw) = onednn(peer, n, &layer.cfg);
            t[2] = t[2].min(pd);
            t[3] = t[3].min(pw);
        }
        let names: Vec<String> = layer.uses.iter().map(|(m, c)| format!("{m} x{c}")).collect();
        println!("| {} | {} | {:.0} | {:.0} | {:.2} | {:.0} | {:.0} | {:.2} |", layer.cfg, names.join(", "), t[0], t[2], t[0] / t[2], t[1], t[3], t[1] / t[3]);
        for (m, count) in &layer.uses {
            let s = models.entry(m.clone()).or_default();
            for i in 0..4 {
                s.t[i] += t[i] * *count as f64;
            }
            s.gaps.push((*count as f64 * (t[0] + t[1] - t[2] - t[3]), layer.cfg.clone()));
        }
    }
    println!("\n| model (N={n}, f32 NCHW) | dx conflux / oneDNN | dw conflux / oneDNN | dx + dw: Σ conflux µs | Σ oneDNN µs | ratio | layers adding most to the gap (µs) |");
    println!("|---|---:|---:|---:|---:|---:|---|");
    for (m, mut s) in models {
        s.gaps.sort_by(|a, b| b.0.total_cmp(&a.0));
        let top: Vec<String> = s.gaps.iter().take(3).map(|(gap, cfg)| format!("{cfg} ({gap:+.0})")).collect();
        let [od, ow, pd, pw] = s.t;
        println!("| {m} | {:.2} | {:.2} | {:.0} | {:.0} | {:.2} | {} |", od / pd, ow / pw, od + ow, pd + pw, (od + ow) / (pd + pw), top.join("; "));
    }
}
