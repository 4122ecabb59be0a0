//! Backward-weights on Hopper tensor cores (conv_wgrad_tma.cu): dw = dyᵀ · im2col(x), the
//! reduction running over every output pixel of the batch. dy and x arrive through the copy
//! engine as 64-pixel boxes (the x loads are the forward TMA kernel's im2col loads), wgmma
//! reads both MN-major, and the long reduction is split across blocks whose f32 sums a second
//! kernel adds in a fixed order (deterministic) into dw with α/β, in any dw layout.
//! Applies to 16-bit 2-D and 3-D problems with channels-last x and dy, channels per group a multiple of
//! 64, on a compute capability 9.0 GPU. f32 problems (channels per group a multiple of 32) run
//! on TF32 tensor cores through their own kernel (cuda_wgrad_tf32.rs): TF32 products when the
//! descriptor allows TF32, split products with f32 accuracy when it does not.

use super::common::{conv_run_params, cuda_of, Fallback};
use super::wgrad_simt::CudaConvWgradSimt;
use super::tensor_core::{tensor_core_defines, tensor_core_precision, TcPrecision};
use super::igemm_tma::{hopper_check, im2col_boxes, is_3d, plain_gemm};
use super::wgrad_tf32::{self as tf32, TLayout};
use crate::solver::{Invoker, RunArgs, Solver, chosen_config};
use crate::backend::cuda::driver::Scratch;
use crate::backend::cuda::module::Kernel;
use crate::backend::cuda::params::Params;
use crate::backend::cuda::preamble::{self, Extra};
use crate::backend::cuda::tensor_map::{self, TensorMap};
use crate::backend::cuda::{grid_for, timed, CudaBackend};
use crate::problem::Geom;
use crate::error::{Error, Result};
use crate::problem::FusedProblem;
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::solver::BuildContext;
use crate::types::{ConvAlgorithm, DataType, Direction};
use std::sync::Arc;

const TEMPLATE: &str = concat!(
    include_str!("../../backend/cuda/kernels/igemm_common.cuh"),
    include_str!("../../backend/cuda/kernels/igemm_tile.cuh"),
    include_str!("../../backend/cuda/kernels/tma.cuh"),
    include_str!("../../backend/cuda/kernels/wgmma.cuh"),
    include_str!("../../backend/cuda/kernels/wgrad_slots.cuh"),
    include_str!("../../backend/cuda/kernels/conv_wgrad_tma.cu"),
);

const TEMPLATE_TF32: &str = concat!(
    include_str!("../../backend/cuda/kernels/igemm_common.cuh"),
    include_str!("../../backend/cuda/kernels/igemm_tile.cuh"),
    include_str!("../../backend/cuda/kernels/tma.cuh"),
    include_str!("../../backend/cuda/kernels/wgmma.cuh"),
    include_str!("../../backend/cuda/kernels/tf32_split.cuh"),
    include_str!("../../backend/cuda/kernels/wgmma_tf32x3.cuh"),
    include_str!("../../backend/cuda/kernels/wgrad_slots.cuh"),
    include_str!("../../backend/cuda/kernels/conv_wgrad_tf32.cu"),
);

/// One point of the kernel's space: BM output channels (one consumer warpgroup per 64) × BN
/// filter columns per block, and the pipeline depth; a k-step is 64 output pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WgradTile {
    pub bm: usize,
    pub bn: usize,
    pub stages: usize,
}

impl WgradTile {
    pub const fn new(bm: usize, bn: usize, stages: usize) -> WgradTile { WgradTile { bm, bn, stages } }
    pub fn threads(&self) -> usize { (self.bm / 64 + 1) * 128 }
    /// Pipeline buffers, two barriers per stage, 1 KiB to align the base for the swizzle.
    pub fn smem_bytes(&self) -> usize { self.stages * (self.bm + self.bn) * 128 + 16 * self.stages + 1024 }
    pub fn label(&self) -> String { format!("wgr{}x{}s{}", self.bm, self.bn, self.stages) }
    pub fn parse(s: &str) -> Option<WgradTile> { WGRAD_CONFIGS.iter().chain(tf32::TF32_CONFIGS).copied().find(|c| c.label() == s) }
    /// The tuning space of a precision.
    pub fn space(prec: TcPrecision) -> &'static [WgradTile] {
        if prec == TcPrecision::Bits16 { WGRAD_CONFIGS } else { tf32::TF32_CONFIGS }
    }
}

