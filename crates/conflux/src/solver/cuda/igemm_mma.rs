//! Implicit-GEMM forward convolution on tensor cores (conv_igemm_tc.cu: mma.sync m16n8k16,
//! cp.async pipeline) for f16/bf16 channels-last tensors with the fused epilogue. Refuses what
//! the 16-byte copies cannot express (channels per group not a multiple of 8, strides that
//! break the alignment); misaligned pointers at run time go to the CUDA-core kernel.

use super::common::{conv_run_params, cuda_of, Fallback};
use super::igemm_simt::CudaConvIgemm;
use super::tensor_core::{tensor_core_check, tensor_core_defines};
use crate::solver::{Invoker, RunArgs, Solver, chosen_config};
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

const TEMPLATE: &str = concat!(
    include_str!("../../backend/cuda/kernels/igemm_common.cuh"),
    include_str!("../../backend/cuda/kernels/igemm_tile.cuh"),
    include_str!("../../backend/cuda/kernels/mma_sync.cuh"),
    include_str!("../../backend/cuda/kernels/conv_igemm_tc.cu")
);

/// One point of the kernel's configuration space: block tile, warp tile, pipeline depth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TileConfig {
    pub bm: usize,
    pub bn: usize,
    pub bk: usize,
    pub wm: usize,
    pub wn: usize,
    pub stages: usize,
}

impl TileConfig {
    pub const fn new(bm: usize, bn: usize, bk: usize, wm: usize, wn: usize, stages: usize) -> TileConfig {
        TileConfig { bm, bn, bk, wm, wn, stages }
    }
    pub fn threads(&self) -> usize { (self.bm / self.wm) * (self.bn / self.wn) * 32 }
    pub fn smem_bytes(&self) -> usize { self.stages * (self.bm + self.bn) * self.bk * 2 }
    pub fn label(&self) -> String { format!("{}x{}x{}w{}x{}s{}", self.bm, self.bn, self.bk, self.wm, self.wn, self.stages) }
    /// Blocks per SM the kernel asks registers for (two for 256-thread tiles).
    pub fn min_blocks(&self) -> usize { if self.threads() >= 256 { 2 } else { 3 } }

    /// The configuration with this `label`, if it is in the tuning space.
    pub fn parse(s: &str) -> Option<TileConfig> {
        CONFIGS.iter().copied().find(|c| c.label() == s)
    }
}

/// The tuning space (every entry satisfies the kernel's static_asserts).
pub const CONFIGS: &[TileConfig] = &[
    TileConfig::new(128, 128, 32, 64, 32, 4),
    TileConfig::new(128, 128, 64, 64, 32, 3),
    TileConfig::new(128, 64, 32, 64, 32, 4),
    TileConfig::new(128, 64, 64, 64, 32, 3),
    TileConfig::new(64, 128, 32, 32, 64, 4),
    TileConfig::new(64, 64, 64, 32, 32, 4),
    TileConfig::new(256, 64, 32, 64, 32, 4),
];

/// Heuristic choice, fitted to the tile sweep on the ResNet-50 layers (H200, N = 64; see
/// bench/results): the widest 64-deep tile (128×128, then 128×64, then 64×64; never wider in
/// channels than the layer needs) that still gives every SM two blocks.
pub fn heuristic(g: &Geom, sm_count: usize) -> TileConfig {
    let m = g.n * g.output_size();
    let blocks = |c: &TileConfig| m.div_ceil(c.bm) * g.kg().div_ceil(c.bn) * g.groups;
    let ladder = [CONFIGS[1], CONFIGS[3], CONFIGS[5]];
    ladder
        .into_iter()
        .filter(|c| c.bn <= 64 || g.kg() > 64)
        .find(|c| blocks(c) >= 2 * sm_count)
        .unwrap_or(CONFIGS[5])
}

pub struct CudaConvIgemmTc;

/// Launch shape of a tensor-core kernel: block tile, threads, dynamic shared memory.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TileLaunch {
    pub bm: usize,
    pub bn: usize,
    pub threads: u32,
    pub smem: u32,
    /// Persistent kernels: at most this many blocks, each looping over tiles; else one block
    /// per tile.
    pub max_blocks: Option<usize>,
}

/// Invoker of either tensor-core kernel.
pub(crate) struct TcInvoker {
    be: Arc<CudaBackend>,
    kernel: Kernel,
    geom: Geom,
    launch: TileLaunch,
    /// Alignment (bytes) the kernel's stores need of y (1, 4 paired, 16 staged; `Staging::y_align`).
    y_align: u64,
    problem: FusedProblem,
    /// The CUDA-core kernel, built on first need for pointers the 16-byte copies cannot use.
    fallback: Fallback,
}

impl Solver for CudaConvIgemmTc {
    fn name(&self) -> &'static str { "CudaConvImplicitGemmTensorCore" }
    fn solution_id(&self) -> u64 { 104 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::ImplicitGemm }
    fn device(&self) -> DeviceKind { DeviceKind::Cuda }

