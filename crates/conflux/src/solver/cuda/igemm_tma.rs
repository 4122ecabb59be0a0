//! Implicit-GEMM forward convolution on Hopper with the copy engine (conv_igemm_tma.cu): x
//! arrives through im2col tensor-map copies and w through box copies issued by one producer
//! thread, consumer warpgroups multiply with wgmma, stages are handed over with mbarriers.
//! Narrower than the cp.async wgmma kernel (`cuda_igemm_wgmma`), which stays the fallback:
//! 2-D and 3-D, at least 32 channels (per group a multiple of the k-step: 64, or 32 in
//! half-row k-steps), each filter's reduction contiguous in w.
//! Also the f32 paths: f32 problems whose descriptor allows TF32 run the same kernel with
//! 32-channel k-steps (a 128-byte row of f32) and tf32 wgmma (f32 accumulation); strict f32
//! problems run it with every operand split into TF32 high and low parts and three TF32
//! products per product (`TcPrecision::Tf32x3`), which keeps f32 accuracy. int8 and fp8
//! problems (`quant.rs`) run it with 128-channel k-steps (a 128-byte row of bytes), s8 or fp8
//! wgmma (i32 or f32 sums) and y of its own type; their other shapes and misaligned pointers
//! go to the CUDA-core quantized kernel (`quant_direct`).

use super::common::{conv_run_params, cuda_of, Fallback};
use super::igemm_simt::CudaConvIgemm;
use super::quant_direct::CudaConvQuantDirect;
use super::tensor_core::{tensor_core_defines, tensor_core_layout, tensor_core_precision, Staging, TcPrecision};
use crate::solver::{Invoker, RunArgs, Solver, chosen_config};
use crate::backend::cuda::module::Kernel;
use crate::backend::cuda::params::Params;
use crate::backend::cuda::preamble::{self, Extra};
use crate::backend::cuda::driver::Scratch;
use crate::backend::cuda::split_counters::SplitCounters;
use crate::backend::cuda::tensor_map::{self, Im2col, TensorMap};
use crate::backend::cuda::tf32_split;
use crate::backend::cuda::{timed, CudaBackend};
use crate::problem::{Geom, TapMap};
use crate::error::{Error, Result};
use crate::problem::FusedProblem;
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::solver::BuildContext;
use crate::quant::Quant;
use crate::types::{ConvAlgorithm, DataType};
use std::sync::Arc;

mod tiles;
pub use tiles::{tma_heuristic, tma_splits, TmaTile, TMA_CONFIGS};
use tiles::SMEM_LIMIT;

const TEMPLATE: &str = concat!(
    include_str!("../../backend/cuda/kernels/igemm_common.cuh"),
    include_str!("../../backend/cuda/kernels/igemm_tile.cuh"),
    include_str!("../../backend/cuda/kernels/tma.cuh"),
    include_str!("../../backend/cuda/kernels/wgmma.cuh"),
    include_str!("../../backend/cuda/kernels/wgmma_epilogue.cuh"),
    include_str!("../../backend/cuda/kernels/tf32_split.cuh"),
    include_str!("../../backend/cuda/kernels/wgmma_tf32x3.cuh"),
    include_str!("../../backend/cuda/kernels/conv_igemm_tma.cu"),
);

/// Channels per k-step: one 128-byte row of the element type (64 16-bit, 32 f32).
fn step_channels(dt: DataType) -> usize { 128 / dt.size() }

/// Channels per k-step of x and w: one 128-byte row, or half of one (64-byte rows in the copy
/// engine's and wgmma's 64-byte swizzle) rather than boxes at least half full of zeros: 8-bit
/// channel counts that are a multiple of 64 but not of 128 (64-channel layers), and 16-bit
/// ones under 64 or whose last 64-channel slice would hold 32 or fewer (32, 96, 160, 80).
fn k_step(g: &Geom, dt: DataType) -> usize {
    let (row, cg) = (step_channels(dt), g.cg());
    let half = match dt.size() {
        1 => !cg.is_multiple_of(128) && cg.is_multiple_of(64),
        2 => cg < 64 || (1..=32).contains(&(cg % 64)),
        _ => false,
    };
    if half { row / 2 } else { row }
}

