//! Backward-data of strided depthwise convolutions (one input and one output channel per
//! group) in one launch on CUDA cores (conv_dgrad_depthwise.cu): each thread gathers its dx
//! tile from the dy columns that reach it. The phase solver (`bwd_data_few_channels`) runs a
//! strided layer as one forward launch per phase and a filter gather per phase; these layers
//! are bound by the bytes they move, and the phases' launches cost more than the bytes. At
//! stride 1 (one phase) the phase solver's forward kernel is the faster one.

use super::common::{channel_vector, AlignmentVariants, check_dtype, columns_label, conv_run_params, cuda_of, direct_kernel_source, parse_columns_label, vectors_aligned};
use crate::backend::cuda::{timed, CudaBackend};
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::error::{Error, Result};
use crate::problem::{FusedProblem, Geom};
use crate::solver::{chosen_config, BuildContext, Invoker, RunArgs, Solver};
use crate::types::{ConvAlgorithm, Direction};
use std::sync::Arc;

/// The kernel after its 16-byte vector helpers (`vec16.cuh`).
const TEMPLATE: &str = concat!(include_str!("../../backend/cuda/kernels/vec16.cuh"), include_str!("../../backend/cuda/kernels/conv_dgrad_depthwise.cu"));

/// Widest filter row and largest column stride the kernel's compile-time tile takes.
const MAX_FILTER_WIDTH: usize = 16;
const MAX_STRIDE: usize = 8;
/// Widest dx tile per thread (columns).
const MAX_TILE: usize = 16;
const BLOCK: u32 = 256;
/// Blocks per SM the registers may be capped for.
const MIN_BLOCKS: [usize; 2] = [1, 2];

pub struct CudaConvBwdDataDepthwise;

/// A configuration: `tw` dx columns per thread (a multiple of the column stride), registers
/// capped for `min_blocks` blocks per SM. Labels `tw8`, `tw8b2`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Tile {
    tw: usize,
    min_blocks: usize,
}

fn parse_tile(label: &str) -> Option<Tile> {
    let (tw, min_blocks) = parse_columns_label(label)?;
    ((1..=MAX_TILE).contains(&tw) && MIN_BLOCKS.contains(&min_blocks)).then_some(Tile { tw, min_blocks })
}

fn label(t: Tile) -> String { columns_label(t.tw, t.min_blocks) }

/// The tiles of a column stride: multiples of it up to `MAX_TILE`, no wider than dx rounded
/// up to the stride.
fn tiles(g: &Geom) -> Vec<usize> {
    let sw = g.stride[2];
    let widest = g.input[2].next_multiple_of(sw).min(MAX_TILE.max(sw));
    (1..).map(|m| m * sw).take_while(|&tw| tw <= widest).collect()
}

/// About eight dx columns per thread (the forward kernel's measured best width), a multiple of
/// the stride; narrower where that leaves fewer than two blocks per SM (batch 1: 384 channels
/// of 14 × 14 in 8-column tiles are five blocks), as each thread's taps run in sequence.
fn heuristic_tile(g: &Geom, elem: usize, sms: usize) -> Tile {
    let sw = g.stride[2];
    let widest = (sw * (8 / sw).max(1)).min(g.input[2].next_multiple_of(sw));
    let blocks = |tw: usize| Shape::of(g, elem, tw).items(g).div_ceil(BLOCK as usize);
    let tw = (1..=widest / sw).rev().map(|m| m * sw).find(|&tw| blocks(tw) >= 2 * sms).unwrap_or(sw);
    Tile { tw, min_blocks: 1 }
}

/// How threads split dx: `vec` channels × `tw` columns each, channels or columns fastest, and
/// which tensors move as 16-byte vectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Shape {
    vec: usize,
    tw: usize,
    channel_inner: bool,
    x_vec: bool,
    y_vec: bool,
}

impl Shape {
    fn of(g: &Geom, elem: usize, tw: usize) -> Shape {
        let channel_inner = g.x_strides[1] == 1;
        let vec = channel_vector(g.c, elem, channel_inner);
        let whole = vec == 16 / elem;
        Shape { vec, tw, channel_inner, x_vec: whole && vectors_aligned(&g.x_strides, vec), y_vec: whole && vectors_aligned(&g.y_strides, vec) }
    }

    fn items(&self, g: &Geom) -> usize {
        g.n * g.input[0] * g.input[1] * g.input[2].div_ceil(self.tw) * (g.c / self.vec)
    }
}

