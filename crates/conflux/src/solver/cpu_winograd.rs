//! Winograd F(2×2, 3×3) forward convolution on the CPU (`backend/cpu/winograd.rs`): 2-D,
//! 3×3, stride 1, dilation 1, any padding, groups, layout and type, with the fused epilogue.
//! Backward-data is not implemented (the GEMM solver serves it).

use super::cpu_conv::{conv_of, run_parts};
use super::{Invoker, RunArgs, Solver};
use crate::backend::cpu::epilogue::CpuEpilogue;
use crate::backend::cpu::winograd;
use crate::backend::cpu::conv_naive::ConvPtrs;
use crate::conv::Geom;
use crate::error::{Error, Result};
use crate::fusion::FusedProblem;
use crate::handle::{DeviceKind, Handle};
use crate::types::{ConvAlgorithm, Direction};
use std::sync::Arc;

/// Fewest channels per group (in and out) for the transforms to pay off.
const MIN_CHANNELS: usize = 4;

pub struct CpuWinograd;

/// What both Winograd solvers (F(2×2) here, F(4×4) in `cpu_winograd4`) need: forward, a
/// geometry the transforms support, enough channels per group for them to pay off.
pub(crate) fn winograd_check(problem: &FusedProblem) -> std::result::Result<Geom, String> {
    let (conv, _) = conv_of(problem)?;
    if conv.direction != Direction::Forward {
        return Err(format!("forward only (this is {:?})", conv.direction));
    }
    let g = Geom::of(conv);
    winograd::supports(&g)?;
    if g.cg() < MIN_CHANNELS || g.kg() < MIN_CHANNELS {
        return Err(format!("{} input / {} output channels per group (< {MIN_CHANNELS})", g.cg(), g.kg()));
    }
    Ok(g)
}

/// A Winograd kernel's entry point: forward convolution with α/β and the epilogue.
pub(crate) type WinogradForward = fn(&Geom, ConvPtrs, f32, f32, &CpuEpilogue);

/// Invoker of either Winograd solver: the problem and the kernel that runs it.
pub(crate) struct WinogradInvoker {
    pub problem: FusedProblem,
    pub name: &'static str,
    pub forward: WinogradForward,
}

impl Solver for CpuWinograd {
    fn name(&self) -> &'static str { "CpuConvWinogradF2x3" }
    fn solution_id(&self) -> u64 { 3 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Winograd }
    fn device(&self) -> DeviceKind { DeviceKind::Cpu }

    fn check(&self, problem: &FusedProblem, _handle: &Handle) -> std::result::Result<(), String> {
        winograd_check(problem).map(|_| ())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // 2.25× fewer multiplies than the GEMM solvers, at a lower rate (~100 GFLOP/s).
        problem.conv_problem().map(|c| 2.0 * c.macs() / 2.25 / 100e9 * 1e3 + 0.01).unwrap_or(f64::MAX)
    }

    fn build(&self, problem: &FusedProblem, _handle: &Handle) -> Result<Arc<dyn Invoker>> {
        Ok(Arc::new(WinogradInvoker { problem: problem.clone(), name: self.name(), forward: winograd::forward }))
    }
}

impl Invoker for WinogradInvoker {
    fn run(&self, _handle: &Handle, a: &RunArgs) -> Result<()> {
        let (g, dir, r) = run_parts(&self.problem, a, self.name)?;
        if dir != Direction::Forward {
            return Err(Error::internal(format!("{}: forward only", self.name)));
        }
        (self.forward)(&g, r.ptrs, r.alpha, r.beta, &r.epi);
        Ok(())
    }
}
