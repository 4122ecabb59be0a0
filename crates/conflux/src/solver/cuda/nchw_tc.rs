//! Tensor cores for channels-first convolutions (NCHW x, KCRS w: MIOpen's and PyTorch's
//! default layouts). The tensor-core kernels read channels-last operands, so this solver
//! copies the channels-first operands a direction reads (forward: x and w; backward-weights:
//! x and dy) into packed channels-last scratch (one bandwidth-bound pass each,
//! `backend/cuda/layout.rs`) and runs the first tensor-core solver that takes the rewritten
//! problem. The output keeps the caller's layout: the forward kernels' epilogue writes any y
//! strides (a channel-major staging path writes whole pixel runs of NCHW y), the
//! backward-weights reduction any dw strides.
//!
//! f32 problems go the same way to the TF32 kernel (three split products each when the
//! descriptor asks for strict f32); its backward-weights kernel transposes dy itself from any
//! layout, so only x is copied there.
//!
//! Scratch is stream-ordered memory from the device's pool, taken per execution, so one
//! compiled invoker may run concurrently on several streams; no workspace is reported.

use super::common::cuda_of;
use super::tensor_core::tensor_core_precision;
use crate::solver::{Invoker, RunArgs, Solver};
use super::adapter;
use crate::solver::registry::Role;
use super::igemm_tma::{CudaConvIgemmTma, FilterSource};
use super::wgrad_tma::CudaConvWgradTma;
use crate::backend::cuda::driver::Scratch;
use crate::backend::cuda::layout::{to_channels_last, ChannelsFirst};
use crate::backend::cuda::{timed, CudaBackend};
use crate::problem::ConvProblem;
use crate::error::{Error, Result};
use crate::problem::{FusedKind, FusedProblem};
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::solver::BuildContext;
use crate::memory::DevPtr;
use crate::tensor::TensorDesc;
use crate::types::{ConvAlgorithm, Direction, Layout};
use std::sync::Arc;


/// Channels-last with 16-byte aligned pixel rows: what the tensor-core loaders read as is.
fn channels_last(t: &TensorDesc) -> bool {
    let s = t.strides();
    let r = s.len();
    s[1] == 1 && (0..r).filter(|&i| i != 1).all(|i| s[i].is_multiple_of(8))
}

/// How a channels-first problem maps onto a tensor-core kernel.
struct Rewrite {
    /// The same convolution over channels-last x and w.
    inner: FusedProblem,
    solver: &'static dyn Solver,
    /// The views to copy (None: the caller's tensor is already channels-last): x, and the
    /// direction's other input (w forward, dy backward-weights).
    x: Option<ChannelsFirst>,
    other: Option<ChannelsFirst>,
    direction: Direction,
}

/// The channels-first operand `t` as a view the layout kernel copies, with its packed
/// channels-last descriptor; no view when `t` is already channels-last, or when its memory
/// already is the packed channels-last tensor (a 1×1 filter in KCRS order is also KRSC).
fn operand(t: &TensorDesc, name: &str) -> std::result::Result<(Option<ChannelsFirst>, TensorDesc), String> {
    if channels_last(t) {
        return Ok((None, t.clone()));
    }
    let layout = if t.rank() == 4 { Layout::NHWC } else { Layout::NDHWC };
    let desc = TensorDesc::with_layout(t.dtype(), layout, t.lens()).map_err(|e| e.reason)?;
    // Strides of unit dimensions never move an offset.
    let same_memory = t.lens().iter().zip(t.strides().iter().zip(desc.strides())).all(|(&l, (a, b))| l == 1 || a == b);
    if same_memory {
        return Ok((None, desc));
    }
    let v = ChannelsFirst::of(t).ok_or_else(|| format!("{name}'s spatial dimensions do not collapse into rows"))?;
    if let Some(why) = v.refusal() {
        return Err(format!("{name}: {why}"));
    }
    Ok((Some(v), desc))
}

fn rewrite(problem: &FusedProblem, device: &DeviceInfo) -> std::result::Result<Rewrite, String> {
    let FusedKind::Conv { conv, epilogue } = &problem.kind else { return Err("not a convolution problem".into()) };
    tensor_core_precision(conv)?;
    let (x, xd) = operand(&conv.x, "x")?;
    let (inner_conv, other, inner_list): (ConvProblem, _, &[Role]) = match conv.direction {
        Direction::Forward => {
            let (w, wd) = operand(&conv.w, "w")?;
            (ConvProblem { x: xd, w: wd, ..conv.clone() }, w, adapter::CHANNELS_LAST_TC)
        }
        Direction::BackwardWeights => {
            // The f32 kernel reads dy in any layout when it transposes it: copy x only then.
            let x_only = ConvProblem { x: xd.clone(), ..conv.clone() };
            let x_only_fused = FusedProblem { kind: FusedKind::Conv { conv: x_only.clone(), epilogue: epilogue.clone() } };
            if x.is_some() && adapter::first_taker(adapter::WEIGHTS_TC, &x_only_fused, device).is_ok() {
                (x_only, None, adapter::WEIGHTS_TC)
            } else {
                let (dy, yd) = operand(&conv.y, "dy")?;
                (ConvProblem { x: xd, y: yd, ..conv.clone() }, dy, adapter::WEIGHTS_TC)
            }
        }
        d => return Err(format!("forward and backward-weights only (this is {d:?})")),
    };
    if inner_conv.x == conv.x && inner_conv.w == conv.w && inner_conv.y == conv.y {
        return Err("the operands are already channels-last: the tensor-core solvers take them as they are".into());
    }
    let inner = FusedProblem { kind: FusedKind::Conv { conv: inner_conv, epilogue: epilogue.clone() } };
    let solver = adapter::first_taker(inner_list, &inner, device).map_err(|why| format!("no tensor-core kernel takes the channels-last problem ({why})"))?;
    Ok(Rewrite { inner, solver, x, other, direction: conv.direction })
}

