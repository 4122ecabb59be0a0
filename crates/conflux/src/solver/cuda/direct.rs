//! The always-applicable CUDA convolution: direct kernels (conv_direct.cu) in every
//! direction, any geometry, f32/f16/bf16, with the generated epilogue. Last in the CUDA list.

use super::common::{check_dtype, conv_run_params, cuda_of};
use crate::solver::{Invoker, RunArgs, Solver};
use crate::backend::cuda::module::Kernel;
use crate::backend::cuda::preamble::{self, Extra};
use crate::backend::cuda::{grid_for, timed, CudaBackend};
use crate::problem::Geom;
use crate::error::{Error, Result};
use crate::problem::FusedProblem;
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::solver::BuildContext;
use crate::types::{ConvAlgorithm, Direction};
use std::sync::Arc;

const TEMPLATE: &str = include_str!("../../backend/cuda/kernels/conv_direct.cu");

pub struct CudaConvDirect;

struct DirectInvoker {
    backend: Arc<CudaBackend>,
    kernel: Kernel,
    geom: Geom,
    direction: Direction,
    problem: FusedProblem,
}

impl Solver for CudaConvDirect {
    fn name(&self) -> &'static str { "CudaConvDirect" }
    fn solution_id(&self) -> u64 { 101 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Direct }
    fn device(&self) -> DeviceKind { DeviceKind::Cuda }

    fn check(&self, problem: &FusedProblem, _device: &DeviceInfo) -> std::result::Result<(), String> {
        let Some(conv) = problem.conv_problem() else { return Err("not a convolution problem".into()) };
        check_dtype(problem)?;
        if conv.direction == Direction::BackwardWeights && !problem.epilogue().is_empty() {
            return Err("no epilogue on backward-weights".into());
        }
        Ok(())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // Roughly 2 TFLOP/s for the one-thread-per-output loops.
        problem.conv_problem().map(|c| 2.0 * c.macs() / 2e12 * 1e3 + 0.01).unwrap_or(f64::MAX)
    }

    fn build(&self, problem: &FusedProblem, ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let be = cuda_of(ctx.device())?.clone();
        let conv = problem.conv_problem().ok_or_else(|| Error::internal("CudaConvDirect: not a convolution"))?;
        let src = preamble::source(conv.dtype(), problem.epilogue(), &Extra::default(), TEMPLATE)?;
        let module = be.module("conv_direct", &src)?;
        let name = match conv.direction {
            Direction::Forward => "conv_fwd_direct",
            Direction::BackwardData => "conv_bwd_data_direct",
            Direction::BackwardWeights => "conv_bwd_weights_direct",
        };
        let kernel = module.function(name)?;
        Ok(Arc::new(DirectInvoker { backend: be, kernel, geom: Geom::of(conv), direction: conv.direction, problem: problem.clone() }))
    }
}

impl Invoker for DirectInvoker {
    fn run(&self, ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let p = conv_run_params(&self.geom, &self.problem, a)?;
        let g = &self.geom;
        let (total, block, per_block) = match self.direction {
            Direction::Forward => ((g.n * g.k * g.output_size()) as u64, 256, false),
            Direction::BackwardData => ((g.n * g.c * g.input_size()) as u64, 256, false),
            Direction::BackwardWeights => ((g.k * g.cg() * g.filter_size()) as u64, 256, true),
        };
        let grid = if per_block { total.min(1 << 20) as u32 } else { grid_for(&self.backend, total, block) };
        // SAFETY: Params mirrors the kernel's parameter struct (static_assert on its size);
        // pointers are the caller's tensors, validated against the problem's descriptors.
        timed(ctx, &self.backend, || unsafe { self.kernel.launch(&self.backend.dev, (grid, 1, 1), (block, 1, 1), 0, &p) })
    }
}