/// Whether the problem's k-steps are half rows (`k_step`).
fn half_rows(g: &Geom, dt: DataType) -> bool { k_step(g, dt) * dt.size() == 64 }

/// The tensor-core conditions for this problem's element type, and how it is multiplied.
fn tma_geometry(problem: &FusedProblem) -> std::result::Result<(Geom, TcPrecision), String> {
    let conv = problem.conv_problem().ok_or("not a convolution problem")?;
    let prec = match conv.quant() {
        Some(Quant::Int8) => TcPrecision::Int8,
        Some(Quant::Fp8 { .. }) => TcPrecision::Fp8,
        None => tensor_core_precision(conv)?,
    };
    if conv.quant().is_some() {
        problem.quantized_conv()?;
    }
    Ok((tensor_core_layout(conv)?, prec))
}

/// What the tensor maps need beyond the tensor-core kernels' conditions.
fn tma_check(g: &Geom, dt: DataType) -> std::result::Result<(), String> {
    if is_3d(g) {
        // 5-D copies take tap offsets of 5 bits (the driver checks the window corners).
        if (0..3).any(|i| g.dilation[i] * (g.filter[i] - 1) > tensor_map::IM2COL_5D_MAX_OFFSET) {
            return Err(format!("3-D filter reach over {} (the copy engine's 5-D tap offsets)", tensor_map::IM2COL_5D_MAX_OFFSET));
        }
        if g.w_strides[2] != g.filter[1] * g.filter[2] * g.cg() {
            return Err("each filter's taps and channels must be contiguous in w".into());
        }
    }
    let bk = k_step(g, dt);
    if g.cg() % bk != 0 && g.groups != 1 {
        return Err(format!("channels per group ({}) not a multiple of {bk} (a box past one group's channels would read the next group's)", g.cg()));
    }
    // Most of every box would be zeros: the cp.async kernels read 16-byte chunks instead. For
    // 8-bit data a half-empty box still beats the CUDA-core kernel, the only other one.
    let least = if dt.size() == 1 { bk / 2 } else { bk };
    if g.cg() < least {
        return Err(format!("{} channels, fewer than {least} (a {bk}-channel slice)", g.cg()));
    }
    let ws = g.w_strides;
    if ws[4] != g.cg() || ws[3] != g.filter[2] * g.cg() {
        return Err("each filter's taps and channels must be contiguous in w".into());
    }
    if g.stride.iter().any(|&s| s > 8) {
        return Err("stride above 8 (the copy engine's traversal stride limit)".into());
    }
    Ok(())
}

/// Channels that end in a partial k-step: the last slice's boxes overhang the channels and
/// the copy engine fills the overhang with zeros (x's channels are innermost in its map; w is
/// then mapped as CG × taps × K so that its overhang is zeros too).
fn channel_tail(g: &Geom, dt: DataType) -> bool { g.cg() % k_step(g, dt) != 0 }

fn im2col_of(g: &Geom, dt: DataType, bm: usize) -> Im2col { im2col_boxes(g, dt, k_step(g, dt), bm) }

