//! Forward convolutions with few input channels per group — depthwise (one channel per group,
//! any channel multiplier), ResNeXt-like groups, 3-channel 3×3 stems — on a direct CUDA-core kernel
//! (conv_few_channels.cu) with the fused epilogue. A GEMM over CG·filter products per output
//! leaves the tensor cores nearly empty and pays a tile per group; these layers are bound by
//! the bytes they move, which this kernel reads once from memory and reuses from registers.

use super::common::{channel_vector, AlignmentVariants, columns_label, conv_run_params, cuda_of, direct_kernel_source, forward_geometry, parse_columns_label, vectors_aligned};
use crate::backend::cuda::{timed, CudaBackend};
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::error::{Error, Result};
use crate::problem::{FusedProblem, Geom};
use crate::solver::{chosen_config, BuildContext, Invoker, RunArgs, Solver};
use crate::types::ConvAlgorithm;
use std::sync::Arc;

/// The kernel after its 16-byte vector helpers (`vec16.cuh`).
const TEMPLATE: &str = concat!(include_str!("../../backend/cuda/kernels/vec16.cuh"), include_str!("../../backend/cuda/kernels/conv_few_channels.cu"));

/// Most input channels per group the kernel takes: each is a pass over the filter row. With 8
/// (a whole 16-bit vector per group) the tensor-core kernels measured faster
/// (bench/results/2026-11-27-h200-zoo-few-channels.md).
pub const MAX_CHANNELS_PER_GROUP: usize = 4;
/// Most products per output of an ungrouped convolution (3-channel 3×3 stems: 27) the kernel
/// takes; 7×7 and 4×4-stride-4 stems measured faster as GEMMs (same file).
pub const MAX_DENSE_PRODUCTS: usize = 32;
/// Widest filter row kept in registers (per output channel of the thread).
const MAX_FILTER_WIDTH: usize = 16;
const BLOCK: u32 = 256;

pub struct CudaConvFewChannels;

/// How the threads split the output: `vec` output channels × `tw` output columns each,
/// channels or columns fastest across threads, whether whole groups of `kg = cg` channels sit
/// inside a thread's channels (their inputs loaded once for every input channel), and which
/// tensors move as vectors of `vec` elements (16 bytes, or 8 with half-width vectors).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Shape {
    vec: usize,
    tw: usize,
    channel_inner: bool,
    group_share: bool,
    x_vec: bool,
    y_vec: bool,
}

/// Output columns per thread that tuning may pick.
const COLUMN_TILES: [usize; 3] = [2, 4, 8];
/// Blocks per SM the kernel's registers are capped for (`__launch_bounds__`): wide tiles of
/// large filters otherwise hold one 256-thread block per SM.
const MIN_BLOCKS: [usize; 3] = [1, 2, 3];

/// A configuration: `tw` output columns per thread, registers capped for `min_blocks` blocks
/// per SM, and with `half` channels-last threads taking half a 16-byte vector of channels
/// (8-byte vectors: half the sums and filter registers per thread, twice the threads).
/// Labels `tw4` (one block), `tw4b2`, `tw8h`, `tw8b2h`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Tile {
    tw: usize,
    min_blocks: usize,
    half: bool,
}

fn parse_tile(label: &str) -> Option<Tile> {
    let (columns, half) = label.strip_suffix('h').map_or((label, false), |l| (l, true));
    let (tw, min_blocks) = parse_columns_label(columns)?;
    (COLUMN_TILES.contains(&tw) && MIN_BLOCKS.contains(&min_blocks)).then_some(Tile { tw, min_blocks, half })
}

fn label(t: Tile) -> String { columns_label(t.tw, t.min_blocks) + if t.half { "h" } else { "" } }

/// Eight columns per thread: wider tiles reread less of each input row (5×5 and 7×7 filters
/// gain most); never wider than the output. Filters of three columns on outputs at least 56
/// wide reuse little across a wide tile and gain from occupancy instead: four columns,
/// registers capped for two blocks per SM (f32: stride 1 only, as measured). 16-bit
/// channels-last threads take half vectors (4 channels): the 8-column tiles of 5×5 and 7×7
/// filters held 170–184 registers, one 256-thread block per SM, latency-bound; at 100–114
/// they hold two. Sweeps: bench/results/2026-11-27-h200-zoo-few-channels.md,
/// 2026-11-27-h200-few-channels-occupancy.md, 2026-11-28-h200-few-channels-half-vectors.md.
fn heuristic_tile(g: &Geom, elem: usize) -> Tile {
    let half = elem == 2;
    if g.filter[2] <= 3 && g.output[2] >= 56 && (half || g.stride[2] == 1) {
        return Tile { tw: 4, min_blocks: 2, half };
    }
    Tile { tw: 8.min(g.output[2]).max(1), min_blocks: 1, half }
}

