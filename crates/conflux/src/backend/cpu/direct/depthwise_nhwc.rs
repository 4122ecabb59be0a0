//! Depthwise f32 convolution over channels-last tensors (one input and one output channel per
//! group), every direction, any filter, stride, padding and dilation: a pixel's channels are
//! contiguous, so every tap is a vector multiply-add across channels — the layout oneDNN's
//! depthwise kernels block into. The planar kernels (`depthwise`) copy one channel's plane per
//! task instead, which channels-last tensors can only feed by gathers.
//!
//! Tasks: forward and backward-data one output row (n, h) each; backward-weights a fixed number
//! of row chunks (independent of the thread count) with per-chunk partial sums added in chunk
//! order, so reruns are bit-identical.

use crate::backend::cpu::direct::naive::ConvPtrs;
use crate::backend::cpu::pointwise::epilogue::CpuEpilogue;
use crate::problem::Geom;
use rayon::prelude::*;

/// Most row chunks of the backward-weights reduction, and the fewest rows a chunk takes.
const WEIGHT_CHUNKS: usize = 64;
const ROWS_PER_CHUNK: usize = 8;

/// The filter as [tap][C] (taps in (r, s) order).
fn taps_by_channel(g: &Geom, w: u64) -> Vec<f32> {
    let [_, fr, fw] = g.filter;
    let ws = g.w_strides;
    let mut t = vec![0f32; fr * fw * g.c];
    for c in 0..g.c {
        for r in 0..fr {
            for s in 0..fw {
                // SAFETY: (c, 0, r, s) is an element of the validated filter.
                t[(r * fw + s) * g.c + c] = unsafe { *(w as *const f32).add(c * ws[0] + r * ws[3] + s * ws[4]) };
            }
        }
    }
    t
}

/// Input position o·stride − pad + tap·dilation along axis `a` (1 = H, 2 = W), if inside.
#[inline(always)]
fn input_pos(g: &Geom, a: usize, o: usize, tap: usize) -> Option<usize> {
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

/// One block of `W` channels at `c0`: Σ over `taps` (pixel offset, tap index) of
/// src[pixel + c0 + l]·wt[tap][c0 + l], the sums in registers (W a constant: the loop unrolls
/// into whole vectors).
#[inline(always)]
fn taps_block<const W: usize>(src: *const f32, taps: &[(usize, usize)], wt: &[f32], cn: usize, c0: usize) -> [f32; W] {
    let mut a = [0f32; W];
    for &(at, t) in taps {
        // SAFETY: `at` is a pixel of the tensor, whose cn channels are contiguous; c0 + W ≤ cn.
        let xr = unsafe { &*(src.add(at + c0) as *const [f32; W]) };
        let wr: &[f32; W] = wt[t * cn + c0..][..W].try_into().expect("W taps");
        for l in 0..W {
            a[l] += xr[l] * wr[l];
        }
    }
    a
}

/// out[..cn] = Σ over `taps` of src[pixel + c]·wt[tap][c]: LANES channels at a time, then the
/// remainder one at a time.
#[inline(always)]
fn taps_into(out: &mut [f32], src: *const f32, taps: &[(usize, usize)], wt: &[f32], cn: usize) {
    let mut c0 = 0;
    while c0 + LANES <= cn {
        out[c0..c0 + LANES].copy_from_slice(&taps_block::<LANES>(src, taps, wt, cn, c0));
        c0 += LANES;
    }
    for c in c0..cn {
        out[c] = taps_block::<1>(src, taps, wt, cn, c)[0];
    }
}

// acc (OW pixels × C) = Σ over taps of x·w for output row (n, oh).
simd!(forward_row(x: *const f32, wt: &[f32], g: &Geom, n: usize, oh: usize, taps: &mut Vec<(usize, usize)>, acc: &mut [f32]) {
    let (cn, [_, fr, fw], xs) = (g.c, g.filter, g.x_strides);
    for ow in 0..g.output[2] {
        taps.clear();
        for r in 0..fr {
            let Some(ih) = input_pos(g, 1, oh, r) else { continue };
            for s in 0..fw {
                let Some(iw) = input_pos(g, 2, ow, s) else { continue };
                taps.push((n * xs[0] + ih * xs[3] + iw * xs[4], r * fw + s));
            }
        }
        taps_into(&mut acc[ow * cn..(ow + 1) * cn], x, taps, wt, cn);
    }
});

// acc (IW pixels × C) = Σ over the taps and dy pixels reaching dx row (n, ih).
simd!(backward_data_row(dy: *const f32, wt: &[f32], g: &Geom, n: usize, ih: usize, taps: &mut Vec<(usize, usize)>, acc: &mut [f32]) {
    let (cn, [_, fr, fw], ys) = (g.c, g.filter, g.y_strides);
    for iw in 0..g.input[2] {
        taps.clear();
        for r in 0..fr {
            let Some(oh) = output_pos(g, 1, ih, r) else { continue };
            for s in 0..fw {
                let Some(ow) = output_pos(g, 2, iw, s) else { continue };
                taps.push((n * ys[0] + oh * ys[3] + ow * ys[4], r * fw + s));
            }
        }
        taps_into(&mut acc[iw * cn..(iw + 1) * cn], dy, taps, wt, cn);
    }
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
            a[l] += dr[l] * xr[l];
        }
    }
    a
}

