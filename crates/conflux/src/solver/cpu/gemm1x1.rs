//! 1×1 forward convolution of f32 NCHW or NHWC tensors as a GEMM with the output channels in
//! the vector lanes (`backend/cpu/conv1x1.rs`): x read in place, no padded tiles, W packed per
//! call; NCHW y is stored through register transposes, NHWC y row by row.
//! Stride 1, no padding, any groups, 2-D or 3-D, with a none / bias / ReLU / bias + ReLU (ReLU6 too)
//! epilogue applied in the tiles, or a bias then any other activation (SiLU, GELU, ...): the
//! tiles store conv + bias and the activation runs over y after (y packed; otherwise the
//! generic GEMM below). Needs AVX-512 (elsewhere the generic GEMM's kernels are the faster choice).
//!
//! With constant weights (`ConvDesc::weights_constant`) W is packed once per filter address
//! (`conv1x1::pack_all`) and kept on the invoker.
//!
//! Mid-sized NCHW images (28×28-like, `conv1x1_pos::suits`) go to a second driver with the
//! positions in the lanes instead, which packs and transposes nothing.
//!
//! α = 1, β = 0 is the fast path; other α/β (known only at run time) go through the generic
//! GEMM convolution (`im2col::forward`), which blends them in.

use super::common::{conv_of, run_parts, RunParts};
use crate::solver::{Invoker, RunArgs, Solver};
use crate::backend::cpu::conv1x1::channels::{forward_with, pack_all, packed_len, Problem, Split};
use crate::backend::cpu::conv1x1::channels_kernel::{self, Kernels};
use crate::backend::cpu::conv1x1::positions::{self as conv1x1_pos, PackedWalk, PosSplit};
use crate::backend::cpu::conv1x1::positions_kernel::{self, PosKernels};
use crate::backend::cpu::im2col;
use crate::backend::cpu::clamp::Clamp;
use crate::backend::cpu::weight_cache::{Transformed, WeightCache};
use crate::problem::{ConvProblem, Geom};
use crate::error::{Error, Result};
use crate::problem::{EpiOp, FusedProblem};
use rayon::prelude::*;
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::solver::BuildContext;
use crate::types::{ActivationMode, ConvAlgorithm, DataType, Direction};
use std::sync::Arc;

pub struct CpuGemm1x1;

struct Gemm1x1Invoker {
    problem: FusedProblem,
    kern: Kernels,
    /// Positions-in-lanes tiles for large NCHW images (`conv1x1_pos`).
    pos: Option<PosKernels>,
    /// Packed W by filter address, when the caller promised constant weights: laid out by
    /// `conv1x1_pos::pack_rows` where `conv1x1_pos::suits`, else by `conv1x1::pack_all`.
    packed: Option<WeightCache>,
}

/// The element stride between consecutive positions of a tensor with strides `s` (N, C, D,
/// H, W) and spatial sizes `[d, h, w]`, if its positions form one sequence (a length-1
/// dimension's stride does not matter).
pub(super) fn position_stride(s: [usize; 5], [d, h, w]: [usize; 3]) -> Option<usize> {
    let p = s[4];
    ((s[3] == w * p || h <= 1) && (s[2] == h * w * p || d <= 1)).then_some(p)
}

/// Why the filter is not 1×1 stride-1 unpadded, if it is not (every 1×1 solver's first check).
pub(super) fn not_pointwise(g: &Geom) -> Option<String> {
    (g.filter != [1, 1, 1] || g.stride != [1, 1, 1] || g.pad != [0, 0, 0] || g.pad_end != [0, 0, 0])
        .then(|| format!("not a 1×1 stride-1 unpadded filter (filter {:?}, stride {:?}, pad {:?})", g.filter, g.stride, g.pad))
}