impl Shape {
    fn of(g: &Geom, elem: usize, tw: usize, half: bool) -> Shape {
        let channel_inner = g.y_strides[1] == 1;
        let full = channel_vector(g.k, elem, channel_inner);
        let halved = half && full * elem == 16 && (full / 2) % g.kg().max(1) == 0;
        let vec = if halved { full / 2 } else { full };
        let whole = vec * elem == 16 || halved;
        let depthwise = g.cg() == 1 && g.kg() == 1;
        let group_share = channel_inner && g.cg() > 1 && g.kg() == g.cg() && vec % g.kg() == 0 && g.x_strides[1] == 1;
        let x_vec = whole && (depthwise || group_share) && vectors_aligned(&g.x_strides, vec);
        let y_vec = whole && vectors_aligned(&g.y_strides, vec);
        let tw = tw.min(g.output[2]).max(1);
        Shape { vec, tw, channel_inner, group_share, x_vec, y_vec }
    }

    fn items(&self, g: &Geom) -> usize {
        g.n * g.output[0] * g.output[1] * g.output[2].div_ceil(self.tw) * (g.k / self.vec)
    }
}

struct FewChannelsInvoker {
    be: Arc<CudaBackend>,
    /// Vector loads and stores where x and y are aligned to the vectors, else element accesses.
    kernels: AlignmentVariants,
    shape: Shape,
    geom: Geom,
    problem: FusedProblem,
}

impl Solver for CudaConvFewChannels {
    fn name(&self) -> &'static str { "CudaConvFewChannels" }
    fn solution_id(&self) -> u64 { 112 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Direct }
    fn device(&self) -> DeviceKind { DeviceKind::Cuda }

    fn check(&self, problem: &FusedProblem, _device: &DeviceInfo) -> std::result::Result<(), String> {
        let g = forward_geometry(problem)?;
        let products = g.cg() * g.filter_size();
        if g.groups == 1 && products > MAX_DENSE_PRODUCTS {
            return Err(format!("ungrouped with {products} products per output (at most {MAX_DENSE_PRODUCTS}): a GEMM's work"));
        }
        if g.groups == 1 && g.y_strides[1] != 1 {
            // Planar threads take one output channel each and would read x once per channel.
            return Err("ungrouped with planar (channel-outer) y".into());
        }
        if g.cg() > MAX_CHANNELS_PER_GROUP {
            return Err(format!("{} input channels per group (at most {MAX_CHANNELS_PER_GROUP})", g.cg()));
        }
        if g.filter[2] > MAX_FILTER_WIDTH {
            return Err(format!("filter width {} (at most {MAX_FILTER_WIDTH})", g.filter[2]));
        }
        // One column per thread, half vectors where they apply: the most items any tile has.
        let shape = Shape::of(&g, problem.dtype().size(), 1, true);
        if shape.items(&g) >= (i32::MAX as usize) {
            return Err("too many output tiles for one launch".into());
        }
        Ok(())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // Bound by the bytes moved: about 2.5 TB/s for x, w and y once each.
        problem.conv_problem().map(|c| (c.x.num_bytes() + c.w.num_bytes() + c.y.num_bytes()) as f64 / 2.5e12 * 1e3 + 0.004).unwrap_or(f64::MAX)
    }

    fn build(&self, problem: &FusedProblem, ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let conv = problem.conv_problem().ok_or_else(|| Error::internal("few-channels: not a convolution"))?;
        let g = Geom::of(conv);
        let tile = chosen_config(ctx, self.name(), &problem.key(), "CONFLUX_FEW_CHANNELS_TILE", parse_tile, || heuristic_tile(&g, conv.dtype().size()))?;
        self.build_with(problem, ctx, tile)
    }

    fn tuning_space(&self, problem: &FusedProblem) -> Vec<String> {
        let Some(conv) = problem.conv_problem() else { return Vec::new() };
        let g = Geom::of(conv);
        // Half-width vectors only where the layout has whole ones to halve.
        let halves: &[bool] = if Shape::of(&g, conv.dtype().size(), 1, true) != Shape::of(&g, conv.dtype().size(), 1, false) { &[false, true] } else { &[false] };
        let tiles = COLUMN_TILES.iter().filter(|&&tw| tw <= g.output[2].max(2));
        let tiles = tiles.flat_map(|&tw| MIN_BLOCKS.iter().map(move |&min_blocks| (tw, min_blocks)));
        tiles.flat_map(|(tw, min_blocks)| halves.iter().map(move |&half| label(Tile { tw, min_blocks, half }))).collect()
    }

