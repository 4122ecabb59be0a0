//! Benchmark program (not a test): fused batch-norm inference + ReLU (the NA plan) through
//! conflux on the problems of a list file (N-C-H-W per line, ../shared/bench/na.txt).
//! Prints CSV rows: config,dtype,layout,mode,us_median,GB/s (bytes = read x + write y).
//! GPU timing: CUDA events per launch, L2 flushed before each, median of `reps`.
//!
//! cargo run --release --example bench_na -- LIST f32|f16|bf16 nchw|nhwc|gapped spatial|peract [reps]
//! (`gapped`: NCHW with 8 unused elements after every image row, so the plan takes the
//! generic strided kernel; bytes still count only the elements.)

use conflux::batchnorm::derive_bn_desc;
use conflux::element::encode;
use conflux::reference::fill::{fill_normal, fill_uniform};
use conflux::{ActivationMode, BnMode, DataType, FusionDirection, FusionPlan, Handle, Layout, OpArg, OpArgs, TensorDesc};

fn main() -> conflux::Result<()> {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 5 {
        eprintln!("usage: bench_na LIST f32|f16|bf16 nchw|nhwc|gapped spatial|peract [reps]");
        std::process::exit(2);
    }
    let list = std::fs::read_to_string(&a[1]).expect("problem list");
    let dt = match a[2].as_str() {
        "f32" => DataType::Float,
        "f16" => DataType::Half,
        _ => DataType::BFloat16,
    };
    let layout = if a[3] == "nhwc" { Layout::NHWC } else { Layout::NCHW };
    let mode = if a[4] == "peract" { BnMode::PerActivation } else { BnMode::Spatial };
    let reps: usize = a.get(5).map(|s| s.parse().unwrap()).unwrap_or(50);
    let h = Handle::new()?;
    let flush = h.alloc(256 << 20)?;
    for line in list.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let v: Vec<usize> = line.split('-').map(|t| t.parse().unwrap()).collect();
        let x_desc = if a[3] == "gapped" {
            let row = v[3] + 8;
            TensorDesc::with_strides(dt, &v, &[v[1] * v[2] * row, v[2] * row, row, 1])?
        } else {
            TensorDesc::with_layout(dt, layout, &v)?
        };
        let p_desc = derive_bn_desc(&x_desc, mode)?;
        let mut plan = FusionPlan::new(FusionDirection::Vertical, x_desc.clone());
        plan.add_bn_inference(mode, &p_desc)?;
        plan.add_activation(ActivationMode::Relu)?;
        plan.compile(&h)?;
        let up = |d: &TensorDesc, vals: Vec<f64>| -> conflux::Result<conflux::Buffer> {
            let mut b = h.alloc(d.num_bytes())?;
            h.write(&mut b, &encode(d.dtype(), &vals))?;
            Ok(b)
        };
        let np = p_desc.element_space();
        let xb = up(&x_desc, fill_normal(1, x_desc.element_space()))?;
        let (s, b, m) = (up(&p_desc, fill_normal(2, np))?, up(&p_desc, fill_normal(3, np))?, up(&p_desc, fill_normal(4, np))?);
        let var = up(&p_desc, fill_uniform(5, np, 0.5, 2.0))?;
        let yb = h.alloc(x_desc.num_bytes())?;
        let mut args = OpArgs::new();
        args.set(0, OpArg::BnInference { scale: s.ptr(), bias: b.ptr(), mean: m.ptr(), var: var.ptr(), eps: 1e-5 });
        args.set(1, OpArg::Activation { alpha: 0.0, beta: 0.0, gamma: 0.0 });
        let run = || plan.execute(&h, &x_desc, xb.ptr(), &x_desc, yb.ptr(), &args);
        for _ in 0..3 {
            run()?;
        }
        h.enable_profiling(true);
        let mut times = Vec::with_capacity(reps);
        for _ in 0..reps {
            if let Some(be) = h.device().cuda() {
                be.dev.memset_async(flush.ptr().0, flush.len())?;
            }
            run()?;
            times.push(h.kernel_time_ms() as f64 * 1e3);
        }
        h.enable_profiling(false);
        times.sort_by(f64::total_cmp);
        let med = times[reps / 2];
        let bytes = 2.0 * (x_desc.element_count() * dt.size()) as f64;
        println!("{line},{},{},{},{med:.1},{:.0}", a[2], a[3], a[4], bytes / med / 1e3);
    }
    Ok(())
}
