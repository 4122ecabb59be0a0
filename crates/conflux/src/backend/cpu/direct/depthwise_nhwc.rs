//! Depthwise f32 convolution (one input and one output channel per group), every direction, any
//! filter, stride, padding and dilation, computed channels-last: a pixel's channels are
//! contiguous, so every tap is a vector multiply-add across channels — the layout oneDNN's
//! depthwise kernels block into. A channels-first operand that is read is copied channels-last
//! first (a pass over memory the planar kernels' per-channel plane copies also pay); results
//! are stored through any strides. Per output row, a block of channels runs over all the row's
//! outputs (its filter taps stay in L1), four outputs at a time where they share taps.
//!
//! Tasks: forward and backward-data one output row (n, h) each; backward-weights a fixed number
//! of row chunks (independent of the thread count) with per-chunk partial sums added in chunk
//! order, so reruns are bit-identical.

use crate::backend::cpu::direct::naive::ConvPtrs;
use super::depthwise_io::{runs_transposed, with_readable, RowOut};
use crate::backend::cpu::gemm::scratch::{with_scratch, Slot};
use crate::backend::cpu::pointwise::epilogue::CpuEpilogue;
use crate::problem::Geom;
use rayon::prelude::*;

/// Most row chunks of the backward-weights reduction, and the fewest rows a chunk takes.
const WEIGHT_CHUNKS: usize = 64;
const ROWS_PER_CHUNK: usize = 8;

/// Length of the filter as `taps_by_channel` lays it out.
pub fn taps_len(g: &Geom) -> usize { g.filter_size() * g.c }

/// t ← the filter at `w` as [tap][C] (taps in (r, s) order). Channels go in blocks of 16, so
/// the block's filters stay in L1 while each tap's 16 values are written contiguously (one
/// channel at a time wrote every value C floats from the last: a cache miss each on wide layers).
pub fn taps_by_channel(g: &Geom, w: u64, t: &mut [f32]) {
    let [_, fr, fw] = g.filter;
    let ws = g.w_strides;
    // Each channel's taps one dense run (KCRS): a (C × taps) transpose in register blocks.
    if ws[4] == 1 && ws[3] == fw && runs_transposed(t, w, g.c, fr * fw, ws[0]) {
        return;
    }
    for c0 in (0..g.c).step_by(16) {
        let block = c0..(c0 + 16).min(g.c);
        for r in 0..fr {
            for s in 0..fw {
                let row = &mut t[(r * fw + s) * g.c..][block.clone()];
                for (v, c) in row.iter_mut().zip(block.clone()) {
                    // SAFETY: (c, 0, r, s) is an element of the validated filter.
                    *v = unsafe { *(w as *const f32).add(c * ws[0] + r * ws[3] + s * ws[4]) };
                }
            }
        }
    }
}

/// Input position o·stride − pad + tap·dilation along axis `a` (1 = H, 2 = W), if inside.
#[inline(always)]
pub(super) fn input_pos(g: &Geom, a: usize, o: usize, tap: usize) -> Option<usize> {
    let i = (o * g.stride[a] + tap * g.dilation[a]) as isize - g.pad[a] as isize;
    (i >= 0 && (i as usize) < g.input[a]).then_some(i as usize)
}

/// Output position o with o·stride − pad + tap·dilation = i along axis `a`, if one exists.
#[inline(always)]
fn output_pos(g: &Geom, a: usize, i: usize, tap: usize) -> Option<usize> {
    let t = (i + g.pad[a]) as isize - (tap * g.dilation[a]) as isize;
    if t < 0 || t as usize % g.stride[a] != 0 {
        return None;
    }
    let o = t as usize / g.stride[a];
    (o < g.output[a]).then_some(o)
}

/// Channels per register block: a block's sums stay in vector registers across all taps.
const LANES: usize = 16;

