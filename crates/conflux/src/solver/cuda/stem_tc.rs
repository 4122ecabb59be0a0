//! Ungrouped 16-bit forward convolutions with fewer than 8 input channels (the stems of image
//! networks: 3-channel 7×7 stride 2, 3×3 stride 2, 4×4 stride 4 patchify) on tensor cores
//! (conv_stem_tc.cu: mma.sync m16n8k16) with the fused epilogue, x, w and y in any layout. The
//! reduction packs several horizontally adjacent taps into each 16-byte chunk (two taps of 4
//! channels for 3-channel input) instead of padding every tap to 8 channels, and x is read once
//! per tile into a shared patch laid out so that any stride and dilation gives whole ldmatrix
//! rows.

use super::common::{conv_run_params, cuda_of, forward_geometry, Fallback};
use super::igemm_simt::CudaConvIgemm;
use super::tensor_core::tensor_core_defines;
use crate::backend::cuda::module::Kernel;
use crate::backend::cuda::preamble::{self, Extra};
use crate::backend::cuda::{timed, CudaBackend};
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::error::{Error, Result};
use crate::problem::{FusedProblem, Geom};
use crate::solver::{chosen_config, BuildContext, Invoker, RunArgs, Solver};
use crate::types::{ConvAlgorithm, DataType};
use std::sync::Arc;

const TEMPLATE: &str = concat!(
    include_str!("../../backend/cuda/kernels/igemm_common.cuh"),
    include_str!("../../backend/cuda/kernels/mma_sync.cuh"),
    include_str!("../../backend/cuda/kernels/conv_stem_tc.cu")
);

/// Input channels from which the general tensor-core kernels read whole 16-byte chunks.
const CHUNK_CHANNELS: usize = 8;
/// Most output channels one block keeps filters for.
const MAX_BLOCK_OUTPUTS: usize = 128;
/// Shared memory a block may take (Hopper's opt-in limit) and an SM holds.
const MAX_SMEM: usize = 227 * 1024;
const SM_SMEM: usize = 228 * 1024;

/// Tile shapes (output rows × columns) and warp grids (along pixels × along channels).
const SHAPES: [(usize, usize); 6] = [(4, 32), (8, 16), (16, 8), (2, 32), (4, 16), (8, 8)];
const WARPS: [(usize, usize); 4] = [(2, 2), (4, 2), (4, 1), (2, 1)];

/// One configuration. Label `t8x16w2x2`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Tile {
    th: usize,
    tw: usize,
    warps_m: usize,
    warps_n: usize,
}

/// How the reduction is chunked: channels per tap slot (a power of two), taps per chunk and
/// chunks per filter row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Chunking {
    cp: usize,
    tpc: usize,
    qr: usize,
}

impl Chunking {
    fn of(g: &Geom) -> Chunking {
        let cp = g.c.next_power_of_two();
        let tpc = CHUNK_CHANNELS / cp;
        Chunking { cp, tpc, qr: g.filter[2].div_ceil(tpc) }
    }
    /// Chunks of the reduction, rounded up to whole m16n8k16 steps.
    fn chunks(&self, g: &Geom) -> usize { (g.filter[0] * g.filter[1] * self.qr).next_multiple_of(2) }
}

impl Tile {
    fn label(&self) -> String { format!("t{}x{}w{}x{}", self.th, self.tw, self.warps_m, self.warps_n) }

    fn parse(s: &str) -> Option<Tile> {
        let (th, rest) = s.strip_prefix('t')?.split_once('x')?;
        let (tw, rest) = rest.split_once('w')?;
        let (warps_m, warps_n) = rest.split_once('x')?;
        let n = |s: &str| s.parse::<usize>().ok();
        let t = Tile { th: n(th)?, tw: n(tw)?, warps_m: n(warps_m)?, warps_n: n(warps_n)? };
        (SHAPES.contains(&(t.th, t.tw)) && WARPS.contains(&(t.warps_m, t.warps_n))).then_some(t)
    }

