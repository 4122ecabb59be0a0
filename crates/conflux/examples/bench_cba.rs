//! Benchmark program (not a test): fused conv + bias + ReLU through conflux on the problems of
//! a list file (format of ../shared/bench/cba_resnet.txt: C-H-W-K-fy-fx-py-px per line).
//! Prints one CSV row per problem: config,dtype,layout,n,solver,us_median,tflops.
//! GPU timing: CUDA events around each launch, L2 flushed before each, median of `reps`.
//!
//! cargo run --release --example bench_cba -- LIST N DTYPE(f32|f16|bf16) LAYOUT(nchw|nhwc) [reps]

use conflux::element::encode;
use conflux::reference::fill::fill_normal;
use conflux::types::ConvAttrib;
use conflux::{ActivationMode, ConvDesc, ConvMode, DataType, FusionDirection, FusionPlan, Handle, Layout, OpArg, OpArgs, TensorDesc};

fn main() -> conflux::Result<()> {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 5 {
        eprintln!("usage: bench_cba LIST N f32|tf32|f16|bf16 nchw|nhwc [reps]   (tf32: f32 data, TF32 allowed)");
        std::process::exit(2);
    }
    let list = std::fs::read_to_string(&a[1]).expect("problem list");
    let n: usize = a[2].parse().expect("N");
    let dt = match a[3].as_str() {
        "f32" | "tf32" => DataType::Float,
        "f16" => DataType::Half,
        "bf16" => DataType::BFloat16,
        o => panic!("dtype {o}"),
    };
    let layout = if a[4] == "nhwc" { Layout::NHWC } else { Layout::NCHW };
    let reps: usize = a.get(5).map(|s| s.parse().unwrap()).unwrap_or(50);
    let h = Handle::new()?;
    let flush = h.alloc(256 << 20)?;
    for line in list.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let v: Vec<usize> = line.split('-').map(|t| t.parse().unwrap()).collect();
        let (c, hh, ww, k, fy, fx, py, px) = (v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]);
        let x_desc = TensorDesc::with_layout(dt, layout, &[n, c, hh, ww])?;
        let w_desc = TensorDesc::with_layout(dt, layout, &[k, c, fy, fx])?;
        let b_desc = TensorDesc::new(dt, &[1, k, 1, 1])?;
        let mut conv = ConvDesc::new(ConvMode::Convolution, &[py as i64, px as i64], &[1, 1], &[1, 1])?;
        conv.set_attribute(ConvAttrib::AllowTf32, (a[3] == "tf32") as i64)?;
        let mut plan = FusionPlan::new(FusionDirection::Vertical, x_desc.clone());
        plan.add_conv_forward(&conv, &w_desc)?;
        plan.add_bias(&b_desc)?;
        plan.add_activation(ActivationMode::Relu)?;
        plan.compile(&h)?;
        let y_desc = plan.output_desc().clone();
        let up = |d: &TensorDesc, seed: u64, scale: f64| -> conflux::Result<conflux::Buffer> {
            let vals: Vec<f64> = fill_normal(seed, d.element_space()).iter().map(|v| v * scale).collect();
            let mut b = h.alloc(d.num_bytes())?;
            h.write(&mut b, &encode(dt, &vals))?;
            Ok(b)
        };
        let xb = up(&x_desc, 1, 1.0)?;
        let wb = up(&w_desc, 2, 1.0 / ((c * fy * fx) as f64).sqrt())?;
        let bb = up(&b_desc, 3, 1.0)?;
        let yb = h.alloc(y_desc.num_bytes())?;
        let mut args = OpArgs::new();
        args.set(0, OpArg::Conv { w: wb.ptr(), alpha: 1.0, beta: 0.0 });
        args.set(1, OpArg::Bias { b: bb.ptr() });
        args.set(2, OpArg::Activation { alpha: 0.0, beta: 0.0, gamma: 0.0 });
        let run = || plan.execute(&h, &x_desc, xb.ptr(), &y_desc, yb.ptr(), &args);
        for _ in 0..3 {
            run()?;
        }
        h.enable_profiling(true);
        let mut times = Vec::with_capacity(reps);
        for _ in 0..reps {
            flush_l2(&h, &flush)?;
            run()?;
            times.push(h.kernel_time_ms() as f64 * 1e3);
        }
        h.enable_profiling(false);
        times.sort_by(f64::total_cmp);
        let med = times[reps / 2];
        let flops = 2.0 * (n * k * (hh + 2 * py - fy + 1) * (ww + 2 * px - fx + 1) * c * fy * fx) as f64;
        println!(
            "{line},{},{},{n},{},{med:.1},{:.1}",
            a[3],
            a[4],
            plan.solver_name().unwrap_or("?"),
            flops / med / 1e6
        );
    }
    Ok(())
}

/// Overwrite a 256 MiB buffer so each timed launch starts with a cold L2 (as triton's
/// do_bench does for the cuDNN side).
fn flush_l2(h: &Handle, buf: &conflux::Buffer) -> conflux::Result<()> {
    if let Some(be) = h.device().cuda() {
        be.dev.memset_async(buf.ptr().0, buf.len())?;
    }
    Ok(())
}