/// The W values of `v` from `at` on, without a bounds check: the inner loops read thousands of
/// them per output row, and a checked slice costs a compare and a branch beside each FMA.
///
/// # Safety
/// `at + W <= v.len()`.
#[inline(always)]
unsafe fn lanes<const W: usize>(v: &[f32], at: usize) -> &[f32; W] {
    debug_assert!(at + W <= v.len());
    // SAFETY: the caller's promise.
    unsafe { &*(v.as_ptr().add(at) as *const [f32; W]) }
}

/// One block of `W` channels at `c0`: Σ over `taps` (pixel offset, tap index) of
/// src[pixel + c0 + l]·wt[tap][c0 + l], the sums in registers (W a constant: the loop unrolls
/// into whole vectors). Even and odd taps go to two sums added at the end: one chain of
/// dependent FMAs per lane would wait on each FMA's latency.
#[inline(always)]
fn taps_block<const W: usize>(src: *const f32, taps: &[(usize, usize)], wt: &[f32], cn: usize, c0: usize) -> [f32; W] {
    let (mut a, mut b) = ([0f32; W], [0f32; W]);
    let mut pairs = taps.chunks_exact(2);
    for p in &mut pairs {
        let (xa, wa) = tap_lanes::<W>(src, p[0], wt, cn, c0);
        let (xb, wb) = tap_lanes::<W>(src, p[1], wt, cn, c0);
        for l in 0..W {
            a[l] = xa[l].mul_add(wa[l], a[l]);
            b[l] = xb[l].mul_add(wb[l], b[l]);
        }
    }
    if let [last] = pairs.remainder() {
        let (x, w) = tap_lanes::<W>(src, *last, wt, cn, c0);
        for l in 0..W {
            a[l] = x[l].mul_add(w[l], a[l]);
        }
    }
    std::array::from_fn(|l| a[l] + b[l])
}

/// The W input and filter values of tap (pixel offset `at`, filter tap `t`) at channel c0.
#[inline(always)]
fn tap_lanes<const W: usize>(src: *const f32, (at, t): (usize, usize), wt: &[f32], cn: usize, c0: usize) -> (&[f32; W], &[f32; W]) {
    // SAFETY: `at` is a pixel of the tensor, whose cn channels are contiguous; c0 + W ≤ cn.
    let x = unsafe { &*(src.add(at + c0) as *const [f32; W]) };
    // SAFETY: t is a tap of the filter, laid out [tap][C], and c0 + W ≤ C.
    (x, unsafe { lanes::<W>(wt, t * cn + c0) })
}

/// Four outputs sharing one tap list shifted by `delta` elements per output: each filter vector
/// loaded once feeds four sums.
#[inline(always)]
fn taps_block4<const W: usize>(src: *const f32, taps: &[(usize, usize)], wt: &[f32], cn: usize, c0: usize, delta: usize) -> [[f32; W]; 4] {
    let mut a = [[0f32; W]; 4];
    for &(at, t) in taps {
        // SAFETY: as in `taps_block`.
        let wr = unsafe { lanes::<W>(wt, t * cn + c0) };
        for (j, aj) in a.iter_mut().enumerate() {
            // SAFETY: as in `taps_block`: `at + j·delta` is the pixel of output j's tap.
            let xr = unsafe { &*(src.add(at + j * delta + c0) as *const [f32; W]) };
            for l in 0..W {
                aj[l] = xr[l].mul_add(wr[l], aj[l]);
            }
        }
    }
    a
}

/// The taps of every output pixel of one row: output o reads `taps[starts[o]..starts[o + 1]]`
/// (source pixel offset, tap index); `run4[o]` is the shift δ when outputs o..o+4 read the same
/// taps at offsets o's + j·δ (inside the image, away from the padding).
#[derive(Default)]
pub struct RowTaps {
    taps: Vec<(usize, usize)>,
    starts: Vec<usize>,
    run4: Vec<Option<usize>>,
}

