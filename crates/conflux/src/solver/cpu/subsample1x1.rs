//! Forward f32 convolutions whose filter windows do not overlap, as a 1×1 stride-1 convolution
//! over a packed copy of the input they read: strided 1×1 layers (ResNet's downsampling
//! shortcuts: 1024-14-14 → 2048 stride 2; the copy is a quarter of x) and patch layers whose
//! stride is their filter (ConvNeXt's 4×4 s4 stem and 2×2 s2 downsampling, vision
//! transformers' patch embeddings; the copy is x rearranged, each window's taps becoming
//! channels in the order the filter stores them, so the filter is the 1×1 filter as it lies).
//! The 1×1 solvers need consecutive positions; over the strided input the implicit GEMM
//! gathered every column and the im2col GEMM copied x into a matrix of short rows. The copy is
//! written once per call; the inner problem writes the caller's y with the whole epilogue.

use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::conv_desc::ConvDesc;
use crate::error::{Error, Result};
use crate::memory::DevPtr;
use crate::problem::{ConvProblem, FusedKind, FusedProblem, Geom};
use crate::solver::registry;
use crate::solver::{BuildContext, Invoker, RunArgs, Solver};
use crate::tensor::TensorDesc;
use crate::types::{ConvAlgorithm, ConvMode, DataType, Direction};
use rayon::prelude::*;
use std::sync::Arc;

/// Fewest input channels per group: the product is a GEMM.
const MIN_CHANNELS: usize = 16;

pub struct CpuSubsample1x1;

/// Where each packed channel reads in a filter window: the packed channel `i` of group `g` is
/// filter column `i` (the filter's dense per-output block of cg·R·S values), i.e. input
/// channel `g·cg + c` at tap (r, s) for the (c, r, s) whose offset in the block is `i`.
#[derive(Clone, Copy, Debug)]
struct Columns {
    cg: usize,
    taps: [usize; 2],
    /// Offsets of one step in c, r and s within a filter's block.
    step: [usize; 3],
}

impl Columns {
    /// (input channel, r, s) of packed channel `ch` (all groups' columns in group order).
    fn source(&self, ch: usize) -> (usize, usize, usize) {
        let per = self.cg * self.taps[0] * self.taps[1];
        let (g, i) = (ch / per, ch % per);
        // The steps are a permutation of the block's dense strides: peel the largest first.
        let mut order = [(self.step[0], self.cg, 0), (self.step[1], self.taps[0], 1), (self.step[2], self.taps[1], 2)];
        order.sort_by(|a, b| b.0.cmp(&a.0));
        let mut idx = [0usize; 3];
        let mut rest = i;
        for (step, _, which) in order {
            idx[which] = rest / step;
            rest %= step;
        }
        (g * self.cg + idx[0], idx[1], idx[2])
    }
}

/// The filter's per-output block as 1×1 columns, or why not: dense, outputs outermost.
fn columns(w: &TensorDesc) -> std::result::Result<Columns, String> {
    let (l, st) = (w.lens(), w.strides());
    let (cg, r, s) = (l[1], l[2], l[3]);
    let block = cg * r * s;
    let step = [st[1], st[2], st[3]];
    let mut dims = [(step[0], cg), (step[1], r), (step[2], s)];
    dims.sort();
    let dense = dims.iter().try_fold(1usize, |want, &(stride, len)| (len == 1 || stride == want).then_some(want * len)).is_some();
    if !dense || st[0] != block {
        return Err("the filter's taps and channels must form one dense block per output channel".into());
    }
    // A length-1 axis may carry any stride: give it the block's size so it never divides.
    let fix = |stride: usize, len: usize| if len == 1 { block } else { stride };
    Ok(Columns { cg, taps: [r, s], step: [fix(step[0], cg), fix(step[1], r), fix(step[2], s)] })
}

