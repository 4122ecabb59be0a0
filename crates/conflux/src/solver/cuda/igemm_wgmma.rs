//! Implicit-GEMM forward convolution with Hopper warpgroup MMA (conv_igemm_wgmma.cu: wgmma
//! from 128-byte-swizzled shared tiles filled by a cp.async pipeline) for f16/bf16
//! channels-last tensors with the fused epilogue. Same applicability as the mma.sync kernel
//! (`cuda_igemm_tc`) plus a compute capability 9.0 device: wgmma exists only in the
//! architecture-specific sm_90a target.

use super::common::cuda_of;
use super::igemm_mma::{TcInvoker, TileLaunch};
use super::tensor_core::{tensor_core_check, tensor_core_defines, Staging};
use crate::solver::{Invoker, Solver, chosen_config};
use crate::backend::cuda::preamble::{self, Extra};
use crate::problem::Geom;
use crate::error::{Error, Result};
use crate::problem::FusedProblem;
use crate::backend::{DeviceInfo, DeviceKind};
use crate::solver::BuildContext;
use crate::types::ConvAlgorithm;
use std::sync::Arc;

const TEMPLATE: &str = concat!(
    include_str!("../../backend/cuda/kernels/igemm_common.cuh"),
    include_str!("../../backend/cuda/kernels/igemm_tile.cuh"),
    include_str!("../../backend/cuda/kernels/wgmma.cuh"),
    include_str!("../../backend/cuda/kernels/wgmma_epilogue.cuh"),
    include_str!("../../backend/cuda/kernels/conv_igemm_wgmma.cu"),
);

/// One point of the wgmma kernel's space: block tile (one warpgroup per 64 pixel rows),
/// pipeline depth, and whether the grid is persistent (as many blocks as are resident, each
/// walking several tiles with the next tile's copies overlapping this tile's epilogue) or
/// one block per tile; the reduction step is always 64.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WgTile {
    pub bm: usize,
    pub bn: usize,
    pub stages: usize,
    pub persistent: bool,
}

/// Shared memory one SM offers its blocks (228 KiB, 1 KiB of it reserved per block).
const SM_SMEM: usize = 228 * 1024;

impl WgTile {
    pub const fn new(bm: usize, bn: usize, stages: usize, persistent: bool) -> WgTile { WgTile { bm, bn, stages, persistent } }
    pub fn threads(&self) -> usize { self.bm / 64 * 128 }
    /// Stages of (BM + BN) rows of 128 bytes, plus 1 KiB to align the base for the swizzle.
    pub fn smem_bytes(&self) -> usize { self.stages * (self.bm + self.bn) * 128 + 1024 }
    /// Blocks per SM: as many as shared memory allows and registers (the accumulators plus
    /// about 48 for addresses and the epilogue) can follow; several let one block's loads
    /// and epilogue overlap another's multiplies.
    pub fn min_blocks(&self) -> usize {
        let by_smem = SM_SMEM / (self.smem_bytes() + 1024);
        let by_regs = 65536 / (self.threads() * (self.bn / 2 + 48));
        by_smem.min(by_regs).clamp(1, 4)
    }
    pub fn label(&self) -> String { format!("{}{}x{}s{}", if self.persistent { "wgp" } else { "wg" }, self.bm, self.bn, self.stages) }
    /// The same tile with no more stages than a reduction of `kred` can fill (the pipeline
    /// keeps stages - 2 tiles in flight), so short reductions leave room for more blocks.
    pub fn fitted(&self, kred: usize) -> WgTile {
        WgTile { stages: self.stages.min(kred.div_ceil(64) + 2).max(3), ..*self }
    }
    pub fn parse(s: &str) -> Option<WgTile> { WG_CONFIGS.iter().copied().find(|c| c.label() == s) }
}

/// The kernel's source for tile `cfg` and the alignment y's rows need for its store path.
fn kernel_source(problem: &FusedProblem, g: &Geom, cfg: WgTile) -> Result<(String, u64)> {
    let dt = problem.conv_problem().ok_or_else(|| Error::internal("igemm-wgmma: not a convolution"))?.dtype();
    // The staged tile lives in one pipeline buffer.
    let fits = cfg.bm * cfg.bn <= (cfg.bm + cfg.bn) * 64;
    let staging = if fits { Staging::of(g) } else { Staging::Direct };
    let mut tile = vec![
        ("BM", cfg.bm), ("BN", cfg.bn), ("BK", 64), ("STAGES", cfg.stages), ("THREADS", cfg.threads()),
        ("LOADER_THREADS", cfg.threads()), ("MIN_BLOCKS", cfg.min_blocks()),
    ];
    tile.extend(staging.defines());
    let (defs, pair_store) = tensor_core_defines(g, dt, &tile);
    let y_align = staging.y_align(pair_store, dt.size());
    let defs: Vec<(&str, String)> = defs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    Ok((preamble::source(dt, problem.epilogue(), &Extra { act: None, defines: &defs }, TEMPLATE)?, y_align))
}

