//! CPU benchmark program (not a test).
//!   bench_cpu gemm M N K [reps]          GFLOP/s of the packed GEMM, every kernel of this CPU
//!   bench_cpu kernel                     the micro-kernels alone (1 thread, L1-resident)
//!   bench_cpu conv LIST N [DNNL_CBA]     fp32 fused conv+bias+ReLU forward on a problem list
//!       (format of ../shared/bench/cba_resnet.txt), NCHW and NHWC, every applicable algorithm
//!       (best reported); with the path of the oneDNN peer harness (../shared/bench/cpu-peer/
//!       dnnl_cba), oneDNN is measured right after each problem in the same run. Prints a
//!       markdown table; an FMA probe before each row shows whether the (shared) machine gave
//!       both cores. Threads: rayon's default (RAYON_NUM_THREADS).
//!       Also NCHW and NHWC with constant weights (attribute CONSTANT_WEIGHTS: filters
//!       transformed once, as oneDNN's timings exclude its weight reorder). Several passes merge
//!       with bench/cpu_conv_agg.py.
//!   bench_cpu one CFG N LAYOUT ALGO SECS [const]  one problem, one layout (NCHW/NHWC), one
//!       algorithm (Gemm/ImplicitGemm/Winograd/Fft/Direct), run for SECS seconds: for `perf record`; prints
//!       min/median µs; `const`: constant weights. With BENCH_LOOP_IN_POOL set, the timing loop
//!       itself runs on a rayon pool thread (a Rust caller inside the pool: no hand-over per call);
//!       BENCH_ACT=silu|gelu|tanh|logistic replaces the ReLU (as in `pointwise`)
//!   bench_cpu bwd LIST N                 fp32 backward-data, NCHW, each backward-data solver
//!       (Winograd F(4×4), GEMM + col2im, direct) on the list's problems (bwd_data.rs)
//!   bench_cpu zoo LIST N DNNL_CBA [MODELS]  fused conv+bias+ReLU forward, f32 NCHW, per model
//!       of a zoo list (../shared/bench/zoo_public.txt: strides, groups, dilation, counts) against
//!       oneDNN in the same run, interleaved per layer (zoo.rs)
//!   bench_cpu bwdzoo LIST N DNNL_BWD [MODELS]  backward-data and backward-weights, f32 NCHW, per
//!       model of a zoo list against oneDNN's backward primitives (bench/cpu-peer-bwd), same run,
//!       interleaved per layer (bwd_zoo.rs)
//!   bench_cpu pointwise LIST N [REPS]    GB/s of the pointwise paths (ReLU, bias+ReLU, BN+ReLU,
//!       conv forward bias, ReLU backward) on the list's output shapes vs memcpy (pointwise.rs)

#[path = "bench_cpu/pointwise.rs"]
mod pointwise;

#[path = "bench_cpu/bwd_data.rs"]
mod bwd_data;

#[path = "bench_cpu/zoo.rs"]
mod zoo;

#[path = "bench_cpu/bwd_zoo.rs"]
mod bwd_zoo;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    match a.get(1).map(String::as_str) {
        Some("conv") => conv::run(&a[2..]),
        Some("one") => conv::one(&a[2..]),
        Some("gemm") => gemm(&a[2..]),
        Some("pointwise") => pointwise::run(&a[2..]),
        Some("bwd") => bwd_data::run(&a[2..]),
        Some("zoo") => zoo::run(&a[2..]),
        Some("bwdzoo") => bwd_zoo::run(&a[2..]),
        Some("kernel") => kernel(),
        _ => eprintln!("usage: see the header of bench_cpu.rs"),
    }
}

fn median(mut t: Vec<f64>) -> f64 {
    t.sort_by(|a, b| a.partial_cmp(b).unwrap());
    t[t.len() / 2]
}

fn gemm(a: &[String]) {
    use conflux::backend::cpu::gemm::{available, sgemm_with};
    let p = |i: usize| a[i].parse::<usize>().unwrap();
    let (m, n, k) = (p(0), p(1), p(2));
    let reps = a.get(3).map(|s| s.parse().unwrap()).unwrap_or(20);
    let av = vec![0.5f32; m * k];
    let bv = vec![0.25f32; k * n];
    let mut c = vec![0f32; m * n];
    for kern in available() {
        let t: Vec<f64> = (0..reps + 3)
            .map(|_| {
                let t0 = std::time::Instant::now();
                sgemm_with(&kern, None, m, n, k, &av, &bv, &mut c);
                t0.elapsed().as_secs_f64()
            })
            .skip(3)
            .collect();
        let s = median(t);
        println!("{},{m}x{n}x{k},{:.1} us,{:.1} GFLOP/s", kern.name, s * 1e6, 2.0 * (m * n * k) as f64 / s * 1e-9);
    }
}