impl RowTaps {
    fn clear(&mut self) {
        self.taps.clear();
        self.starts.clear();
        self.starts.push(0);
    }
    /// Ends output pixel's tap list.
    fn close(&mut self) { self.starts.push(self.taps.len()); }
    fn of(&self, o: usize) -> &[(usize, usize)] { &self.taps[self.starts[o]..self.starts[o + 1]] }
    fn outputs(&self) -> usize { self.starts.len() - 1 }

    fn find_runs(&mut self) {
        let outs = self.outputs();
        self.run4.clear();
        for o in 0..outs {
            let run = (o + 4 <= outs).then(|| self.shift(o)).flatten();
            self.run4.push(run);
        }
    }

    /// δ if outputs o+1..o+4 read o's taps shifted by j·δ.
    fn shift(&self, o: usize) -> Option<usize> {
        let base = self.of(o);
        let next = self.of(o + 1);
        if base.is_empty() || next.len() != base.len() || next[0].0 < base[0].0 {
            return None;
        }
        let delta = next[0].0 - base[0].0;
        (1..4).all(|j| {
            let tj = self.of(o + j);
            tj.len() == base.len() && tj.iter().zip(base).all(|(a, b)| a.1 == b.1 && a.0 == b.0 + j * delta)
        })
        .then_some(delta)
    }
}

/// acc (outputs × C) = every output's Σ over its taps of src·wt: per LANES-channel block, all
/// outputs of the row (the block's filter taps stay in L1), four at a time where they share taps.
#[inline(always)]
fn row_sums(acc: &mut [f32], src: *const f32, rt: &RowTaps, wt: &[f32], cn: usize) {
    let outs = rt.outputs();
    let mut c0 = 0;
    while c0 + LANES <= cn {
        let mut o = 0;
        while o < outs {
            if let Some(delta) = rt.run4[o] {
                let a = taps_block4::<LANES>(src, rt.of(o), wt, cn, c0, delta);
                for (j, aj) in a.iter().enumerate() {
                    acc[(o + j) * cn + c0..][..LANES].copy_from_slice(aj);
                }
                o += 4;
            } else {
                acc[o * cn + c0..][..LANES].copy_from_slice(&taps_block::<LANES>(src, rt.of(o), wt, cn, c0));
                o += 1;
            }
        }
        c0 += LANES;
    }
    for c in c0..cn {
        for o in 0..outs {
            acc[o * cn + c] = taps_block::<1>(src, rt.of(o), wt, cn, c)[0];
        }
    }
}