/// The tuning space; every entry fits the 227 KiB of shared memory a block may use.
pub const WGRAD_CONFIGS: &[WgradTile] = &[
    WgradTile::new(128, 128, 4),
    WgradTile::new(128, 128, 6),
    WgradTile::new(64, 128, 6),
    WgradTile::new(64, 256, 4),
    WgradTile::new(128, 256, 3),
    WgradTile::new(128, 64, 6),
];

/// Heuristic, fitted to the tile sweep on the ResNet-50 layers (H200, N = 64, f16;
/// bench/results/2026-11-21-h200-bwd-weights.md) and on small maps (N = 32,
/// 2026-11-29-h200-wgrad-splits.md): 64 output channels per block when a group has at most 64
/// (no half-empty warpgroup); for filters with taps and at least 256 output channels, 128 × 256
/// (wider tiles read each dy box once for more columns) unless 128 × 128 tiles fill the GPU's
/// waves enough better to make up for reading the boxes twice as often (`modelled_us`: 7×7 to
/// 17×17 maps of 256–448 channels); else 128 × 128 with 6 stages.
pub fn wgrad_heuristic(g: &Geom, sms: usize) -> WgradTile {
    let (wide, square) = (WgradTile::new(128, 256, 3), WgradTile::new(128, 128, 6));
    if g.kg() <= 64 {
        WgradTile::new(64, 128, 6)
    } else if g.filter_size() > 1 && g.kg() >= 256 {
        if modelled_us(g, square, sms).1 < modelled_us(g, wide, sms).1 { square } else { wide }
    } else {
        square
    }
}

/// The split count and modelled µs of a 16-bit problem on tile `cfg` with `sms` SMs: k-step
/// waves plus the partial sums' passes (`SplitCosts`, `wgrad_splits`).
pub fn modelled_us(g: &Geom, cfg: WgradTile, sms: usize) -> (usize, f64) {
    let ksteps = (g.n * g.output_size()).div_ceil(64);
    let tiles = g.kg().div_ceil(cfg.bm) * (g.filter_size() * g.cg()).div_ceil(cfg.bn) * g.groups;
    let per_sm = blocks_per_sm(cfg.smem_bytes());
    let cost = SplitCosts::of(cfg.bm, cfg.bn, per_sm, tiles * cfg.bm * cfg.bn);
    let splits = wgrad_splits(tiles, ksteps, sms * per_sm, cost);
    (splits, cost.time(tiles, ksteps, sms * per_sm, splits))
}

/// Blocks of `smem` bytes of shared memory an SM holds (of its 228 KiB), one or two.
fn blocks_per_sm(smem: usize) -> usize { (228 * 1024 / (smem + 1024)).clamp(1, 2) }

/// What one split of the pixel reduction costs, in µs: a k-step of a block, and one pass of the
/// split's f32 partial sums (written by the GEMM kernel, read by the reduction).
#[derive(Clone, Copy, Debug)]
pub struct SplitCosts {
    pub kstep_us: f64,
    pub partial_us: f64,
}

impl SplitCosts {
    /// Fitted to sweeps of forced split counts and tiles on the H200 (fp16, N = 32, 7×7 to
    /// 56×56 maps; bench/results/2026-11-29-h200-wgrad-splits.md): a 128 × 256 k-step takes
    /// ~1 µs with one block per SM, a 128 × 128 one ~0.55 (the products scale with the tile's
    /// area, the box loads with its perimeter), twice as long when two blocks share an SM; each
    /// split's partial sums move 8 bytes per output at ~3 TB/s.
    pub fn of(bm: usize, bn: usize, blocks_per_sm: usize, outputs: usize) -> SplitCosts {
        let kstep = 2.14e-5 * (bm * bn) as f64 + 7.8e-4 * (bm + bn) as f64;
        SplitCosts { kstep_us: kstep * blocks_per_sm as f64, partial_us: outputs as f64 * 8.0 / 3e6 }
    }

