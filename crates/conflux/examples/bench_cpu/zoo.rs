//! `bench_cpu zoo LIST N DNNL_CBA [MODELS]`: fused conv + bias + ReLU forward, f32 NCHW, for every
//! distinct layer of a zoo list (`N-C-H-W-K-fy-fx-py-px-sy-sx-g-dy-dx  # model xcount`, the list's
//! N replaced by the argument), conflux against oneDNN in the same run, interleaved per layer.
//! conflux: the fastest algorithm with and without the constant-weights promise (what a caller
//! who runs Find once gets); oneDNN: its best variant (any, nchw, wino); each side's faster of
//! two rounds (`ROUNDS`). Prints one row per layer,
//! then per model Σ count × time, conflux / oneDNN, and the model's three worst layers.
//! MODELS (comma list) keeps the layers of those models only.

use super::conv::{conflux_best_for, onednn_for};
use conflux::Layout;
use std::collections::BTreeMap;

/// Milliseconds each conflux algorithm is timed per layer (a zoo has ~200 layers).
const TIMING_MS: u64 = 80;

/// Rounds per layer (conflux and oneDNN alternating); each side's fastest counts.
const ROUNDS: usize = 2;

pub(super) struct Layer {
    /// C-H-W-K-fy-fx-py-px-sy-sx-g-dy-dx (the peer's cfg format).
    pub(super) cfg: String,
    /// (model, count) of every model using it.
    pub(super) uses: Vec<(String, usize)>,
}

pub(super) fn parse(list: &str, keep: &[&str]) -> Vec<Layer> {
    let mut layers: Vec<Layer> = Vec::new();
    for line in list.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let (shape, tail) = line.split_once('#').unwrap_or((line, ""));
        let mut t = tail.split_whitespace();
        let model = t.next().unwrap_or("?").to_string();
        let count = t.next().and_then(|c| c.trim_start_matches('x').parse().ok()).unwrap_or(1);
        if !keep.is_empty() && !keep.contains(&model.as_str()) {
            continue;
        }
        let cfg = shape.trim().split_once('-').map(|(_, rest)| rest.to_string()).expect("N-C-H-W-... shape");
        match layers.iter_mut().find(|l| l.cfg == cfg) {
            Some(l) => l.uses.push((model, count)),
            None => layers.push(Layer { cfg, uses: vec![(model, count)] }),
        }
    }
    layers
}

pub fn run(a: &[String]) {
    let list = std::fs::read_to_string(&a[0]).expect("zoo list");
    let n: usize = a[1].parse().expect("N");
    let peer = a.get(2).expect("path of dnnl_cba");
    let keep: Vec<&str> = a.get(3).map(|m| m.split(',').collect()).unwrap_or_default();
    println!("| layer (C-H-W-K-fy-fx-py-px-sy-sx-g-dy-dx) | models | conflux µs | solver | oneDNN µs | conflux / oneDNN |");
    println!("|---|---|---:|---|---:|---:|");
    // Per model: Σ conflux, Σ oneDNN, and (ratio, layer, conflux µs, oneDNN µs) per layer.
    let mut models: BTreeMap<String, (f64, f64, Vec<(f64, String, f64, f64)>)> = BTreeMap::new();
    for layer in parse(&list, &keep) {
        let cfg: Vec<usize> = layer.cfg.split('-').map(|t| t.parse().expect("number")).collect();
        let (plain, plain_solver) = conflux_best_for(&cfg, n, Layout::NCHW, false, TIMING_MS).expect("conflux");
        let d = onednn_for(peer, &layer.cfg, n, "10", "0.15");
        let (constant, constant_solver) = conflux_best_for(&cfg, n, Layout::NCHW, true, TIMING_MS).expect("conflux");
        let (mut ours, solver) = if constant < plain { (constant, format!("{constant_solver} (const-w)")) } else { (plain, plain_solver) };
        let mut peer_us = d.iter().copied().filter(|v| v.is_finite()).fold(f64::MAX, f64::min);
        // A second round of both sides, the faster of each kept: the VM lends a core away for
        // seconds at a time, which one round per layer turns into 2× rows.
        for _ in 1..ROUNDS {
            let again = onednn_for(peer, &layer.cfg, n, "10", "0.15");
            peer_us = again.iter().copied().filter(|v| v.is_finite()).fold(peer_us, f64::min);
            let (t, _) = conflux_best_for(&cfg, n, Layout::NCHW, constant < plain, TIMING_MS).expect("conflux");
            ours = ours.min(t);
        }
        let names: Vec<String> = layer.uses.iter().map(|(m, c)| format!("{m} x{c}")).collect();
        println!("| {} | {} | {ours:.0} | {solver} | {peer_us:.0} | {:.2} |", layer.cfg, names.join(", "), ours / peer_us);
        for (m, count) in &layer.uses {
            let e = models.entry(m.clone()).or_default();
            e.0 += ours * *count as f64;
            e.1 += peer_us * *count as f64;
            e.2.push((ours / peer_us, layer.cfg.clone(), ours, peer_us));
        }
    }
    println!("\n| model (N={n}, f32 NCHW) | Σ conflux µs | Σ oneDNN µs | conflux / oneDNN | worst layers (ratio) |");
    println!("|---|---:|---:|---:|---|");
    for (m, (ours, peer, mut rows)) in models {
        rows.sort_by(|a, b| b.0.total_cmp(&a.0));
        let worst: Vec<String> = rows.iter().take(3).map(|(r, cfg, ..)| format!("{cfg} ({r:.1}×)")).collect();
        println!("| {m} | {ours:.0} | {peer:.0} | {:.2} | {} |", ours / peer, worst.join("; "));
    }
}