/// Output row (n, oh) for the W channels at c0: the input rows its taps reach are staged with
/// their padding as zeros (`span` columns of W channels each, in `buf`), so every output reads
/// the same taps and GROUP outputs share each filter vector; acc (OW pixels × C) receives them.
#[inline(always)]
fn forward_block<const W: usize>(x: *const f32, wt: &[f32], g: &Geom, n: usize, oh: usize, c0: usize, buf: &mut [f32], acc: &mut [f32]) {
    let ([_, fr, fw], xs, cn) = (g.filter, g.x_strides, g.c);
    let (outs, sw, dw) = (g.output[2], g.stride[2], g.dilation[2]);
    let span = buf.len() / (fr * W);
    // Stage the rows inside the image; rows[k] is the filter row of staged row k.
    let mut rows = [0usize; MAX_FILTER_ROWS];
    let mut staged = 0;
    for r in 0..fr {
        let Some(ih) = input_pos(g, 1, oh, r) else { continue };
        let dst = &mut buf[staged * span * W..][..span * W];
        for (j, d) in dst.chunks_exact_mut(W).enumerate() {
            let iw = j as isize - g.pad[2] as isize;
            if iw < 0 || iw as usize >= g.input[2] {
                d.fill(0.0);
            } else {
                let at = n * xs[0] + ih * xs[3] + iw as usize * xs[4];
                if xs[1] == 1 {
                    // SAFETY: pixel (n, ih, iw) is inside x, whose channels c0..c0 + W are contiguous.
                    d.copy_from_slice(unsafe { std::slice::from_raw_parts(x.add(at + c0), W) });
                } else {
                    // Channels-first x: the W channels' rows are transposed as they are staged.
                    for (l, v) in d.iter_mut().enumerate() {
                        // SAFETY: (n, c0 + l, ih, iw) is an element of x.
                        *v = unsafe { *x.add(at + (c0 + l) * xs[1]) };
                    }
                }
            }
        }
        rows[staged] = r;
        staged += 1;
    }
    // Staged row k holds span columns: outputs up to outs rounded up to GROUP, the extra ones
    // reading zeros past the image (computed, never stored).
    // SAFETY (every call): k < staged ≤ fr rows of span·W values; o < outs rounded up to GROUP
    // and s < fw, so o·sw + s·dw < span.
    let tap = |k: usize, s: usize, o: usize| -> &[f32; W] { unsafe { lanes::<W>(buf, k * span * W + (o * sw + s * dw) * W) } };
    let mut o = 0;
    while o < outs {
        let mut a = [[0f32; W]; GROUP];
        for (k, &r) in rows[..staged].iter().enumerate() {
            for s in 0..fw {
                // SAFETY: tap (r, s) of the [tap][C] filter; c0 + W ≤ C.
                let wr = unsafe { lanes::<W>(wt, (r * fw + s) * cn + c0) };
                for (j, aj) in a.iter_mut().enumerate() {
                    let xr = tap(k, s, o + j);
                    for l in 0..W {
                        aj[l] = xr[l].mul_add(wr[l], aj[l]);
                    }
                }
            }
        }
        for (j, aj) in a.iter().enumerate().take(outs - o) {
            acc[(o + j) * cn + c0..][..W].copy_from_slice(aj);
        }
        o += GROUP;
    }
}

/// Outputs of the staged path computed together: GROUP sums of W channels share each filter
/// vector, and independent sums hide the FMA latency a single output's chain would wait on.
const GROUP: usize = 4;

/// Most filter rows the forward stages (the solver leaves taller forward filters to others).
pub const MAX_FILTER_ROWS: usize = 16;

/// Input columns the staged path reads for a row, padding included: its outputs rounded up to
/// a whole GROUP.
fn staged_span(g: &Geom) -> usize { (g.output[2].next_multiple_of(GROUP) - 1) * g.stride[2] + (g.filter[2] - 1) * g.dilation[2] + 1 }

/// Floats a forward task stages (the filter rows' spans of the padded input row, one vector of
/// channels each), None when that overflows. The solver refuses past `MAX_STAGED`: a dilation
/// or stride near 2³⁰ on a narrow output would ask for terabytes.
pub fn staged_floats(g: &Geom) -> Option<usize> {
    let span = (g.output[2].checked_next_multiple_of(GROUP)? - 1).checked_mul(g.stride[2])?.checked_add((g.filter[2] - 1).checked_mul(g.dilation[2])?)?.checked_add(1)?;
    g.filter[1].checked_mul(span)?.checked_mul(LANES)
}

pub const MAX_STAGED: usize = 1 << 26;