/// The im2col map of x for boxes of `channels` × `pixels` output pixels (the backward-weights
/// kernels load x the same way): 4-D for 2-D problems, 5-D for 3-D ones (`is_3d`).
pub(crate) fn im2col_boxes(g: &Geom, dt: DataType, channels: usize, pixels: usize) -> Im2col {
    let xs = g.x_strides.map(|v| (v * dt.size()) as u64);
    // Innermost first: W, H, D.
    let rev = |v: [usize; 3]| [v[2], v[1], v[0]];
    let [pw, ph, pd] = rev(g.pad).map(|v| v as i32);
    let [ew, eh, ed] = rev(g.pad_end).map(|v| v as i32);
    let [fw, fh, fd] = rev(g.filter).map(|v| v as i32);
    let [dw, dh, dd] = rev(g.dilation).map(|v| v as i32);
    let [sw, sh, sd] = rev(g.stride).map(|v| v as u32);
    let [iw, ih, id] = rev(g.input).map(|v| v as u64);
    let (lower, upper) = ([-pw, -ph, -pd], [ew - dw * (fw - 1), eh - dh * (fh - 1), ed - dd * (fd - 1)]);
    let (spatial, dims, strides) = if is_3d(g) {
        (3, [g.c as u64, iw, ih, id, g.n as u64], [xs[4], xs[3], xs[2], xs[0]])
    } else {
        (2, [g.c as u64, iw, ih, g.n as u64, 0], [xs[4], xs[3], xs[0], 0])
    };
    Im2col { spatial, dims, strides, lower, upper, stride: [sw, sh, sd], channels: channels as u32, pixels: pixels as u32 }
}

/// A 3-D problem: anything but a 2-D problem seen as 3-D (`Geom::is_2d`).
pub(crate) fn is_3d(g: &Geom) -> bool { !g.is_2d() }

/// w as a K × (FH·FW·CG) matrix: extents (inner, outer) and row bytes. Tf32x3 reads the split
/// copy instead, K × 2·(FH·FW·CG) packed (`tf32_split::split_rows`).
fn w_matrix(g: &Geom, prec: TcPrecision) -> ([u64; 2], u64) {
    let cols = g.cg() * g.filter_size();
    match prec {
        TcPrecision::Tf32x3 => ([2 * cols as u64, g.k as u64], (2 * cols * 4) as u64),
        _ => ([cols as u64, g.k as u64], (g.w_strides[0] * prec.elem()) as u64),
    }
}

/// A 1×1, unpadded, stride-1 convolution over dense pixel rows: x is a (N·H·W) × C matrix.
pub(crate) fn plain_gemm(g: &Geom) -> bool {
    let xs = g.x_strides;
    g.filter_size() == 1 && g.pad == [0; 3] && g.pad_end == [0; 3] && g.stride == [1; 3] && xs[3] == g.input[2] * xs[4] && xs[0] == g.input[1] * xs[3]
}

/// Where the kernel's w comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FilterSource {
    /// The problem's own filter (for Tf32x3 its split copy).
    Own,
    /// The caller's filter of a 16-bit backward-data problem whose forward rewrite this is,
    /// read in place with its taps reversed (bwd_data_tc.rs; a strided problem's phase reads
    /// a subset of them, bwd_data_strided.rs): `rows` output channels (the rewrite's input
    /// channels), `row_elems` elements apart, each holding the source taps × channels (the
    /// rewrite's output channels) of one filter, channels fastest; `taps` maps the rewrite's
    /// taps onto the source's.
    Flipped { rows: usize, row_elems: usize, taps: TapMap },
}

/// y's channels split into runs (`Y_SEG` in igemm_common.cuh): `channels` per run (even), each
/// run `stride` elements after the one before. Backward-data of patch layers writes its GEMM
/// columns (filter row, filter column, channel) so: one run per filter row (bwd_data_patch.rs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChannelRuns {
    pub channels: usize,
    pub stride: usize,
}

/// The x and w maps (over stand-in addresses in `check`: the driver validates the geometry —
/// corner ranges, strides, extents — without touching memory).
fn encode_maps(g: &Geom, dt: DataType, prec: TcPrecision, (bm, bn): (usize, usize), filter: FilterSource, x: u64, w: u64) -> Result<(TensorMap, TensorMap)> {
    let bk = k_step(g, dt) as u32;
    let xm = if plain_gemm(g) {
        let pixels = (g.n * g.input_size()) as u64;
        tensor_map::tiled_2d([g.c as u64, pixels], (g.x_strides[4] * dt.size()) as u64, [bk, bm as u32], dt, x)?
    } else {
        tensor_map::im2col(&im2col_of(g, dt, bm), dt, x)?
    };
    let wm = match filter {
        FilterSource::Own if channel_tail(g, dt) => {
            let e = dt.size() as u64;
            let dims = [g.cg() as u64, g.filter_size() as u64, g.k as u64];
            tensor_map::tiled_3d(dims, [g.cg() as u64 * e, g.w_strides[0] as u64 * e], [bk, 1, bn as u32], dt, w)?
        }
        FilterSource::Own => {
            let (dims, row) = w_matrix(g, prec);
            tensor_map::tiled_2d(dims, row, [bk, bn as u32], dt, w)?
        }
        FilterSource::Flipped { rows, row_elems, taps } => {
            // Boxes of BK rows × 64 channels of one tap (MN-major B tiles).
            let cols = (taps.src.iter().product::<usize>() * g.kg()) as u64;
            tensor_map::tiled_2d([cols, rows as u64], (row_elems * dt.size()) as u64, [64, bk], dt, w)?
        }
    };
    Ok((xm, wm))
}