    fn build_config(&self, problem: &FusedProblem, ctx: &dyn BuildContext, config: &str) -> Result<Arc<dyn Invoker>> {
        let tile = parse_tile(config).ok_or_else(|| Error::bad_parm(format!("{}: no configuration {config}", self.name())))?;
        self.build_with(problem, ctx, tile)
    }
}

impl CudaConvFewChannels {
    /// Build with `tile`; `check` must have passed.
    fn build_with(&self, problem: &FusedProblem, ctx: &dyn BuildContext, tile: Tile) -> Result<Arc<dyn Invoker>> {
        let be = cuda_of(ctx.device())?.clone();
        let (src, shape, g) = kernel_source(problem, tile)?;
        let kernels = AlignmentVariants::build(&be, "conv_few_channels", src, shape.x_vec || shape.y_vec)?;
        Ok(Arc::new(FewChannelsInvoker { be, kernels, shape, geom: g, problem: problem.clone() }))
    }
}

/// The kernel source of `problem` with `tile` (`check` must have passed), its thread shape and
/// geometry.
fn kernel_source(problem: &FusedProblem, tile: Tile) -> Result<(String, Shape, Geom)> {
    let conv = problem.conv_problem().ok_or_else(|| Error::internal("few-channels: not a convolution"))?;
    let g = Geom::of(conv);
    let shape = Shape::of(&g, conv.dtype().size(), tile.tw, tile.half);
    let defines = [
        ("KTOT", g.k),
        ("VEC", shape.vec),
        ("TW", shape.tw),
        ("CH_INNER", shape.channel_inner as usize),
        ("GSHARE", shape.group_share as usize),
        ("XVEC", shape.x_vec as usize),
        ("YVEC", shape.y_vec as usize),
        ("MINB", tile.min_blocks),
    ];
    let src = direct_kernel_source(problem, &g, &defines, TEMPLATE)?;
    Ok((src, shape, g))
}