/// Why the geometry does not fit, if it does not.
fn geometry_refusal(g: &Geom) -> Option<String> {
    if let Some(why) = not_pointwise(g) {
        return Some(why);
    }
    // Per tensor: positions consecutive (NCHW-like) or channels consecutive (NHWC-like).
    let fits = |s: [usize; 5], sp: [usize; 3]| position_stride(s, sp).is_some_and(|p| p == 1 || s[1] == 1 || sp.iter().product::<usize>() <= 1);
    if !fits(g.x_strides, g.input) || !fits(g.y_strides, g.output) {
        return Some("x or y has neither its positions nor its channels consecutive".into());
    }
    if g.w_strides[1] != 1 {
        return Some("filter channels are not consecutive".into());
    }
    // Expanding layers with few input channels (C < 256, K ≥ 2·C) are taken too: they first
    // measured slower than the GEMM solvers (bench/results/2026-11-22-cpu-gemm1x1.md), but
    // after the pool hand-over and K blocking this solver is faster at N=1 and on par at N=8
    // (bench/results/2026-11-27-history-from-status.md, gemm1x1.rs).
    None
}

/// What every 1×1 forward solver of this file's kind requires: forward, f32, a none / bias /
/// ReLU / bias + ReLU epilogue, 1×1 stride 1 unpadded, positions or channels consecutive.
/// Whether the epilogue is none, bias, ReLU or bias then ReLU (what the 1×1 tiles apply; ReLU
/// includes CLIPPEDRELU, ReLU6, as a clamp).
fn fits_bias_relu(epilogue: &[EpiOp]) -> bool {
    let relu = |op: &EpiOp| matches!(op, EpiOp::Activation { mode: ActivationMode::Relu | ActivationMode::ClippedRelu });
    let bias = |op: &EpiOp| matches!(op, EpiOp::Bias { .. });
    match epilogue {
        [] => true,
        [a] => bias(a) || relu(a),
        [a, b] => bias(a) && relu(b),
        _ => false,
    }
}

/// Whether the epilogue is at most a bias then one activation of any mode: `CpuConvGemm1x1`
/// stores conv + bias from its tiles and runs other activations than ReLU / ReLU6 over y after.
fn fits_bias_act(epilogue: &[EpiOp]) -> bool {
    let act = |op: &EpiOp| matches!(op, EpiOp::Activation { .. });
    match epilogue {
        [a] => act(a),
        [a, b] => matches!(a, EpiOp::Bias { .. }) && act(b),
        _ => false,
    }
}

/// The convolution of a forward f32 problem whose epilogue `fits` accepts, else why not
/// (`epilogue_why` when only the epilogue is refused).
fn forward_f32_where<'a>(problem: &'a FusedProblem, fits: fn(&[EpiOp]) -> bool, epilogue_why: &str) -> std::result::Result<&'a ConvProblem, String> {
    let (conv, epilogue) = conv_of(problem)?;
    if conv.direction != Direction::Forward {
        return Err(format!("forward only (this is {:?})", conv.direction));
    }
    if conv.dtype() != DataType::Float {
        return Err(format!("f32 only (this is {:?})", conv.dtype()));
    }
    if !fits(epilogue) {
        return Err(epilogue_why.into());
    }
    Ok(conv)
}

/// The convolution of a forward f32 problem whose epilogue the 1×1 tiles apply (none, bias,
/// ReLU, bias then ReLU), else why not: what the solvers built on those tiles need first.
pub(super) fn forward_f32_bias_relu(problem: &FusedProblem) -> std::result::Result<&ConvProblem, String> {
    forward_f32_where(problem, fits_bias_relu, "epilogue other than bias and/or ReLU (or CLIPPEDRELU)")
}

fn check_geometry(conv: &ConvProblem) -> std::result::Result<(), String> {
    geometry_refusal(&Geom::of(conv)).map_or(Ok(()), Err)
}

pub(super) fn check_common(problem: &FusedProblem) -> std::result::Result<(), String> {
    check_geometry(forward_f32_bias_relu(problem)?)
}

/// The bias and ReLU of a run with α = 1, β = 0 and such an epilogue (the fast path).
/// Otherwise the run is done here by the generic GEMM convolution (`im2col::forward`),
/// which blends other α/β in, and None is returned.
pub(super) fn direct_epilogue<'a>(g: &Geom, r: &'a RunParts) -> Option<(Option<&'a [f32]>, Clamp)> {
    let direct = (r.alpha == 1.0 && r.beta == 0.0).then(|| r.epi.bias_relu_all()).flatten();
    if direct.is_none() {
        im2col::forward(g, r.ptrs, r.alpha, r.beta, &r.epi, im2col::FwdB::Implicit);
    }
    direct
}