/// wgmma and TMA exist on compute capability 9.0 (the sm_90a target) only.
pub(crate) fn hopper_check(device: &DeviceInfo) -> std::result::Result<(), String> {
    match device.compute_capability()? {
        (9, 0) => Ok(()),
        (maj, min) => Err(format!("wgmma and TMA need a compute capability 9.0 GPU (sm_90a); this one is {maj}.{min}")),
    }
}

pub struct CudaConvIgemmTma;

impl Solver for CudaConvIgemmTma {
    fn name(&self) -> &'static str { "CudaConvImplicitGemmTma" }
    fn solution_id(&self) -> u64 { 106 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::ImplicitGemm }
    fn device(&self) -> DeviceKind { DeviceKind::Cuda }
    fn computes_quantized(&self) -> bool { true }

    fn check(&self, problem: &FusedProblem, device: &DeviceInfo) -> std::result::Result<(), String> {
        let (g, prec) = tma_geometry(problem)?;
        let dt = problem.conv_problem().map(|c| c.dtype()).unwrap_or(DataType::Half);
        tma_check(&g, dt)?;
        if channel_tail(&g, dt) && !prec.narrow() {
            // The split filter copy has no tail; TF32 tails are not yet run on a GPU.
            return Err(format!("f32 over {} channels: channel tails are taken for 16-bit data only", g.cg()));
        }
        hopper_check(device)?;
        encode_maps(&g, dt, prec, (128, 128), FilterSource::Own, 1 << 20, 1 << 20).map(|_| ()).map_err(|e| format!("tensor map refused: {e}"))
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // About 500 TFLOP/s on an H100/H200-class GPU in 16-bit types, half that in TF32, a
        // third of that again with three products each.
        let rate = |c: &crate::problem::ConvProblem| match tensor_core_precision(c) {
            _ if c.quant().is_some() => 1000e12,
            Ok(TcPrecision::Bits16) => 500e12,
            Ok(TcPrecision::Tf32) => 250e12,
            _ => 80e12,
        };
        problem.conv_problem().map(|c| 2.0 * c.macs() / rate(c) * 1e3 + 0.004).unwrap_or(f64::MAX)
    }

    fn build(&self, problem: &FusedProblem, ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let (g, prec) = tma_geometry(problem).map_err(|why| Error::not_implemented(format!("{}: {why}", self.name())))?;
        let sms = cuda_of(ctx.device())?.dev.sm_count() as usize;
        let cfg = chosen_config(ctx, self.name(), &problem.key(), "CONFLUX_TMA_TILE", TmaTile::parse, || tma_heuristic(&g, prec, sms))?;
        self.build_with(problem, ctx, cfg, None)
    }

    fn tuning_space(&self, _problem: &FusedProblem) -> Vec<String> {
        TMA_CONFIGS.iter().map(TmaTile::label).collect()
    }

    fn build_config(&self, problem: &FusedProblem, ctx: &dyn BuildContext, config: &str) -> Result<Arc<dyn Invoker>> {
        let cfg = TmaTile::parse(config).ok_or_else(|| Error::bad_parm(format!("{}: unknown configuration {config}", self.name())))?;
        self.build_with(problem, ctx, cfg, None)
    }
}

