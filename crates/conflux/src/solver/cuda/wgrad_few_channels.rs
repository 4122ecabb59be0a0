//! Backward-weights of 2-D convolutions with few input channels per group — depthwise,
//! ResNeXt-like groups of up to 16 channels, 3-channel stems — on CUDA cores (conv_wgrad_few_channels.cu). Their
//! reduction (N·OH·OW per weight) is long and their output small, and a GEMM tile per group
//! would run nearly empty: each thread instead keeps one output channel's filter (or, for wide
//! groups, one filter row) in registers, reads dy and the x window once per item, and blocks
//! along the pixels write
//! per-block partial sums that a second kernel adds in a fixed order (deterministic).

use super::common::{check_dtype, conv_run_params, cuda_of};
use crate::backend::cuda::driver::Scratch;
use crate::backend::cuda::module::Kernel;
use crate::backend::cuda::preamble::{self, Extra};
use crate::backend::cuda::{timed, CudaBackend};
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::error::{Error, Result};
use crate::problem::{FusedProblem, Geom};
use crate::solver::{BuildContext, Invoker, RunArgs, Solver};
use crate::types::{ConvAlgorithm, Direction};
use std::sync::Arc;

const TEMPLATE: &str = include_str!("../../backend/cuda/kernels/conv_wgrad_few_channels.cu");
/// Most input channels per group: a thread holds a filter row of each in registers.
const MAX_CHANNELS_PER_GROUP: usize = 16;
/// Most accumulators (input channels × filter width) per thread.
const MAX_ACCUMULATORS: usize = 48;
/// Output columns per work item.
const TW: usize = 8;
/// Widest x window a thread holds in registers.
const MAX_WINDOW: usize = 40;
const WARPS: usize = 8;

fn geometry(problem: &FusedProblem) -> std::result::Result<Geom, String> {
    let Some(conv) = problem.conv_problem() else { return Err("not a convolution problem".into()) };
    check_dtype(problem)?;
    if conv.direction != Direction::BackwardWeights {
        return Err(format!("backward-weights only (this is {:?})", conv.direction));
    }
    Ok(Geom::of(conv))
}

/// x columns one item's window spans.
fn window(g: &Geom) -> usize { (TW.min(g.output[2]) - 1) * g.stride[2] + (g.filter[2] - 1) * g.dilation[2] + 1 }

/// Most sums a thread holds when it takes the whole filter (every row): dy is then read once
/// per item instead of once per filter row. Depthwise 7 × 7 (49 sums) measured faster with a
/// block row per filter row (bench/results/2026-11-28-h200-depthwise-backward.md).
const MAX_WHOLE_FILTER_SUMS: usize = 25;

/// Filter rows per thread: all of them where CG · FH · FW sums fit (depthwise up to 5 × 5),
/// else one (a block row per filter row).
fn rows_per_thread(g: &Geom) -> usize {
    if g.cg() * g.filter_size() <= MAX_WHOLE_FILTER_SUMS { g.filter[1] } else { 1 }
}

pub struct CudaConvWgradFewChannels;

impl Solver for CudaConvWgradFewChannels {
    fn name(&self) -> &'static str { "CudaConvBwdWeightsFewChannels" }
    fn solution_id(&self) -> u64 { 116 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Direct }
    fn device(&self) -> DeviceKind { DeviceKind::Cuda }