/// The micro-kernel alone on L1-resident panels, one thread: the ceiling for everything else.
fn kernel() {
    use conflux::backend::cpu::gemm::available;
    for kern in available() {
        let kc = 256;
        let a = vec![0.5f32; kern.mr * kc];
        let b = vec![0.25f32; kern.nr * kc];
        let mut c = vec![0f32; kern.mr * kern.nr];
        let iters = 20000;
        let t0 = std::time::Instant::now();
        for _ in 0..iters {
            // SAFETY: panels and tile sized for the kernel.
            unsafe { (kern.f)(kc, a.as_ptr(), b.as_ptr(), c.as_mut_ptr(), kern.nr, true) };
        }
        let s = t0.elapsed().as_secs_f64();
        println!("{} kernel: {:.1} GFLOP/s (1 thread)", kern.name, 2.0 * (kern.mr * kern.nr * kc * iters) as f64 / s * 1e-9);
        // The same tile reading A in place (row stride kc).
        let t0 = std::time::Instant::now();
        for _ in 0..iters {
            // SAFETY: as above; A is mr rows of kc values.
            unsafe { (kern.fa)(kc, a.as_ptr(), kc, b.as_ptr(), c.as_mut_ptr(), kern.nr, true) };
        }
        let s = t0.elapsed().as_secs_f64();
        println!("{} kernel, A in place: {:.1} GFLOP/s (1 thread)", kern.name, 2.0 * (kern.mr * kern.nr * kc * iters) as f64 / s * 1e-9);
    }
    amx_kernel();
}

/// The AMX 32×32 block (`amx::Tiles::block_32x32`, bf16×6) over 16 steps of 32 channels, its
/// operands 64-byte aligned: f32-equivalent GFLOP/s and cycles per tile multiply (24 per step)
/// at the clock `CLOCK_GHZ` (default 3.75).
fn amx_kernel() {
    use conflux::backend::cpu::x86::amx::{self, Tiles, ALIGN_SLACK, STEP};
    if !amx::available() {
        return;
    }
    let steps = 16;
    let (mut a, mut b) = (vec![0x3f80u16; steps * STEP + ALIGN_SLACK], vec![0x3f80u16; steps * STEP + ALIGN_SLACK]);
    let (sa, sb) = (amx::skip_to_64(a.as_ptr()), amx::skip_to_64(b.as_ptr()));
    let (a, b) = (a[sa..].as_mut_ptr(), b[sb..].as_mut_ptr());
    let mut c = vec![0f32; 1024];
    let calls = 20000;
    // SAFETY: AMX is available; the operands hold `steps` steps each; c holds a 32×32 block.
    let tiles = unsafe { Tiles::configure() };
    let t0 = std::time::Instant::now();
    for _ in 0..calls {
        // SAFETY: as above.
        unsafe { tiles.block_32x32(a, b, steps, c.as_mut_ptr(), true) };
    }
    let s = t0.elapsed().as_secs_f64();
    let ghz: f64 = std::env::var("CLOCK_GHZ").ok().and_then(|v| v.parse().ok()).unwrap_or(3.75);
    let flops = 2.0 * (1024 * 32 * steps * calls) as f64;
    println!("amx bf16×6 block: {:.1} GFLOP/s f32-equivalent, {:.1} cycles per tile multiply at {ghz} GHz (1 thread)", flops / s * 1e-9, s * ghz * 1e9 / (calls * steps * 24) as f64);
}

mod conv {
    use conflux::element::encode;
    use conflux::reference::fill::fill_normal;
    use conflux::{ConvAlgorithm, ConvAttrib, ConvDesc, ConvMode, DataType, FusionDirection, FusionPlan, Handle, Layout, OpArg, OpArgs, TensorDesc};
    use std::time::{Duration, Instant};