/// The stride-1 1×1 problem over the packed input, or why not.
fn rewrite(problem: &FusedProblem) -> std::result::Result<(FusedProblem, Columns), String> {
    let FusedKind::Conv { conv, epilogue } = &problem.kind else { return Err("not a convolution problem".into()) };
    if conv.direction != Direction::Forward || conv.conv.mode() != ConvMode::Convolution {
        return Err(format!("forward convolution only (this is {:?})", conv.direction));
    }
    if conv.dtype() != DataType::Float {
        return Err(format!("f32 only (this is {:?})", conv.dtype()));
    }
    let d = &conv.conv;
    if conv.spatial_dims() != 2 || d.pads() != [0, 0] || d.pads_end() != [0, 0] {
        return Err("2-D unpadded convolutions only".into());
    }
    let (f, stride) = (conv.filter(), d.strides());
    if f == [1, 1] && stride == [1, 1] {
        return Err("1×1 stride 1 (the 1×1 solvers read it in place)".into());
    }
    if f != [1, 1] && (d.dilations() != [1, 1] || stride[0] < f[0] || stride[1] < f[1]) {
        return Err(format!("filter windows overlap ({}×{} filter, stride {}×{}, dilation {:?}): the packed copy would repeat x", f[0], f[1], stride[0], stride[1], d.dilations()));
    }
    let cols = columns(&conv.w)?;
    if cols.cg < MIN_CHANNELS {
        // (Few-channel patch stems measured no faster than the im2col GEMM, which also copies
        // x once.)
        return Err(format!("{} input channels per group (at least {MIN_CHANNELS}: depthwise, small groups and stems have their own kernels)", cols.cg));
    }
    let reduction = cols.cg * f[0] * f[1];
    let yl = conv.y.lens();
    let err = |e: crate::error::Error| e.reason;
    let x2 = TensorDesc::new(DataType::Float, &[yl[0], conv.x.c() * f[0] * f[1], yl[2], yl[3]]).map_err(err)?;
    let w2 = TensorDesc::new(DataType::Float, &[conv.w.lens()[0], reduction, 1, 1]).map_err(err)?;
    let mut one = ConvDesc::new(ConvMode::Convolution, &[0, 0], &[1, 1], &[1, 1]).map_err(err)?;
    one.set_groups(conv.groups() as i64).map_err(err)?;
    one.copy_attributes(d);
    let inner = ConvProblem::forward(&one, &x2, &w2, &conv.y).map_err(err)?;
    Ok((FusedProblem { kind: FusedKind::Conv { conv: inner, epilogue: epilogue.clone() } }, cols))
}

impl Solver for CpuSubsample1x1 {
    fn name(&self) -> &'static str { "CpuConvSubsample1x1" }
    fn solution_id(&self) -> u64 { 20 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Gemm }
    fn device(&self) -> DeviceKind { DeviceKind::Cpu }

    fn check(&self, problem: &FusedProblem, device: &DeviceInfo) -> std::result::Result<(), String> {
        let (inner, _) = rewrite(problem)?;
        inner_solver(&inner, device).map(|_| ())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // The products at about 200 GFLOP/s plus the copy.
        problem.conv_problem().map_or(f64::MAX, |c| 2.0 * c.macs() / 200e9 * 1e3 + 0.01)
    }

    fn build(&self, problem: &FusedProblem, ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let (inner, cols) = rewrite(problem).map_err(|why| Error::not_implemented(format!("{}: {why}", self.name())))?;
        let solver = inner_solver(&inner, ctx.device().info()).map_err(|why| Error::not_implemented(format!("{}: {why}", self.name())))?;
        let run = solver.build(&inner, ctx)?;
        let conv = problem.conv_problem().ok_or_else(|| Error::internal("subsample 1×1: not a convolution"))?;
        let g = Geom::of(conv);
        let sources = (0..g.c * cols.taps[0] * cols.taps[1]).map(|ch| cols.source(ch)).collect();
        Ok(Arc::new(Subsample1x1Invoker { run, geom: g, sources }))
    }
}

/// The 1×1 solver that runs the packed problem: the first without workspace that reads
/// consecutive positions (not the implicit GEMM, which would gather them again).
fn inner_solver(inner: &FusedProblem, device: &DeviceInfo) -> std::result::Result<&'static dyn Solver, String> {
    registry::walk(inner, device, |e| matches!(e.solver.name(), "CpuConvGemm1x1" | "CpuConvAmx1x1" | "CpuConvSinglePixel"))
        .find(|s| s.verdict.is_ok() && s.solver.workspace_bytes(inner) == 0)
        .map(|s| s.solver)
        .ok_or_else(|| "no 1×1 solver takes the packed problem".into())
}

struct Subsample1x1Invoker {
    run: Arc<dyn Invoker>,
    geom: Geom,
    /// (input channel, r, s) that each packed channel reads.
    sources: Vec<(usize, usize, usize)>,
}

impl Invoker for Subsample1x1Invoker {
    fn run(&self, ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let g = &self.geom;
        let [_, oh, ow] = g.output;
        let channels = self.sources.len();
        let mut x2 = vec![0f32; g.n * channels * oh * ow];
        let (xs, [_, sh, sw], xa) = (g.x_strides, g.stride, a.x.0 as usize);
        x2.par_chunks_mut(oh * ow).enumerate().for_each(|(plane, out)| {
            let (c, r, s) = self.sources[plane % channels];
            let src = (xa as *const f32).wrapping_add((plane / channels) * xs[0] + c * xs[1] + r * xs[3] + s * xs[4]);
            for (i, row) in out.chunks_exact_mut(ow).enumerate() {
                for (j, v) in row.iter_mut().enumerate() {
                    // SAFETY: (n, c, i·sh + r, j·sw + s) is an element of the caller's validated
                    // x: r and s are filter taps of an unpadded convolution with this output.
                    *v = unsafe { *src.add(i * sh * xs[3] + j * sw * xs[4]) };
                }
            }
        });
        self.run.run(ctx, &RunArgs { x: DevPtr(x2.as_ptr() as u64), ..*a })
    }
}