/// W as `cache` keeps it for the filter at `w`: `per_group` values per group, made by `pack`
/// for each group's problem on the first call with this filter.
///
/// # Safety
/// `w` addresses the filter `problem`'s descriptors describe, and `pack` writes what its
/// problem's W gives.
unsafe fn kept_per_group(cache: &WeightCache, problem: &FusedProblem, w: u64, problems: &[Problem], per_group: usize, pack: impl Fn(&Problem, &mut [f32])) -> Arc<Transformed> {
    cache.filter(problem, w, per_group * problems.len(), |dst| {
        for (p, d) in problems.iter().zip(dst.chunks_mut(per_group)) {
            pack(p, d);
        }
    })
}

/// The 1×1 problem of each group of a run (`bias` for all K filters, or none).
pub(super) fn group_problems(g: &Geom, r: &RunParts, bias: Option<&[f32]>, relu: Clamp) -> Vec<Problem> {
    let (kg, cg) = (g.kg(), g.cg());
    (0..g.groups)
        .map(|group| Problem {
            n: g.n,
            c: cg,
            k: kg,
            hw: g.output_size(),
            x: (r.ptrs.x as *const f32).wrapping_add(group * cg * g.x_strides[1]),
            xs: [g.x_strides[0], g.x_strides[1]],
            // One position: its stride never matters (and 1 keeps the tiles on the
            // channel-stride path).
            xp: if g.input.iter().product::<usize>() <= 1 { 1 } else { position_stride(g.x_strides, g.input).unwrap_or(1) },
            w: (r.ptrs.w as *const f32).wrapping_add(group * kg * g.w_strides[0]),
            ws0: g.w_strides[0],
            wc: 1,
            y: (r.ptrs.y as *mut f32).wrapping_add(group * kg * g.y_strides[1]),
            ys: [g.y_strides[0], g.y_strides[1]],
            yp: if g.output_size() <= 1 { 1 } else { position_stride(g.y_strides, g.output).unwrap_or(1) },
            bias: bias.map_or(std::ptr::null(), |b| b[group * kg..].as_ptr()),
            relu,
        })
        .collect()
}

impl Solver for CpuGemm1x1 {
    fn name(&self) -> &'static str { "CpuConvGemm1x1" }
    fn solution_id(&self) -> u64 { 8 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Gemm }
    fn device(&self) -> DeviceKind { DeviceKind::Cpu }

    fn check(&self, problem: &FusedProblem, _device: &DeviceInfo) -> std::result::Result<(), String> {
        // Also a bias then another activation, finished over y after the tiles.
        let fits = |e: &[EpiOp]| fits_bias_relu(e) || fits_bias_act(e);
        check_geometry(forward_f32_where(problem, fits, "epilogue other than a bias and/or one activation")?)?;
        if channels_kernel::best().is_none() {
            return Err("needs AVX-512".into());
        }
        Ok(())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // ~200 GFLOP/s on 2 AVX-512 cores, plus one pass over W.
        let Some(c) = problem.conv_problem() else { return f64::MAX };
        (2.0 * c.macs() / 200e9 + c.w.element_space() as f64 * 8.0 / 20e9) * 1e3 + 0.01
    }

    fn build(&self, problem: &FusedProblem, _ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let kern = channels_kernel::best().ok_or_else(|| Error::unsupported("CpuConvGemm1x1: needs AVX-512"))?;
        Ok(Arc::new(Gemm1x1Invoker { problem: problem.clone(), kern, pos: positions_kernel::best(), packed: WeightCache::if_promised(problem) }))
    }
}

