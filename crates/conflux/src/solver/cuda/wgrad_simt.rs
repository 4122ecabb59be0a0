//! Backward-weights on CUDA cores (conv_wgrad_simt.cu): dw = dyᵀ · im2col(x) per group as a
//! tiled GEMM with the pixel reduction split across blocks and a deterministic reduction
//! kernel, for every geometry, layout and type the direct kernel takes (2-D and 3-D, groups,
//! stride, padding, dilation; f32 with f32 math, 16-bit with f32 accumulation). The tensor-core
//! kernel (109) stays first for the 16-bit problems it takes.

use super::common::{check_dtype, conv_run_params, cuda_of};
use super::wgrad_tma::{wgrad_splits, SplitCosts};
use crate::solver::{Invoker, RunArgs, Solver};
use crate::backend::cuda::driver::Scratch;
use crate::backend::cuda::module::Kernel;
use crate::backend::cuda::params::Params;
use crate::backend::cuda::preamble::{self, Extra};
use crate::backend::cuda::{grid_for, timed, CudaBackend};
use crate::problem::Geom;
use crate::error::{Error, Result};
use crate::problem::FusedProblem;
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::solver::BuildContext;
use crate::types::{ConvAlgorithm, Direction};
use std::sync::Arc;

const TEMPLATE: &str = concat!(include_str!("../../backend/cuda/kernels/simt_gemm.cuh"), include_str!("../../backend/cuda/kernels/conv_wgrad_simt.cu"));
/// Pixels per shared-memory slice.
const BK: usize = 16;

/// Output channels × filter columns per block: 128 × 128 (8 × 8 per thread) where the GEMM is
/// that large, else 64 on the short side (no mostly-empty tiles).
fn block_tile(g: &Geom) -> (usize, usize) {
    let side = |n: usize| if n >= 128 { 128 } else { 64 };
    (side(g.kg()), side(g.cg() * g.filter_size()))
}

pub struct CudaConvWgradSimt;

impl Solver for CudaConvWgradSimt {
    fn name(&self) -> &'static str { "CudaConvBwdWeightsSimt" }
    fn solution_id(&self) -> u64 { 110 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::ImplicitGemm }
    fn device(&self) -> DeviceKind { DeviceKind::Cuda }

    fn check(&self, problem: &FusedProblem, _device: &DeviceInfo) -> std::result::Result<(), String> {
        let Some(conv) = problem.conv_problem() else { return Err("not a convolution problem".into()) };
        check_dtype(problem)?;
        if conv.direction != Direction::BackwardWeights {
            return Err(format!("backward-weights only (this is {:?})", conv.direction));
        }
        let g = Geom::of(conv);
        let limit = i32::MAX as usize / 2;
        if g.n * g.output_size() >= limit || g.cg() * g.filter_size() >= limit || g.groups > 65535 {
            return Err("GEMM dimensions exceed 32-bit indexing or the launch's group limit".into());
        }
        Ok(())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // About 15 TFLOP/s on a Hopper-class GPU, as the forward CUDA-core kernel.
        problem.conv_problem().map(|c| 2.0 * c.macs() / 15e12 * 1e3 + 0.01).unwrap_or(f64::MAX)
    }

    fn build(&self, problem: &FusedProblem, ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let be = cuda_of(ctx.device())?.clone();
        let conv = problem.conv_problem().ok_or_else(|| Error::internal("wgrad-simt: not a convolution"))?;
        let g = Geom::of(conv);
        let (bm, bn) = block_tile(&g);
        let mut defs = preamble::conv_geometry_defines(&g);
        let dy_channels_last = conv.y.is_channels_last();
        for (name, v) in [("BM", bm), ("BN", bn), ("BK", BK), ("CHANNEL_INNER", conv.x.is_channels_last() as usize), ("DY_CHANNEL_INNER", dy_channels_last as usize)] {
            defs.push((name.to_string(), v.to_string()));
        }
        let defs: Vec<(&str, String)> = defs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        let src = preamble::source(conv.dtype(), problem.epilogue(), &Extra { act: None, defines: &defs }, TEMPLATE)?;
        let module = be.module("conv_wgrad_simt", &src)?;
        let (kernel, reduce) = (module.function("conv_wgrad_simt")?, module.function("conv_wgrad_simt_reduce")?);
        let tiles = g.kg().div_ceil(bm) * (g.cg() * g.filter_size()).div_ceil(bn);
        let slices = (g.n * g.output_size()).div_ceil(BK);
        // About four blocks per SM (256 threads, at most 32 KiB of shared memory), sharing the
        // SM's 128 FMA lanes at ~1.8 GHz; each split's f32 partial sums cost a pass at ~3 TB/s.
        let cost = SplitCosts { kstep_us: (bm * bn * BK) as f64 / 32.0 / 1.8e3, partial_us: (tiles * g.groups * bm * bn) as f64 * 8.0 / 3e6 };
        let splits = wgrad_splits(tiles * g.groups, slices, be.dev.sm_count() as usize * 4, cost);
        Ok(Arc::new(WgradSimtInvoker { be, kernel, reduce, geom: g, tiles, tile: (bm, bn), splits, problem: problem.clone() }))
    }
}

/// The kernels' parameter block (mirrors `WgradSimtArgs` in conv_wgrad_simt.cu).
#[repr(C)]
struct WgradSimtArgs {
    p: Params,
    partial: u64,
    splits: i32,
    pad: i32,
}

struct WgradSimtInvoker {
    be: Arc<CudaBackend>,
    kernel: Kernel,
    reduce: Kernel,
    geom: Geom,
    tiles: usize,
    /// (BM, BN) of `block_tile`.
    tile: (usize, usize),
    splits: usize,
    problem: FusedProblem,
}

impl Invoker for WgradSimtInvoker {
    fn run(&self, ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let g = &self.geom;
        let slot_bytes = g.groups * self.tiles * self.splits * self.tile.0 * self.tile.1 * 4;
        timed(ctx, &self.be, || {
            let scratch = Scratch::new(ctx, &self.be.dev, slot_bytes)?;
            let args = WgradSimtArgs { p: conv_run_params(g, &self.problem, a)?, partial: scratch.ptr(), splits: self.splits as i32, pad: 0 };
            let grid = (self.tiles as u32, self.splits as u32, g.groups as u32);
            let total = (g.k * g.cg() * g.filter_size()) as u64;
            // SAFETY: WgradSimtArgs mirrors the kernels' parameter block (Params checked by the
            // preamble's static_assert); x, dy and dw are the caller's validated tensors, the
            // slots the scratch sized for every (group, tile, split).
            unsafe {
                self.kernel.launch(&self.be.dev, grid, (256, 1, 1), 0, &args)?;
                self.reduce.launch(&self.be.dev, (grid_for(&self.be, total, 256), 1, 1), (256, 1, 1), 0, &args)
            }
        })
    }
}