impl CudaConvIgemmTma {
    /// Build with a given tile, launching at most `max_blocks` blocks per group when given
    /// (tests make blocks walk many tiles); `check` must have passed.
    pub fn build_with(&self, problem: &FusedProblem, ctx: &dyn BuildContext, cfg: TmaTile, max_blocks: Option<usize>) -> Result<Arc<dyn Invoker>> {
        self.build_from(problem, ctx, cfg, max_blocks, FilterSource::Own, None)
    }

    /// Build for a filter read in place (`FilterSource::Flipped`, 16-bit data), with the tile
    /// `config` names or else the perf-db's or the heuristic's; `check` must have passed.
    pub fn build_flipped(&self, problem: &FusedProblem, ctx: &dyn BuildContext, config: Option<&str>, filter: FilterSource) -> Result<Arc<dyn Invoker>> {
        self.build_flipped_runs(problem, ctx, config, filter, None)
    }

    /// `build_flipped` writing y's channels in `runs` when given.
    pub fn build_flipped_runs(&self, problem: &FusedProblem, ctx: &dyn BuildContext, config: Option<&str>, filter: FilterSource, runs: Option<ChannelRuns>) -> Result<Arc<dyn Invoker>> {
        let (g, prec) = tma_geometry(problem).map_err(|why| Error::not_implemented(format!("{}: {why}", self.name())))?;
        let cfg = match config {
            Some(l) => TmaTile::parse(l).ok_or_else(|| Error::bad_parm(format!("{}: unknown configuration {l}", self.name())))?,
            None => {
                let sms = cuda_of(ctx.device())?.dev.sm_count() as usize;
                chosen_config(ctx, self.name(), &problem.key(), "CONFLUX_TMA_TILE", TmaTile::parse, || tma_heuristic(&g, prec, sms))?
            }
        };
        self.build_from(problem, ctx, cfg, None, filter, runs)
    }

    fn build_from(&self, problem: &FusedProblem, ctx: &dyn BuildContext, cfg: TmaTile, max_blocks: Option<usize>, filter: FilterSource, runs: Option<ChannelRuns>) -> Result<Arc<dyn Invoker>> {
        let be = cuda_of(ctx.device())?.clone();
        let conv = problem.conv_problem().ok_or_else(|| Error::internal("igemm-tma: not a convolution"))?;
        let (g, prec) = tma_geometry(problem).map_err(|why| Error::not_implemented(format!("igemm-tma: {why}")))?;
        let sms = be.dev.sm_count() as usize;
        let KernelPlan { src, cfg, splits, y_align, tma_store, min_blocks } = kernel_plan(problem, &g, prec, cfg, filter, runs, sms)?;
        let kernel = be.module_arch_specific("conv_igemm_tma", &src)?.function("conv_fwd_igemm_tma")?;
        let smem = cfg.smem_bytes(prec) as u32;
        kernel.reserve_dynamic_smem(&be.dev, smem)?;
        let resident = (be.dev.sm_count() as usize * min_blocks).div_ceil(g.groups);
        let max_blocks = max_blocks.unwrap_or(resident).max(1);
        let tiles = (g.n * g.output_size()).div_ceil(cfg.bm) * g.kg().div_ceil(cfg.bn);
        let counters = SplitCounters::new(4 * split_counter_words(&g, tiles, cfg.bm));
        Ok(Arc::new(TmaInvoker {
            be,
            kernel,
            dtype: conv.dtype(),
            y_dtype: conv.y.dtype(),
            prec,
            bm: cfg.bm,
            bn: cfg.bn,
            threads: cfg.threads() as u32,
            smem,
            max_blocks,
            splits,
            y_align,
            tma_store,
            filter,
            geom: g,
            problem: problem.clone(),
            fallback: Fallback::new(if conv.quant().is_some() { &CudaConvQuantDirect } else { &CudaConvIgemm }),
            counters,
        }))
    }
}