/// Output row (n, oh) read from x in place. Interior outputs (every horizontal tap inside the
/// image) read one tap list shifted by stride·pixel per output, four at a time; the few border
/// outputs get lists of their own.
#[inline(always)]
fn forward_row_in_place(x: *const f32, wt: &[f32], g: &Geom, n: usize, oh: usize, rt: &mut RowTaps, acc: &mut [f32]) {
    let ([_, fr, fw], xs, cn, outs) = (g.filter, g.x_strides, g.c, g.output[2]);
    let (sw, dw, pw) = (g.stride[2], g.dilation[2], g.pad[2]);
    // Interior: ow·sw ≥ pw and ow·sw − pw + (fw − 1)·dw ≤ iw − 1.
    let lo = pw.div_ceil(sw).min(outs);
    let reach = (g.input[2] + pw) as isize - 1 - ((fw - 1) * dw) as isize;
    let hi = if reach < 0 { 0 } else { (reach as usize / sw + 1).min(outs) }.max(lo);
    let push = |rt: &mut RowTaps, ow: usize| {
        for r in 0..fr {
            let Some(ih) = input_pos(g, 1, oh, r) else { continue };
            for s in 0..fw {
                let Some(iw) = input_pos(g, 2, ow, s) else { continue };
                rt.taps.push((n * xs[0] + ih * xs[3] + iw * xs[4], r * fw + s));
            }
        }
        rt.close();
    };
    rt.clear();
    // List 0: the interior template (output lo); then one per border output.
    push(rt, lo.min(outs.saturating_sub(1)));
    for ow in (0..lo).chain(hi..outs) {
        push(rt, ow);
    }
    let span = InPlace { lo, hi, outs, delta: sw * xs[4] };
    let mut c0 = 0;
    while c0 + LANES <= cn {
        in_place_block::<LANES>(x, wt, cn, c0, &span, rt, acc);
        c0 += LANES;
    }
    for c in c0..cn {
        in_place_block::<1>(x, wt, cn, c, &span, rt, acc);
    }
}

/// The interior outputs [lo, hi) of a row of `outs`, each `delta` elements of x past the last.
struct InPlace {
    lo: usize,
    hi: usize,
    outs: usize,
    delta: usize,
}

/// The W channels at c0 of every output of the row: rt's list 0 is the interior template,
/// lists 1.. the border outputs in order. (A function, not a closure: closures do not inherit
/// the caller's vector target features.)
#[inline(always)]
fn in_place_block<const W: usize>(x: *const f32, wt: &[f32], cn: usize, c0: usize, sp: &InPlace, rt: &RowTaps, acc: &mut [f32]) {
    let (lo, hi, delta) = (sp.lo, sp.hi, sp.delta);
    let mut o = lo;
    while o + 4 <= hi {
        let a = taps_block4::<W>(x.wrapping_add((o - lo) * delta), rt.of(0), wt, cn, c0, delta);
        for (j, aj) in a.iter().enumerate() {
            acc[(o + j) * cn + c0..][..W].copy_from_slice(aj);
        }
        o += 4;
    }
    for o in o..hi {
        acc[o * cn + c0..][..W].copy_from_slice(&taps_block::<W>(x.wrapping_add((o - lo) * delta), rt.of(0), wt, cn, c0));
    }
    for (i, ow) in (0..lo).chain(hi..sp.outs).enumerate() {
        acc[ow * cn + c0..][..W].copy_from_slice(&taps_block::<W>(x, rt.of(i + 1), wt, cn, c0));
    }
}

/// Channels from which the AVX-512 row kernel also takes rows of ≥ STAGE_BELOW outputs.
#[cfg(target_arch = "x86_64")]
const TABLE_CHANNELS: usize = 256;

/// Channels-last output rows at least this wide read x in place (`forward_row_in_place`);
/// narrower rows (many of whose outputs touch the padding, each with a tap list of its own)
/// and channels-first x are staged with the padding as zeros.
const STAGE_BELOW: usize = 8;

// acc (OW pixels × C) = Σ over taps of x·w for output row (n, oh).
simd!(forward_row(x: *const f32, wt: &[f32], g: &Geom, n: usize, oh: usize, buf: &mut Vec<f32>, rt: &mut RowTaps, acc: &mut [f32]) {
    let (cn, fr) = (g.c, g.filter[1]);
    if g.output[2] >= STAGE_BELOW && g.x_strides[1] == 1 {
        forward_row_in_place(x, wt, g, n, oh, rt, acc);
        return;
    }
    let span = staged_span(g);
    buf.resize(fr * span * LANES, 0.0);
    let mut c0 = 0;
    while c0 + LANES <= cn {
        forward_block::<LANES>(x, wt, g, n, oh, c0, buf, acc);
        c0 += LANES;
    }
    for c in c0..cn {
        forward_block::<1>(x, wt, g, n, oh, c, &mut buf[..fr * span], acc);
    }
});

