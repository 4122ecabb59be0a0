//! Benchmark program (not a test): the host time of queuing work, without waiting for it —
//! what bounds a layer whose kernels finish faster than the host issues them. For each
//! backward-data layer of the list (N-C-H-W-K-fy-fx-py-px-sy-sx, f16 NHWC): µs per call
//! through the convolution API (`conv::api::backward_data`, solver chosen as immediate mode
//! chooses) and through the compiled invoker alone; then the pieces of one launch: a tensor-map
//! encode and a fork/join of empty pieces. Calls are queued in bursts of `burst` (the GPU
//! drains them between bursts, so the launch queue never blocks the host).
//!
//! cargo run --release --example host_cost -- LAYER[,LAYER...] [burst]

use conflux::conv::{api, Choice, Workspace};
use conflux::fusion::FusedProblem;
use conflux::{ConvDesc, ConvMode, ConvProblem, DataType, Handle, Layout, TensorDesc};
use std::time::Instant;

fn per_call(h: &Handle, burst: usize, mut f: impl FnMut()) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..5 {
        h.synchronize().unwrap();
        let t = Instant::now();
        for _ in 0..burst {
            f();
        }
        best = best.min(t.elapsed().as_secs_f64() * 1e6 / burst as f64);
    }
    h.synchronize().unwrap();
    best
}

fn main() -> conflux::Result<()> {
    let a: Vec<String> = std::env::args().collect();
    let burst: usize = a.get(2).map(|s| s.parse().unwrap()).unwrap_or(50);
    let h = Handle::new()?;
    let dt = DataType::Half;
    for layer in a[1].split(',') {
        let v: Vec<usize> = layer.split('-').map(|t| t.parse().unwrap()).collect();
        let (n, c, hh, ww, k, fy, fx, py, px, sy, sx) = (v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10]);
        let dx_desc = TensorDesc::with_layout(dt, Layout::NHWC, &[n, c, hh, ww])?;
        let w_desc = TensorDesc::with_layout(dt, Layout::NHWC, &[k, c, fy, fx])?;
        let conv = ConvDesc::new(ConvMode::Convolution, &[py as i64, px as i64], &[sy as i64, sx as i64], &[1, 1])?;
        let dy_desc = TensorDesc::with_layout(dt, Layout::NHWC, conv.output_desc(&dx_desc, &w_desc)?.lens())?;
        let (dy, w, dx) = (h.alloc(dy_desc.num_bytes())?, h.alloc(w_desc.num_bytes())?, h.alloc(dx_desc.num_bytes())?);
        let problem = FusedProblem::conv(ConvProblem::backward_data(&conv, &dy_desc, &w_desc, &dx_desc)?);
        let solver = conflux::search::choose(&h, &problem, Choice::Auto, 0)?;
        let api_us = per_call(&h, burst, || {
            api::backward_data(&h, &conv, &dy_desc, dy.ptr(), &w_desc, w.ptr(), &dx_desc, dx.ptr(), 1.0, 0.0, Choice::Auto, Workspace::default()).unwrap()
        });
        let inv = h.invoker(&problem, solver)?;
        let args = conflux::solver::RunArgs { x: dx.ptr(), w: w.ptr(), y: dy.ptr(), alpha: 1.0, beta: 0.0, workspace: conflux::DevPtr::NULL, workspace_bytes: 0, ops: &[] };
        let inv_us = per_call(&h, burst, || conflux::solver::invoke(&*inv, &h, &args).unwrap());
        println!("{layer} {}: api {api_us:.1} us/call, invoker {inv_us:.1} us/call", solver.name());
    }
    let be = h.device().cuda().expect("a CUDA device");
    let buf = h.alloc(1 << 20)?;
    let encode_us = per_call(&h, 1000, || {
        conflux::backend::cuda::tensor_map::tiled_2d([256, 1024], 512, [64, 128], dt, buf.ptr().0).unwrap();
    });
    let fork_us = per_call(&h, burst, || {
        let pieces: Vec<Box<dyn FnOnce() -> conflux::Result<()>>> = (0..4).map(|_| Box::new(|| Ok(())) as Box<dyn FnOnce() -> conflux::Result<()>>).collect();
        conflux::backend::cuda::fork::fork_join(&be.dev, pieces).unwrap()
    });
    let memset_us = per_call(&h, burst, || be.dev.memset_async(buf.ptr().0, 1 << 20).unwrap());
    println!("tensor-map encode {encode_us:.2} us, fork/join of 4 empty pieces {fork_us:.1} us, memset {memset_us:.1} us");
    Ok(())
}