    /// Modelled µs of `splits` splits of `tiles` tiles' `ksteps` k-steps on `blocks` slots.
    pub fn time(&self, tiles: usize, ksteps: usize, blocks: usize, splits: usize) -> f64 {
        let waves = (tiles * splits).div_ceil(blocks.max(1));
        (waves * ksteps.div_ceil(splits.max(1))) as f64 * self.kstep_us + splits as f64 * self.partial_us
    }
}

/// Splits of the pixel reduction (at least 4 k-steps each) with the least modelled time: the
/// waves of blocks the GPU's `blocks` resident slots run, each as long as a split's k-steps,
/// plus a pass of partial sums per split. Long reductions into small outputs split until the
/// GPU is full (64-56-56 3×3: 26 splits); short ones into large outputs (512-7-7 3×3, 4.7 MB of
/// dw) stay whole, where each split's partial sums cost more than the wave it fills.
pub fn wgrad_splits(tiles: usize, ksteps: usize, blocks: usize, cost: SplitCosts) -> usize {
    let (tiles, most) = (tiles.max(1), (ksteps / 4).max(1));
    let time = |s: usize| cost.time(tiles, ksteps, blocks, s);
    (1..=most).min_by(|&a, &b| time(a).total_cmp(&time(b)).then(a.cmp(&b))).unwrap_or(1)
}

/// How a 16-bit problem's channels fill the kernel's 64-channel boxes. The kernel runs on
/// `boxed`, a geometry whose channels per group are a whole number of boxes:
/// - channels per group a multiple of 64: the problem itself;
/// - one group of any other count (32, 80, 96, 288): rounded up to the next multiple of 64,
///   the copy engine filling the boxes' overhang with zeros (x's map keeps the real channels);
/// - groups of 8, 16 or 32 channels: `merge` = 64 / CG neighbouring groups computed as one
///   dense group, of which only the diagonal blocks are stored (M× the products of the groups
///   alone, no copy; a padded copy would multiply M² times as many).
#[derive(Clone, Copy, Debug)]
struct Boxing {
    real: Geom,
    boxed: Geom,
    merge: usize,
}

impl Boxing {
    fn of(g: Geom, box_channels: usize) -> std::result::Result<Boxing, String> {
        let cg = g.cg();
        if cg % box_channels == 0 {
            return Ok(Boxing { real: g, boxed: g, merge: 1 });
        }
        if box_channels != 64 {
            return Err(format!("channels per group ({cg}) not a multiple of {box_channels}"));
        }
        if g.groups == 1 {
            return Ok(Boxing { real: g, boxed: Geom { c: cg.next_multiple_of(64), ..g }, merge: 1 });
        }
        let merge = 64 / cg;
        if cg < 8 || 64 % cg != 0 || g.groups % merge != 0 {
            return Err(format!("{} groups of {cg} channels: neither whole 64-channel boxes nor groups that merge into them", g.groups));
        }
        Ok(Boxing { real: g, boxed: Geom { groups: g.groups / merge, ..g }, merge })
    }
}