/// The tuning space; every entry fits the 227 KiB of shared memory a block may use.
pub const WG_CONFIGS: &[WgTile] = &[
    WgTile::new(256, 128, 4, false),
    WgTile::new(128, 128, 6, false),
    WgTile::new(128, 128, 4, false),
    WgTile::new(128, 128, 3, false),
    WgTile::new(128, 64, 4, false),
    WgTile::new(128, 64, 3, false),
    WgTile::new(256, 64, 4, false),
    WgTile::new(256, 128, 4, true),
    WgTile::new(128, 128, 6, true),
    WgTile::new(128, 128, 4, true),
    WgTile::new(128, 128, 3, true),
    WgTile::new(128, 64, 4, true),
    WgTile::new(128, 64, 3, true),
    WgTile::new(256, 64, 4, true),
];

/// Heuristic choice, fitted to the tile sweep on the ResNet-50 layers (H200, N = 64, f16; see
/// bench/results/2026-11-21-h200-cba-wgmma.md): persistent 128×64 for layers of at most 64
/// channels; for up to 16384 output pixels 256×128 unless that leaves most SMs idle (fewer
/// blocks than 70% of the SMs: persistent 128×128 then); beyond that persistent 128×128,
/// 3 stages (two blocks per SM) when the reduction is at most two k-tiles, else 6.
pub fn wg_heuristic(g: &Geom, sm_count: usize) -> WgTile {
    let m = g.n * g.output_size();
    let kred = g.cg() * g.filter_size();
    let big = WgTile::new(256, 128, 4, false);
    let blocks = m.div_ceil(big.bm) * g.kg().div_ceil(big.bn) * g.groups;
    if g.kg() <= 64 {
        WgTile::new(128, 64, 4, true)
    } else if m <= 16384 {
        if blocks * 10 >= sm_count * 7 { big } else { WgTile::new(128, 128, 4, true) }
    } else if kred <= 128 {
        WgTile::new(128, 128, 3, true)
    } else {
        WgTile::new(128, 128, 6, true)
    }
}

pub struct CudaConvIgemmWgmma;

impl Solver for CudaConvIgemmWgmma {
    fn name(&self) -> &'static str { "CudaConvImplicitGemmWgmma" }
    fn solution_id(&self) -> u64 { 105 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::ImplicitGemm }
    fn device(&self) -> DeviceKind { DeviceKind::Cuda }

    fn check(&self, problem: &FusedProblem, device: &DeviceInfo) -> std::result::Result<(), String> {
        tensor_core_check(problem)?;
        match device.compute_capability()? {
            (9, 0) => Ok(()),
            (maj, min) => Err(format!("wgmma needs a compute capability 9.0 GPU (sm_90a); this one is {maj}.{min}")),
        }
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // About 450 TFLOP/s on an H100/H200-class GPU.
        problem.conv_problem().map(|c| 2.0 * c.macs() / 450e12 * 1e3 + 0.004).unwrap_or(f64::MAX)
    }

    fn build(&self, problem: &FusedProblem, ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let be = cuda_of(ctx.device())?;
        let conv = problem.conv_problem().ok_or_else(|| Error::internal("igemm-wgmma: not a convolution"))?;
        let g = Geom::of(conv);
        let cfg = chosen_config(ctx, self.name(), &problem.key(), "CONFLUX_WGMMA_TILE", WgTile::parse, || {
            wg_heuristic(&g, be.dev.sm_count() as usize)
        })?;
        self.build_with(problem, ctx, cfg)
    }

    fn tuning_space(&self, _problem: &FusedProblem) -> Vec<String> {
        WG_CONFIGS.iter().map(WgTile::label).collect()
    }

    fn build_config(&self, problem: &FusedProblem, ctx: &dyn BuildContext, config: &str) -> Result<Arc<dyn Invoker>> {
        let cfg = WgTile::parse(config).ok_or_else(|| Error::bad_parm(format!("{}: unknown configuration {config}", self.name())))?;
        self.build_with(problem, ctx, cfg)
    }
}

