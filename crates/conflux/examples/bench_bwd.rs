//! Benchmark program (not a test): convolution backward-data or backward-weights through
//! conflux's convolution API on the problems of a list file (C-H-W-K-fy-fx-py-px per line,
//! stride 1), default solver choice. Prints one CSV row per problem:
//! config,dtype,layout,n,solver,us_median,tflops.
//! GPU timing as bench_cba: CUDA events around each call, L2 flushed before each, median.
//!
//! cargo run --release --example bench_bwd -- LIST N DTYPE(f32|tf32|f16|bf16) LAYOUT(nchw|nhwc) [reps] [data|weights]

use conflux::conv::{api, Choice, Workspace};
use conflux::element::encode;
use conflux::fusion::FusedProblem;
use conflux::reference::fill::fill_normal;
use conflux::types::ConvAttrib;
use conflux::{ConvDesc, ConvMode, ConvProblem, DataType, Handle, Layout, TensorDesc};

fn main() -> conflux::Result<()> {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 5 {
        eprintln!("usage: bench_bwd LIST N f32|tf32|f16|bf16 nchw|nhwc [reps] [data|weights]   (tf32: f32 data, TF32 allowed)");
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
    let weights = a.get(6).is_some_and(|d| d == "weights");
    let h = Handle::new()?;
    let flush = h.alloc(256 << 20)?;
    for line in list.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let v: Vec<usize> = line.split('-').map(|t| t.parse().unwrap()).collect();
        let (c, hh, ww, k, fy, fx, py, px) = (v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]);
        let dx_desc = TensorDesc::with_layout(dt, layout, &[n, c, hh, ww])?;
        let w_desc = TensorDesc::with_layout(dt, layout, &[k, c, fy, fx])?;
        let mut conv = ConvDesc::new(ConvMode::Convolution, &[py as i64, px as i64], &[1, 1], &[1, 1])?;
        conv.set_attribute(ConvAttrib::AllowTf32, (a[3] == "tf32") as i64)?;
        let dy_lens = conv.output_desc(&dx_desc, &w_desc)?.lens().to_vec();
        let dy_desc = TensorDesc::with_layout(dt, layout, &dy_lens)?;
        let up = |d: &TensorDesc, seed: u64, scale: f64| -> conflux::Result<conflux::Buffer> {
            let vals: Vec<f64> = fill_normal(seed, d.element_space()).iter().map(|v| v * scale).collect();
            let mut b = h.alloc(d.num_bytes())?;
            h.write(&mut b, &encode(dt, &vals))?;
            Ok(b)
        };
        let dyb = up(&dy_desc, 1, 1.0)?;
        let wb = up(&w_desc, 2, 1.0 / ((k * fy * fx) as f64).sqrt())?;
        // Backward-weights reads x (in dx's buffer) and writes dw (in w's).
        let dxb = up(&dx_desc, 3, 1.0)?;
        let problem = if weights {
            FusedProblem::conv(ConvProblem::backward_weights(&conv, &dy_desc, &dx_desc, &w_desc)?)
        } else {
            FusedProblem::conv(ConvProblem::backward_data(&conv, &dy_desc, &w_desc, &dx_desc)?)
        };
        let solver = conflux::search::choose(&h, &problem, Choice::Auto, 0)?.name();
        let run = || {
            if weights {
                api::backward_weights(&h, &conv, &dy_desc, dyb.ptr(), &dx_desc, dxb.ptr(), &w_desc, wb.ptr(), 1.0, 0.0, Choice::Auto, Workspace::default())
            } else {
                api::backward_data(&h, &conv, &dy_desc, dyb.ptr(), &w_desc, wb.ptr(), &dx_desc, dxb.ptr(), 1.0, 0.0, Choice::Auto, Workspace::default())
            }
        };
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
        let flops = 2.0 * (n * k * dy_lens[2] * dy_lens[3] * c * fy * fx) as f64;
        println!("{line},{},{},{n},{solver},{med:.1},{:.1}", a[3], a[4], flops / med / 1e6);
    }
    Ok(())
}
