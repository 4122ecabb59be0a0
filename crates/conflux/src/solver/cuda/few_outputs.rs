//! Forward convolutions with few output channels (≤ 8) and many input channels, ungrouped, on
//! a CUDA-core kernel (conv_few_outputs.cu) with the fused epilogue: the phases of a
//! few-channel stem's backward-data (`bwd_data_few_channels`: dx has 3 channels) and output
//! layers that produce images. A GEMM tile of 64 output channels would run with a handful live;
//! this kernel keeps the whole filter in shared memory and feeds each input value it loads to
//! every output channel at once.

use super::common::{conv_run_params, AlignmentVariants, cuda_of, direct_kernel_source, forward_geometry};
use crate::backend::cuda::{timed, CudaBackend};
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::error::{Error, Result};
use crate::problem::{FusedProblem, Geom};
use crate::solver::{BuildContext, Invoker, RunArgs, Solver};
use crate::types::ConvAlgorithm;
use std::sync::Arc;

const TEMPLATE: &str = include_str!("../../backend/cuda/kernels/conv_few_outputs.cu");

/// Most output channels the kernel takes (two 16-byte filter words per input value).
pub const MAX_OUTPUTS: usize = 8;
/// Shared memory for the staged filter: the default per-block limit, needing no opt-in.
const MAX_FILTER_BYTES: usize = 48 * 1024;
/// Input columns a thread keeps in registers (per channel of its chunk).
const MAX_SPAN: usize = 16;
const BLOCK: u32 = 256;
/// Blocks per SM the launch aims for: blocks stride over the tiles, so more only stages the
/// filter more often.
const BLOCKS_PER_SM: u32 = 8;

pub struct CudaConvFewOutputs;

/// How the work is cut: `vec` input channels per chunk, `lanes` lanes per tile, `tw` output
/// columns per tile, and whether chunks are read as 16-byte vectors.
#[derive(Clone, Copy, Debug)]
struct Shape {
    vec: usize,
    chunks: usize,
    lanes: usize,
    tw: usize,
    x_vec: bool,
    /// Output channels rounded up to the 4 of a shared-memory word.
    kp: usize,
}

impl Shape {
    fn of(g: &Geom, elem: usize) -> Shape {
        let vec = 16 / elem;
        let chunks = g.c.div_ceil(vec);
        // Lanes split a tile's chunks; up to 8 keeps the butterfly short.
        let lanes = [8, 4, 2, 1].into_iter().find(|&l| l <= chunks).unwrap_or(1);
        let s = &g.x_strides;
        let x_vec = g.c % vec == 0 && s[1] == 1 && [s[0], s[2], s[3], s[4]].iter().all(|v| v % vec == 0);
        // The widest tile (4, 2 or 1 columns) whose input span fits the registers.
        let span = |tw: usize| (tw - 1) * g.stride[2] + (g.filter[2] - 1) * g.dilation[2] + 1;
        let tw = [4, 2, 1].into_iter().find(|&tw| span(tw) <= MAX_SPAN).unwrap_or(1).min(g.output[2].max(1));
        Shape { vec, chunks, lanes, tw, x_vec, kp: g.k.next_multiple_of(4) }
    }

    fn filter_bytes(&self, g: &Geom) -> usize {
        g.filter.iter().product::<usize>() * self.chunks * self.vec * self.kp * 4
    }

    fn tiles(&self, g: &Geom) -> usize {
        g.n * g.output[0] * g.output[1] * g.output[2].div_ceil(self.tw)
    }
}

struct FewOutputsInvoker {
    be: Arc<CudaBackend>,
    /// Vector loads of x where x is 16-byte aligned, else element loads.
    kernels: AlignmentVariants,
    shape: Shape,
    geom: Geom,
    problem: FusedProblem,
}

impl Solver for CudaConvFewOutputs {
    fn name(&self) -> &'static str { "CudaConvFewOutputs" }
    fn solution_id(&self) -> u64 { 118 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Direct }
    fn device(&self) -> DeviceKind { DeviceKind::Cuda }

    fn check(&self, problem: &FusedProblem, _device: &DeviceInfo) -> std::result::Result<(), String> {
        let g = forward_geometry(problem)?;
        if g.groups != 1 {
            return Err("grouped: the few-channels kernel takes small groups".into());
        }
        if g.k > MAX_OUTPUTS {
            return Err(format!("{} output channels (at most {MAX_OUTPUTS})", g.k));
        }
        let shape = Shape::of(&g, problem.dtype().size());
        let span = (shape.tw - 1) * g.stride[2] + (g.filter[2] - 1) * g.dilation[2] + 1;
        if span > MAX_SPAN {
            return Err(format!("a filter row spans {span} input columns (at most {MAX_SPAN})"));
        }
        let bytes = shape.filter_bytes(&g);
        if bytes > MAX_FILTER_BYTES {
            return Err(format!("the filter takes {bytes} bytes of shared memory as f32 (at most {MAX_FILTER_BYTES})"));
        }
        if shape.tiles(&g) >= i32::MAX as usize {
            return Err("too many output tiles".into());
        }
        Ok(())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // CUDA-core FMAs at about 30 TFLOP/s with the outputs padded to 4, or the bytes moved.
        problem.conv_problem().map_or(f64::MAX, |c| {
            let g = Geom::of(c);
            let flops = 2.0 * (g.n * g.output.iter().product::<usize>() * g.k.next_multiple_of(4) * g.c * g.filter.iter().product::<usize>()) as f64;
            let bytes = (c.x.num_bytes() + c.w.num_bytes() + c.y.num_bytes()) as f64;
            (flops / 30e12).max(bytes / 2.5e12) * 1e3 + 0.004
        })
    }

    fn build(&self, problem: &FusedProblem, ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let be = cuda_of(ctx.device())?.clone();
        let conv = problem.conv_problem().ok_or_else(|| Error::internal("few-outputs: not a convolution"))?;
        let g = Geom::of(conv);
        let shape = Shape::of(&g, conv.dtype().size());
        let defines = [
            ("KTOT", g.k),
            ("KP", shape.kp),
            ("VEC", shape.vec),
            ("NCH", shape.chunks),
            ("LC", shape.lanes),
            ("TW", shape.tw),
            ("XVEC", shape.x_vec as usize),
        ];
        let src = direct_kernel_source(problem, &g, &defines, TEMPLATE)?;
        let kernels = AlignmentVariants::build(&be, "conv_few_outputs", src, shape.x_vec)?;
        Ok(Arc::new(FewOutputsInvoker { be, kernels, shape, geom: g, problem: problem.clone() }))
    }
}

impl Invoker for FewOutputsInvoker {
    fn run(&self, ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let g = &self.geom;
        let p = conv_run_params(g, &self.problem, a)?;
        let kernel = self.kernels.kernel(a.x.0 % 16 == 0)?;
        let per_block = BLOCK as usize / self.shape.lanes;
        let blocks = self.shape.tiles(g).div_ceil(per_block).min((self.be.dev.sm_count() as u32 * BLOCKS_PER_SM) as usize);
        let smem = self.shape.filter_bytes(g) as u32;
        // SAFETY: Params mirrors the kernel's parameter struct; pointers are the caller's
        // tensors, validated against the problem's descriptors; the vector kernel only runs on
        // a 16-byte aligned x whose chunk strides `Shape::of` checked; `check` bounded the
        // shared memory by the default per-block limit.
        timed(ctx, &self.be, || unsafe { kernel.launch(&self.be.dev, (blocks.max(1) as u32, 1, 1), (BLOCK, 1, 1), smem, &p) })
    }
}