/// What `build_from` compiles and launches: the kernel source, the fitted tile, the split-K
/// count, the store path and the blocks per SM the kernel is compiled for.
struct KernelPlan {
    src: String,
    cfg: TmaTile,
    splits: usize,
    y_align: u64,
    tma_store: bool,
    min_blocks: usize,
}

fn kernel_plan(problem: &FusedProblem, g: &Geom, prec: TcPrecision, cfg: TmaTile, filter: FilterSource, runs: Option<ChannelRuns>, sms: usize) -> Result<KernelPlan> {
    let conv = problem.conv_problem().ok_or_else(|| Error::internal("igemm-tma: not a convolution"))?;
    let (dt, ydt) = (conv.dtype(), conv.y.dtype());
    let bk = k_step(g, dt);
    let tail = channel_tail(g, dt);
    if tail && !prec.narrow() {
        return Err(Error::internal("igemm-tma: channel tails are taken for 16-bit data only"));
    }
    let ksteps = g.filter_size() * g.cg().div_ceil(bk);
    let tiles = (g.n * g.output_size()).div_ceil(cfg.bm) * g.kg().div_ceil(cfg.bn) * g.groups;
    let splits = tma_splits(tiles, ksteps, sms);
    let cfg = if half_rows(g, dt) { cfg.half_rows() } else { cfg };
    let cfg = cfg.fitted(ksteps.div_ceil(splits), prec);
    let ys = g.y_strides;
    // Bulk stores write whole BK-channel boxes of y seen as pixels × channels: y must be
    // dense channels-last and no box may reach into another group's channels.
    let [od, oh, ow] = g.output;
    // (A 2-D y has D stride 0: only the N stride says whether images are packed.)
    let pixel_rows = ys[3] == ow * ys[4] && (od == 1 || ys[2] == oh * ys[3]) && ys[0] == od * oh * ys[3];
    let bulk_ok = Staging::of(g) == Staging::Rows && pixel_rows && (g.groups == 1 || g.kg() % step_channels(ydt) == 0);
    // f32 results are staged only for bulk stores (the other staged stores pack 16-bit
    // values; channel-major runs of f32 for NCHW y measured slower than stores from
    // registers: bench/results/2026-11-27-history-from-status.md) and only where the
    // staging buffer fits; else they go from registers.
    // Quantized kernels stage 16-bit y and channels-last 8-bit y rounded to nearest (within
    // `TcPrecision::stage_elem`'s buffer); int32, f32 and stochastically rounded fp8 outputs
    // (each element's own random bits) go from registers.
    let stochastic = conv.conv.attribute(crate::types::ConvAttrib::Fp8RoundingMode) == 1 && crate::quant::Fp8::of(ydt).is_some();
    // Channel runs: staged rows only where every 16-byte chunk lies in one run; no bulk
    // stores (their boxes are dense pixel rows), no channel-major runs.
    let runs_fit = |s: Staging| runs.is_none_or(|r| s == Staging::Rows && [r.channels, r.stride].iter().all(|v| v % (16 / ydt.size()) == 0));
    let staging = match (cfg.staged, ydt) {
        (false, _) => Staging::Direct,
        (true, _) if !runs_fit(Staging::of(g)) => Staging::Direct,
        (true, _) if prec.elem() == 1 && ydt.size() == 1 && !stochastic && Staging::of_elem(g, 1) == Staging::Rows => Staging::Rows,
        (true, _) if prec.elem() == 1 && ydt.size() != 2 => Staging::Direct,
        (true, DataType::Float) if bulk_ok && cfg.smem_bytes(prec) <= SMEM_LIMIT => Staging::Rows,
        (true, DataType::Float) => Staging::Direct,
        (true, _) => Staging::of(g),
    };
    // Shared memory must follow from the generated source alone: two configurations that
    // compile to the same kernel share its CUfunction and its dynamic-smem attribute.
    let cfg = TmaTile { staged: staging != Staging::Direct, ..cfg };
    let tma_store = staging == Staging::Rows && bulk_ok && ydt.size() >= 2 && runs.is_none();
    let min_blocks = cfg.min_blocks(prec, splits > 1);
    let mut tile = vec![
        ("BM", cfg.bm), ("BN", cfg.bn), ("BK", bk), ("STAGES", cfg.stages), ("THREADS", cfg.threads()), ("LOADER_THREADS", 128),
        ("MIN_BLOCKS", min_blocks), ("TMA_STORE", tma_store as usize), ("A_TILED", plain_gemm(&g) as usize),
        ("F32_SPLIT", (prec == TcPrecision::Tf32x3) as usize), ("PINGPONG", cfg.pingpong as usize),
        ("WGMMA_B_MN_MAJOR", (filter != FilterSource::Own) as usize), ("CHANNEL_TAIL", tail as usize), ("SPLITS", splits),
        ("TMA_3D", is_3d(g) as usize),
    ];
    if let FilterSource::Flipped { taps, .. } = filter {
        if prec != TcPrecision::Bits16 {
            return Err(Error::internal("igemm-tma: in-place filter reads need 16-bit data"));
        }
        let [_, h, w] = taps.axes;
        if taps.src[0] != 1 || [h.count, w.count] != [g.filter[1], g.filter[2]] {
            return Err(Error::internal("igemm-tma: the tap map does not fit the 2-D problem's filter"));
        }
        tile.extend([("SRC_FW", taps.src[2]), ("TAP0_H", h.first), ("TAP_STEP_H", h.step), ("TAP0_W", w.first), ("TAP_STEP_W", w.step)]);
    }
    if let Some(r) = runs {
        if r.channels % 2 != 0 || prec != TcPrecision::Bits16 {
            return Err(Error::internal("igemm-tma: channel runs need 16-bit data and an even run length"));
        }
        tile.extend([("Y_SEG", r.channels), ("Y_SEG_STRIDE", r.stride)]);
    }
    tile.extend(staging.defines());
    let (mut defs, pair_store) = tensor_core_defines(g, dt, &tile);
    // fp8 operands may differ: w's format is B's.
    match conv.w.dtype() {
        DataType::Float8 => defs.push(("MMA_B".into(), "\"e4m3\"".into())),
        DataType::BFloat8 => defs.push(("MMA_B".into(), "\"e5m2\"".into())),
        _ => {}
    }
    let y_align = staging.y_align(pair_store, ydt.size());
    let defs: Vec<(&str, String)> = defs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    let src = preamble::conv_source(conv, problem.epilogue(), &Extra { act: None, defines: &defs }, TEMPLATE)?;
    Ok(KernelPlan { src, cfg, splits, y_align, tma_store, min_blocks })
}

