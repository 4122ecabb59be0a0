//! Implicit-GEMM forward convolution on the CPU: the packed GEMM's B panels are gathered
//! straight from x (im2col tiles built on the fly, `backend/cpu/im2col.rs`), so no im2col
//! buffer and no workspace; the batch is folded into the GEMM's N. Any geometry, groups,
//! layout and type; the fused epilogue is applied to each C block while it is in cache.

use super::common::{conv_of, run_parts};
use crate::solver::{Invoker, RunArgs, Solver};
use crate::backend::cpu::im2col as conv_gemm;
use crate::error::{Error, Result};
use crate::problem::FusedProblem;
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::solver::BuildContext;
use crate::types::{ConvAlgorithm, Direction};
use std::sync::Arc;

pub struct CpuImplicitGemm;

struct IgemmInvoker {
    problem: FusedProblem,
}

impl Solver for CpuImplicitGemm {
    fn name(&self) -> &'static str { "CpuConvImplicitGemm" }
    fn solution_id(&self) -> u64 { 4 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::ImplicitGemm }
    fn device(&self) -> DeviceKind { DeviceKind::Cpu }

    fn check(&self, problem: &FusedProblem, _device: &DeviceInfo) -> std::result::Result<(), String> {
        let (conv, _) = conv_of(problem)?;
        if conv.direction != Direction::Forward {
            return Err(format!("forward only (this is {:?})", conv.direction));
        }
        Ok(())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // ~150 GFLOP/s on 2 AVX-512 cores; gathering costs more per B element than a copy.
        problem.conv_problem().map(|c| 2.0 * c.macs() / 140e9 * 1e3 + 0.01).unwrap_or(f64::MAX)
    }

    fn build(&self, problem: &FusedProblem, _ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        Ok(Arc::new(IgemmInvoker { problem: problem.clone() }))
    }
}

impl Invoker for IgemmInvoker {
    fn run(&self, _ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let (g, dir, r) = run_parts(&self.problem, a, "CpuConvImplicitGemm")?;
        if dir != Direction::Forward {
            return Err(Error::internal("CpuConvImplicitGemm: forward only"));
        }
        conv_gemm::forward(&g, r.ptrs, r.alpha, r.beta, &r.epi, conv_gemm::FwdB::Implicit);
        Ok(())
    }
}
