//! Grouped forward convolutions with 2–32 channels per group (ResNeXt, RegNet) on tensor cores
//! (conv_grouped_tc.cu: mma.sync m16n8k16) with the fused epilogue. A GEMM per group gives
//! these layers tiles of 8–32 columns and a reduction of a few chunks; this kernel packs
//! several whole groups into one block, keeps their filters in shared memory and multiplies
//! only the diagonal blocks of the block-diagonal filter. Groups of 2 or 4 channels are merged
//! into virtual groups of 8 whose filters are block-diagonal (zeros between the real groups).

use super::common::{conv_run_params, cuda_of, Fallback};
use super::igemm_simt::CudaConvIgemm;
use super::tensor_core::{tensor_core_defines, tensor_core_layout};
use crate::backend::cuda::module::Kernel;
use crate::backend::cuda::preamble::{self, Extra};
use crate::backend::cuda::{timed, CudaBackend};
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::error::{Error, Result};
use crate::problem::{FusedProblem, Geom};
use crate::solver::{chosen_config, BuildContext, Invoker, RunArgs, Solver};
use crate::types::{ConvAlgorithm, DataType, Direction};
use std::sync::Arc;

const TEMPLATE: &str = concat!(
    include_str!("../../backend/cuda/kernels/igemm_common.cuh"),
    include_str!("../../backend/cuda/kernels/mma_sync.cuh"),
    include_str!("../../backend/cuda/kernels/conv_grouped_tc.cu")
);

/// Most input channels per group: a block's groups share one 128-byte row per pixel and tap,
/// and from 64 channels on a group fills the general kernels' tiles by itself.
pub const MAX_CHANNELS_PER_GROUP: usize = 32;
/// Most output channels of the groups one block computes.
const MAX_BLOCK_OUTPUTS: usize = 128;
/// Shared memory a block may take (Hopper's opt-in limit).
const MAX_SMEM: usize = 227 * 1024;

/// Block shapes: output pixels, warps along pixels, warps along channels.
const BLOCKS: [(usize, usize, usize); 4] = [(128, 4, 2), (128, 4, 1), (64, 2, 2), (64, 4, 1)];
const STAGES: [usize; 2] = [3, 4];

/// Filter taps per pipeline stage that tuning may pick.
const TAPS_PER_STAGE: [usize; 4] = [1, 2, 3, 4];

/// One configuration: block shape, pipeline depth, groups per block and filter taps per
/// stage. Label `b128w4x2s3g8t2`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Tile {
    bm: usize,
    warps_m: usize,
    warps_n: usize,
    stages: usize,
    gpb: usize,
    tps: usize,
}

impl Tile {
    fn label(&self) -> String { format!("b{}w{}x{}s{}g{}t{}", self.bm, self.warps_m, self.warps_n, self.stages, self.gpb, self.tps) }

    fn parse(s: &str) -> Option<Tile> {
        let rest = s.strip_prefix('b')?;
        let (bm, rest) = rest.split_once('w')?;
        let (warps_m, rest) = rest.split_once('x')?;
        let (warps_n, rest) = rest.split_once('s')?;
        let (stages, rest) = rest.split_once('g')?;
        let (gpb, tps) = rest.split_once('t')?;
        let n = |s: &str| s.parse::<usize>().ok();
        let t = Tile { bm: n(bm)?, warps_m: n(warps_m)?, warps_n: n(warps_n)?, stages: n(stages)?, gpb: n(gpb)?, tps: n(tps)? };
        (BLOCKS.contains(&(t.bm, t.warps_m, t.warps_n)) && STAGES.contains(&t.stages) && t.gpb >= 1 && TAPS_PER_STAGE.contains(&t.tps)).then_some(t)
    }

    fn threads(&self) -> usize { self.warps_m * self.warps_n * 32 }

    /// Whether the kernel's static conditions hold for `g` and the block fits shared memory.
    fn fits(&self, g: &Geom) -> bool {
        let bn = self.gpb * g.kg();
        if self.gpb > max_groups_per_block(g) || bn % self.warps_n != 0 {
            return false;
        }
        let wn = bn / self.warps_n;
        // Every m16n8k16 step (two chunks) inside one stage; no stage of padding taps only.
        let whole_steps = (self.tps * (g.cg() / 8)) % 2 == 0 && self.tps < g.filter_size() + taps_per_stage(g);
        whole_steps && wn % 8 == 0 && (wn % g.kg() == 0 || g.kg() % wn == 0) && self.smem_bytes(g) <= MAX_SMEM
    }