fn geometry(problem: &FusedProblem) -> std::result::Result<Geom, String> {
    let Some(conv) = problem.conv_problem() else { return Err("not a convolution problem".into()) };
    check_dtype(problem)?;
    if conv.direction != Direction::BackwardData {
        return Err(format!("backward-data only (this is {:?})", conv.direction));
    }
    let g = Geom::of(conv);
    if g.groups == 1 || g.cg() != 1 || g.kg() != 1 {
        return Err(format!("depthwise with one output channel per group only ({} groups, {} → {} channels)", g.groups, g.c, g.k));
    }
    Ok(g)
}

struct DgradInvoker {
    be: Arc<CudaBackend>,
    /// Vector loads and stores where dx and dy are 16-byte aligned, else element accesses.
    kernels: AlignmentVariants,
    shape: Shape,
    geom: Geom,
    problem: FusedProblem,
}

impl Solver for CudaConvBwdDataDepthwise {
    fn name(&self) -> &'static str { "CudaConvBwdDataDepthwise" }
    fn solution_id(&self) -> u64 { 129 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Direct }
    fn device(&self) -> DeviceKind { DeviceKind::Cuda }

    fn check(&self, problem: &FusedProblem, _device: &DeviceInfo) -> std::result::Result<(), String> {
        let g = geometry(problem)?;
        if g.stride.iter().all(|&s| s == 1) {
            // One phase: the phase solver runs it as one forward convolution on the few-channels
            // kernel, which measured faster at stride 1 (bench/results/2026-11-28-h200-depthwise-backward.md).
            return Err("stride 1: one forward convolution on the few-channels kernel (CudaConvBwdDataFewChannels)".into());
        }
        if g.filter[2] > MAX_FILTER_WIDTH {
            return Err(format!("filter width {} (at most {MAX_FILTER_WIDTH})", g.filter[2]));
        }
        if g.stride[2] > MAX_STRIDE {
            return Err(format!("column stride {} (at most {MAX_STRIDE})", g.stride[2]));
        }
        let shape = Shape::of(&g, problem.dtype().size(), g.stride[2]);
        if shape.items(&g) >= (i32::MAX as usize) {
            return Err("too many dx tiles for one launch".into());
        }
        Ok(())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // Bound by the bytes moved: dx, dy and w once each at about 2.5 TB/s, one launch.
        problem.conv_problem().map_or(f64::MAX, |c| (c.x.num_bytes() + c.w.num_bytes() + c.y.num_bytes()) as f64 / 2.5e12 * 1e3 + 0.004)
    }

    fn build(&self, problem: &FusedProblem, ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let g = geometry(problem).map_err(|why| Error::internal(format!("{}: {why}", self.name())))?;
        let sms = ctx.device().info().cuda.as_ref().map_or(132, |c| c.sm_count.max(1) as usize);
        let tile = chosen_config(ctx, self.name(), &problem.key(), "CONFLUX_DGRAD_DEPTHWISE_TILE", parse_tile, || heuristic_tile(&g, problem.dtype().size(), sms))?;
        self.build_with(problem, ctx, tile)
    }

    fn tuning_space(&self, problem: &FusedProblem) -> Vec<String> {
        let Ok(g) = geometry(problem) else { return Vec::new() };
        tiles(&g).into_iter().flat_map(|tw| MIN_BLOCKS.iter().map(move |&min_blocks| label(Tile { tw, min_blocks }))).collect()
    }

    fn build_config(&self, problem: &FusedProblem, ctx: &dyn BuildContext, config: &str) -> Result<Arc<dyn Invoker>> {
        let tile = parse_tile(config).ok_or_else(|| Error::bad_parm(format!("{}: no configuration {config}", self.name())))?;
        self.build_with(problem, ctx, tile)
    }
}

impl CudaConvBwdDataDepthwise {
    /// Build with `tile`; `check` must have passed.
    fn build_with(&self, problem: &FusedProblem, ctx: &dyn BuildContext, tile: Tile) -> Result<Arc<dyn Invoker>> {
        let be = cuda_of(ctx.device())?.clone();
        let (src, shape, g) = kernel_source(problem, tile)?;
        let kernels = AlignmentVariants::build(&be, "conv_dgrad_depthwise", src, shape.x_vec || shape.y_vec)?;
        Ok(Arc::new(DgradInvoker { be, kernels, shape, geom: g, problem: problem.clone() }))
    }
}