/// The kernel's parameter block: both tensor maps, then the common parameters (mirrors
/// `TmaArgs` in conv_igemm_tma.cu; the y map is unused without bulk stores, the split-K
/// scratch without splits).
#[repr(C, align(128))]
struct TmaArgs {
    x: TensorMap,
    w: TensorMap,
    y: TensorMap,
    p: Params,
    partial: u64,
    counters: u64,
}

struct TmaInvoker {
    be: Arc<CudaBackend>,
    kernel: Kernel,
    dtype: DataType,
    y_dtype: DataType,
    prec: TcPrecision,
    bm: usize,
    bn: usize,
    threads: u32,
    smem: u32,
    max_blocks: usize,
    /// Split-K count (`tma_splits`).
    splits: usize,
    /// Alignment (bytes) the stores need of y (`Staging::y_align`).
    y_align: u64,
    /// y goes out through bulk tensor stores (needs its own map).
    tma_store: bool,
    filter: FilterSource,
    geom: Geom,
    problem: FusedProblem,
    /// The CUDA-core kernel, built on first need for pointers the copy engine cannot use.
    fallback: Fallback,
    /// Split-K counter blocks kept between launches (unused without splits).
    counters: SplitCounters,
}

/// Split-K counters of one launch: one per (group, tile, consumer part), rounded up to 256 bytes.
fn split_counter_words(g: &Geom, tiles: usize, bm: usize) -> usize { (g.groups * tiles * (bm / 64)).next_multiple_of(64) }

