//! Benchmark program (not a test): fused conv + bias + ReLU through conflux on the problems of
//! a list file: C-H-W-K-fy-fx-py-px per line (../shared/bench/cba_resnet.txt), or the zoo lists'
//! N-C-H-W-K-fy-fx-py-px-sy-sx-g-dy-dx (N replaced by the N argument; `#` starts a comment).
//! Prints one CSV row per problem: config,dtype,layout,n,solver,us_median,tflops.
//! GPU timing: CUDA events around each launch, L2 flushed before each, median of `reps`.
//! With BENCH_SWEEP=<solver name>, also one row per configuration of that solver's tuning space
//! (solver column `name:label`, the convolution alone) for each problem it takes; with
//! BENCH_SWEEP_ONLY=a,b only the labels containing one of those substrings.
//! Quantized inputs (i8, e4m3, e5m2): the plan outputs BENCH_QY's type (default f16; i8 / i32 /
//! f32 / bf16 / e4m3; `confluxFusionPlanSetOutputType`), the convolution's α scaling int8 sums
//! into an 8-bit output's range; a second row per problem (solver column `conv->TYPE`) times
//! the convolution alone through immediate mode into the same type.
//!
//! cargo run --release --example bench_cba -- LIST N DTYPE(f32|tf32|f16|bf16|i8|e4m3|e5m2) LAYOUT(nchw|nhwc) [reps]

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
        "i8" => DataType::Int8,
        "e4m3" => DataType::Float8,
        "e5m2" => DataType::BFloat8,
        o => panic!("dtype {o}"),
    };
    let quantized = matches!(dt, DataType::Int8 | DataType::Float8 | DataType::BFloat8);
    let qy = match std::env::var("BENCH_QY").as_deref().unwrap_or("f16") {
        "i8" => DataType::Int8,
        "i32" => DataType::Int32,
        "f32" => DataType::Float,
        "bf16" => DataType::BFloat16,
        "e4m3" => DataType::Float8,
        _ => DataType::Half,
    };
    let layout = if a[4] == "nhwc" { Layout::NHWC } else { Layout::NCHW };
    let reps: usize = a.get(5).map(|s| s.parse().unwrap()).unwrap_or(50);
    let h = Handle::new()?;
    let flush = h.alloc(256 << 20)?;
    let sweep = std::env::var("BENCH_SWEEP").ok();
    let only: Vec<String> = std::env::var("BENCH_SWEEP_ONLY").map(|v| v.split(',').map(String::from).collect()).unwrap_or_default();
    for line in list.lines().map(|l| l.split('#').next().unwrap_or("").trim()).filter(|l| !l.is_empty()) {
        let v: Vec<usize> = line.split('-').map(|t| t.parse().unwrap()).collect();
        // Zoo lines lead with N and add stride, groups and dilation.
        let v = if v.len() == 14 { v[1..].to_vec() } else { [&v[..8], &[1, 1, 1, 1, 1]].concat() };
        let (c, hh, ww, k, fy, fx, py, px) = (v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]);
        let (sy, sx, g, dy, dx) = (v[8], v[9], v[10], v[11], v[12]);
        let x_desc = TensorDesc::with_layout(dt, layout, &[n, c, hh, ww])?;
        let w_desc = TensorDesc::with_layout(dt, layout, &[k, c / g, fy, fx])?;
        let b_desc = TensorDesc::new(if quantized { DataType::Float } else { dt }, &[1, k, 1, 1])?;
        let i = |v: usize| v as i64;
        let mut conv = ConvDesc::new(ConvMode::Convolution, &[i(py), i(px)], &[i(sy), i(sx)], &[i(dy), i(dx)])?;
        conv.set_groups(i(g))?;
        conv.set_attribute(ConvAttrib::AllowTf32, (a[3] == "tf32") as i64)?;
        let mut plan = FusionPlan::new(FusionDirection::Vertical, x_desc.clone());
        plan.add_conv_forward(&conv, &w_desc)?;
        plan.add_bias(&b_desc)?;
        plan.add_activation(ActivationMode::Relu)?;
        if quantized {
            plan.set_output_type(qy)?;
        }
        plan.compile(&h)?;
        let y_desc = plan.output_desc().clone();
        let up = |d: &TensorDesc, seed: u64, scale: f64| -> conflux::Result<conflux::Buffer> {
            let vals: Vec<f64> = fill_normal(seed, d.element_space()).iter().map(|v| v * scale).collect();
            let mut b = h.alloc(d.num_bytes())?;
            h.write(&mut b, &encode(d.dtype(), &vals))?;
            Ok(b)
        };
        // int8 data spans its range; float data has unit variance per output.
        let (xs, ws) = if dt == DataType::Int8 { (40.0, 40.0) } else { (1.0, 1.0 / ((c * fy * fx) as f64).sqrt()) };
        let xb = up(&x_desc, 1, xs)?;
        let wb = up(&w_desc, 2, ws)?;
        let bb = up(&b_desc, 3, 1.0)?;
        let yb = h.alloc(y_desc.num_bytes())?;
        // α scales int8 sums into an int8 / fp8 output's range.
        let alpha = if dt == DataType::Int8 && qy != DataType::Int32 { 1.0 / 4096.0 } else { 1.0 };
        let mut args = OpArgs::new();
        args.set(0, OpArg::Conv { w: wb.ptr(), alpha: if quantized { alpha } else { 1.0 }, beta: 0.0 });
        args.set(1, OpArg::Bias { b: bb.ptr() });
        args.set(2, OpArg::Activation { alpha: 0.0, beta: 0.0, gamma: 0.0 });
        let run = || plan.execute(&h, &x_desc, xb.ptr(), &y_desc, yb.ptr(), &args);
        for _ in 0..3 {
            run()?;
        }
        let med = median_us(&h, &flush, reps, run)?;
        let flops = 2.0 * (n * k * y_desc.lens()[2] * y_desc.lens()[3] * (c / g) * fy * fx) as f64;
        if let Some(name) = &sweep {
            let problem = conflux::problem::FusedProblem::conv(conflux::problem::ConvProblem::forward(&conv, &x_desc, &w_desc, &y_desc)?);
            let solver = conflux::solver::find_by_name(name).unwrap_or_else(|| panic!("no solver {name}"));
            if solver.check(&problem, h.device().info()).is_ok() {
                for label in solver.tuning_space(&problem).into_iter().filter(|l| only.is_empty() || only.iter().any(|o| l.contains(o.as_str()))) {
                    let inv = solver.build_config(&problem, h.device(), &label)?;
                    let args = conflux::solver::RunArgs { x: xb.ptr(), w: wb.ptr(), y: yb.ptr(), alpha: 1.0, beta: 0.0, workspace: conflux::DevPtr::NULL, workspace_bytes: 0, ops: &[] };
                    let med = median_us(&h, &flush, reps, || conflux::solver::invoke(&*inv, &h, &args))?;
                    println!("{line},{},{},{n},{name}:{label},{med:.1},{:.1}", a[3], a[4], flops / med / 1e6);
                }
            }
        }
        println!(
            "{line},{},{},{n},{},{med:.1},{:.1}",
            a[3],
            a[4],
            plan.solver_name().unwrap_or("?"),
            flops / med / 1e6
        );
        if quantized {
            let qy_desc = TensorDesc::with_layout(qy, layout, y_desc.lens())?;
            let qyb = h.alloc(qy_desc.num_bytes())?;
            let conv_run = || {
                let ws = conflux::conv::api::Workspace::default();
                conflux::conv::api::forward(&h, &conv, &x_desc, xb.ptr(), &w_desc, wb.ptr(), &qy_desc, qyb.ptr(), alpha, 0.0, conflux::conv::api::Choice::Auto, ws)
            };
            for _ in 0..3 {
                conv_run()?;
            }
            let med = median_us(&h, &flush, reps, conv_run)?;
            println!("{line},{},{},{n},conv->{qy:?},{med:.1},{:.1}", a[3], a[4], flops / med / 1e6);
        }
    }
    Ok(())
}

/// Median kernel time (µs) of `reps` runs of `run`, each after an L2 flush.
fn median_us(h: &Handle, flush: &conflux::Buffer, reps: usize, run: impl Fn() -> conflux::Result<()>) -> conflux::Result<f64> {
    run()?;
    h.enable_profiling(true);
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        flush_l2(h, flush)?;
        run()?;
        times.push(h.kernel_time_ms() as f64 * 1e3);
    }
    h.enable_profiling(false);
    times.sort_by(f64::total_cmp);
    Ok(times[reps / 2])
}

/// Overwrite a 256 MiB buffer so each timed launch starts with a cold L2 (as triton's
/// do_bench does for the cuDNN side).
fn flush_l2(h: &Handle, buf: &conflux::Buffer) -> conflux::Result<()> {
    if let Some(be) = h.device().cuda() {
        be.dev.memset_async(buf.ptr().0, buf.len())?;
    }
    Ok(())
}