impl CudaConvIgemmWgmma {
    /// Build with a given tile (tuning and tests); `check` must have passed.
    pub fn build_with(&self, problem: &FusedProblem, ctx: &dyn BuildContext, cfg: WgTile) -> Result<Arc<dyn Invoker>> {
        self.build_capped(problem, ctx, cfg, None)
    }

    /// `build_with`, launching at most `max_blocks` blocks per group (each walking several
    /// tiles) instead of what the configuration says (tests use a few).
    pub fn build_capped(&self, problem: &FusedProblem, ctx: &dyn BuildContext, cfg: WgTile, max_blocks: Option<usize>) -> Result<Arc<dyn Invoker>> {
        let be = cuda_of(ctx.device())?.clone();
        let conv = problem.conv_problem().ok_or_else(|| Error::internal("igemm-wgmma: not a convolution"))?;
        let g = Geom::of(conv);
        let cfg = cfg.fitted(g.cg() * g.filter_size());
        let (src, y_align) = kernel_source(problem, &g, cfg)?;
        let kernel = be.module_arch_specific("conv_igemm_wgmma", &src)?.function("conv_fwd_igemm_wgmma")?;
        kernel.reserve_dynamic_smem(&be.dev, cfg.smem_bytes() as u32)?;
        // Persistent: as many blocks as are resident at once (per group).
        let resident = be.dev.sm_count() as usize * cfg.min_blocks();
        let max_blocks = match (max_blocks, cfg.persistent) {
            (Some(b), _) => Some(b.max(1)),
            (None, true) => Some(resident.div_ceil(g.groups)),
            (None, false) => None,
        };
        let launch = TileLaunch { bm: cfg.bm, bn: cfg.bn, threads: cfg.threads() as u32, smem: cfg.smem_bytes() as u32, max_blocks };
        Ok(Arc::new(TcInvoker::new(be, kernel, g, launch, y_align, problem)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::{ConvProblem, EpiOp, FusedKind};
    use crate::types::{ActivationMode, ConvMode, DataType, Layout};
    use crate::{ConvDesc, TensorDesc};

    /// Sources of every tile generate for a grouped layer whose groups hold a partial channel
    /// tile (28 outputs each: the epilogue's channel guard matters) and for a plain one; with
    /// `CONFLUX_KERNEL_SOURCES` set, written there for an offline NVRTC compile
    /// (`scripts/nvrtc_check.py`).
    #[test]
    fn sources_generate_for_partial_channel_tiles() {
        let out = std::env::var("CONFLUX_KERNEL_SOURCES").ok();
        // (name, groups, x lengths, w lengths, padding, stride, dilation)
        type Case = (&'static str, usize, [usize; 4], [usize; 4], [i64; 2], [i64; 2], [i64; 2]);
        let cases: [Case; 2] = [
            ("g2_k28", 2, [2, 32, 7, 12], [56, 16, 1, 1], [0, 1], [2, 1], [2, 2]),
            ("k200", 1, [1, 64, 9, 9], [200, 64, 3, 3], [1, 1], [1, 1], [1, 1]),
        ];
        for (name, groups, lx, lw, pad, stride, dil) in cases {
            let k = lw[0];
            let mut conv = ConvDesc::new(ConvMode::Convolution, &pad, &stride, &dil).unwrap();
            conv.set_groups(groups as i64).unwrap();
            let t = |l: &[usize]| TensorDesc::with_layout(DataType::Half, Layout::NHWC, l).unwrap();
            let (x, w) = (t(&lx), t(&lw));
            let y = t(conv.output_desc(&x, &w).unwrap().lens());
            let conv = ConvProblem::forward(&conv, &x, &w, &y).unwrap();
            let epilogue = vec![EpiOp::Bias { dtype: DataType::Half }, EpiOp::Activation { mode: ActivationMode::LeakyRelu }];
            let p = FusedProblem { kind: FusedKind::Conv { conv, epilogue } };
            let g = Geom::of(p.conv_problem().unwrap());
            for cfg in WG_CONFIGS {
                let (src, _) = kernel_source(&p, &g, cfg.fitted(g.cg() * g.filter_size())).unwrap();
                assert!(src.contains(&format!("#define KG {}", k / groups)), "{name}");
                if let Some(dir) = &out {
                    std::fs::write(format!("{dir}/igemm_wgmma_{name}_{}.cu", cfg.label()), &src).unwrap();
                }
            }
        }
    }
}