impl Invoker for TmaInvoker {
    fn run(&self, ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        if a.x.0 % 16 != 0 || a.w.0 % 16 != 0 || a.y.0 % self.y_align != 0 {
            // The CUDA-core kernel reads the problem's own filter layout, not a flipped one in
            // place (the backward-data solver checks alignment before choosing this plan).
            if self.filter != FilterSource::Own {
                return Err(Error::internal("igemm-tma: in-place filter read with pointers the copy engine cannot use"));
            }
            return self.fallback.run(&self.problem, ctx, a);
        }
        let g = &self.geom;
        if g.groups > 65535 {
            return Err(Error::not_implemented("igemm-tma: more than 65535 groups in one launch"));
        }
        let tiles = (g.n * g.output_size()).div_ceil(self.bm) * g.kg().div_ceil(self.bn);
        let grid = ((tiles * self.splits).min(self.max_blocks) as u32, 1, g.groups as u32);
        // The whole sequence (the filter split included) is one timed unit when profiling.
        timed(ctx, &self.be, || {
            // Tf32x3: the kernel reads w's TF32 high and low parts from a split copy.
            let (rows, cols) = (g.k, g.cg() * g.filter_size());
            let split = match self.prec {
                TcPrecision::Tf32x3 => {
                    let scratch = Scratch::new(ctx, &self.be.dev, tf32_split::split_bytes(rows, cols))?;
                    tf32_split::split_rows(&self.be, a.w.0, g.w_strides[0], rows, cols, scratch.ptr())?;
                    Some(scratch)
                }
                _ => None,
            };
            let w_in = split.as_ref().map_or(a.w.0, Scratch::ptr);
            let (x, w) = encode_maps(g, self.dtype, self.prec, (self.bm, self.bn), self.filter, a.x.0, w_in)?;
            let y = if self.tma_store {
                let pixels = (g.n * g.output_size()) as u64;
                let yt = self.y_dtype;
                tensor_map::tiled_2d([g.k as u64, pixels], (g.y_strides[4] * yt.size()) as u64, [step_channels(yt) as u32, 64], yt, a.y.0)?
            } else {
                TensorMap { opaque: [0; 16] }
            };
            // Split-K: a zero counter per (group, tile, consumer part), from the invoker's kept
            // blocks (the kernel leaves them zero) or zeroed at the head of the scratch block,
            // then the partial sums (each tile's BM × BN floats per split) in scratch.
            let counters = split_counter_words(g, tiles, self.bm);
            let partials = g.groups * tiles * self.bm * self.bn * self.splits;
            let kept = match self.splits {
                1 => None,
                _ => self.counters.acquire(&self.be.dev)?,
            };
            let own_counters = if kept.is_some() { 0 } else { counters };
            let split_scratch = match self.splits {
                1 => None,
                _ => Some(Scratch::new(ctx, &self.be.dev, 4 * (own_counters + partials))?),
            };
            let (partial, counter) = match (&split_scratch, &kept) {
                (None, _) => (0, 0),
                (Some(s), Some(lease)) => (s.ptr(), lease.ptr),
                (Some(s), None) => {
                    self.be.dev.memset_async(s.ptr(), 4 * counters)?;
                    (s.ptr() + 4 * counters as u64, s.ptr())
                }
            };
            let args = TmaArgs { x, w, y, p: conv_run_params(g, &self.problem, a)?, partial, counters: counter };
            // SAFETY: TmaArgs mirrors the kernel's parameter block (Params checked by the
            // preamble's static_assert, the maps are 128-byte opaque blocks); pointers are the
            // caller's tensors, validated against the problem and aligned as the copies need,
            // the split copy and partials, which live (stream-ordered) until after this launch,
            // and a counter block lent until this launch has run.
            unsafe { self.kernel.launch(&self.be.dev, grid, (self.threads, 1, 1), self.smem, &args) }?;
            kept.map_or(Ok(()), |lease| lease.launched(&self.be.dev))
        })
    }
}

#[cfg(test)]
mod tests;