/// The problem's geometry and how its products are made, or why the kernels refuse it.
fn geometry(problem: &FusedProblem) -> std::result::Result<(Boxing, TcPrecision), String> {
    let Some(conv) = problem.conv_problem() else { return Err("not a convolution problem".into()) };
    if conv.direction != Direction::BackwardWeights {
        return Err(format!("backward-weights only (this is {:?})", conv.direction));
    }
    let prec = tensor_core_precision(conv)?;
    let g = Geom::of(conv);
    if is_3d(&g) {
        if prec != TcPrecision::Bits16 {
            return Err("3-D convolutions in 16-bit types only (the TF32 kernel is 2-D)".into());
        }
        if (0..3).any(|i| g.dilation[i] * (g.filter[i] - 1) > tensor_map::IM2COL_5D_MAX_OFFSET) {
            return Err(format!("3-D filter reach over {} (the copy engine's 5-D tap offsets)", tensor_map::IM2COL_5D_MAX_OFFSET));
        }
    }
    // A k-step's box is one tap and one 128-byte row of channels.
    let (box_channels, chunk) = if prec == TcPrecision::Bits16 { (64, 8) } else { (32, 4) };
    let boxing = Boxing::of(g, box_channels)?;
    // The copy engine faults on a box whose first element is not 16-byte aligned: each
    // (merged) group's dy boxes start at channel g·KG.
    if boxing.boxed.groups > 1 && boxing.boxed.kg() % chunk != 0 {
        return Err(format!("{} output channels per group: group boxes of dy would start off 16-byte alignment", boxing.boxed.kg()));
    }
    let xs = g.x_strides;
    if xs[1] != 1 || [xs[0], xs[2], xs[3], xs[4]].iter().any(|v| v % chunk != 0) {
        return Err("x must be channels-last with 16-byte aligned pixel rows".into());
    }
    // f32 reads dy through the transpose kernel when it is T (any strides), else as boxes.
    let dy_transposed = prec != TcPrecision::Bits16 && tf32::r_is_x(&g);
    if !dy_transposed && !tf32::dy_as_boxes(&g, chunk) {
        return Err("dy must be channels-last with evenly spaced, 16-byte aligned pixel rows".into());
    }
    if g.stride.iter().any(|&s| s > 8) {
        return Err("stride above 8 (the copy engine's traversal stride limit)".into());
    }
    let biggest = [g.n * xs[0], g.n * g.y_strides[0], g.n * g.output_size(), g.k * g.w_strides[0]];
    if biggest.iter().any(|&v| v >= i32::MAX as usize / 2) {
        return Err("tensor too large for 32-bit indexing".into());
    }
    Ok((boxing, prec))
}

/// The x map (im2col boxes of 64 pixels × 64 channels, or boxes of the pixel matrix) and the
/// dy map (boxes of 64 pixels × 64 channels of the (N·OH·OW) × K matrix) of a 16-bit problem.
fn encode_maps(g: &Geom, dt: DataType, x: u64, dy: u64) -> Result<(TensorMap, TensorMap)> {
    let xm = if plain_gemm(g) {
        tensor_map::tiled_2d([g.c as u64, (g.n * g.input_size()) as u64], g.x_strides[4] as u64 * 2, [64, 64], dt, x)?
    } else {
        tensor_map::im2col(&im2col_boxes(g, dt, 64, 64), dt, x)?
    };
    let pixels = (g.n * g.output_size()) as u64;
    let dym = tensor_map::tiled_2d([g.k as u64, pixels], g.y_strides[4] as u64 * 2, [64, 64], dt, dy)?;
    Ok((xm, dym))
}

/// The heuristic's tile for a precision.
fn heuristic(g: &Geom, prec: TcPrecision, sms: usize) -> WgradTile {
    if prec == TcPrecision::Bits16 { wgrad_heuristic(g, sms) } else { tf32::tf32_heuristic(g) }
}

pub struct CudaConvWgradTma;

impl Solver for CudaConvWgradTma {
    fn name(&self) -> &'static str { "CudaConvBwdWeightsTma" }
    fn solution_id(&self) -> u64 { 109 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::ImplicitGemm }
    fn device(&self) -> DeviceKind { DeviceKind::Cuda }

    fn check(&self, problem: &FusedProblem, device: &DeviceInfo) -> std::result::Result<(), String> {
        let (b, prec) = geometry(problem)?;
        let g = b.real;
        hopper_check(device)?;
        let maps = match prec {
            TcPrecision::Bits16 => encode_maps(&g, problem.conv_problem().map_or(DataType::Half, |c| c.dtype()), 1 << 20, 1 << 20),
            _ => tf32::encode_maps(&g, &heuristic(&g, prec, device.cuda.as_ref().map_or(132, |c| c.sm_count as usize)), &TLayout::of(&g, prec), 1 << 20, 1 << 20, 1 << 20),
        };
        maps.map(|_| ()).map_err(|e| format!("tensor map refused: {e}"))
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // About 400 TFLOP/s for 16-bit data, 200 for TF32 and 100 for split TF32 (three
        // products each), plus the reduction pass.
        let Some(c) = problem.conv_problem() else { return f64::MAX };
        let rate = match tensor_core_precision(c) {
            Ok(TcPrecision::Tf32) => 200e12,
            Ok(TcPrecision::Tf32x3) => 100e12,
            _ => 400e12,
        };
        2.0 * c.macs() / rate * 1e3 + 0.008
    }