    fn check(&self, problem: &FusedProblem, _device: &DeviceInfo) -> std::result::Result<(), String> {
        tensor_core_check(problem).map(|_| ())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // About 300 TFLOP/s with mma.sync on a Hopper-class GPU.
        problem.conv_problem().map(|c| 2.0 * c.macs() / 300e12 * 1e3 + 0.004).unwrap_or(f64::MAX)
    }

    fn build(&self, problem: &FusedProblem, ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let be = cuda_of(ctx.device())?;
        let conv = problem.conv_problem().ok_or_else(|| Error::internal("igemm-tc: not a convolution"))?;
        let g = Geom::of(conv);
        let cfg = chosen_config(ctx, self.name(), &problem.key(), "CONFLUX_TC_TILE", TileConfig::parse, || {
            heuristic(&g, be.dev.sm_count() as usize)
        })?;
        self.build_with(problem, ctx, cfg)
    }

    fn tuning_space(&self, _problem: &FusedProblem) -> Vec<String> {
        CONFIGS.iter().map(TileConfig::label).collect()
    }

    fn build_config(&self, problem: &FusedProblem, ctx: &dyn BuildContext, config: &str) -> Result<Arc<dyn Invoker>> {
        let cfg = TileConfig::parse(config).ok_or_else(|| Error::bad_parm(format!("{}: unknown configuration {config}", self.name())))?;
        self.build_with(problem, ctx, cfg)
    }
}

impl CudaConvIgemmTc {
    /// Build with a given tile configuration (tuning and tests); `check` must have passed.
    pub fn build_with(&self, problem: &FusedProblem, ctx: &dyn BuildContext, cfg: TileConfig) -> Result<Arc<dyn Invoker>> {
        let be = cuda_of(ctx.device())?.clone();
        let conv = problem.conv_problem().ok_or_else(|| Error::internal("igemm-tc: not a convolution"))?;
        let g = Geom::of(conv);
        let tile = [("BM", cfg.bm), ("BN", cfg.bn), ("BK", cfg.bk), ("WM", cfg.wm), ("WN", cfg.wn), ("STAGES", cfg.stages), ("THREADS", cfg.threads()), ("LOADER_THREADS", cfg.threads()), ("MIN_BLOCKS", cfg.min_blocks())];
        let (defs, pair_store) = tensor_core_defines(&g, conv.dtype(), &tile);
        let defs: Vec<(&str, String)> = defs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        let src = preamble::source(conv.dtype(), problem.epilogue(), &Extra { act: None, defines: &defs }, TEMPLATE)?;
        let kernel = be.module("conv_igemm_tc", &src)?.function("conv_fwd_igemm_tc")?;
        kernel.reserve_dynamic_smem(&be.dev, cfg.smem_bytes() as u32)?;
        let launch = TileLaunch { bm: cfg.bm, bn: cfg.bn, threads: cfg.threads() as u32, smem: cfg.smem_bytes() as u32, max_blocks: None };
        Ok(Arc::new(TcInvoker::new(be, kernel, g, launch, if pair_store { 4 } else { 1 }, problem)))
    }
}

impl TcInvoker {
    pub(crate) fn new(be: Arc<CudaBackend>, kernel: Kernel, geom: Geom, launch: TileLaunch, y_align: u64, problem: &FusedProblem) -> TcInvoker {
        TcInvoker { be, kernel, geom, launch, y_align, problem: problem.clone(), fallback: Fallback::new(&CudaConvIgemm) }
    }

    /// The 16-byte copies need 16-byte aligned x and w; the stores y_align.
    fn pointers_fit(&self, a: &RunArgs) -> bool {
        a.x.0 % 16 == 0 && a.w.0 % 16 == 0 && a.y.0 % self.y_align == 0
    }
}

impl Invoker for TcInvoker {
    fn run(&self, ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        if !self.pointers_fit(a) {
            return self.fallback.run(&self.problem, ctx, a);
        }
        let g = &self.geom;
        let p = conv_run_params(g, &self.problem, a)?;
        let m = g.n * g.output_size();
        // One grid row of (pixel tile, channel tile) pairs per group, channel tiles fastest.
        let tiles = m.div_ceil(self.launch.bm) * g.kg().div_ceil(self.launch.bn);
        if tiles > i32::MAX as usize || g.groups > 65535 {
            return Err(Error::not_implemented("igemm-tc: too many tiles or groups for one launch"));
        }
        let grid = (tiles.min(self.launch.max_blocks.unwrap_or(usize::MAX)) as u32, 1, g.groups as u32);
        let (threads, smem) = (self.launch.threads, self.launch.smem);
        // SAFETY: Params mirrors the kernel struct; pointers validated against the problem and
        // checked for the alignment the kernel's vector accesses need.
        timed(ctx, &self.be, || unsafe { self.kernel.launch(&self.be.dev, grid, (threads, 1, 1), smem, &p) })
    }
}