// acc (IW pixels × C) = Σ over the taps and dy pixels reaching dx row (n, ih).
simd!(backward_data_row(dy: *const f32, wt: &[f32], g: &Geom, n: usize, ih: usize, rt: &mut RowTaps, acc: &mut [f32]) {
    let ([_, fr, fw], ys) = (g.filter, g.y_strides);
    rt.clear();
    for iw in 0..g.input[2] {
        for r in 0..fr {
            let Some(oh) = output_pos(g, 1, ih, r) else { continue };
            for s in 0..fw {
                let Some(ow) = output_pos(g, 2, iw, s) else { continue };
                rt.taps.push((n * ys[0] + oh * ys[3] + ow * ys[4], r * fw + s));
            }
        }
        rt.close();
    }
    rt.find_runs();
    row_sums(acc, dy, rt, wt, g.c);
});

// acc (taps × C) += Σ over rows [r0, r1) of (n, oh) of dy·x at every tap: per tap and channel
// block, the sums stay in registers along each output row.
simd!(weights_rows(x: *const f32, dy: *const f32, g: &Geom, r0: usize, r1: usize, acc: &mut [f32]) {
    let (cn, [_, fr, fw], xs, ys) = (g.c, g.filter, g.x_strides, g.y_strides);
    for row in r0..r1 {
        let (n, oh) = (row / g.output[1], row % g.output[1]);
        for r in 0..fr {
            let Some(ih) = input_pos(g, 1, oh, r) else { continue };
            for s in 0..fw {
                let t = r * fw + s;
                let ows = output_range(g, 2, s);
                let dy_row = n * ys[0] + oh * ys[3];
                let x_row = n * xs[0] + ih * xs[3];
                // x offset of output column ow: x_row + (ow·stride − pad + s·dilation)·xs[4].
                let x_at = |ow: usize| x_row + (ow * g.stride[2] + s * g.dilation[2] - g.pad[2]) * xs[4];
                let mut c0 = 0;
                while c0 + LANES <= cn {
                    let a = dot_block::<LANES>(dy, x, ows.clone().map(|ow| (dy_row + ow * ys[4], x_at(ow))), c0);
                    acc[t * cn + c0..][..LANES].iter_mut().zip(&a).for_each(|(o, v)| *o += v);
                    c0 += LANES;
                }
                for c in c0..cn {
                    acc[t * cn + c] += dot_block::<1>(dy, x, ows.clone().map(|ow| (dy_row + ow * ys[4], x_at(ow))), c)[0];
                }
            }
        }
    }
});

/// The output positions along axis `a` whose input position at `tap` lies inside the input.
fn output_range(g: &Geom, a: usize, tap: usize) -> std::ops::Range<usize> {
    let (s, shift) = (g.stride[a] as isize, (tap * g.dilation[a]) as isize - g.pad[a] as isize);
    // o·s + shift ≥ 0 and o·s + shift ≤ input − 1.
    let lo = if shift >= 0 { 0 } else { (-shift + s - 1) / s };
    let hi = (g.input[a] as isize - 1 - shift).div_euclid(s) + 1;
    (lo as usize)..(hi.clamp(0, g.output[a] as isize) as usize).max(lo as usize)
}

/// Σ over `pixels` (dy offset, x offset) of dy[.. + c0 + l]·x[.. + c0 + l] for W channels, the
/// sums in registers.
#[inline(always)]
fn dot_block<const W: usize>(dy: *const f32, x: *const f32, pixels: impl Iterator<Item = (usize, usize)>, c0: usize) -> [f32; W] {
    let mut a = [0f32; W];
    for (yo, xo) in pixels {
        // SAFETY: both offsets are pixels of their tensors, whose channels are contiguous and
        // hold c0 + W.
        let (dr, xr) = unsafe { (&*(dy.add(yo + c0) as *const [f32; W]), &*(x.add(xo + c0) as *const [f32; W])) };
        for l in 0..W {
            a[l] = dr[l].mul_add(xr[l], a[l]);
        }
    }
    a
}