    fn check(&self, problem: &FusedProblem, _device: &DeviceInfo) -> std::result::Result<(), String> {
        let g = geometry(problem)?;
        if !g.is_2d() {
            return Err("2-D convolutions only".into());
        }
        if g.cg() > MAX_CHANNELS_PER_GROUP {
            return Err(format!("{} input channels per group (at most {MAX_CHANNELS_PER_GROUP})", g.cg()));
        }
        if g.cg() * g.filter[2] > MAX_ACCUMULATORS {
            return Err(format!("{} channels × filter width {} accumulators per thread (at most {MAX_ACCUMULATORS})", g.cg(), g.filter[2]));
        }
        if window(&g) > MAX_WINDOW {
            return Err(format!("an item's x window spans {} columns (at most {MAX_WINDOW})", window(&g)));
        }
        if g.n * g.output_size() >= i32::MAX as usize / 2 || g.k > 65535 * 32 {
            return Err("too many pixels or output channels for one launch".into());
        }
        Ok(())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // Bound by reading x and dy (about 2 TB/s, dy once per filter row from L2) and by the
        // products on CUDA cores (about 20 TFLOP/s).
        problem.conv_problem().map_or(f64::MAX, |c| (c.x.num_bytes() + c.y.num_bytes()) as f64 / 2e12 * 1e3 + 2.0 * c.macs() / 20e12 * 1e3 + 0.006)
    }

    fn build(&self, problem: &FusedProblem, ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let g = geometry(problem).map_err(|why| Error::not_implemented(format!("{}: {why}", self.name())))?;
        let be = cuda_of(ctx.device())?.clone();
        let tw = TW.min(g.output[2]);
        let rt = rows_per_thread(&g);
        // Blocks along the pixels: about four blocks of 8 warps per SM in all, at most one
        // warp per item.
        let blocks_xy = g.k.div_ceil(32) * (g.filter[1] / rt);
        let items = g.n * g.output[1] * g.output[2].div_ceil(tw);
        let splits = (4 * be.dev.sm_count() as usize).div_ceil(blocks_xy).clamp(1, items.div_ceil(WARPS).min(65535));
        let mut defs = preamble::conv_geometry_defines(&g);
        for (name, v) in [("NB", g.n), ("KTOT", g.k), ("TW", tw), ("XW", window(&g)), ("RT", rt), ("SPLITS", splits)] {
            defs.push((name.to_string(), v.to_string()));
        }
        let defs: Vec<(&str, String)> = defs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        let src = preamble::source(problem.dtype(), &[], &Extra { act: None, defines: &defs }, TEMPLATE)?;
        let module = be.module("conv_wgrad_few_channels", &src)?;
        let (partial, sum) = (module.function("wgrad_few_partial")?, module.function("wgrad_few_sum")?);
        let partial_bytes = splits * g.k * g.cg() * g.filter_size() * 4;
        Ok(Arc::new(WgradFewInvoker { be, partial, sum, geom: g, splits, rt, partial_bytes, problem: problem.clone() }))
    }
}

struct WgradFewInvoker {
    be: Arc<CudaBackend>,
    partial: Kernel,
    sum: Kernel,
    geom: Geom,
    splits: usize,
    /// Filter rows per thread (`rows_per_thread`).
    rt: usize,
    partial_bytes: usize,
    problem: FusedProblem,
}

impl Invoker for WgradFewInvoker {
    fn run(&self, ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let g = &self.geom;
        timed(ctx, &self.be, || {
            let scratch = Scratch::new(ctx, &self.be.dev, self.partial_bytes)?;
            let mut p = conv_run_params(g, &self.problem, a)?;
            p.aux[0] = scratch.ptr();
            let grid = (g.k.div_ceil(32) as u32, (g.filter[1] / self.rt) as u32, self.splits as u32);
            let sum_grid = ((g.cg() * g.filter_size()) as u32, g.k.div_ceil(32) as u32, 1);
            // SAFETY: Params mirrors the kernels' parameter struct; x, dy and dw are the
            // caller's tensors validated against the problem; aux[0] is scratch of
            // SPLITS slots of the dw-sized f32 partials, alive (stream-ordered) until
            // both launches have run; the sum reads only slots the first launch wrote.
            unsafe {
                self.partial.launch(&self.be.dev, grid, (256, 1, 1), 0, &p)?;
                self.sum.launch(&self.be.dev, sum_grid, (256, 1, 1), 0, &p)
            }
        })
    }
}