    fn build(&self, problem: &FusedProblem, ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let (b, prec) = geometry(problem).map_err(|why| Error::not_implemented(format!("{}: {why}", self.name())))?;
        let parse = |s: &str| WgradTile::space(prec).iter().copied().find(|c| c.label() == s);
        let sms = cuda_of(ctx.device())?.dev.sm_count() as usize;
        let cfg = chosen_config(ctx, self.name(), &problem.key(), "CONFLUX_WGRAD_TILE", parse, || heuristic(&b.boxed, prec, sms))?;
        self.build_with(problem, ctx, cfg)
    }

    fn tuning_space(&self, problem: &FusedProblem) -> Vec<String> {
        let prec = problem.conv_problem().and_then(|c| tensor_core_precision(c).ok()).unwrap_or(TcPrecision::Bits16);
        WgradTile::space(prec).iter().map(WgradTile::label).collect()
    }

    fn build_config(&self, problem: &FusedProblem, ctx: &dyn BuildContext, config: &str) -> Result<Arc<dyn Invoker>> {
        let cfg = WgradTile::parse(config).ok_or_else(|| Error::bad_parm(format!("{}: unknown configuration {config}", self.name())))?;
        self.build_with(problem, ctx, cfg)
    }
}

impl CudaConvWgradTma {
    /// Build with a given tile; `check` must have passed.
    pub fn build_with(&self, problem: &FusedProblem, ctx: &dyn BuildContext, cfg: WgradTile) -> Result<Arc<dyn Invoker>> {
        let be = cuda_of(ctx.device())?.clone();
        let conv = problem.conv_problem().ok_or_else(|| Error::internal("wgrad-tma: not a convolution"))?;
        let (b, prec) = geometry(problem).map_err(|why| Error::not_implemented(format!("{}: {why}", self.name())))?;
        // The kernels see the boxed geometry; x's and dy's maps keep the real one.
        let g = b.boxed;
        if !WgradTile::space(prec).contains(&cfg) {
            return Err(Error::bad_parm(format!("{}: configuration {} is not one for {:?} data", self.name(), cfg.label(), conv.dtype())));
        }
        // A k-step is one 128-byte row of channels per pixel: 64 pixels of 16-bit data, 32 of f32.
        let step = if prec == TcPrecision::Bits16 { 64 } else { 32 };
        let ksteps = (g.n * g.output_size()).div_ceil(step);
        let cfg = WgradTile { stages: cfg.stages.min(ksteps + 1).max(2), ..cfg };
        let (template, name, tile, smem, (tile_k, tile_cols)) = if prec == TcPrecision::Bits16 {
            let tile = vec![
                ("BM", cfg.bm), ("BN", cfg.bn), ("BK", 64), ("STAGES", cfg.stages), ("THREADS", cfg.threads()), ("LOADER_THREADS", 128),
                ("A_TILED", plain_gemm(&g) as usize), ("WGMMA_MN_MAJOR", 1), ("TILE_K", cfg.bm), ("TILE_COLS", cfg.bn),
                ("MERGE", b.merge), ("REAL_CG", b.real.cg()), ("TMA_3D", is_3d(&g) as usize),
            ];
            (TEMPLATE, "conv_wgrad_tma", tile, cfg.smem_bytes(), (cfg.bm, cfg.bn))
        } else {
            let tile = tf32::defines(&g, &cfg, prec);
            let dims = if tf32::r_is_x(&g) { (cfg.bn, cfg.bm) } else { (cfg.bm, cfg.bn) };
            (TEMPLATE_TF32, "conv_wgrad_tf32", tile, tf32::smem_bytes(&cfg, prec), dims)
        };
        let (defs, _) = tensor_core_defines(&g, conv.dtype(), &tile);
        let defs: Vec<(&str, String)> = defs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        let src = preamble::source(conv.dtype(), &[], &Extra { act: None, defines: &defs }, template)?;
        let module = be.module_arch_specific(name, &src)?;
        let (kernel, reduce) = (module.function(name)?, module.function("conv_wgrad_reduce")?);
        let operands = match prec {
            TcPrecision::Bits16 => Operands::Bits16,
            _ => Operands::Tf32 { transpose: module.function("wgrad_transpose")?, layout: TLayout::of(&g, prec) },
        };
        kernel.reserve_dynamic_smem(&be.dev, smem as u32)?;
        let tiles = g.kg().div_ceil(tile_k) * (g.filter_size() * g.cg()).div_ceil(tile_cols);
        let per_sm = blocks_per_sm(smem);
        let cost = SplitCosts::of(tile_k, tile_cols, per_sm, tiles * g.groups * tile_k * tile_cols);
        let splits = match std::env::var("CONFLUX_WGRAD_SPLITS").ok().and_then(|v| v.parse::<usize>().ok()) {
            // Sweeps of the split count (bwd_layer_table.py); at most one split per k-step.
            Some(forced) => forced.clamp(1, ksteps.max(1)),
            None => wgrad_splits(tiles * g.groups, ksteps, be.dev.sm_count() as usize * per_sm, cost),
        };
        Ok(Arc::new(WgradInvoker {
            be,
            kernel,
            reduce,
            operands,
            dtype: conv.dtype(),
            tile: cfg,
            smem: smem as u32,
            slot_elems: tile_k * tile_cols,
            tiles,
            splits,
            geom: g,
            real: b.real,
            problem: problem.clone(),
            fallback: Fallback::new(&CudaConvWgradSimt),
        }))
    }
}