/// Whether the forward reads channels-first x without a copy, transposing the rows it stages:
/// where each input row is staged at most 1.5 times (filter rows ≤ 1.5 × stride; 3×3 stride 2).
/// Taller filters restage each row more often than one copy of x costs.
pub fn transposes_while_staging(g: &Geom) -> bool { g.x_strides[1] != 1 && 2 * g.filter[1] <= 3 * g.stride[1] }

/// y = epilogue(α·conv(x, w) + β·y).
/// `wt` is the filter as `taps_by_channel` lays it out.
pub fn forward(g: &Geom, p: ConvPtrs, wt: &[f32], alpha: f32, beta: f32, epi: &CpuEpilogue) {
    // Channels-first x: transposed row by row as the staged path reads it where each input row
    // is staged at most 1.5 times, else copied channels-last once.
    if transposes_while_staging(g) {
        return forward_rows(g, p, wt, alpha, beta, epi);
    }
    with_readable(Slot::Conv, p.x, g.n, g.c, g.input, g.x_strides, |x, xs| forward_rows(&Geom { x_strides: xs, ..*g }, ConvPtrs { x, ..p }, wt, alpha, beta, epi));
}

/// Every output row of the forward, one task each, x as `g` describes it.
fn forward_rows(g: &Geom, p: ConvPtrs, wt: &[f32], alpha: f32, beta: f32, epi: &CpuEpilogue) {
    let out = RowOut { ptr: p.y, strides: g.y_strides, dims: g.output, alpha, beta, epi };
    #[cfg(target_arch = "x86_64")]
    if g.x_strides[1] == 1 && crate::backend::cpu::lanes::level() == 2 && (g.output[2] < STAGE_BELOW || g.c >= TABLE_CHANNELS) {
        // AVX-512: a row's outputs in register chunks over a table of input pixels, x read
        // where it lies (`x86/depthwise_rows.rs`): rows short enough that the other path
        // stages them, or channel blocks enough to amortize the row's table (on 96 or 144
        // channels of 56 or 112 outputs, building it cost as much as the products).
        use crate::backend::cpu::x86::depthwise_rows::{row_sums, RowTable};
        let zeros = vec![0f32; g.c];
        let row_len = g.output[2] * g.c;
        let sums = |t: &mut RowTable, row: usize, acc: &mut [f32]| {
            t.build(g, p.x as *const f32, zeros.as_ptr(), row / g.output[1], row % g.output[1]);
            // SAFETY: level 2 means AVX-512F; the table is this row's over channels-last x and
            // C zeros; wt is the [tap][C] filter and acc a row of C-channel outputs.
            unsafe { row_sums(t, g, wt, acc) };
        };
        if out.planes_apply(g.c) {
            // Small channels-first planes: every row's sums channels-last, then each plane
            // stored through transposes across row ends.
            let rows = g.n * g.output[1];
            with_scratch(Slot::PackBAll, rows * row_len, |all| {
                all.par_chunks_mut(row_len).enumerate().for_each_init(RowTable::default, |t, (row, acc)| sums(t, row, acc));
                // SAFETY: y holds the problem's n images of C channels.
                unsafe { out.write_planes(all, g.n, g.c) };
            });
            return;
        }
        (0..g.n * g.output[1]).into_par_iter().for_each_init(RowTable::default, |t, row| {
            with_scratch(Slot::Task, row_len, |acc| {
                sums(t, row, acc);
                // SAFETY: this task owns y row (n, oh).
                unsafe { out.write(acc, row / g.output[1], row % g.output[1]) };
            });
        });
        return;
    }
    // (rayon calls init once per piece of work it splits off, many times per call: the row's
    // sums live in the thread's scratch, not in a zeroed buffer per piece.)
    (0..g.n * g.output[1]).into_par_iter().for_each_init(
        || (Vec::new(), RowTaps::default()),
        |(buf, rt), row| {
            let (n, oh) = (row / g.output[1], row % g.output[1]);
            with_scratch(Slot::Task, g.output[2] * g.c, |acc| {
                forward_row(p.x as *const f32, wt, g, n, oh, buf, rt, acc);
                // SAFETY: this task owns y row (n, oh).
                unsafe { out.write(acc, n, oh) };
            });
        },
    );
}

