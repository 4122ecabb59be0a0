//! Tensor cores for ungrouped 16-bit convolutions whose input channels do not fill whole
//! 16-byte chunks: the 3-channel 7×7 and 4×4-stride-4 stems, and wide layers of odd widths
//! (R(2+1)D's 230, 460 and 921 channels). The tensor-core kernels read channels in whole
//! 16-byte chunks, so this solver copies x and w into packed channels-last scratch with the
//! channels padded by zeros to the next multiple of 8 (`backend/cuda/pad.rs`) and runs the
//! first channels-last tensor-core solver that takes the padded problem; y and the epilogue
//! are the caller's. The zero channels add products (a stem's reduction is short, its output
//! long; a wide layer's padding is a few percent) and the copies one pass over x: the padded
//! GEMM on tensor cores beats the CUDA-core paths that take the unpadded problem.
//!
//! Scratch is stream-ordered memory from the device's pool, taken per execution.

use super::adapter;
use super::common::{cuda_of, forward_geometry};
use crate::backend::cuda::driver::Scratch;
use crate::backend::cuda::pad::{pad_channels, padded_bytes};
use crate::backend::cuda::{timed, CudaBackend};
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::error::{Error, Result};
use crate::memory::DevPtr;
use crate::problem::{ConvProblem, FusedKind, FusedProblem};
use crate::solver::{BuildContext, Invoker, RunArgs, Solver};
use crate::tensor::TensorDesc;
use crate::types::{ConvAlgorithm, DataType, Layout};
use std::sync::Arc;

/// The copies pad channels to a multiple of one 16-byte chunk of 16-bit elements.
const CHUNK: usize = 8;

pub struct CudaConvPadChannels;

/// The padded problem and the solver that runs it.
struct Rewrite {
    inner: FusedProblem,
    solver: &'static dyn Solver,
    /// Channels of the padded copies.
    padded: usize,
}

fn padded(t: &TensorDesc, channels: usize) -> std::result::Result<TensorDesc, String> {
    let layout = if t.rank() == 4 { Layout::NHWC } else { Layout::NDHWC };
    let mut lens = t.lens().to_vec();
    lens[1] = channels;
    TensorDesc::with_layout(t.dtype(), layout, &lens).map_err(|e| e.reason)
}

fn rewrite(problem: &FusedProblem, device: &DeviceInfo) -> std::result::Result<Rewrite, String> {
    let g = forward_geometry(problem)?;
    let FusedKind::Conv { conv, epilogue } = &problem.kind else { return Err("not a convolution problem".into()) };
    if !matches!(conv.dtype(), DataType::Half | DataType::BFloat16) {
        return Err(format!("f16 or bf16 only ({:?} given)", conv.dtype()));
    }
    if g.groups != 1 {
        return Err(format!("ungrouped only ({} groups)", g.groups));
    }
    if g.c.is_multiple_of(CHUNK) {
        return Err(format!("{} input channels: the tensor-core kernels take them unpadded when they fill 16-byte chunks", g.c));
    }
    if g.output_size() == 1 && g.filter_size() == 1 {
        // Squeeze-excitation layers (EfficientNet's 10 / 20 / 28 channels): a GEMM of N rows,
        // which one CUDA-core launch finishes before the two copies would have.
        return Err("a 1×1 convolution over one pixel per image (squeeze-excitation): the copies cost more than the CUDA-core kernels' whole run".into());
    }
    let channels = g.c.next_multiple_of(CHUNK);
    let inner_conv = ConvProblem { x: padded(&conv.x, channels)?, w: padded(&conv.w, channels)?, ..conv.clone() };
    let inner = FusedProblem { kind: FusedKind::Conv { conv: inner_conv, epilogue: epilogue.clone() } };
    let solver = adapter::first_taker(adapter::CHANNELS_LAST_TC, &inner, device).map_err(|why| format!("no tensor-core kernel takes the padded problem ({why})"))?;
    Ok(Rewrite { inner, solver, padded: channels })
}

impl Solver for CudaConvPadChannels {
    fn name(&self) -> &'static str { "CudaConvTensorCorePadChannels" }
    fn solution_id(&self) -> u64 { 113 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::ImplicitGemm }
    fn device(&self) -> DeviceKind { DeviceKind::Cuda }

    fn check(&self, problem: &FusedProblem, device: &DeviceInfo) -> std::result::Result<(), String> {
        rewrite(problem, device).map(|_| ())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // The padded tensor-core GEMM (about 150 TFLOP/s with the zero channels) plus the copies.
        problem.conv_problem().map_or(f64::MAX, |c| {
            let channels = c.x.c().next_multiple_of(CHUNK);
            let padded_macs = c.macs() * channels as f64 / c.x.c() as f64;
            2.0 * padded_macs / 150e12 * 1e3 + 3.0 * (c.x.num_bytes() * channels / c.x.c()) as f64 / 3e12 * 1e3
        })
    }

    fn build(&self, problem: &FusedProblem, ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let r = rewrite(problem, ctx.device().info()).map_err(|why| Error::not_implemented(format!("{}: {why}", self.name())))?;
        let conv = problem.conv_problem().ok_or_else(|| Error::internal("pad-channels: not a convolution"))?;
        let inner = r.solver.build(&r.inner, ctx)?;
        Ok(Arc::new(PadInvoker { be: cuda_of(ctx.device())?.clone(), inner, x: conv.x.clone(), w: conv.w.clone(), padded: r.padded }))
    }
}

struct PadInvoker {
    be: Arc<CudaBackend>,
    inner: Arc<dyn Invoker>,
    x: TensorDesc,
    w: TensorDesc,
    padded: usize,
}

impl Invoker for PadInvoker {
    fn run(&self, ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let xb = padded_bytes(&self.x, self.padded).next_multiple_of(256);
        let wb = padded_bytes(&self.w, self.padded);
        // The copies and the convolution are one timed unit when profiling is on.
        timed(ctx, &self.be, || {
            let scratch = Scratch::new(ctx, &self.be.dev, xb + wb)?;
            let (xs, ws) = (scratch.ptr(), scratch.ptr() + xb as u64);
            pad_channels(&self.be, &self.x, self.padded, a.x.0, xs)?;
            pad_channels(&self.be, &self.w, self.padded, a.w.0, ws)?;
            self.inner.run(ctx, &RunArgs { x: DevPtr(xs), w: DevPtr(ws), ..*a })
        })
    }
}
