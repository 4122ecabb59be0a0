//! Winograd F(2×2, 3×3) forward convolution on the CPU: the `wino4` pipeline with
//! `Variant::F2` (2-D, 3×3, stride 1, dilation 1, any padding, groups, layout and type, the
//! fused epilogue, constant weights as in `cpu_winograd4`). 2.25× fewer multiplies than direct
//! against F(4×4)'s 4×, with transformed filters 16/36 the size. It comes after F(4×4) in the
//! registry, so it runs where that one declines (forward problems of at most four 4×4 output
//! tiles, where U streams from memory: `cpu_winograd4::MIN_FORWARD_TILES` has the
//! measurements), or where Find times it faster.
//!
//! Backward-data is not implemented (F(4×4) and the GEMM solvers serve it).

use super::common::conv_of;
use super::winograd_f4::ForwardInvoker;
use crate::solver::{Invoker, Solver};
use crate::backend::cpu::winograd::{self, Variant};
use crate::problem::Geom;
use crate::error::Result;
use crate::problem::FusedProblem;
use crate::backend::{DeviceInfo, DeviceKind};
use crate::solver::BuildContext;
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

impl Solver for CpuWinograd {
    fn name(&self) -> &'static str { "CpuConvWinogradF2x3" }
    fn solution_id(&self) -> u64 { 3 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Winograd }
    fn device(&self) -> DeviceKind { DeviceKind::Cpu }

    fn check(&self, problem: &FusedProblem, _device: &DeviceInfo) -> std::result::Result<(), String> {
        winograd_check(problem).map(|_| ())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // ~230 direct-equivalent GFLOP/s on 2 AVX-512 cores, below the 300 `cpu_winograd4`
        // assumes, so immediate mode ranks it after F(4×4): where both apply F(2×2) measured
        // slower (bench/results/2026-11-25-cpu-session17.md).
        problem.conv_problem().map(|c| 2.0 * c.macs() / 230e9 * 1e3 + 0.01).unwrap_or(f64::MAX)
    }

    fn build(&self, problem: &FusedProblem, _ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        Ok(Arc::new(ForwardInvoker::new(problem, self.name(), Variant::F2)))
    }
}