/// dx = epilogue(α·conv_bwd_data(dy, w) + β·dx).
/// `wt` is the filter as `taps_by_channel` lays it out.
pub fn backward_data(g: &Geom, p: ConvPtrs, wt: &[f32], alpha: f32, beta: f32, epi: &CpuEpilogue) {
    with_readable(Slot::Conv, p.y, g.n, g.k, g.output, g.y_strides, |dy, ys| {
        let (g, p) = (&Geom { y_strides: ys, ..*g }, ConvPtrs { y: dy, ..p });
        let out = RowOut { ptr: p.x, strides: g.x_strides, dims: g.input, alpha, beta, epi };
        (0..g.n * g.input[1]).into_par_iter().for_each_init(RowTaps::default, |taps, row| {
            let (n, ih) = (row / g.input[1], row % g.input[1]);
            with_scratch(Slot::Task, g.input[2] * g.c, |acc| {
                backward_data_row(p.y as *const f32, wt, g, n, ih, taps, acc);
                // SAFETY: this task owns dx row (n, ih).
                unsafe { out.write(acc, n, ih) };
            });
        });
    });
}

/// dw = α·conv_bwd_weights(x, dy) + β·dw.
pub fn backward_weights(g: &Geom, p: ConvPtrs, alpha: f32, beta: f32) {
    with_readable(Slot::Conv, p.x, g.n, g.c, g.input, g.x_strides, |x, xs| {
        // A second whole-problem buffer on this thread: PackBAll is free outside the GEMMs.
        with_readable(Slot::PackBAll, p.y, g.n, g.k, g.output, g.y_strides, |dy, ys| {
            weights_sums(&Geom { x_strides: xs, y_strides: ys, ..*g }, ConvPtrs { x, y: dy, ..p }, alpha, beta)
        })
    })
}

/// `backward_weights` on channels-last x and dy.
fn weights_sums(g: &Geom, p: ConvPtrs, alpha: f32, beta: f32) {
    let rows = g.n * g.output[1];
    // A few rows per chunk at least (each chunk's partial sums are dw-sized).
    let chunks = (rows / ROWS_PER_CHUNK).clamp(1, WEIGHT_CHUNKS);
    let size = g.filter_size() * g.c;
    let partial: Vec<Vec<f32>> = (0..chunks)
        .into_par_iter()
        .map(|i| {
            let mut acc = vec![0f32; size];
            weights_rows(p.x as *const f32, p.y as *const f32, g, i * rows / chunks, (i + 1) * rows / chunks, &mut acc);
            acc
        })
        .collect();
    // Chunk order, element by element: the same sums on every run.
    let mut total = partial[0].clone();
    for part in &partial[1..] {
        total.iter_mut().zip(part).for_each(|(t, v)| *t += v);
    }
    let [_, fr, fw] = g.filter;
    let ws = g.w_strides;
    let dw = p.w as *mut f32;
    for c in 0..g.c {
        for t in 0..fr * fw {
            let v = total[t * g.c + c];
            // SAFETY: (c, 0, r, s) is an element of the validated dw, written once.
            unsafe {
                let at = dw.add(c * ws[0] + (t / fw) * ws[3] + (t % fw) * ws[4]);
                *at = alpha * v + if beta != 0.0 { beta * *at } else { 0.0 };
            }
        }
    }
}
