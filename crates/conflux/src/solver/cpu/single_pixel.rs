//! Forward 1×1 convolutions with one output pixel per image and no padding — squeeze-and-
//! excitation layers and fully connected layers as convolutions — as one dot product per output
//! (`backend/cpu/direct/single_pixel.rs`). Ahead of the GEMM solvers, whose panels and tiles
//! for a single column cost more than these layers' products.

use super::common::{f32_geometry, run_parts};
use crate::backend::cpu::direct::single_pixel as kernels;
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::error::{Error, Result};
use crate::problem::FusedProblem;
use crate::solver::{BuildContext, Invoker, RunArgs, Solver};
use crate::types::{ConvAlgorithm, Direction};
use std::sync::Arc;

/// Fewest input channels per group (the length of each dot product) it takes.
const MIN_CHANNELS: usize = 8;

pub struct CpuSinglePixel;

struct SinglePixelInvoker {
    problem: FusedProblem,
    single_threaded: bool,
}

impl Solver for CpuSinglePixel {
    fn name(&self) -> &'static str { "CpuConvSinglePixel" }
    fn solution_id(&self) -> u64 { 13 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Direct }
    fn device(&self) -> DeviceKind { DeviceKind::Cpu }

    fn check(&self, problem: &FusedProblem, _device: &DeviceInfo) -> std::result::Result<(), String> {
        let (_, g) = f32_geometry(problem, true)?;
        if g.filter_size() != 1 || g.output_size() != 1 {
            return Err(format!("{} filter taps and {} output pixels per image (1 and 1 only)", g.filter_size(), g.output_size()));
        }
        if g.cg() < MIN_CHANNELS {
            // Dots this short do not fill a vector (the expand side of squeeze-and-excitation
            // from 8 channels up runs here: bench/results/2026-11-28-cpu-depthwise-planes.md).
            return Err(format!("{} input channels per group (at least {MIN_CHANNELS})", g.cg()));
        }
        if g.pad.iter().chain(&g.pad_end).any(|&p| p != 0) {
            return Err("padding".into());
        }
        Ok(())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // Bound by reading w once (about 10 GB/s on a small VM) plus a few µs per call.
        problem.conv_problem().map_or(f64::MAX, |c| c.w.num_bytes() as f64 / 10e9 * 1e3 + 0.002)
    }

    fn build(&self, problem: &FusedProblem, _ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let single_threaded = problem.conv_problem().is_some_and(|c| kernels::single_threaded(&crate::problem::Geom::of(c)));
        Ok(Arc::new(SinglePixelInvoker { problem: problem.clone(), single_threaded }))
    }
}

impl Invoker for SinglePixelInvoker {
    fn run(&self, _ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let (g, dir, r) = run_parts(&self.problem, a, "CpuConvSinglePixel")?;
        if dir != Direction::Forward {
            return Err(Error::internal("CpuConvSinglePixel: not a forward problem"));
        }
        kernels::forward(&g, r.ptrs, r.alpha, r.beta, &r.epi);
        Ok(())
    }

    fn single_threaded(&self) -> bool { self.single_threaded }
}
