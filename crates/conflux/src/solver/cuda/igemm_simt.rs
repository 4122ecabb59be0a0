//! Implicit-GEMM forward convolution on CUDA cores (conv_igemm.cu) with the fused epilogue:
//! any geometry, group count, layout and type; the batch size stays a run-time argument.

use super::common::{conv_run_params, cuda_of, forward_geometry};
use crate::solver::{Invoker, RunArgs, Solver};
use crate::backend::cuda::module::Kernel;
use crate::backend::cuda::preamble::{self, Extra};
use crate::backend::cuda::{timed, CudaBackend};
use crate::problem::Geom;
use crate::error::{Error, Result};
use crate::problem::FusedProblem;
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::solver::BuildContext;
use crate::types::ConvAlgorithm;
use std::sync::Arc;

const TEMPLATE: &str = concat!(include_str!("../../backend/cuda/kernels/simt_gemm.cuh"), include_str!("../../backend/cuda/kernels/conv_igemm.cu"));
const BM: usize = 128;
const BK: usize = 8;

pub struct CudaConvIgemm;

/// Output channels per block: 64 when the group has no more, else 128.
fn channel_tile(g: &Geom) -> usize {
    if g.kg() <= 64 { 64 } else { 128 }
}

struct IgemmInvoker {
    be: Arc<CudaBackend>,
    kernel: Kernel,
    geom: Geom,
    bm: usize,
    bn: usize,
    problem: FusedProblem,
}

impl Solver for CudaConvIgemm {
    fn name(&self) -> &'static str { "CudaConvImplicitGemmSimt" }
    fn solution_id(&self) -> u64 { 103 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::ImplicitGemm }
    fn device(&self) -> DeviceKind { DeviceKind::Cuda }

    fn check(&self, problem: &FusedProblem, _device: &DeviceInfo) -> std::result::Result<(), String> {
        let g = forward_geometry(problem)?;
        let m = g.n * g.output_size();
        if m >= i32::MAX as usize / 2 || g.cg() * g.filter_size() >= i32::MAX as usize / 2 {
            return Err("GEMM dimensions exceed 32-bit indexing".into());
        }
        Ok(())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // About 15 TFLOP/s on a Hopper-class GPU.
        problem.conv_problem().map(|c| 2.0 * c.macs() / 15e12 * 1e3 + 0.005).unwrap_or(f64::MAX)
    }

    fn build(&self, problem: &FusedProblem, ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let conv = problem.conv_problem().ok_or_else(|| Error::internal("igemm: not a convolution"))?;
        let g = Geom::of(conv);
        // Fewer than two blocks per SM with 128-pixel tiles: halve them.
        let blocks = (g.n * g.output_size()).div_ceil(BM) * g.kg().div_ceil(channel_tile(&g)) * g.groups;
        let tall = blocks >= 2 * cuda_of(ctx.device())?.dev.sm_count() as usize;
        self.build_with(problem, ctx, if tall { BM } else { BM / 2 })
    }
}

impl CudaConvIgemm {
    /// Build with `bm` (64 or 128) output pixels per block; `check` must have passed.
    pub fn build_with(&self, problem: &FusedProblem, ctx: &dyn BuildContext, bm: usize) -> Result<Arc<dyn Invoker>> {
        if bm != BM && bm != BM / 2 {
            return Err(Error::bad_parm(format!("igemm: tile height {bm} (64 or 128)")));
        }
        let be = cuda_of(ctx.device())?.clone();
        let conv = problem.conv_problem().ok_or_else(|| Error::internal("igemm: not a convolution"))?;
        let g = Geom::of(conv);
        let bn = channel_tile(&g);
        let mut defs = preamble::conv_geometry_defines(&g);
        for (name, v) in [("BM", bm), ("BN", bn), ("BK", BK), ("CHANNEL_INNER", conv.x.is_channels_last() as usize)] {
            defs.push((name.to_string(), v.to_string()));
        }
        let defs: Vec<(&str, String)> = defs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        let src = preamble::source(conv.dtype(), problem.epilogue(), &Extra { act: None, defines: &defs }, TEMPLATE)?;
        let kernel = be.module("conv_igemm", &src)?.function("conv_fwd_igemm")?;
        Ok(Arc::new(IgemmInvoker { be, kernel, geom: g, bm, bn, problem: problem.clone() }))
    }
}

impl Invoker for IgemmInvoker {
    fn run(&self, ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let g = &self.geom;
        let p = conv_run_params(g, &self.problem, a)?;
        let m = g.n * g.output_size();
        let grid = (m.div_ceil(self.bm) as u32, g.kg().div_ceil(self.bn) as u32, g.groups as u32);
        if grid.1 > 65535 || grid.2 > 65535 {
            return Err(Error::not_implemented("igemm: too many channel tiles or groups for one launch"));
        }
        // SAFETY: Params mirrors the kernel struct; pointers validated against the problem.
        timed(ctx, &self.be, || unsafe { self.kernel.launch(&self.be.dev, grid, (256, 1, 1), 0, &p) })
    }
}