    fn smem_bytes(&self, g: &Geom) -> usize {
        let tps = self.tps;
        let q_row = g.filter_size().div_ceil(tps) * tps * (g.cg() / 8);
        self.gpb * g.kg() * (q_row | 1) * 16 + self.stages * tps * self.bm * 128
    }

    fn blocks(&self, g: &Geom) -> usize { (g.n * g.output_size()).div_ceil(self.bm) * g.groups.div_ceil(self.gpb) }
}

/// The fewest taps per pipeline stage: two when a group is an odd number of chunks, so that
/// every m16n8k16 step (two chunks) lies inside one stage.
fn taps_per_stage(g: &Geom) -> usize { if (g.cg() / 8) % 2 == 1 { 2 } else { 1 } }

/// Groups whose input channels fill one 128-byte row and whose outputs fit a block.
fn max_groups_per_block(g: &Geom) -> usize { (64 / g.cg()).min(MAX_BLOCK_OUTPUTS / g.kg()).min(g.groups).max(1) }

/// Group counts per block worth trying: the most, half and a quarter of it.
fn group_counts(g: &Geom) -> Vec<usize> {
    let most = max_groups_per_block(g);
    let mut v: Vec<usize> = [most, most / 2, most / 4].into_iter().filter(|&c| c >= 1).collect();
    v.dedup();
    v
}

/// Every configuration with `gpb` groups per block for each count of `counts`, in that order.
fn space(counts: &[usize]) -> Vec<Tile> {
    let mut out = Vec::new();
    for &gpb in counts {
        for &(bm, warps_m, warps_n) in &BLOCKS {
            for &stages in &STAGES {
                out.extend(TAPS_PER_STAGE.iter().map(|&tps| Tile { bm, warps_m, warps_n, stages, gpb, tps }));
            }
        }
    }
    out
}

/// The configurations that fit `g`, most groups per block first.
fn tiles(g: &Geom) -> Vec<Tile> { space(&group_counts(g)).into_iter().filter(|t| t.fits(g)).collect() }

/// Shared memory that still lets two blocks share an SM.
const TWO_BLOCKS_SMEM: usize = 113 * 1024;

/// Every label of the configuration space (1 to 8 groups per block), fitting or not.
fn every_label() -> Vec<String> { space(&[8, 7, 6, 5, 4, 3, 2, 1]).iter().map(Tile::label).collect() }

/// The most groups per block on 128 pixels and 8 warps while that gives every SM a block
/// (with fewer groups per block each group tile rereads x);
/// else 64 pixels, with fewer groups per block until every SM has one (batch 1). The deepest
/// pipeline that keeps two blocks per SM. Sweep: bench/results/2026-11-27-h200-grouped-tc.md.
fn heuristic(g: &Geom, sm_count: usize) -> Option<Tile> {
    let all = tiles(g);
    let tps = taps_per_stage(g);
    let pick = |bm: usize, warps_m: usize, gpb: usize| {
        let fit = all.iter().copied().filter(move |t| (t.bm, t.warps_m, t.warps_n, t.gpb, t.tps) == (bm, warps_m, 2, gpb, tps));
        fit.clone().filter(|t| t.smem_bytes(g) <= TWO_BLOCKS_SMEM).max_by_key(|t| t.stages).or_else(|| fit.min_by_key(|t| t.stages))
    };
    let counts = group_counts(g);
    if let Some(t) = pick(128, 4, counts[0]).filter(|t| t.blocks(g) >= sm_count) {
        return Some(t);
    }
    let mut last = None;
    for &gpb in &counts {
        if let Some(t) = pick(64, 2, gpb) {
            if t.blocks(g) >= sm_count {
                return Some(t);
            }
            last = Some(t);
        }
    }
    last.or_else(|| all.first().copied())
}