/// The kernels' parameter block (mirrors `WgradArgs` in wgrad_slots.cuh).
#[repr(C, align(128))]
struct WgradArgs {
    a: TensorMap,
    b: TensorMap,
    p: Params,
    partial: u64,
    splits: i32,
    reduce_runs: i32,
    pad: [i32; 2],
}

/// How the operands reach the GEMM kernel.
enum Operands {
    /// 16-bit: x and dy as they are (a = x, b = dy).
    Bits16,
    /// f32: T transposed (and split) into scratch first (a = R, b = T; cuda_wgrad_tf32.rs).
    Tf32 { transpose: Kernel, layout: TLayout },
}

struct WgradInvoker {
    be: Arc<CudaBackend>,
    kernel: Kernel,
    reduce: Kernel,
    operands: Operands,
    dtype: DataType,
    tile: WgradTile,
    smem: u32,
    /// f32 sums per slot (one tile).
    slot_elems: usize,
    /// Output tiles per group.
    tiles: usize,
    /// Blocks sharing each tile's reduction.
    splits: usize,
    /// The geometry the kernels run (`Boxing::boxed`) and the problem's own.
    geom: Geom,
    real: Geom,
    problem: FusedProblem,
    /// The CUDA-core GEMM kernel, built on first need for pointers the copy engine cannot use.
    fallback: Fallback,
}

