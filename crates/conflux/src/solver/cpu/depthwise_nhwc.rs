//! Depthwise f32 convolutions over channels-last tensors, every direction
//! (`backend/cpu/direct/depthwise_nhwc.rs`): channels in the vector lanes, no plane copies.
//! Ahead of the planar direct solver, which reads channels-last tensors by gathers.

use super::common::{conv_of, run_parts};
use crate::backend::cpu::direct::depthwise_nhwc as kernels;
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::error::Result;
use crate::problem::{FusedProblem, Geom};
use crate::solver::{BuildContext, Invoker, RunArgs, Solver};
use crate::types::{ConvAlgorithm, DataType, Direction};
use std::sync::Arc;

pub struct CpuDepthwiseNhwc;

struct DepthwiseInvoker {
    problem: FusedProblem,
}

impl Solver for CpuDepthwiseNhwc {
    fn name(&self) -> &'static str { "CpuConvDepthwiseNhwc" }
    fn solution_id(&self) -> u64 { 12 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Direct }
    fn device(&self) -> DeviceKind { DeviceKind::Cpu }

    fn check(&self, problem: &FusedProblem, _device: &DeviceInfo) -> std::result::Result<(), String> {
        let (conv, _) = conv_of(problem)?;
        if conv.dtype() != DataType::Float {
            return Err(format!("f32 only ({:?} given)", conv.dtype()));
        }
        let g = Geom::of(conv);
        if g.groups == 1 || g.cg() != 1 || g.kg() != 1 {
            return Err(format!("depthwise with one output channel per group only ({} groups, {} → {} channels)", g.groups, g.c, g.k));
        }
        if g.filter[0] != 1 || g.input[0] != 1 {
            return Err("2-D convolutions only".into());
        }
        if g.x_strides[1] != 1 || g.y_strides[1] != 1 {
            return Err("x and y must be channels-last (channels contiguous)".into());
        }
        Ok(())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // Bound by moving x and y once (about 10 GB/s on a small VM) and by vector FMAs.
        problem.conv_problem().map_or(f64::MAX, |c| (c.x.num_bytes() + c.y.num_bytes()) as f64 / 10e9 * 1e3 + 2.0 * c.macs() / 40e9 * 1e3)
    }

    fn build(&self, problem: &FusedProblem, _ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        Ok(Arc::new(DepthwiseInvoker { problem: problem.clone() }))
    }
}

impl Invoker for DepthwiseInvoker {
    fn run(&self, _ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let (g, dir, r) = run_parts(&self.problem, a, "CpuConvDepthwiseNhwc")?;
        match dir {
            Direction::Forward => kernels::forward(&g, r.ptrs, r.alpha, r.beta, &r.epi),
            Direction::BackwardData => kernels::backward_data(&g, r.ptrs, r.alpha, r.beta, &r.epi),
            Direction::BackwardWeights => kernels::backward_weights(&g, r.ptrs, r.alpha, r.beta),
        }
        Ok(())
    }
}