pub struct CudaConvTcNchw;

impl Solver for CudaConvTcNchw {
    fn name(&self) -> &'static str { "CudaConvTensorCoreNchw" }
    fn solution_id(&self) -> u64 { 107 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::ImplicitGemm }
    fn device(&self) -> DeviceKind { DeviceKind::Cuda }

    fn check(&self, problem: &FusedProblem, device: &DeviceInfo) -> std::result::Result<(), String> {
        rewrite(problem, device).map(|_| ())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // The tensor-core kernel plus the copies of the inputs it reads at about 3 TB/s.
        let Some(c) = problem.conv_problem() else { return f64::MAX };
        let (kernel, other): (&dyn Solver, _) = match c.direction {
            Direction::BackwardWeights => (&CudaConvWgradTma, &c.y),
            _ => (&CudaConvIgemmTma, &c.w),
        };
        kernel.estimate_ms(problem) + 2.0 * (c.x.num_bytes() + other.num_bytes()) as f64 / 3e12 * 1e3
    }

    fn build(&self, problem: &FusedProblem, ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        adapter::build_tuned(self, problem, ctx, || self.build_inner(problem, ctx, |s, p| s.build(p, ctx)))
    }

    fn tuning_space(&self, problem: &FusedProblem) -> Vec<String> { adapter::tensor_core_space(problem) }

    fn build_config(&self, problem: &FusedProblem, ctx: &dyn BuildContext, config: &str) -> Result<Arc<dyn Invoker>> {
        self.build_inner(problem, ctx, |s, p| s.build_config(p, ctx, config))
    }
}

impl CudaConvTcNchw {
    /// Forward only: the channels-last kernel reading a backward-data filter in place
    /// (`FilterSource::Flipped`, cuda_tc_bwd_data.rs) when the rewrite's kernel is the TMA one
    /// and w needs no copy; `config` as in `build_config`, else the inner solver's choice.
    pub fn build_flipped(&self, problem: &FusedProblem, ctx: &dyn BuildContext, config: Option<&str>, filter: FilterSource) -> Result<Arc<dyn Invoker>> {
        let r = rewrite(problem, ctx.device().info()).map_err(|why| Error::not_implemented(format!("{}: {why}", self.name())))?;
        if r.solver.name() != CudaConvIgemmTma.name() || r.other.is_some() || r.direction != Direction::Forward {
            return Err(Error::not_implemented(format!("{}: the filter cannot be read in place here", self.name())));
        }
        let inner = CudaConvIgemmTma.build_flipped(&r.inner, ctx, config, filter)?;
        Ok(Arc::new(NchwInvoker { be: cuda_of(ctx.device())?.clone(), inner, x: r.x, other: None, direction: r.direction }))
    }

    /// Whether `build_flipped` can take this problem.
    pub fn takes_flipped(&self, problem: &FusedProblem, device: &DeviceInfo) -> bool {
        rewrite(problem, device).is_ok_and(|r| r.solver.name() == CudaConvIgemmTma.name() && r.other.is_none() && r.direction == Direction::Forward)
    }

    fn build_inner(
        &self,
        problem: &FusedProblem,
        ctx: &dyn BuildContext,
        build: impl FnOnce(&dyn Solver, &FusedProblem) -> Result<Arc<dyn Invoker>>,
    ) -> Result<Arc<dyn Invoker>> {
        let r = rewrite(problem, ctx.device().info()).map_err(|why| Error::not_implemented(format!("{}: {why}", self.name())))?;
        let inner = build(r.solver, &r.inner)?;
        Ok(Arc::new(NchwInvoker { be: cuda_of(ctx.device())?.clone(), inner, x: r.x, other: r.other, direction: r.direction }))
    }
}

struct NchwInvoker {
    be: Arc<CudaBackend>,
    inner: Arc<dyn Invoker>,
    x: Option<ChannelsFirst>,
    other: Option<ChannelsFirst>,
    direction: Direction,
}

impl Invoker for NchwInvoker {
    fn run(&self, ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let bytes = |v: &Option<ChannelsFirst>| v.map_or(0, |v| v.packed_bytes().next_multiple_of(256));
        let (xb, ob) = (bytes(&self.x), bytes(&self.other));
        // The direction's other input: w forward, dy backward-weights.
        let other_in = if self.direction == Direction::Forward { a.w } else { a.y };
        // The whole sequence is one timed unit (copies included) when profiling is on.
        timed(ctx, &self.be, || {
            let scratch = Scratch::new(ctx, &self.be.dev, xb + ob)?;
            let (xs, os) = (scratch.ptr(), scratch.ptr() + xb as u64);
            if let Some(v) = &self.x {
                to_channels_last(&self.be, v, a.x.0, xs)?;
            }
            if let Some(v) = &self.other {
                to_channels_last(&self.be, v, other_in.0, os)?;
            }
            let x = if self.x.is_some() { DevPtr(xs) } else { a.x };
            let other = if self.other.is_some() { DevPtr(os) } else { other_in };
            let args = if self.direction == Direction::Forward { RunArgs { x, w: other, ..*a } } else { RunArgs { x, y: other, ..*a } };
            self.inner.run(ctx, &args)
        })
    }
}