impl Invoker for Gemm1x1Invoker {
    fn run(&self, _ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let (g, _, r) = run_parts(&self.problem, a, "CpuConvGemm1x1")?;
        if let Some(fs) = (r.alpha == 1.0 && r.beta == 0.0).then(|| r.epi.fused_store()).flatten() {
            if !fs.needs_finish() {
                self.run_tiles(&g, &r, fs.bias, fs.clamp);
                return Ok(());
            }
            if let Some(len) = dense_len(g.y_strides, &g) {
                // Another activation: the tiles store conv + bias, then it runs over y.
                self.run_tiles(&g, &r, fs.bias, fs.clamp);
                // SAFETY: y is `len` consecutive f32 elements (dense_len), written by the tiles above.
                let y = unsafe { std::slice::from_raw_parts_mut(r.ptrs.y as *mut f32, len) };
                y.par_chunks_mut(ACT_CHUNK).for_each(|v| fs.finish(v));
                return Ok(());
            }
        }
        // Other α/β or epilogues, or a gapped y with an activation to finish: the generic GEMM.
        im2col::forward(&g, r.ptrs, r.alpha, r.beta, &r.epi, im2col::FwdB::Implicit);
        Ok(())
    }
}

/// Elements per task of the activation pass after the tiles.
const ACT_CHUNK: usize = 16384;

/// How many elements y spans when they are all consecutive (packed NCHW or NHWC), else None.
fn dense_len(ys: [usize; 5], g: &Geom) -> Option<usize> {
    let [d, h, w] = g.output;
    let len = g.n * g.k * d * h * w;
    // (A 2-D tensor's depth stride is 0.)
    let nchw = ys[4] == 1 && ys[3] == w && (d == 1 || ys[2] == h * w) && ys[1] == d * h * w && ys[0] == g.k * d * h * w;
    let nhwc = ys[1] == 1 && ys[4] == g.k && ys[3] == w * g.k && (d == 1 || ys[2] == h * w * g.k) && ys[0] == d * h * w * g.k;
    (nchw || nhwc || len <= 1).then_some(len)
}

impl Gemm1x1Invoker {
    /// The tiles of every group, storing conv + bias through `relu`.
    fn run_tiles(&self, g: &Geom, r: &RunParts, bias: Option<&[f32]>, relu: Clamp) {
        let problems = group_problems(g, r, bias, relu);
        let threads = rayon::current_num_threads();
        if let (Some(pos), true) = (&self.pos, conv1x1_pos::suits(&problems[0])) {
            // (`suits` depends on the descriptors only, so a kept W always has this layout.)
            let Some(cache) = &self.packed else {
                for p in &problems {
                    // SAFETY: as below; `suits` established NCHW x and y.
                    unsafe { conv1x1_pos::forward(p, pos, PosSplit::choose(p, threads)) };
                }
                return;
            };
            let per_group = conv1x1_pos::packed_rows_len(&problems[0]);
            // SAFETY: as below; each group's slice holds packed_rows_len values.
            let packed = unsafe { kept_per_group(cache, &self.problem, r.ptrs.w, &problems, per_group, |p, d| conv1x1_pos::pack_rows(p, d)) };
            for (group, p) in problems.iter().enumerate() {
                let w = &packed.as_slice()[group * per_group..(group + 1) * per_group];
                // SAFETY: as below; `suits` established NCHW x and y, `w` is this group's W
                // packed by `pack_rows`.
                unsafe { conv1x1_pos::forward_packed(p, pos, PosSplit::choose(p, threads), PackedWalk::choose(p), w) };
            }
            return;
        }
        let per_group = packed_len(&problems[0]);
        // SAFETY: W is the filter tensor the descriptors describe; each group's slice holds
        // packed_len values.
        let packed = self.packed.as_ref().map(|cache| unsafe { kept_per_group(cache, &self.problem, r.ptrs.w, &problems, per_group, |p, d| pack_all(p, &self.kern, d)) });
        for (group, p) in problems.iter().enumerate() {
            let w = packed.as_ref().map(|t| &t.as_slice()[group * per_group..(group + 1) * per_group]);
            // SAFETY: the descriptors were checked against the buffers by the caller; `check`
            // established the geometry, the layout and the CPU features.
            unsafe { forward_with(p, &self.kern, Split::choose(p, threads), w) };
        }
    }
}