/// Where a row of results goes: pixels `width` of row (n, h) of a channels-last tensor.
struct RowOut<'a> {
    ptr: u64,
    strides: [usize; 5],
    dims: [usize; 3],
    alpha: f32,
    beta: f32,
    epi: &'a CpuEpilogue,
}

impl RowOut<'_> {
    /// out[n, :, h, w] = epi(α·v + β·out_old) for every pixel w of the row; β = 0 never reads
    /// the old value.
    ///
    /// # Safety
    /// Row (n, h) must be inside the tensor and written by no other thread.
    unsafe fn write(&self, v: &[f32], n: usize, h: usize) {
        let (cn, width) = (v.len() / self.dims[2], self.dims[2]);
        let fast = (self.alpha == 1.0 && self.beta == 0.0).then(|| self.epi.bias_relu_all()).flatten();
        for w in 0..width {
            let src = &v[w * cn..(w + 1) * cn];
            let dst = std::slice::from_raw_parts_mut((self.ptr as *mut f32).add(n * self.strides[0] + h * self.strides[3] + w * self.strides[4]), cn);
            match fast {
                Some((bias, relu)) => {
                    for c in 0..cn {
                        let x = src[c] + bias.map_or(0.0, |b| b[c]);
                        dst[c] = if relu && !(x > 0.0) { 0.0 } else { x };
                    }
                }
                None => {
                    let sp = h * width + w;
                    for c in 0..cn {
                        let mut x = self.alpha * src[c];
                        if self.beta != 0.0 {
                            x += self.beta * dst[c];
                        }
                        dst[c] = self.epi.apply(x, n, c, [0, h, w], sp, self.dims[1] * width);
                    }
                }
            }
        }
    }
}

/// y = epilogue(α·conv(x, w) + β·y).
pub fn forward(g: &Geom, p: ConvPtrs, alpha: f32, beta: f32, epi: &CpuEpilogue) {
    let wt = taps_by_channel(g, p.w);
    let out = RowOut { ptr: p.y, strides: g.y_strides, dims: g.output, alpha, beta, epi };
    (0..g.n * g.output[1]).into_par_iter().for_each_init(
        || (vec![0f32; g.output[2] * g.c], Vec::new()),
        |(acc, taps), row| {
            let (n, oh) = (row / g.output[1], row % g.output[1]);
            forward_row(p.x as *const f32, &wt, g, n, oh, taps, acc);
            // SAFETY: this task owns y row (n, oh).
            unsafe { out.write(acc, n, oh) };
        },
    );
}

/// dx = epilogue(α·conv_bwd_data(dy, w) + β·dx).
pub fn backward_data(g: &Geom, p: ConvPtrs, alpha: f32, beta: f32, epi: &CpuEpilogue) {
    let wt = taps_by_channel(g, p.w);
    let out = RowOut { ptr: p.x, strides: g.x_strides, dims: g.input, alpha, beta, epi };
    (0..g.n * g.input[1]).into_par_iter().for_each_init(
        || (vec![0f32; g.input[2] * g.c], Vec::new()),
        |(acc, taps), row| {
            let (n, ih) = (row / g.input[1], row % g.input[1]);
            backward_data_row(p.y as *const f32, &wt, g, n, ih, taps, acc);
            // SAFETY: this task owns dx row (n, ih).
            unsafe { out.write(acc, n, ih) };
        },
    );
}

/// dw = α·conv_bwd_weights(x, dy) + β·dw.
pub fn backward_weights(g: &Geom, p: ConvPtrs, alpha: f32, beta: f32) {
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
