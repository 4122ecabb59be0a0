//! The always-applicable CPU convolution: direct loops in every direction, 2-D and 3-D, any
//! stride/pad/dilation/groups, with the fused epilogue on forward. Last in the CPU list.

use crate::solver::{Invoker, RunArgs, Solver};
use crate::backend::cpu::direct::naive::{self, ConvPtrs};
use crate::backend::cpu::pointwise::epilogue::CpuEpilogue;
use crate::problem::Geom;
use crate::error::{Error, Result};
use crate::problem::{FusedKind, FusedProblem};
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::solver::BuildContext;
use crate::types::{ConvAlgorithm, Direction};
use std::sync::Arc;

pub struct CpuNaive;

struct NaiveInvoker {
    problem: FusedProblem,
    geom: Geom,
}

impl Solver for CpuNaive {
    fn name(&self) -> &'static str { "CpuConvNaive" }
    fn solution_id(&self) -> u64 { 1 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Direct }
    fn device(&self) -> DeviceKind { DeviceKind::Cpu }

    fn check(&self, problem: &FusedProblem, _device: &DeviceInfo) -> Result<(), String> {
        match &problem.kind {
            FusedKind::Conv { .. } => Ok(()),
            _ => Err("not a convolution problem".into()),
        }
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // About 0.3 GMAC/s per core through the generic strided loops.
        problem.conv_problem().map(|c| c.macs() / 0.6e9 * 1e3).unwrap_or(f64::MAX)
    }

    fn build(&self, problem: &FusedProblem, _ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let conv = problem.conv_problem().ok_or_else(|| Error::internal("CpuConvNaive: not a convolution"))?;
        Ok(Arc::new(NaiveInvoker { problem: problem.clone(), geom: Geom::of(conv) }))
    }
}

impl Invoker for NaiveInvoker {
    fn run(&self, _ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let FusedKind::Conv { conv, epilogue } = &self.problem.kind else {
            return Err(Error::internal("CpuConvNaive: not a convolution"));
        };
        let ptrs = ConvPtrs { x: a.x.0, w: a.w.0, y: a.y.0, dt: conv.dtype() };
        let (alpha, beta) = (a.alpha as f32, a.beta as f32);
        match conv.direction {
            Direction::Forward => {
                let epi = CpuEpilogue::new(epilogue, a.ops, &conv.y, 1)?;
                naive::forward(&self.geom, ptrs, alpha, beta, &epi)
            }
            Direction::BackwardData => {
                // A fused transpose convolution writes x here, so the epilogue follows it.
                let epi = CpuEpilogue::new(epilogue, a.ops, &conv.x, 1)?;
                naive::backward_data(&self.geom, ptrs, alpha, beta, &epi)
            }
            Direction::BackwardWeights => {
                if !epilogue.is_empty() {
                    return Err(Error::internal("CpuConvNaive: epilogue on backward-weights"));
                }
                naive::backward_weights(&self.geom, ptrs, alpha, beta)
            }
        }
        Ok(())
    }
}