    /// Median time in µs of `f`: warm-up ≥ 5 runs and ≥ 50 ms, then ≥ 10 runs and ≥ 0.3 s.
    /// (Three warm-up runs and at most 500 timed ones measured the first 60 ms of a 120 µs
    /// layer, right after its buffers were allocated: up to 1.4× the steady median.)
    pub fn time_us(f: impl FnMut()) -> f64 {
        time_us_for(f, 300)
    }

    /// As `time_us`, timing for at least `ms` milliseconds.
    pub fn time_us_for(mut f: impl FnMut(), ms: u64) -> f64 {
        let warm = Instant::now();
        let mut runs = 0;
        while runs < 5 || warm.elapsed() < Duration::from_millis(50) {
            f();
            runs += 1;
        }
        let mut t = Vec::new();
        let start = Instant::now();
        while t.len() < 10 || (start.elapsed() < Duration::from_millis(ms) && t.len() < 20000) {
            let t0 = Instant::now();
            f();
            t.push(t0.elapsed().as_secs_f64() * 1e6);
        }
        super::median(t)
    }

    /// The best micro-kernel on every rayon thread for ~20 ms: the machine's current FMA rate.
    pub fn fma_probe() -> f64 {
        use rayon::prelude::*;
        let kern = conflux::backend::cpu::gemm::best();
        let threads = rayon::current_num_threads();
        let iters = 2000;
        let kc = 256;
        let t0 = Instant::now();
        (0..threads).into_par_iter().for_each(|_| {
            let a = vec![0.5f32; kern.mr * kc];
            let b = vec![0.25f32; kern.nr * kc];
            let mut c = vec![0f32; kern.mr * kern.nr];
            for _ in 0..iters {
                // SAFETY: panels and tile sized for the kernel.
                unsafe { (kern.f)(kc, a.as_ptr(), b.as_ptr(), c.as_mut_ptr(), kern.nr, true) };
            }
        });
        2.0 * (kern.mr * kern.nr * kc * iters * threads) as f64 / t0.elapsed().as_secs_f64() * 1e-9
    }

    /// A compiled fused conv+bias+ReLU plan with its buffers, ready to execute.
    struct Prepared {
        h: Handle,
        plan: FusionPlan,
        x_desc: TensorDesc,
        y_desc: TensorDesc,
        bufs: [conflux::Buffer; 4],
    }

    impl Prepared {
        fn run(&mut self) {
            let mut args = OpArgs::new();
            args.set(0, OpArg::Conv { w: self.bufs[1].ptr(), alpha: 1.0, beta: 0.0 });
            args.set(1, OpArg::Bias { b: self.bufs[2].ptr() });
            args.set(2, OpArg::Activation { alpha: 0.0, beta: 0.0, gamma: 0.0 });
            self.plan.execute(&self.h, &self.x_desc, self.bufs[0].ptr(), &self.y_desc, self.bufs[3].ptr(), &args).unwrap();
        }
    }

    /// The plan for one problem (C-H-W-K-fy-fx-py-px, optionally followed by sy-sx-g-dy-dx),
    /// layout and algorithm (None when no solver of it applies); `constant`: the descriptor
    /// promises constant weights.
    fn prepare(cfg: &[usize], n: usize, layout: Layout, algo: ConvAlgorithm, constant: bool) -> conflux::Result<Option<Prepared>> {
        let h = Handle::cpu();
        let (c, hh, ww, k, fy, fx, py, px) = (cfg[0], cfg[1], cfg[2], cfg[3], cfg[4], cfg[5], cfg[6], cfg[7]);
        let extra = |i: usize| cfg.get(i).copied().unwrap_or(1) as i64;
        let (strides, groups, dilations) = ([extra(8), extra(9)], extra(10), [extra(11), extra(12)]);
        let dt = DataType::Float;
        let x_desc = TensorDesc::with_layout(dt, layout, &[n, c, hh, ww])?;
        let w_desc = TensorDesc::with_layout(dt, layout, &[k, c / groups as usize, fy, fx])?;
        let b_desc = TensorDesc::new(dt, &[1, k, 1, 1])?;
        let mut conv = ConvDesc::new(ConvMode::Convolution, &[py as i64, px as i64], &strides, &dilations)?;
        conv.set_groups(groups)?;
        conv.set_attribute(ConvAttrib::ConstantWeights, constant as i64)?;
        let up = |d: &TensorDesc, seed: u64, scale: f64| -> conflux::Result<conflux::Buffer> {
            let vals: Vec<f64> = fill_normal(seed, d.element_space()).iter().map(|v| v * scale).collect();
            let mut b = h.alloc(d.num_bytes())?;
            h.write(&mut b, &encode(dt, &vals))?;
            Ok(b)
        };
        let xb = up(&x_desc, 1, 1.0)?;
        let wb = up(&w_desc, 2, 1.0 / ((c / groups as usize * fy * fx) as f64).sqrt())?;
        let bb = up(&b_desc, 3, 0.1)?;
        let mut plan = FusionPlan::new(FusionDirection::Vertical, x_desc.clone());
        plan.set_algo(algo);
        plan.add_conv_forward(&conv, &w_desc)?;
        plan.add_bias(&b_desc)?;
        plan.add_activation(super::pointwise::activation_mode())?;
        if plan.compile(&h).is_err() {
            return Ok(None);
        }
        let y_desc = plan.output_desc().clone();
        let yb = h.alloc(y_desc.num_bytes())?;
        Ok(Some(Prepared { h, plan, x_desc, y_desc, bufs: [xb, wb, bb, yb] }))
    }