impl Invoker for FewChannelsInvoker {
    fn run(&self, ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let g = &self.geom;
        let p = conv_run_params(g, &self.problem, a)?;
        let bytes = (self.shape.vec * self.problem.dtype().size()) as u64;
        let aligned = (!self.shape.x_vec || a.x.0 % bytes == 0) && (!self.shape.y_vec || a.y.0 % bytes == 0);
        let kernel = self.kernels.kernel(aligned)?;
        let grid = self.shape.items(g).div_ceil(BLOCK as usize) as u32;
        // SAFETY: Params mirrors the kernel's parameter struct; pointers are the caller's
        // tensors, validated against the problem's descriptors; the vector kernel only runs on
        // x and y aligned to its vectors.
        timed(ctx, &self.be, || unsafe { kernel.launch(&self.be.dev, (grid.max(1), 1, 1), (BLOCK, 1, 1), 0, &p) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A depthwise c-hw-hw convolution, f × f at `stride`, of `dt` in `layout`, with bias + ReLU.
    fn depthwise(dt: crate::types::DataType, layout: crate::types::Layout, c: usize, hw: usize, f: usize, stride: i64) -> FusedProblem {
        use crate::problem::{EpiOp, FusedKind};
        use crate::types::{ActivationMode, ConvMode};
        use crate::{ConvDesc, TensorDesc};
        let mut conv = ConvDesc::new(ConvMode::Convolution, &[f as i64 / 2; 2], &[stride; 2], &[1, 1]).unwrap();
        conv.set_groups(c as i64).unwrap();
        let t = |l: &[usize]| TensorDesc::with_layout(dt, layout, l).unwrap();
        let (x, w) = (t(&[32, c, hw, hw]), t(&[c, 1, f, f]));
        let y = t(conv.output_desc(&x, &w).unwrap().lens());
        let problem = crate::problem::ConvProblem::forward(&conv, &x, &w, &y).unwrap();
        let epilogue = vec![EpiOp::Bias { dtype: dt }, EpiOp::Activation { mode: ActivationMode::Relu }];
        FusedProblem { kind: FusedKind::Conv { conv: problem, epilogue } }
    }

    /// The default tiles of the sweep in bench/results/2026-11-28-h200-few-channels-half-vectors.md:
    /// 16-bit channels-last layers take half vectors (4 channels per thread), wide 3 × 3
    /// outputs four columns at two blocks per SM, the rest eight columns; f32 keeps whole
    /// vectors and the stride-1 rule; planar layouts have nothing to halve.
    #[test]
    fn default_tiles_follow_the_sweep() {
        use crate::types::{DataType, Layout};
        let pick = |dt, layout, c, hw, f, stride| {
            let p = depthwise(dt, layout, c, hw, f, stride);
            let g = Geom::of(p.conv_problem().unwrap());
            let t = heuristic_tile(&g, dt.size());
            (label(t), Shape::of(&g, dt.size(), t.tw, t.half).vec)
        };
        assert_eq!(pick(DataType::Half, Layout::NHWC, 240, 28, 5, 1), ("tw8h".to_string(), 4));
        assert_eq!(pick(DataType::BFloat16, Layout::NHWC, 384, 14, 7, 1), ("tw8h".to_string(), 4));
        assert_eq!(pick(DataType::Half, Layout::NHWC, 96, 112, 3, 2), ("tw4b2h".to_string(), 4));
        assert_eq!(pick(DataType::Half, Layout::NHWC, 144, 56, 3, 1), ("tw4b2h".to_string(), 4));
        assert_eq!(pick(DataType::Float, Layout::NHWC, 96, 112, 3, 2), ("tw8".to_string(), 4));
        assert_eq!(pick(DataType::Float, Layout::NHWC, 144, 56, 3, 1), ("tw4b2".to_string(), 4));
        assert_eq!(pick(DataType::Half, Layout::NCHW, 240, 28, 5, 1).1, 1);
        // Half tiles are in the tuning space only where they change the thread shape.
        let space = |dt, layout| CudaConvFewChannels.tuning_space(&depthwise(dt, layout, 240, 28, 5, 1));
        assert!(space(DataType::Half, Layout::NHWC).iter().any(|l| l.ends_with('h')));
        assert!(!space(DataType::Half, Layout::NCHW).iter().any(|l| l.ends_with('h')));
        assert!(space(DataType::Half, Layout::NHWC).iter().all(|l| parse_tile(l).is_some_and(|t| label(t) == *l)));
    }

    /// Every tile's source for the depthwise layers of real networks (3 × 3 at strides 1 and 2,
    /// 5 × 5, 7 × 7; fp16 channels-last with bias + ReLU) generates; with
    /// `CONFLUX_KERNEL_SOURCES` set they are written there for an offline NVRTC compile
    /// (`scripts/nvrtc_check.py`: registers, spills).
    #[test]
    fn sources_generate_for_every_tile() {
        use crate::problem::{EpiOp, FusedKind};
        use crate::types::{ActivationMode, ConvMode, DataType, Layout};
        use crate::{ConvDesc, TensorDesc};
        let out = std::env::var("CONFLUX_KERNEL_SOURCES").ok();
        for (i, &(c, hw, f, stride)) in [(144, 56, 3, 1), (144, 56, 3, 2), (240, 28, 5, 1), (384, 14, 7, 1)].iter().enumerate() {
            let mut conv = ConvDesc::new(ConvMode::Convolution, &[f as i64 / 2; 2], &[stride; 2], &[1, 1]).unwrap();
            conv.set_groups(c as i64).unwrap();
            let t = |l: &[usize]| TensorDesc::with_layout(DataType::Half, Layout::NHWC, l).unwrap();
            let (x, w) = (t(&[32, c, hw, hw]), t(&[c, 1, f, f]));
            let y = t(conv.output_desc(&x, &w).unwrap().lens());
            let problem = crate::problem::ConvProblem::forward(&conv, &x, &w, &y).unwrap();
            let epilogue = vec![EpiOp::Bias { dtype: DataType::Half }, EpiOp::Activation { mode: ActivationMode::Relu }];
            let fused = FusedProblem { kind: FusedKind::Conv { conv: problem, epilogue } };
            for label in CudaConvFewChannels.tuning_space(&fused) {
                let (src, _, _) = kernel_source(&fused, parse_tile(&label).unwrap()).unwrap();
                assert!(src.contains("conv_few_channels_vec"), "{label}");
                if let Some(dir) = &out {
                    for (vector, suffix) in [(true, "_vec"), (false, "")] {
                        std::fs::write(format!("{dir}/few_channels_{i}_{label}{suffix}.cu"), super::super::common::variant_source(&src, vector)).unwrap();
                    }
                }
            }
        }
    }
}