/// The problem as the kernel sees it, and SUB: groups of 2 or 4 channels merged SUB at a time
/// into virtual groups of 8 channels (the same x, y and w; only the group count changes), other
/// groups as they are (SUB = 1; the tensor-core layout conditions).
fn kernel_geometry(problem: &FusedProblem) -> std::result::Result<(Geom, usize), String> {
    let Some(conv) = problem.conv_problem() else { return Err("not a convolution problem".into()) };
    if !matches!(conv.dtype(), DataType::Half | DataType::BFloat16) {
        return Err(format!("tensor cores need f16 or bf16 data ({:?} given)", conv.dtype()));
    }
    let g = Geom::of(conv);
    if !matches!(g.cg(), 2 | 4) {
        return tensor_core_layout(conv).map(|g| (g, 1));
    }
    if conv.direction != Direction::Forward {
        return Err(format!("forward only (this is {:?})", conv.direction));
    }
    let sub = 8 / g.cg();
    if g.groups % sub != 0 {
        return Err(format!("{} groups of {} channels do not merge into groups of 8", g.groups, g.cg()));
    }
    let rows = |s: &[usize; 5], unit: usize| s[1] == 1 && [s[0], s[2], s[3], s[4]].iter().all(|v| v % unit == 0);
    if !rows(&g.x_strides, 8) || !rows(&g.w_strides, g.cg()) {
        return Err("x and w must be channels-last with 16-byte aligned pixel rows of x".into());
    }
    let biggest = [g.n * g.x_strides[0], g.k * g.w_strides[0], g.n * g.output_size(), g.kg() * g.cg() * g.filter_size()];
    if biggest.iter().any(|&v| v >= i32::MAX as usize / 2) {
        return Err("tensor too large for 32-bit tile indexing".into());
    }
    Ok((Geom { groups: g.groups / sub, ..g }, sub))
}

pub struct CudaConvGroupedTc;

struct GroupedInvoker {
    be: Arc<CudaBackend>,
    kernel: Kernel,
    /// The problem's geometry (run parameters) and the kernel's (virtual groups).
    geom: Geom,
    vgeom: Geom,
    tile: Tile,
    smem: u32,
    y_align: u64,
    problem: FusedProblem,
    /// The CUDA-core kernel, built on first need for pointers the 16-byte copies cannot use.
    fallback: Fallback,
}

impl Solver for CudaConvGroupedTc {
    fn name(&self) -> &'static str { "CudaConvGroupedTensorCore" }
    fn solution_id(&self) -> u64 { 119 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::ImplicitGemm }
    fn device(&self) -> DeviceKind { DeviceKind::Cuda }

    fn check(&self, problem: &FusedProblem, _device: &DeviceInfo) -> std::result::Result<(), String> {
        let (g, _) = kernel_geometry(problem)?;
        if g.groups == 1 {
            return Err("ungrouped: the general tensor-core kernels take it".into());
        }
        if g.cg() > MAX_CHANNELS_PER_GROUP {
            return Err(format!("{} input channels per group (at most {MAX_CHANNELS_PER_GROUP}; more fill the general kernels' tiles)", g.cg()));
        }
        if g.kg() % 8 != 0 || g.kg() > MAX_BLOCK_OUTPUTS {
            return Err(format!("{} output channels per group (a multiple of 8, at most {MAX_BLOCK_OUTPUTS})", g.kg()));
        }
        let Some(t) = tiles(&g).into_iter().last() else {
            return Err(format!("a {}-tap filter of {} channels per group does not fit shared memory", g.filter_size(), g.cg()));
        };
        if t.blocks(&g) >= i32::MAX as usize {
            return Err("too many tiles for one launch".into());
        }
        Ok(())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // About 150 TFLOP/s of useful products: ldmatrix feeds each A fragment to few MMAs.
        problem.conv_problem().map(|c| 2.0 * c.macs() / 150e12 * 1e3 + 0.004).unwrap_or(f64::MAX)
    }

    fn build(&self, problem: &FusedProblem, ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let be = cuda_of(ctx.device())?;
        let (g, _) = kernel_geometry(problem).map_err(|why| Error::not_implemented(format!("{}: {why}", self.name())))?;
        let sms = be.dev.sm_count() as usize;
        let tile = chosen_config(ctx, self.name(), &problem.key(), "CONFLUX_GROUPED_TILE", Tile::parse, || {
            heuristic(&g, sms).unwrap_or(Tile { bm: 64, warps_m: 4, warps_n: 1, stages: 3, gpb: 1, tps: taps_per_stage(&g) })
        })?;
        self.build_with(problem, ctx, tile)
    }

    /// The configurations that fit the problem; for a problem the kernel does not take itself
    /// (the backward-data adapters ask with theirs before rewriting it), every label, each
    /// refused at build time where it does not fit.
    fn tuning_space(&self, problem: &FusedProblem) -> Vec<String> {
        match kernel_geometry(problem) {
            Ok((g, _)) => tiles(&g).iter().map(Tile::label).collect(),
            Err(_) => every_label(),
        }
    }

