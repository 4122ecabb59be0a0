//! Solvers that rewrite a problem into another over the same memory and run it on the first
//! solver of their own backend's list that takes it without workspace (an adapter cannot pass
//! workspace through): 3-D convolutions folded into 2-D ones (`folded.rs`), filters with their
//! dead outer taps cut (`trimmed.rs`). The rewritten problem addresses the caller's tensors, the
//! filter possibly at an offset, so nothing is copied.

use super::registry::first_without_workspace;
use super::{BuildContext, Invoker, RunArgs, Solver};
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::error::{Error, Result};
use crate::memory::DevPtr;
use crate::problem::FusedProblem;
use crate::types::ConvAlgorithm;
use std::sync::Arc;

/// The rewritten problem and the element offset at which its filter starts in the caller's w.
pub struct Rewrite {
    pub problem: FusedProblem,
    pub w_offset: usize,
}

pub struct Rewritten {
    pub(super) kind: DeviceKind,
    pub(super) name: &'static str,
    pub(super) id: u64,
    /// The backend's main general kernel, whose estimate for the rewritten problem is this
    /// solver's (the rewrite is free; without a device the inner solver is not known).
    pub(super) estimate_like: &'static dyn Solver,
    /// The rewrite, else why this solver does not apply.
    pub(super) rewrite: fn(&FusedProblem) -> std::result::Result<Rewrite, String>,
}

impl Rewritten {
    fn inner(&self, problem: &FusedProblem, device: &DeviceInfo) -> std::result::Result<(Rewrite, &'static dyn Solver), String> {
        let r = (self.rewrite)(problem)?;
        let solver = first_without_workspace(&r.problem, device, |_| true).map_err(|why| format!("no solver takes the rewritten problem ({why})"))?;
        Ok((r, solver))
    }
}

impl Solver for Rewritten {
    fn name(&self) -> &'static str { self.name }
    fn solution_id(&self) -> u64 { self.id }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::ImplicitGemm }
    fn device(&self) -> DeviceKind { self.kind }
    // The inner solver's own check decides (the registry's quantized gate applies to it).
    fn computes_quantized(&self) -> bool { true }

    fn check(&self, problem: &FusedProblem, device: &DeviceInfo) -> std::result::Result<(), String> {
        if device.kind != self.kind {
            return Err(format!("runs on {:?} devices", self.kind));
        }
        self.inner(problem, device).map(|_| ())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        (self.rewrite)(problem).map_or(f64::MAX, |r| self.estimate_like.estimate_ms(&r.problem))
    }

    fn build(&self, problem: &FusedProblem, ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let (r, solver) = self.inner(problem, ctx.device().info()).map_err(|why| Error::not_implemented(format!("{}: {why}", self.name)))?;
        let inner = solver.build(&r.problem, ctx)?;
        if r.w_offset == 0 {
            return Ok(inner);
        }
        let elem = problem.conv_problem().map_or(1, |c| c.w.dtype().size());
        Ok(Arc::new(FilterAtOffset { inner, bytes: (r.w_offset * elem) as u64 }))
    }
}

/// The inner solver's invoker, handed the filter view's address.
struct FilterAtOffset {
    inner: Arc<dyn Invoker>,
    bytes: u64,
}

impl Invoker for FilterAtOffset {
    fn run(&self, ctx: &dyn RunContext, a: &RunArgs) -> Result<()> { self.inner.run(ctx, &RunArgs { w: DevPtr(a.w.0 + self.bytes), ..*a }) }
    fn single_threaded(&self) -> bool { self.inner.single_threaded() }
}
