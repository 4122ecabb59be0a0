//! Backward-weights on tensor cores for channels-last problems whose input channels per group
//! are not a whole number of the TMA kernel's 128-byte channel boxes and that the TMA kernel
//! does not take directly (f32's 32-channel boxes; groups of 24 or 48 channels, which neither
//! fill boxes nor merge into them), and ungrouped layers whose output channels do not fill
//! 16-byte chunks (R(2+1)D's 230, 460, 921): x is copied with each group's channels padded by
//! zeros to the next multiple (`backend/cuda/pad.rs`), dy's channels too where they are odd, the
//! first backward-weights tensor-core kernel reduces into a padded dw in scratch, and the real
//! channels go to the caller's dw as α·dw' + β·dw (`blend_view`). The zero channels add
//! products, but the long pixel reduction runs on tensor cores instead of CUDA cores.

use super::adapter;
use super::common::cuda_of;
use super::tensor_core::{tensor_core_precision, TcPrecision};
use crate::backend::cuda::driver::Scratch;
use crate::backend::cuda::pad::{pad_channels, pad_group_channels, padded_bytes};
use crate::backend::cuda::scale::blend_view;
use crate::backend::cuda::{timed, CudaBackend};
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::error::{Error, Result};
use crate::memory::DevPtr;
use crate::problem::{ConvProblem, FusedKind, FusedProblem};
use crate::solver::{BuildContext, Invoker, RunArgs, Solver};
use crate::tensor::TensorDesc;
use crate::types::{ConvAlgorithm, Direction, Layout};
use std::sync::Arc;

/// The padded problem and the solver that runs it.
struct Rewrite {
    inner: FusedProblem,
    solver: &'static dyn Solver,
    /// Channels per group after padding.
    padded_cg: usize,
    /// dy's channels after padding (ungrouped layers of odd widths), when they are.
    padded_k: Option<usize>,
}

fn rewrite(problem: &FusedProblem, device: &DeviceInfo) -> std::result::Result<Rewrite, String> {
    let FusedKind::Conv { conv, epilogue } = &problem.kind else { return Err("not a convolution problem".into()) };
    if conv.direction != Direction::BackwardWeights {
        return Err(format!("backward-weights only (this is {:?})", conv.direction));
    }
    let prec = tensor_core_precision(conv)?;
    let boxed = if prec == TcPrecision::Bits16 { 64 } else { 32 };
    let groups = conv.groups();
    let cg = conv.x.c() / groups;
    // dy's channels go in whole 16-byte chunks; an ungrouped layer of another width has them
    // padded too (zero rows of the padded dw, never stored).
    let (k, chunk) = (conv.k(), 16 / conv.dtype().size());
    let padded_k = (groups == 1 && !k.is_multiple_of(chunk)).then(|| k.next_multiple_of(chunk));
    if cg % boxed == 0 && padded_k.is_none() {
        return Err(format!("{cg} channels per group fill whole boxes: the tensor-core kernel takes them unpadded"));
    }
    if super::wgrad_tma::CudaConvWgradTma.check(problem, device).is_ok() {
        return Err("the TMA kernel takes these channels without a padded copy (its boxes' overhang reads zeros, or small groups merge)".into());
    }
    if cg < 8 {
        return Err(format!("{cg} channels per group: padded to {boxed}, zeros would be most of the work"));
    }
    let padded_cg = cg.next_multiple_of(boxed);
    let with = |t: &TensorDesc, n: Option<usize>, c: usize| -> std::result::Result<TensorDesc, String> {
        let mut lens = t.lens().to_vec();
        lens[0] = n.unwrap_or(lens[0]);
        lens[1] = c;
        let layout = if lens.len() == 4 { Layout::NHWC } else { Layout::NDHWC };
        TensorDesc::with_layout(t.dtype(), layout, &lens).map_err(|e| e.reason)
    };
    let dy = match padded_k {
        Some(pk) => with(&conv.y, None, pk)?,
        None => conv.y.clone(),
    };
    let inner_conv = ConvProblem { x: with(&conv.x, None, groups * padded_cg)?, w: with(&conv.w, padded_k, padded_cg)?, y: dy, ..conv.clone() };
    let inner = FusedProblem { kind: FusedKind::Conv { conv: inner_conv, epilogue: epilogue.clone() } };
    let solver = adapter::first_taker(adapter::WEIGHTS_TC, &inner, device).map_err(|why| format!("no tensor-core kernel takes the padded problem ({why})"))?;
    Ok(Rewrite { inner, solver, padded_cg, padded_k })
}