    fn build_config(&self, problem: &FusedProblem, ctx: &dyn BuildContext, config: &str) -> Result<Arc<dyn Invoker>> {
        let tile = Tile::parse(config).ok_or_else(|| Error::bad_parm(format!("{}: no configuration {config}", self.name())))?;
        self.build_with(problem, ctx, tile)
    }
}

impl CudaConvGroupedTc {
    /// Build with `tile`; `check` must have passed.
    fn build_with(&self, problem: &FusedProblem, ctx: &dyn BuildContext, tile: Tile) -> Result<Arc<dyn Invoker>> {
        let be = cuda_of(ctx.device())?.clone();
        let conv = problem.conv_problem().ok_or_else(|| Error::internal("grouped-tc: not a convolution"))?;
        let (g, sub) = kernel_geometry(problem).map_err(|why| Error::not_implemented(format!("{}: {why}", self.name())))?;
        if !tile.fits(&g) {
            return Err(Error::bad_parm(format!("{}: configuration {} does not fit this problem", self.name(), tile.label())));
        }
        let (src, y_align) = kernel_source(problem, &g, sub, tile)?;
        let kernel = be.module("conv_grouped_tc", &src)?.function("conv_fwd_grouped_tc")?;
        let smem = tile.smem_bytes(&g) as u32;
        kernel.reserve_dynamic_smem(&be.dev, smem)?;
        Ok(Arc::new(GroupedInvoker { be, kernel, geom: Geom::of(conv), vgeom: g, tile, smem, y_align, problem: problem.clone(), fallback: Fallback::new(&CudaConvIgemm) }))
    }
}

/// The kernel's source for `problem` (kernel geometry `g`, `sub` real groups per group of `g`)
/// with `tile`, and the alignment (bytes) its stores need of y.
fn kernel_source(problem: &FusedProblem, g: &Geom, sub: usize, tile: Tile) -> Result<(String, u64)> {
    // Registers for three 128-thread blocks per SM unless a thread holds over 64 accumulators
    // or copies more than four x rows per tap (those spill under the tighter cap).
    let accumulators = tile.bm / tile.warps_m / 16 * (tile.gpb * g.kg() / tile.warps_n / 8) * 4;
    let rows = tile.bm * 8 / tile.threads();
    let min_blocks = if tile.threads() >= 256 || accumulators > 64 || rows > 4 { 2 } else { 3 };
    let defs = [
        ("GROUPS", g.groups),
        ("SUB", sub),
        ("CG_W", g.cg() / sub),
        ("GPB", tile.gpb),
        ("BM", tile.bm),
        ("WARPS_M", tile.warps_m),
        ("WARPS_N", tile.warps_n),
        ("STAGES", tile.stages),
        ("TPS", tile.tps),
        ("MIN_BLOCKS", min_blocks),
    ];
    let (defs, pair_store) = tensor_core_defines(g, problem.dtype(), &defs);
    let defs: Vec<(&str, String)> = defs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    let y_align = if pair_store { 4 } else { 1 };
    Ok((preamble::source(problem.dtype(), problem.epilogue(), &Extra { act: None, defines: &defs }, TEMPLATE)?, y_align))
}

