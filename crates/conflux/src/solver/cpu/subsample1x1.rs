//! Forward f32 convolutions as a 1×1 stride-1 convolution over a packed copy of the input they
//! read, each window's taps becoming channels in the order the filter stores them (so the
//! filter is the 1×1 filter as it lies): strided 1×1 layers (ResNet's downsampling shortcuts:
//! 1024-14-14 → 2048 stride 2; the copy is a quarter of x), patch layers whose stride is their
//! filter (ConvNeXt's 4×4 s4 stem and 2×2 s2 downsampling, vision transformers' patch
//! embeddings; the copy is x rearranged), and ungrouped 3×3 stride-2 layers of at least 256
//! channels in and out (ResNet's and Inception's; the copy is 2.25 x, padding as zeros). The
//! 1×1 solvers need consecutive positions; over the strided input the implicit GEMM gathered
//! every column, and the im2col GEMM's tiles run the 49–784-position outputs of these layers
//! at about half the 1×1 solvers' rate. The copy is written once per call into per-thread
//! scratch; the inner problem writes the caller's y with the whole epilogue.

use crate::backend::cpu::gemm::{with_scratch, Slot};
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

/// Most filter taps per output position of the copy, relative to x (R·S / (stride_h·stride_w)),
/// for windows that overlap: 3×3 stride 2 (2.25) is taken, 5×5 stride 2 (6.25) is not.
const MAX_OVERLAP: f64 = 2.25;
/// Fewest input and output channels for windows that overlap: with 256–512 of each the copy and
/// the 1×1 solvers ran 0.73–0.86 of the im2col GEMM's time on ResNet's and Inception's 3×3 s2
/// layers; with 64–192 input channels 0.93–1.16 (bench/results/2026-11-28-cpu-strided-3x3-as-1x1.md).
const MIN_OVERLAP_CHANNELS: usize = 256;

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
    if conv.spatial_dims() != 2 {
        return Err("2-D convolutions only".into());
    }
    let (f, stride) = (conv.filter(), d.strides());
    if f == [1, 1] && stride == [1, 1] {
        return Err("1×1 stride 1 (the 1×1 solvers read it in place)".into());
    }
    let overlap = f != [1, 1] && (d.dilations() != [1, 1] || stride[0] < f[0] || stride[1] < f[1]);
    let repeats = (f[0] * f[1]) as f64 / (stride[0] * stride[1]) as f64;
    let (c, k) = (conv.x.c(), conv.w.lens()[0]);
    if overlap && (conv.groups() != 1 || d.dilations() != [1, 1] || stride[0] < 2 || stride[1] < 2 || repeats > MAX_OVERLAP || c.min(k) < MIN_OVERLAP_CHANNELS) {
        return Err(format!(
            "filter windows overlap ({}×{} filter, stride {}×{}, dilation {:?}, {} groups, {c} → {k} channels): the packed copy would repeat x {repeats:.2} times (taken: ungrouped, stride ≥ 2, dilation 1, at most {MAX_OVERLAP}, at least {MIN_OVERLAP_CHANNELS} channels in and out)",
            f[0], f[1], stride[0], stride[1], d.dilations(), conv.groups()
        ));
    }
    let cols = columns(&conv.w)?;
    if cols.cg < MIN_CHANNELS {
        // (Few-channel stems, patch or overlapping, measured no faster than the im2col GEMM,
        // which also copies x once: bench/results/2026-11-28-cpu-strided-3x3-as-1x1.md.)
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

/// Row `i` of the packed plane for tap (r, s) of one input plane (`plane0`: its element (0, 0)):
/// x[i·sh + r·dh − ph][j·sw + s·dw − pw] for every output column j, zero in the padding.
fn copy_row(g: &Geom, plane0: *const f32, i: usize, r: usize, s: usize, row: &mut [f32]) {
    let (xs, [_, sh, sw], [_, dh, dw], [_, ph, pw], [_, ih, iw]) = (g.x_strides, g.stride, g.dilation, g.pad, g.input);
    let iy = (i * sh + r * dh) as isize - ph as isize;
    if iy < 0 || iy >= ih as isize {
        row.fill(0.0);
        return;
    }
    // Output columns whose input column j·sw + s·dw − pw lies inside the row: lo..hi.
    let first = (s * dw) as isize - pw as isize;
    let lo = if first >= 0 { 0 } else { ((-first) as usize).div_ceil(sw) };
    let hi = if first >= iw as isize { 0 } else { ((iw as isize - first) as usize).div_ceil(sw).min(row.len()) };
    let (lo, hi) = (lo.min(hi), hi);
    row[..lo].fill(0.0);
    row[hi..].fill(0.0);
    if lo == hi {
        return;
    }
    let start = (first + (lo * sw) as isize) as usize;
    // Input row iy of the plane, columns start, start + sw, … (hi − lo of them): all in 0..iw
    // by the bounds above; x is the caller's validated tensor.
    let base = plane0.wrapping_add(iy as usize * xs[3] + start * xs[4]);
    let dst = &mut row[lo..hi];
    if xs[4] == 1 && sw == 2 {
        // Every other element of a dense row: a slice the compiler splits with shuffles.
        // SAFETY: elements start .. start + 2·(hi − lo − 1) of the row, inside it (above).
        let src = unsafe { std::slice::from_raw_parts(base, 2 * dst.len() - 1) };
        for (j, v) in dst.iter_mut().enumerate() {
            *v = src[2 * j];
        }
    } else {
        for (j, v) in dst.iter_mut().enumerate() {
            // SAFETY: column start + j·sw of the row, inside it (above).
            *v = unsafe { *base.add(j * sw * xs[4]) };
        }
    }
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
        let xa = a.x.0 as usize;
        // Kept per thread: a fresh buffer each call was page faults and zeroing on every
        // call (copy_row writes every element, padding included).
        with_scratch(Slot::Packed, g.n * channels * oh * ow, |x2| {
            x2.par_chunks_mut(oh * ow).enumerate().for_each(|(plane, out)| {
                let (c, r, s) = self.sources[plane % channels];
                let plane0 = (xa as *const f32).wrapping_add((plane / channels) * g.x_strides[0] + c * g.x_strides[1]);
                for (i, row) in out.chunks_exact_mut(ow).enumerate() {
                    copy_row(g, plane0, i, r, s, row);
                }
            });
            self.run.run(ctx, &RunArgs { x: DevPtr(x2.as_ptr() as u64), ..*a })
        })
    }
}