    fn bm(&self) -> usize { self.th * self.tw }
    fn threads(&self) -> usize { self.warps_m * self.warps_n * 32 }

    /// Output channels per block: all of them, up to 128, in whole n8 fragments per warp.
    fn bn(&self, g: &Geom) -> usize {
        let unit = 8 * self.warps_n;
        g.k.next_multiple_of(unit).min(MAX_BLOCK_OUTPUTS / unit * unit)
    }

    /// Slots of one patch buffer and pixels a tile reads.
    fn patch(&self, g: &Geom) -> (usize, usize) {
        let ch = Chunking::of(g);
        let (s, d, f) = (g.stride, g.dilation, g.filter);
        let layers = (f[0] - 1) * d[0] + 1;
        let rows = (self.th - 1) * s[1] + (f[1] - 1) * d[1] + 1;
        let slot_cols = (self.tw - 1) * s[2] + (ch.qr - 1) * ch.tpc * d[2] + 1;
        let pixel_cols = slot_cols + (ch.tpc - 1) * d[2];
        (layers * rows * slot_cols.div_ceil(s[2]) * s[2], layers * rows * pixel_cols)
    }

    /// The filter tile and two patch buffers.
    fn smem_bytes(&self, g: &Geom) -> usize { (self.bn(g) * (Chunking::of(g).chunks(g) | 1) + 2 * self.patch(g).0) * 16 }

    /// The static chunk-offset table shares the block's shared-memory limit with the dynamic part.
    fn fits(&self, g: &Geom) -> bool {
        let table = 4 * Chunking::of(g).chunks(g);
        self.bm() % (self.warps_m * 16) == 0 && self.accumulators(g) <= 96 && self.smem_bytes(g) + table <= MAX_SMEM
    }

    fn pixel_tiles(&self, g: &Geom) -> usize { g.n * g.output[0] * g.output[1].div_ceil(self.th) * g.output[2].div_ceil(self.tw) }

    /// Computed pixels per output pixel (tiles overhanging the image compute nothing useful).
    fn waste(&self, g: &Geom) -> f64 { (self.pixel_tiles(g) * self.bm()) as f64 / (g.n * g.output_size()) as f64 }

    /// Accumulators per thread.
    fn accumulators(&self, g: &Geom) -> usize { self.bm() / self.warps_m / 16 * (self.bn(g) / self.warps_n / 8) * 4 }

    /// Blocks per SM the launch bounds ask registers for: about 56 registers besides the
    /// accumulators, the A fragments, the next tile's fetched pixels and two per n8 column.
    fn min_blocks(&self, g: &Geom) -> usize {
        let fetched = self.patch(g).1.div_ceil(self.threads()) * Chunking::of(g).cp.div_ceil(2);
        let columns = self.bn(g) / self.warps_n / 8;
        let regs = (self.accumulators(g) + self.bm() / self.warps_m / 4 + fetched + 2 * columns + 56).next_multiple_of(8);
        (65536 / (self.threads() * regs)).clamp(1, 4)
    }

    /// Blocks launched along pixels: as many as run at once, each walking several tiles with
    /// its filter tile kept in shared memory.
    fn grid_x(&self, g: &Geom, sm_count: usize) -> usize {
        let resident = self.min_blocks(g).min(SM_SMEM / (self.smem_bytes(g) + 1024)).max(1);
        self.pixel_tiles(g).min(sm_count * resident).max(1)
    }
}

/// Every configuration, fitting or not.
fn space() -> Vec<Tile> {
    SHAPES.iter().flat_map(|&(th, tw)| WARPS.iter().map(move |&(warps_m, warps_n)| Tile { th, tw, warps_m, warps_n })).collect()
}

fn tiles(g: &Geom) -> Vec<Tile> { space().into_iter().filter(|t| t.fits(g)).collect() }