impl Invoker for GroupedInvoker {
    fn run(&self, ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        if a.x.0 % 16 != 0 || a.w.0 % 16 != 0 || a.y.0 % self.y_align != 0 {
            return self.fallback.run(&self.problem, ctx, a);
        }
        let p = conv_run_params(&self.geom, &self.problem, a)?;
        let grid = self.tile.blocks(&self.vgeom) as u32;
        let threads = self.tile.threads() as u32;
        // SAFETY: Params mirrors the kernel's parameter struct; pointers are the caller's
        // tensors, validated against the problem and checked for the alignment of the 16-byte
        // copies and paired stores.
        timed(ctx, &self.be, || unsafe { self.kernel.launch(&self.be.dev, (grid.max(1), 1, 1), (threads, 1, 1), self.smem, &p) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geom(c: usize, k: usize, groups: usize, hw: usize, f: usize, n: usize) -> Geom {
        Geom {
            n,
            c,
            k,
            groups,
            input: [1, hw, hw],
            output: [1, hw, hw],
            filter: [1, f, f],
            stride: [1, 1, 1],
            pad: [0, f / 2, f / 2],
            pad_end: [0, f / 2, f / 2],
            dilation: [1, 1, 1],
            x_strides: [hw * hw * c, 1, hw * hw * c, hw * c, c],
            w_strides: [f * f * (c / groups), 1, f * f * (c / groups), f * (c / groups), c / groups],
            y_strides: [hw * hw * k, 1, hw * hw * k, hw * k, k],
        }
    }

    #[test]
    fn labels_round_trip_and_every_tile_fits() {
        for g in [geom(128, 128, 32, 56, 3, 32), geom(256, 256, 32, 28, 3, 32), geom(512, 512, 32, 14, 3, 1), geom(1024, 1024, 32, 7, 3, 1), geom(96, 192, 4, 9, 5, 2)] {
            let all = tiles(&g);
            assert!(!all.is_empty(), "{g:?}");
            for t in &all {
                assert_eq!(Tile::parse(&t.label()), Some(*t));
                assert!(t.fits(&g) && t.smem_bytes(&g) <= MAX_SMEM);
            }
            let h = heuristic(&g, 132).unwrap();
            assert!(all.contains(&h), "{h:?}");
        }
        assert_eq!(Tile::parse("b96w4x2s3g8t2"), None);
        assert_eq!(Tile::parse("b128w4x2s3g8"), None);
    }

    #[test]
    fn heuristic_packs_whole_rows_and_splits_small_layers() {
        // ResNeXt's groups of 8 at 28×28, batch 32: eight groups (64 channels) per block.
        let h = heuristic(&geom(256, 256, 32, 28, 3, 32), 132).unwrap();
        assert_eq!((h.bm, h.gpb), (128, 8));
        // Groups of 32 on a 7×7 image at batch 1: too few blocks for 132 SMs at any size, so
        // the tile with the most blocks.
        let g = geom(1024, 1024, 32, 7, 3, 1);
        let h = heuristic(&g, 132).unwrap();
        assert!(tiles(&g).iter().all(|t| t.blocks(&g) <= h.blocks(&g)));
    }

    /// Every tile's source for ResNeXt-like layers (groups of 2, 4, 8, 16, 32; 8 → 16 outputs;
    /// a 5×5 filter) with a bias + ReLU epilogue is generated; with `CONFLUX_KERNEL_SOURCES`
    /// set, written there for an offline NVRTC compile (`scripts/nvrtc_check.py`).
    #[test]
    fn sources_generate_for_every_tile() {
        use crate::problem::{EpiOp, FusedKind};
        use crate::types::{ActivationMode, ConvMode, DataType, Layout};
        use crate::{ConvDesc, TensorDesc};
        let out = std::env::var("CONFLUX_KERNEL_SOURCES").ok();
        for (i, &(c, k, groups, hw, f, stride)) in [(128, 128, 16, 56, 3, 1), (256, 256, 16, 28, 3, 2), (512, 512, 16, 14, 3, 1), (256, 512, 32, 9, 5, 1), (128, 128, 32, 56, 3, 1), (32, 32, 16, 9, 3, 1)].iter().enumerate() {
            let conv = ConvDesc::new(ConvMode::Convolution, &[f as i64 / 2; 2], &[stride; 2], &[1, 1]).unwrap();
            let mut conv = conv;
            conv.set_groups(groups).unwrap();
            let nhwc = |l: &[usize]| TensorDesc::with_layout(DataType::Half, Layout::NHWC, l).unwrap();
            let x = nhwc(&[2, c, hw, hw]);
            let w = nhwc(&[k, c / groups as usize, f, f]);
            let y = nhwc(conv.output_desc(&x, &w).unwrap().lens());
            let problem = crate::problem::ConvProblem::forward(&conv, &x, &w, &y).unwrap();
            let epilogue = vec![EpiOp::Bias { dtype: DataType::Half }, EpiOp::Activation { mode: ActivationMode::Relu }];
            let fused = FusedProblem { kind: FusedKind::Conv { conv: problem, epilogue } };
            let (g, sub) = kernel_geometry(&fused).unwrap();
            assert_eq!((g.cg(), g.cg() / sub), (8.max(c / groups as usize), c / groups as usize), "case {i}");
            for tile in tiles(&g) {
                let (src, _) = kernel_source(&fused, &g, sub, tile).unwrap();
                assert!(src.contains("conv_fwd_grouped_tc") && src.contains(&format!("#define GPB {}", tile.gpb)));
                if let Some(dir) = &out {
                    std::fs::write(format!("{dir}/grouped_{i}_{}.cu", tile.label()), src).unwrap();
                }
            }
        }
    }
}
