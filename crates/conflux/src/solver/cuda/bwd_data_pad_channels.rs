//! Backward-data on tensor cores for ungrouped layers whose output channels (dy's channels, the
//! reduction of dx) do not fill 16-byte chunks: R(2+1)D's 230-, 460- and 921-channel layers.
//! The tensor-core paths read dy's channels in whole chunks, so this solver copies dy into
//! packed channels-last scratch with the channels padded by zeros to the next multiple of a
//! chunk (`backend/cuda/pad.rs`) and w with as many zero filters appended, then runs the first
//! tensor-core solver of the list (those ahead of it) that takes the padded problem: the zero channels add nothing to dx. dx,
//! α and β are the caller's.
//!
//! Scratch is stream-ordered memory from the device's pool, taken per execution.

use super::common::cuda_of;
use crate::backend::cuda::driver::Scratch;
use crate::backend::cuda::pad::{pad_channels, padded_bytes};
use crate::backend::cuda::{timed, CudaBackend};
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::error::{Error, Result};
use crate::memory::DevPtr;
use crate::problem::{ConvProblem, FusedProblem};
use crate::solver::registry::{first_without_workspace, list};
use crate::solver::{BuildContext, Invoker, RunArgs, Solver};
use crate::tensor::TensorDesc;
use crate::types::{ConvAlgorithm, DataType, Direction, Layout};
use std::sync::Arc;

pub struct CudaConvBwdDataPadChannels;

const ID: u64 = 128;

/// The padded problem and the solver that runs it.
struct Rewrite {
    inner: FusedProblem,
    solver: &'static dyn Solver,
    /// dy's channels after padding.
    padded: usize,
}

fn rewrite(problem: &FusedProblem, device: &DeviceInfo) -> std::result::Result<Rewrite, String> {
    let Some(conv) = problem.conv_problem() else { return Err("not a convolution problem".into()) };
    if conv.direction != Direction::BackwardData {
        return Err(format!("backward-data only (this is {:?})", conv.direction));
    }
    if !problem.epilogue().is_empty() {
        return Err("backward-data with an epilogue".into());
    }
    if !matches!(conv.dtype(), DataType::Half | DataType::BFloat16) {
        return Err(format!("f16 or bf16 only ({:?} given)", conv.dtype()));
    }
    if conv.groups() != 1 {
        return Err(format!("ungrouped only ({} groups)", conv.groups()));
    }
    let chunk = 16 / conv.dtype().size();
    let k = conv.k();
    if k.is_multiple_of(chunk) || k < chunk {
        return Err(format!("{k} output channels: padded only when at least {chunk} and not a multiple of {chunk}"));
    }
    // The padded filter is w's K rows followed by zero rows: w must be packed, K outermost.
    let (wl, ws) = (conv.w.lens(), conv.w.strides());
    let row = conv.w.element_count() / k;
    if !conv.w.is_packed() || ws[0] != row {
        return Err("w must be packed with its output channels outermost".into());
    }
    let padded = k.next_multiple_of(chunk);
    let mut w_lens = wl.to_vec();
    w_lens[0] = padded;
    let w = TensorDesc::with_strides(conv.dtype(), &w_lens, ws).map_err(|e| e.reason)?;
    let layout = if conv.spatial_dims() == 2 { Layout::NHWC } else { Layout::NDHWC };
    let mut dy_lens = conv.y.lens().to_vec();
    dy_lens[1] = padded;
    let dy = TensorDesc::with_layout(conv.dtype(), layout, &dy_lens).map_err(|e| e.reason)?;
    let inner = FusedProblem::conv(ConvProblem { y: dy, w, ..conv.clone() });
    // Only the solvers ahead of this one (the tensor-core paths): behind it are the CUDA-core
    // kernels, which take the unpadded problem as fast.
    let ahead: Vec<u64> = list(DeviceKind::Cuda).iter().map(|e| e.solver.solution_id()).take_while(|&id| id != ID).collect();
    let solver = first_without_workspace(&inner, device, |e| ahead.contains(&e.solver.solution_id())).map_err(|why| format!("no tensor-core solver takes the padded problem ({why})"))?;
    Ok(Rewrite { inner, solver, padded })
}

impl Solver for CudaConvBwdDataPadChannels {
    fn name(&self) -> &'static str { "CudaConvBwdDataPadChannels" }
    fn solution_id(&self) -> u64 { ID }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::ImplicitGemm }
    fn device(&self) -> DeviceKind { DeviceKind::Cuda }

    fn check(&self, problem: &FusedProblem, device: &DeviceInfo) -> std::result::Result<(), String> {
        rewrite(problem, device).map(|_| ())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // The tensor-core GEMM (about 300 TFLOP/s) plus the padded copies of dy and w.
        problem.conv_problem().map_or(f64::MAX, |c| 2.0 * c.macs() / 300e12 * 1e3 + 2.5 * (c.y.num_bytes() + c.w.num_bytes()) as f64 / 3e12 * 1e3 + 0.01)
    }

    fn build(&self, problem: &FusedProblem, ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let r = rewrite(problem, ctx.device().info()).map_err(|why| Error::not_implemented(format!("{}: {why}", self.name())))?;
        let conv = problem.conv_problem().ok_or_else(|| Error::internal("bwd-data-pad-channels: not a convolution"))?;
        let inner = r.solver.build(&r.inner, ctx)?;
        Ok(Arc::new(PadInvoker { be: cuda_of(ctx.device())?.clone(), inner, dy: conv.y.clone(), w: conv.w.clone(), padded: r.padded }))
    }
}

struct PadInvoker {
    be: Arc<CudaBackend>,
    inner: Arc<dyn Invoker>,
    dy: TensorDesc,
    w: TensorDesc,
    padded: usize,
}

impl Invoker for PadInvoker {
    fn run(&self, ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        // Backward-data arguments: y = dy read, w read, x = dx written.
        let dyb = padded_bytes(&self.dy, self.padded).next_multiple_of(256);
        let (wb, pwb) = (self.w.num_bytes(), self.w.num_bytes() / self.w.n() * self.padded);
        timed(ctx, &self.be, || {
            let scratch = Scratch::new(ctx, &self.be.dev, dyb + pwb)?;
            let (dys, ws) = (scratch.ptr(), scratch.ptr() + dyb as u64);
            pad_channels(&self.be, &self.dy, self.padded, a.y.0, dys)?;
            self.be.dev.copy_async(ws, a.w.0, wb)?;
            self.be.dev.memset_async(ws + wb as u64, pwb - wb)?;
            self.inner.run(ctx, &RunArgs { y: DevPtr(dys), w: DevPtr(ws), ..*a })
        })
    }
}
