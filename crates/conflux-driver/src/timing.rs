//! Timing: each iteration is measured with `Handle::measure_ms` (CUDA events on the GPU,
//! wall-clock on the CPU, whose invokers return when done). MIOpen's average excludes the
//! first iteration (warm-up: kernel loading, caches) when there is more than one.

use crate::session::Session;
use crate::Res;
use serde_json::json;
use std::time::Instant;

#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub min_ms: f64,
    pub avg_ms: f64,
    pub iters: usize,
    /// Wall-clock ms per iteration over the whole loop, host overhead included.
    pub wall_ms: f64,
}

/// Run `work` `iters` times, timing each run on the device.
pub fn time(s: &Session, iters: usize, mut work: impl FnMut() -> Res<()>) -> Res<Timing> {
    let iters = iters.max(1);
    let mut t = Vec::with_capacity(iters);
    s.handle.synchronize()?;
    let wall = Instant::now();
    for _ in 0..iters {
        t.push(measure(s, &mut work)?);
    }
    s.handle.synchronize()?;
    Ok(summary(&t, wall.elapsed().as_secs_f64() * 1e3 / iters as f64))
}

/// One timed run of `work` (its own error, if any, wins over the timer's).
fn measure(s: &Session, work: &mut impl FnMut() -> Res<()>) -> Res<f64> {
    let mut r = Ok(());
    let ms = s.handle.measure_ms(|| {
        r = work();
        Ok(())
    })?;
    r?;
    Ok(ms as f64)
}

/// Min and average (first run excluded when there are more) of per-iteration times.
fn summary(t: &[f64], wall_ms: f64) -> Timing {
    let min_ms = t.iter().copied().fold(f64::INFINITY, f64::min);
    let rest = if t.len() > 1 { &t[1..] } else { t };
    let avg_ms = rest.iter().sum::<f64>() / rest.len() as f64;
    Timing { min_ms, avg_ms, iters: t.len(), wall_ms }
}

/// Time two alternatives in alternation (a, b, a, b, …), so load that comes and goes on a
/// shared machine hits both alike instead of whichever ran during it. Wall time per
/// iteration is each one's own measured time.
pub fn time_pair(s: &Session, iters: usize, mut a: impl FnMut() -> Res<()>, mut b: impl FnMut() -> Res<()>) -> Res<(Timing, Timing)> {
    let mut ta = Vec::with_capacity(iters.max(1));
    let mut tb = Vec::with_capacity(iters.max(1));
    s.handle.synchronize()?;
    for _ in 0..iters.max(1) {
        ta.push(measure(s, &mut a)?);
        tb.push(measure(s, &mut b)?);
    }
    s.handle.synchronize()?;
    let mean = |t: &[f64]| t.iter().sum::<f64>() / t.len() as f64;
    Ok((summary(&ta, mean(&ta)), summary(&tb, mean(&tb))))
}

/// GFLOP/s and GB/s at the average time.
pub fn rates(flops: f64, bytes: f64, t: &Timing) -> (f64, f64) {
    let s = (t.avg_ms * 1e-3).max(1e-12);
    (flops / s / 1e9, bytes / s / 1e9)
}

/// Peak fp32 FLOP/s and memory bandwidth of GPUs whose peaks are known, for the roofline
/// fraction (SXM datasheet numbers; f16/bf16 use the tensor-core peak dense).
fn peaks(device_name: &str, dtype: conflux::DataType) -> Option<(f64, f64)> {
    let half = matches!(dtype, conflux::DataType::Half | conflux::DataType::BFloat16);
    if device_name.contains("H200") {
        Some((if half { 989e12 } else { 67e12 }, 4.8e12))
    } else if device_name.contains("H100") {
        Some((if half { 989e12 } else { 67e12 }, 3.35e12))
    } else if device_name.contains("A100") {
        Some((if half { 312e12 } else { 19.5e12 }, 2.0e12))
    } else {
        None
    }
}

/// Roofline fraction: achieved time relative to the time the peaks allow.
pub fn roofline(s: &Session, dtype: conflux::DataType, flops: f64, bytes: f64, t: &Timing) -> Option<f64> {
    let (pf, pb) = peaks(&s.handle.device().name(), dtype)?;
    let bound_s = (flops / pf).max(bytes / pb);
    Some(bound_s / (t.avg_ms * 1e-3).max(1e-12))
}

/// The JSON record of a timing.
pub fn to_json(name: &str, flops: f64, bytes: f64, t: &Timing, roof: Option<f64>) -> serde_json::Value {
    let (gf, gb) = rates(flops, bytes, t);
    json!({ "name": name, "iters": t.iters, "min_ms": t.min_ms, "avg_ms": t.avg_ms, "wall_ms": t.wall_ms,
            "flops": flops, "bytes": bytes, "gflops": gf, "gbps": gb, "roofline": roof })
}