/// Eight warps (they beat four on every stem of the sweep), two along channels from 64 output
/// channels on (fewer leave each warp's A fragments feeding too few MMAs); 128 pixels, or 64
/// where that wastes clearly fewer pixels at the image's edges (56-wide outputs) or where
/// 128-pixel tiles leave SMs without two tiles each (batch 1); tiles 16 wide on a tie. Sweep:
/// bench/results/2026-11-27-h200-stem-tc.md.
fn heuristic(g: &Geom, sm_count: usize) -> Option<Tile> {
    let all = tiles(g);
    let warps = (if g.k >= 64 { 2 } else { 1 }, 4);
    let best = |bm: usize| {
        let shaped = all.iter().copied().filter(|t| t.bm() == bm && (t.warps_n, t.warps_m) == warps);
        shaped.min_by(|a, b| a.waste(g).total_cmp(&b.waste(g)).then(a.tw.abs_diff(16).cmp(&b.tw.abs_diff(16))))
    };
    match (best(128), best(64)) {
        (Some(big), Some(small)) if big.pixel_tiles(g) < 2 * sm_count || small.waste(g) * 1.05 < big.waste(g) => Some(small),
        (big, small) => big.or(small).or_else(|| all.first().copied()),
    }
}

/// The geometry the kernel takes, else why not.
fn stem_geometry(problem: &FusedProblem) -> std::result::Result<Geom, String> {
    let g = forward_geometry(problem)?;
    if !matches!(problem.dtype(), DataType::Half | DataType::BFloat16) {
        return Err(format!("tensor cores need f16 or bf16 data ({:?} given)", problem.dtype()));
    }
    if g.groups != 1 {
        return Err(format!("ungrouped only ({} groups)", g.groups));
    }
    if g.c >= CHUNK_CHANNELS {
        return Err(format!("{} input channels: the general tensor-core kernels take channels that fill 16-byte chunks", g.c));
    }
    if g.filter_size() == 1 && Chunking::of(&g).tpc > 1 {
        return Err(format!("a 1×1 filter over {} channels: its chunks would be mostly zero taps", g.c));
    }
    let biggest = [g.n * g.output_size(), g.n * g.x_strides[0], g.k * g.w_strides[0]];
    if biggest.iter().any(|&v| v >= i32::MAX as usize / 2) {
        return Err("tensor too large for 32-bit tile indexing".into());
    }
    Ok(g)
}

pub struct CudaConvStemTc;

struct StemInvoker {
    be: Arc<CudaBackend>,
    kernel: Kernel,
    geom: Geom,
    tile: Tile,
    grid: (u32, u32, u32),
    smem: u32,
    y_align: u64,
    problem: FusedProblem,
    /// The CUDA-core kernel, built on first need for a y its paired stores cannot use.
    fallback: Fallback,
}

impl Solver for CudaConvStemTc {
    fn name(&self) -> &'static str { "CudaConvStemTensorCore" }
    fn solution_id(&self) -> u64 { 120 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::ImplicitGemm }
    fn device(&self) -> DeviceKind { DeviceKind::Cuda }

    fn check(&self, problem: &FusedProblem, _device: &DeviceInfo) -> std::result::Result<(), String> {
        let g = stem_geometry(problem)?;
        if tiles(&g).is_empty() {
            return Err(format!("a {}×{} filter at stride {} does not fit shared memory with any tile", g.filter[1], g.filter[2], g.stride[2]));
        }
        Ok(())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // About 200 TFLOP/s of the chunked products (taps padded to whole chunks).
        let Ok(g) = stem_geometry(problem) else { return f64::MAX };
        let ch = Chunking::of(&g);
        let products = (g.n * g.output_size() * g.k * ch.chunks(&g) * 8) as f64;
        2.0 * products / 200e12 * 1e3 + 0.004
    }