impl Invoker for WgradInvoker {
    fn run(&self, ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        // Backward-weights arguments: x = x, w = dw (written), y = dy.
        if a.x.0 % 16 != 0 || a.y.0 % 16 != 0 {
            return self.fallback.run(&self.problem, ctx, a);
        }
        let g = &self.geom;
        if g.groups > 65535 {
            return Err(Error::not_implemented("wgrad-tma: more than 65535 groups in one launch"));
        }
        let slot_bytes = g.groups * self.tiles * self.splits * self.slot_elems * 4;
        timed(ctx, &self.be, || {
            let scratch = Scratch::new(ctx, &self.be.dev, slot_bytes)?;
            // f32: T, transposed (and split) into its own scratch, which lives (stream-ordered)
            // until after the launches below.
            let (maps, _t) = match &self.operands {
                Operands::Bits16 => (encode_maps(&self.real, self.dtype, a.x.0, a.y.0)?, None),
                Operands::Tf32 { transpose, layout } => {
                    let t = Scratch::new(ctx, &self.be.dev, layout.bytes())?;
                    let src = if tf32::r_is_x(g) { a.y.0 } else { a.x.0 };
                    tf32::transpose(&self.be, transpose, layout, src, t.ptr())?;
                    (tf32::encode_maps(g, &self.tile, layout, a.x.0, a.y.0, t.ptr())?, Some(t))
                }
            };
            // The reduction: chunks of 4 runs of 128 elements when there are enough of them to
            // fill the GPU twice, else single runs; split lanes share the splits (≤ 16 runs' worth
            // of lanes per block, the reduce kernel's shared buffer).
            let elems = g.groups * self.tiles * self.slot_elems;
            let reduce_runs = if elems / 512 >= 2 * self.be.dev.sm_count() as usize { 4 } else { 1 };
            let lanes = self.splits.min(16 / reduce_runs) as u32;
            let chunks = (elems / (128 * reduce_runs)) as u64;
            let args = WgradArgs { a: maps.0, b: maps.1, p: conv_run_params(g, &self.problem, a)?, partial: scratch.ptr(), splits: self.splits as i32, reduce_runs: reduce_runs as i32, pad: [0; 2] };
            let grid = ((self.tiles * self.splits) as u32, 1, g.groups as u32);
            // SAFETY: WgradArgs mirrors the kernels' parameter block (Params checked by the
            // preamble's static_assert, the maps are 128-byte opaque blocks); x and dy are the
            // caller's tensors, validated against the problem and 16-byte aligned (T's scratch
            // holds layout.bytes()); dw is written by the reduction only, through its validated
            // strides; the scratch holds every block's slot.
            unsafe {
                self.kernel.launch(&self.be.dev, grid, (self.tile.threads() as u32, 1, 1), self.smem, &args)?;
                self.reduce.launch(&self.be.dev, (grid_for(&self.be, chunks, 1), 1, 1), (32, lanes, 1), 0, &args)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{wgrad_splits, SplitCosts};

    #[test]
    fn square_tiles_where_they_fill_the_waves() {
        use super::{wgrad_heuristic, WgradTile};
        use crate::problem::Geom;
        let geom = |c: usize, hw: usize, k: usize, f: usize| Geom {
            n: 32, c, k, groups: 1, input: [1, hw, hw], output: [1, hw, hw], filter: [1, f, f], pad: [0, f / 2, f / 2], pad_end: [0, f / 2, f / 2],
            stride: [1; 3], dilation: [1; 3], x_strides: [0; 5], w_strides: [0; 5], y_strides: [0; 5],
        };
        let (wide, square) = (WgradTile::new(128, 256, 3), WgradTile::new(128, 128, 6));
        // 512-7-7 3×3: wide tiles (one wave either way, fewer box loads).
        assert_eq!(wgrad_heuristic(&geom(512, 7, 512, 3), 132), wide);
        // 448-8-8 → 384 and 256-14-14 3×3: square tiles fill more of the GPU.
        assert_eq!(wgrad_heuristic(&geom(448, 8, 384, 3), 132), square);
        assert_eq!(wgrad_heuristic(&geom(256, 14, 256, 3), 132), square);
    }

    #[test]
    fn splits_weigh_waves_against_partial_sums() {
        let costs = |bm, bn, outputs| SplitCosts::of(bm, bn, 1, outputs);
        // 512-7-7 3×3 at N = 32: 72 tiles of 128 × 256, 25 k-steps, 2.4 M outputs: one wave unsplit.
        assert_eq!(wgrad_splits(72, 25, 132, costs(128, 256, 72 * 32768)), 1);
        // 448-8-8 3×3: 48 tiles, 32 k-steps: two splits still fit one wave.
        assert_eq!(wgrad_splits(48, 32, 132, costs(128, 256, 48 * 32768)), 2);
        // 64-56-56 3×3: 5 tiles of 64 × 128, 1568 k-steps, a small output: fill the GPU once.
        assert_eq!(wgrad_splits(5, 1568, 132, costs(64, 128, 5 * 8192)), 26);
        // Short reductions keep at least 4 k-steps per split.
        assert_eq!(wgrad_splits(4, 20, 132, costs(128, 128, 4 * 16384)), 5);
        assert_eq!(wgrad_splits(1000, 3, 132, costs(128, 128, 1000 * 16384)), 1);
    }
}