/// The kernel source of `problem` with `tile` (`check` must have passed), its thread shape and
/// geometry.
fn kernel_source(problem: &FusedProblem, tile: Tile) -> Result<(String, Shape, Geom)> {
    let conv = problem.conv_problem().ok_or_else(|| Error::internal("depthwise backward-data: not a convolution"))?;
    let g = Geom::of(conv);
    if tile.tw % g.stride[2] != 0 {
        return Err(Error::bad_parm(format!("CudaConvBwdDataDepthwise: tile of {} columns is not a multiple of the column stride {}", tile.tw, g.stride[2])));
    }
    let shape = Shape::of(&g, conv.dtype().size(), tile.tw);
    let defines = [
        ("CTOT", g.c),
        ("VEC", shape.vec),
        ("TW", shape.tw),
        ("CH_INNER", shape.channel_inner as usize),
        ("XVEC", shape.x_vec as usize),
        ("YVEC", shape.y_vec as usize),
        ("MINB", tile.min_blocks),
    ];
    let src = direct_kernel_source(problem, &g, &defines, TEMPLATE)?;
    Ok((src, shape, g))
}

impl Invoker for DgradInvoker {
    fn run(&self, ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let g = &self.geom;
        // x is dx (written), y is dy (read).
        let p = conv_run_params(g, &self.problem, a)?;
        let aligned = (!self.shape.x_vec || a.x.0 % 16 == 0) && (!self.shape.y_vec || a.y.0 % 16 == 0);
        let kernel = self.kernels.kernel(aligned)?;
        let grid = self.shape.items(g).div_ceil(BLOCK as usize) as u32;
        // SAFETY: Params mirrors the kernel's parameter struct; pointers are the caller's
        // tensors, validated against the problem's descriptors; the vector kernel only runs on
        // 16-byte aligned dx and dy.
        timed(ctx, &self.be, || unsafe { kernel.launch(&self.be.dev, (grid.max(1), 1, 1), (BLOCK, 1, 1), 0, &p) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sources of every tile for strided depthwise layers (3 × 3 at strides 2 and 3, 5 × 5,
    /// 7 × 7, a 4 × 4 stride-4 patch; fp16 channels-last and f32 planar) generate;
    /// with `CONFLUX_KERNEL_SOURCES` set they are written there for an offline NVRTC compile
    /// (`scripts/nvrtc_check.py`: registers, spills).
    #[test]
    fn sources_generate_for_every_tile() {
        use crate::types::{ConvMode, DataType, Layout};
        use crate::{ConvDesc, TensorDesc};
        let out = std::env::var("CONFLUX_KERNEL_SOURCES").ok();
        let layers = [(240, 28, 5, 2, DataType::Half), (144, 56, 3, 2, DataType::Half), (384, 14, 7, 2, DataType::Half), (96, 56, 4, 4, DataType::Half), (32, 30, 3, 3, DataType::Float)];
        for (i, &(c, hw, f, stride, dt)) in layers.iter().enumerate() {
            let pad = if f == stride { 0 } else { f as i64 / 2 };
            let mut conv = ConvDesc::new(ConvMode::Convolution, &[pad; 2], &[stride as i64; 2], &[1, 1]).unwrap();
            conv.set_groups(c as i64).unwrap();
            let layout = if dt == DataType::Half { Layout::NHWC } else { Layout::NCHW };
            let t = |l: &[usize]| TensorDesc::with_layout(dt, layout, l).unwrap();
            let (dx, w) = (t(&[32, c, hw, hw]), t(&[c, 1, f, f]));
            let dy = t(conv.output_desc(&dx, &w).unwrap().lens());
            let fused = FusedProblem::conv(crate::problem::ConvProblem::backward_data(&conv, &dy, &w, &dx).unwrap());
            let g = geometry(&fused).unwrap();
            for label in CudaConvBwdDataDepthwise.tuning_space(&fused) {
                let tile = parse_tile(&label).unwrap();
                let (src, shape, _) = kernel_source(&fused, tile).unwrap();
                assert!(src.contains("conv_dgrad_depthwise_vec") && src.contains(&format!("#define TW {}", tile.tw)), "{label}");
                assert_eq!(shape.tw % g.stride[2], 0);
                if let Some(dir) = &out {
                    for (vector, suffix) in [(true, "_vec"), (false, "")] {
                        std::fs::write(format!("{dir}/dgrad_dw_{i}_{label}{suffix}.cu"), super::super::common::variant_source(&src, vector)).unwrap();
                    }
                }
            }
            let h = heuristic_tile(&g, dt.size(), 132);
            assert_eq!(h.tw % g.stride[2], 0, "layer {i}");
        }
    }
}