    fn build(&self, problem: &FusedProblem, ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let g = stem_geometry(problem).map_err(|why| Error::not_implemented(format!("{}: {why}", self.name())))?;
        let sms = cuda_of(ctx.device())?.dev.sm_count() as usize;
        let tile = chosen_config(ctx, self.name(), &problem.key(), "CONFLUX_STEM_TILE", Tile::parse, || {
            heuristic(&g, sms).unwrap_or(Tile { th: 8, tw: 8, warps_m: 2, warps_n: 1 })
        })?;
        self.build_with(problem, ctx, tile)
    }

    fn tuning_space(&self, problem: &FusedProblem) -> Vec<String> {
        match stem_geometry(problem) {
            Ok(g) => tiles(&g).iter().map(Tile::label).collect(),
            Err(_) => Vec::new(),
        }
    }

    fn build_config(&self, problem: &FusedProblem, ctx: &dyn BuildContext, config: &str) -> Result<Arc<dyn Invoker>> {
        let tile = Tile::parse(config).ok_or_else(|| Error::bad_parm(format!("{}: no configuration {config}", self.name())))?;
        self.build_with(problem, ctx, tile)
    }
}

impl CudaConvStemTc {
    fn build_with(&self, problem: &FusedProblem, ctx: &dyn BuildContext, tile: Tile) -> Result<Arc<dyn Invoker>> {
        let be = cuda_of(ctx.device())?.clone();
        let g = stem_geometry(problem).map_err(|why| Error::not_implemented(format!("{}: {why}", self.name())))?;
        if !tile.fits(&g) {
            return Err(Error::bad_parm(format!("{}: configuration {} does not fit this problem", self.name(), tile.label())));
        }
        let (src, y_align) = kernel_source(problem, &g, tile)?;
        let kernel = be.module("conv_stem_tc", &src)?.function("conv_fwd_stem_tc")?;
        let smem = tile.smem_bytes(&g) as u32;
        kernel.reserve_dynamic_smem(&be.dev, smem)?;
        let grid = (tile.grid_x(&g, be.dev.sm_count() as usize) as u32, g.k.div_ceil(tile.bn(&g)) as u32, 1);
        Ok(Arc::new(StemInvoker { be, kernel, geom: g, tile, grid, smem, y_align, problem: problem.clone(), fallback: Fallback::new(&CudaConvIgemm) }))
    }
}

/// The kernel's source for `problem` with `tile`, and the alignment (bytes) its stores need of y.
fn kernel_source(problem: &FusedProblem, g: &Geom, tile: Tile) -> Result<(String, u64)> {
    let ch = Chunking::of(g);
    let defs = [
        ("CP", ch.cp),
        ("TPC", ch.tpc),
        ("QR", ch.qr),
        ("TH", tile.th),
        ("TW", tile.tw),
        ("WARPS_M", tile.warps_m),
        ("WARPS_N", tile.warps_n),
        ("BN", tile.bn(g)),
        ("MIN_BLOCKS", tile.min_blocks(g)),
    ];
    let (defs, pair_store) = tensor_core_defines(g, problem.dtype(), &defs);
    let defs: Vec<(&str, String)> = defs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    let y_align = if pair_store { 4 } else { 2 };
    Ok((preamble::source(problem.dtype(), problem.epilogue(), &Extra { act: None, defines: &defs }, TEMPLATE)?, y_align))
}

impl Invoker for StemInvoker {
    fn run(&self, ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        if a.x.0 % 2 != 0 || a.w.0 % 2 != 0 || a.y.0 % self.y_align != 0 {
            return self.fallback.run(&self.problem, ctx, a);
        }
        let p = conv_run_params(&self.geom, &self.problem, a)?;
        let threads = self.tile.threads() as u32;
        // SAFETY: Params mirrors the kernel's parameter struct; pointers are the caller's
        // tensors, validated against the problem, element-aligned, and y aligned for the
        // paired stores.
        timed(ctx, &self.be, || unsafe { self.kernel.launch(&self.be.dev, self.grid, (threads, 1, 1), self.smem, &p) })
    }
}

#[cfg(test)]
mod tests;