    /// (µs, solver) of the fastest algorithm for one problem and layout. The naive solver
    /// (where the Direct algorithm falls back to it) is timed only when no other applies: its
    /// calls take 0.1–2 s on these layers (a third of an N=8 pass went to timing it) and it is
    /// never the fastest.
    pub fn conflux_best(cfg: &[usize], n: usize, layout: Layout, constant: bool) -> conflux::Result<(f64, String)> {
        conflux_best_for(cfg, n, layout, constant, 300)
    }

    /// As `conflux_best`, timing each algorithm for at least `ms` milliseconds.
    pub fn conflux_best_for(cfg: &[usize], n: usize, layout: Layout, constant: bool, ms: u64) -> conflux::Result<(f64, String)> {
        let mut best = (f64::MAX, String::new());
        let mut naive = None;
        for algo in [ConvAlgorithm::Winograd, ConvAlgorithm::Fft, ConvAlgorithm::Direct, ConvAlgorithm::ImplicitGemm, ConvAlgorithm::Gemm] {
            let Some(mut p) = prepare(cfg, n, layout, algo, constant)? else { continue };
            if p.plan.solver_name() == Some("CpuConvNaive") {
                naive = Some(p);
                continue;
            }
            let us = time_us_for(|| p.run(), ms);
            let name = p.plan.solver_name().unwrap_or("?").to_string();
            eprintln!("{cfg:?} {layout:?}{} {name}: {us:.0} us", if constant { " const-w" } else { "" });
            if us < best.0 {
                best = (us, name);
            }
        }
        if let (f64::MAX, Some(mut p)) = (best.0, naive) {
            best = (time_us_for(|| p.run(), ms), "CpuConvNaive".to_string());
        }
        Ok(best)
    }

    /// `one CFG N LAYOUT ALGO SECS`: a single plan in a loop (for profilers).
    pub fn one(a: &[String]) {
        let cfg: Vec<usize> = a[0].split('-').map(|t| t.parse().unwrap()).collect();
        let n: usize = a[1].parse().unwrap();
        let layout = if a[2] == "NHWC" { Layout::NHWC } else { Layout::NCHW };
        let algo = match a[3].as_str() {
            "Winograd" => ConvAlgorithm::Winograd,
            "ImplicitGemm" => ConvAlgorithm::ImplicitGemm,
            "Fft" => ConvAlgorithm::Fft,
            "Direct" => ConvAlgorithm::Direct,
            _ => ConvAlgorithm::Gemm,
        };
        let secs: f64 = a[4].parse().unwrap();
        let constant = a.get(5).is_some_and(|s| s == "const");
        let mut p = prepare(&cfg, n, layout, algo, constant).unwrap().expect("no solver of this algorithm applies");
        let mut t = Vec::new();
        let start = Instant::now();
        let mut body = || while start.elapsed().as_secs_f64() < secs || t.len() < 5 {
            let t0 = Instant::now();
            p.run();
            t.push(t0.elapsed().as_secs_f64() * 1e6);
        };
        if std::env::var("BENCH_LOOP_IN_POOL").is_ok() { rayon::scope(|_| body()) } else { body() }
        let min = t.iter().copied().fold(f64::MAX, f64::min);
        println!("{} {layout:?} {}: min {min:.0} us, median {:.0} us ({} runs)", a[0], p.plan.solver_name().unwrap_or("?"), super::median(t.clone()), t.len());
    }