pub struct CudaConvWgradPadChannels;

impl Solver for CudaConvWgradPadChannels {
    fn name(&self) -> &'static str { "CudaConvBwdWeightsPadChannels" }
    fn solution_id(&self) -> u64 { 117 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::ImplicitGemm }
    fn device(&self) -> DeviceKind { DeviceKind::Cuda }

    fn check(&self, problem: &FusedProblem, device: &DeviceInfo) -> std::result::Result<(), String> {
        rewrite(problem, device).map(|_| ())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // The padded tensor-core reduction (about 300 TFLOP/s) plus the padded copy of x.
        problem.conv_problem().map_or(f64::MAX, |c| 2.0 * c.macs() / 300e12 * 1e3 + 2.5 * c.x.num_bytes() as f64 / 3e12 * 1e3 + 0.01)
    }

    fn build(&self, problem: &FusedProblem, ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let r = rewrite(problem, ctx.device().info()).map_err(|why| Error::not_implemented(format!("{}: {why}", self.name())))?;
        let conv = problem.conv_problem().ok_or_else(|| Error::internal("wgrad-pad-channels: not a convolution"))?;
        let inner = r.solver.build(&r.inner, ctx)?;
        let padded_w = r.inner.conv_problem().map(|c| c.w.clone()).ok_or_else(|| Error::internal("wgrad-pad-channels: inner problem"))?;
        let padded_dy = r.padded_k.map(|pk| (conv.y.clone(), pk));
        Ok(Arc::new(WgradPadInvoker { be: cuda_of(ctx.device())?.clone(), inner, x: conv.x.clone(), w: conv.w.clone(), padded_w, groups: conv.groups(), padded_cg: r.padded_cg, padded_dy }))
    }
}

struct WgradPadInvoker {
    be: Arc<CudaBackend>,
    inner: Arc<dyn Invoker>,
    x: TensorDesc,
    w: TensorDesc,
    /// The padded dw in scratch (KRSC, padded channels).
    padded_w: TensorDesc,
    groups: usize,
    padded_cg: usize,
    /// dy and its padded channel count, when its channels are padded too.
    padded_dy: Option<(TensorDesc, usize)>,
}

impl Invoker for WgradPadInvoker {
    fn run(&self, ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        // Backward-weights arguments: x read, y = dy read, w = dw written.
        let xb = padded_bytes(&self.x, self.groups * self.padded_cg).next_multiple_of(256);
        let wb = self.padded_w.num_bytes().next_multiple_of(256);
        let dyb = self.padded_dy.as_ref().map_or(0, |(dy, pk)| padded_bytes(dy, *pk));
        timed(ctx, &self.be, || {
            let scratch = Scratch::new(ctx, &self.be.dev, xb + wb + dyb)?;
            let (xs, ws) = (scratch.ptr(), scratch.ptr() + xb as u64);
            pad_group_channels(&self.be, &self.x, self.groups, self.padded_cg, a.x.0, xs)?;
            let dy = match &self.padded_dy {
                Some((dy, pk)) => {
                    let dys = ws + wb as u64;
                    pad_channels(&self.be, dy, *pk, a.y.0, dys)?;
                    DevPtr(dys)
                }
                None => a.y,
            };
            self.inner.run(ctx, &RunArgs { x: DevPtr(xs), w: DevPtr(ws), y: dy, alpha: 1.0, beta: 0.0, ..*a })?;
            // The real channels of the padded dw, seen with the caller's dw lengths.
            blend_view(&self.be, &self.w, a.w.0, ws, self.padded_w.strides(), a.alpha as f32, a.beta as f32)
        })
    }
}
