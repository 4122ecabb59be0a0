//! CPU benchmark program (not a test).
//!   bench_cpu gemm M N K [reps]          GFLOP/s of the packed GEMM, every kernel of this CPU
fn main() {
    let a: Vec<String> = std::env::args().collect();
    match a.get(1).map(String::as_str) {
        Some("gemm") => gemm(&a[2..]),
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
    }
}