    /// oneDNN medians (any, nchw, wino) in µs from the peer harness.
    pub fn onednn(bin: &str, cfg: &str, n: usize) -> [f64; 3] {
        onednn_for(bin, cfg, n, "20", "0.3")
    }

    /// As `onednn`, at least `reps` runs for about `secs` seconds.
    pub fn onednn_for(bin: &str, cfg: &str, n: usize, reps: &str, secs: &str) -> [f64; 3] {
        let out = std::process::Command::new(bin).args(["bench", &n.to_string(), reps, secs, cfg]).output().expect("run dnnl_cba");
        let mut r = [f64::NAN; 3];
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let f: Vec<&str> = line.split(',').collect();
            if f.len() > 5 && f[0] == "onednn" {
                let v = f[5].parse().unwrap_or(f64::NAN);
                match f[1] {
                    "any" => r[0] = v,
                    "nchw" => r[1] = v,
                    "wino" => r[2] = v,
                    _ => {}
                }
            }
        }
        r
    }

    pub fn run(a: &[String]) {
        let list = std::fs::read_to_string(&a[0]).expect("problem list");
        let n: usize = a[1].parse().expect("N");
        let peer = a.get(2);
        println!("| config | N | FMA probe GFLOP/s | conflux NCHW µs | solver | GFLOP/s | NCHW const-w µs | const-w solver | NHWC µs | NHWC const-w µs | NHWC const-w solver | oneDNN any µs | oneDNN nchw µs | oneDNN wino µs | NCHW / oneDNN best | NCHW const-w / oneDNN best | NHWC const-w / oneDNN best |");
        println!("|---|---:|---:|---:|---|---:|---:|---|---:|---:|---|---:|---:|---:|---:|---:|---:|");
        let mut logs = [0.0f64; 3];
        let mut cnt = 0;
        for line in list.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
            let cfg: Vec<usize> = line.split('-').map(|t| t.parse().unwrap()).collect();
            let (ho, wo) = (cfg[1] + 2 * cfg[6] + 1 - cfg[4], cfg[2] + 2 * cfg[7] + 1 - cfg[5]);
            let gflop = 2.0 * (n * cfg[3] * ho * wo * cfg[0] * cfg[4] * cfg[5]) as f64 * 1e-9;
            let probe = fma_probe();
            let (nchw, solver) = conflux_best(&cfg, n, Layout::NCHW, false).unwrap();
            let d = peer.map(|b| onednn(b, line, n)).unwrap_or([f64::NAN; 3]);
            let (cw, cw_solver) = conflux_best(&cfg, n, Layout::NCHW, true).unwrap();
            let (nhwc, _) = conflux_best(&cfg, n, Layout::NHWC, false).unwrap();
            let (nhwc_cw, nhwc_cw_solver) = conflux_best(&cfg, n, Layout::NHWC, true).unwrap();
            let best_peer = d.iter().copied().filter(|v| v.is_finite()).fold(f64::MAX, f64::min);
            let ratios = [nchw / best_peer, cw / best_peer, nhwc_cw / best_peer];
            if ratios[0].is_finite() {
                for (l, r) in logs.iter_mut().zip(ratios) {
                    *l += r.ln();
                }
                cnt += 1;
            }
            println!(
                "| {line} | {n} | {probe:.0} | {nchw:.0} | {solver} | {:.0} | {cw:.0} | {cw_solver} | {nhwc:.0} | {nhwc_cw:.0} | {nhwc_cw_solver} | {:.0} | {:.0} | {:.0} | {:.2} | {:.2} | {:.2} |",
                gflop / nchw * 1e6,
                d[0],
                d[1],
                d[2],
                ratios[0],
                ratios[1],
                ratios[2]
            );
        }
        if cnt > 0 {
            let g = |i: usize| (logs[i] / cnt as f64).exp();
            println!("\ngeomean / oneDNN best (any, nchw, wino) at N={n}: NCHW {:.2}, NCHW constant weights {:.2}, NHWC constant weights {:.2}", g(0), g(1), g(2));
        }
    }
}
