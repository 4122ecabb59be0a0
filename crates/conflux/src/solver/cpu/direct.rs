//! Direct CPU convolution for depthwise problems in every direction and few-channel problems
//! forward (`backend/cpu/direct/depthwise.rs`): vectorized loops over padded f32 planes. It
//! refuses forward layers whose reduction per output (C/G · filter size) is long enough for the
//! GEMM solvers to win, and the backward directions of all but depthwise layers, whose
//! per-group GEMMs would run nearly empty.

use super::common::{conv_of, run_parts};
use crate::solver::{Invoker, RunArgs, Solver};
use crate::backend::cpu::direct::depthwise as conv_direct;
use crate::problem::Geom;
use crate::error::Result;
use crate::problem::FusedProblem;
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::solver::BuildContext;
use crate::types::{ConvAlgorithm, Direction};
use std::sync::Arc;

/// Longest reduction (C/G · filter size) taken; beyond it a GEMM micro-kernel is fuller.
const MAX_REDUCTION: usize = 32;
/// Depthwise layers (one input channel per group) with at most this many output channels per
/// group are taken at any filter size: a GEMM per group would have that many rows, its
/// micro-kernel nearly empty (depthwise 7×7: 15–25× slower through the GEMM solvers,
/// bench/results/2026-11-27-cpu-bwd-strided.md).
const DEPTHWISE_MULTIPLIER: usize = 4;

pub struct CpuDirect;

struct DirectInvoker {
    problem: FusedProblem,
}

impl Solver for CpuDirect {
    fn name(&self) -> &'static str { "CpuConvDirect" }
    fn solution_id(&self) -> u64 { 6 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Direct }
    fn device(&self) -> DeviceKind { DeviceKind::Cpu }

    fn check(&self, problem: &FusedProblem, _device: &DeviceInfo) -> std::result::Result<(), String> {
        let (conv, _) = conv_of(problem)?;
        let g = Geom::of(conv);
        let depthwise = g.groups > 1 && g.cg() == 1 && g.kg() <= DEPTHWISE_MULTIPLIER;
        if conv.direction != Direction::Forward && !depthwise {
            // Its backward loops ran few-channel layers at 5–10 GFLOP/s (MobileNetV2's 144 → 24
            // 1×1 backward-data at N = 8: 26 ms, the GEMM path 1.9 ms; 16 → 96 backward-weights
            // 86 ms vs 8): backward directions are for depthwise layers only.
            return Err("backward directions of layers other than depthwise (the GEMM solvers are faster there)".into());
        }
        let red = g.cg() * g.filter_size();
        if red > MAX_REDUCTION && !depthwise {
            return Err(format!("reduction C/G·filter = {red} > {MAX_REDUCTION} (GEMM solvers are faster there)"));
        }
        if conv_direct::padded_plane(&g).is_none_or(|e| e > conv_direct::MAX_PADDED_PLANE) {
            return Err(format!("the padded input plane exceeds {} elements (padding {:?})", conv_direct::MAX_PADDED_PLANE, g.pad));
        }
        Ok(())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // ~20 GFLOP/s: vector FMAs, but a load and a store per tap.
        problem.conv_problem().map(|c| 2.0 * c.macs() / 20e9 * 1e3 + 0.01).unwrap_or(f64::MAX)
    }

    fn build(&self, problem: &FusedProblem, _ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        Ok(Arc::new(DirectInvoker { problem: problem.clone() }))
    }
}

impl Invoker for DirectInvoker {
    fn run(&self, _ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let (g, dir, r) = run_parts(&self.problem, a, "CpuConvDirect")?;
        match dir {
            Direction::Forward => conv_direct::forward(&g, r.ptrs, r.alpha, r.beta, &r.epi),
            Direction::BackwardData => conv_direct::backward_data(&g, r.ptrs, r.alpha, r.beta, &r.epi),
            Direction::BackwardWeights => conv_direct::backward_weights(&g, r.ptrs, r.alpha, r.beta),
        }
        Ok(())
    }
}
