//! Depthwise forward convolutions on channels-first tensors, one padded input plane at a time
//! split into stride phases (`backend/cpu/direct/depthwise_planes.rs`): a whole output plane is
//! one run of vector FMAs per tap, so 7- and 14-pixel rows fill the lanes as wide rows do, with
//! no copy to channels-last and back. Channels-last tensors go to `CpuConvDepthwiseNhwc`, whose
//! lanes are channels.

use super::common::{conv_of, run_parts};
use crate::backend::cpu::direct::depthwise_planes::{self as kernels, PhaseLayout};
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::error::{Error, Result};
use crate::problem::{FusedProblem, Geom};
use crate::solver::{BuildContext, Invoker, RunArgs, Solver};
use crate::types::{ConvAlgorithm, Direction};
use std::sync::Arc;

pub struct CpuDepthwisePlanes;

struct PlanesInvoker {
    problem: FusedProblem,
    layout: PhaseLayout,
}

impl Solver for CpuDepthwisePlanes {
    fn name(&self) -> &'static str { "CpuConvDepthwisePlanes" }
    fn solution_id(&self) -> u64 { 18 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Direct }
    fn device(&self) -> DeviceKind { DeviceKind::Cpu }

    fn check(&self, problem: &FusedProblem, _device: &DeviceInfo) -> std::result::Result<(), String> {
        let (conv, _) = conv_of(problem)?;
        if conv.direction != Direction::Forward {
            return Err(format!("forward only (this is {:?})", conv.direction));
        }
        let g = Geom::of(conv);
        if g.groups == 1 || g.cg() != 1 {
            return Err(format!("one input channel per group only ({} groups, {} channels)", g.groups, g.c));
        }
        if !g.is_2d() {
            return Err("2-D convolutions only".into());
        }
        if g.x_strides[1] == 1 || g.y_strides[1] == 1 {
            return Err("channels-last tensors (the channels-last depthwise solver fills its lanes with channels)".into());
        }
        if PhaseLayout::of(&g).is_none() {
            return Err(format!("the stride phases of one padded plane exceed {} floats (padding {:?}, stride {:?}, dilation {:?})", kernels::MAX_PHASE_FLOATS, g.pad, g.stride, g.dilation));
        }
        Ok(())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // Moving x and y once (about 10 GB/s on a small VM) and the vector FMAs.
        problem.conv_problem().map_or(f64::MAX, |c| (c.x.num_bytes() + c.y.num_bytes()) as f64 / 10e9 * 1e3 + 2.0 * c.macs() / 60e9 * 1e3)
    }

    fn build(&self, problem: &FusedProblem, _ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let conv = problem.conv_problem().ok_or_else(|| Error::internal("CpuConvDepthwisePlanes: not a convolution"))?;
        let layout = PhaseLayout::of(&Geom::of(conv)).ok_or_else(|| Error::internal("CpuConvDepthwisePlanes: the layout its check accepted overflows"))?;
        Ok(Arc::new(PlanesInvoker { problem: problem.clone(), layout }))
    }
}

impl Invoker for PlanesInvoker {
    fn run(&self, _ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let (g, _, r) = run_parts(&self.problem, a, "CpuConvDepthwisePlanes")?;
        kernels::forward(&g, &self.layout, r.ptrs, r.alpha, r.beta, &r.epi);
        Ok(())
    }
}
