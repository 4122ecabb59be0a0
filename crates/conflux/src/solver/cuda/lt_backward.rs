//! What the two cuBLASLt backward solvers share (`wgrad_gemm_lt`, `bwd_data_gemm_lt`): their
//! time estimate and their invoker — one planned GEMM, its workspace, a zeroed output first
//! where the GEMMs do not write every element, and fallbacks for pointers the plan cannot
//! take and for β the zeroing would lose.

use super::common::Fallback;
use super::tensor_core::{tensor_core_precision, TcPrecision};
use crate::backend::cuda::blas_lt::LtGemm;
use crate::backend::cuda::driver::Scratch;
use crate::backend::cuda::{timed, CudaBackend};
use crate::backend::RunContext;
use crate::error::Result;
use crate::problem::{ConvProblem, FusedProblem, Geom};
use crate::solver::{Invoker, RunArgs};
use crate::types::Direction;
use std::sync::Arc;

/// What every cuBLASLt backward solver requires: a convolution in `direction` with no fused
/// operations, of one group, in a precision the tensor cores multiply; its geometry, or why not.
pub(crate) fn lt_problem(problem: &FusedProblem, direction: Direction) -> std::result::Result<(&ConvProblem, Geom, TcPrecision), String> {
    let conv = problem.conv_problem().ok_or("not a convolution")?;
    if conv.direction != direction {
        let name = if direction == Direction::BackwardData { "backward-data" } else { "backward-weights" };
        return Err(format!("{name} only (this is {:?})", conv.direction));
    }
    if !problem.epilogue().is_empty() {
        return Err("no fused operations".into());
    }
    let prec = tensor_core_precision(conv)?;
    let g = Geom::of(conv);
    if g.groups != 1 {
        return Err("one group only".into());
    }
    Ok((conv, g, prec))
}

/// cuBLASLt's rate on such products, about: 16-bit, TF32, and f32 on CUDA cores.
pub(crate) fn estimate_ms(problem: &FusedProblem, overhead_ms: f64) -> f64 {
    let Some(c) = problem.conv_problem() else { return f64::MAX };
    let rate = match tensor_core_precision(c) {
        Ok(TcPrecision::Bits16) => 450e12,
        Ok(TcPrecision::Tf32) => 225e12,
        _ => 50e12,
    };
    2.0 * c.macs() / rate * 1e3 + overhead_ms
}

/// Which run argument is cuBLASLt's A, B and D.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Operands {
    /// Backward-weights: A = x, B = dy, D = dw.
    XDyDw,
    /// Backward-data: A = w, B = dy, D = dx.
    WDyDx,
    /// Backward-data with pixel-contiguous dx: A = dy, B = w, D = dx.
    DyWDx,
}

pub(crate) struct BackwardLtInvoker {
    pub be: Arc<CudaBackend>,
    pub gemm: LtGemm,
    pub operands: Operands,
    /// Bytes of D to zero before the GEMMs (0: they write all of it).
    pub zero_bytes: usize,
    pub problem: FusedProblem,
    /// For pointers the planned algorithm cannot take.
    pub fallback: Fallback,
    /// For runs with β ≠ 0 when D is zeroed first.
    pub beta_fallback: Option<Fallback>,
}

impl Invoker for BackwardLtInvoker {
    fn run(&self, ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        // Backward arguments: x = x or dx, w = w or dw, y = dy.
        if [a.x.0, a.w.0, a.y.0].iter().any(|p| p % self.gemm.align != 0) {
            return self.fallback.run(&self.problem, ctx, a);
        }
        if let (Some(f), true) = (&self.beta_fallback, a.beta != 0.0) {
            return f.run(&self.problem, ctx, a);
        }
        let (ma, mb, md) = match self.operands {
            Operands::XDyDw => (a.x.0, a.y.0, a.w.0),
            Operands::WDyDx => (a.w.0, a.y.0, a.x.0),
            Operands::DyWDx => (a.y.0, a.w.0, a.x.0),
        };
        timed(ctx, &self.be, || {
            let ws = if self.gemm.workspace > 0 { Some(Scratch::new(ctx, &self.be.dev, self.gemm.workspace)?) } else { None };
            if self.zero_bytes > 0 {
                // D is dense when it is zeroed (the plan's condition): exactly its bytes.
                self.be.dev.memset_async(md, self.zero_bytes)?;
            }
            // SAFETY: the three tensors are the caller's, validated against the problem the
            // plan was made for and aligned as planned; the workspace lives (stream-ordered)
            // until after the multiply.
            unsafe { self.gemm.run(self.be.dev.stream_raw(), a.alpha as f32, a.beta as f32, ma, mb, md, 0, ws.as_ref().map_or(0, Scratch::ptr)) }
        })
    }
}
