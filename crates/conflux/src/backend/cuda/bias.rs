//! ConvolutionForwardBias / BackwardBias on the GPU (kernels/bias.cu).

use super::params::Params;
use super::preamble::{self, Extra};
use super::{grid_for, timed, CudaBackend};
use crate::backend::cpu::pointwise::bias::broadcast_strides;
use crate::problem::shape5;
use crate::error::Result;
use crate::backend::RunContext;
use crate::tensor::TensorDesc;

const TEMPLATE: &str = include_str!("kernels/bias.cu");

fn params(t: &TensorDesc, xp: u64, xs: [usize; 5], yp: u64, ys: [usize; 5], alpha: f32, beta: f32) -> Params {
    let (nc, sp, _) = shape5(t);
    let mut p = Params::shape(nc, sp, xs, ys);
    p.x = xp;
    p.y = yp;
    p.alpha = alpha;
    p.beta = beta;
    p
}

/// y = α·(y + b) + β·y.
#[allow(clippy::too_many_arguments)]
pub fn forward(ctx: &dyn RunContext, be: &CudaBackend, y: &TensorDesc, yp: u64, b: &TensorDesc, bp: u64, alpha: f32, beta: f32) -> Result<()> {
    // Dense y with a per-channel b (the usual conv bias, any layout) walks y linearly in
    // vectors; anything else decomposes each element's coordinates.
    let bs = broadcast_strides(b);
    let dense = y.is_packed() && yp % 16 == 0 && bs.iter().enumerate().all(|(i, &s)| i == 1 || s == 0);
    let name = if dense { "bias_fwd_dense" } else { "bias_fwd" };
    let k = be.module("bias", &preamble::source(y.dtype(), &[], &Extra::default(), TEMPLATE)?)?.function(name)?;
    let p = params(y, bp, bs, yp, shape5(y).2, alpha, beta);
    let per_thread = if dense { 8 } else { 1 };
    let grid = grid_for(be, (y.element_count() as u64).div_ceil(per_thread) + 1, 256);
    // SAFETY: Params mirrors the kernel struct; pointers are the caller's validated tensors.
    timed(ctx, be, || unsafe { k.launch(&be.dev, (grid, 1, 1), (256, 1, 1), 0, &p) })
}

/// db[c] = α·Σ dy + β·db[c].
#[allow(clippy::too_many_arguments)]
pub fn backward(ctx: &dyn RunContext, be: &CudaBackend, dy: &TensorDesc, dyp: u64, db: &TensorDesc, dbp: u64, alpha: f32, beta: f32) -> Result<()> {
    let k = be.module("bias", &preamble::source(dy.dtype(), &[], &Extra::default(), TEMPLATE)?)?.function("bias_bwd")?;
    let p = params(dy, dyp, shape5(dy).2, dbp, shape5(db).2, alpha, beta);
    let grid = dy.c().clamp(1, 65535) as u32;
    // SAFETY: as above; the kernel's block size is fixed at 256 threads.
    timed(ctx, be, || unsafe { k.launch(&be.dev, (grid, 1, 1), (256, 1, 1), 0, &p) })
}
