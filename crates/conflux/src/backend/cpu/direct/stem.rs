//! Forward f32 convolutions with few input channels (networks' stems: 3-channel 3×3 s2, 7×7
//! s2, 4×4 s4), computed directly.
//!
//! The im2col GEMM spends these layers on the im2col matrix (27–147 rows of strided gathers)
//! and on a GEMM whose reduction is too short to amortise its packing. Here a task takes a band
//! of output rows of one image: it copies the input rows the band reads, zero-padded and split
//! into column phases (columns ≡ b mod the stride), so that every tap of an output row reads a
//! run of consecutive floats. Each output row is then blocks of KB output channels × V vectors
//! of 16 columns in registers, one multiply-add per tap, channel and vector: no gathers in the
//! loop and every loaded vector used KB times.

use crate::backend::cpu::direct::naive::ConvPtrs;
use crate::backend::cpu::gemm::{with_scratch, Slot};
use crate::backend::cpu::lanes::strided_copy;
use crate::backend::cpu::pointwise::epilogue::CpuEpilogue;
use crate::backend::cpu::tensor_io::access::load;
use crate::backend::cpu::tensor_io::conv_out::OutTensor;
use crate::problem::Geom;
use crate::types::DataType;
use rayon::prelude::*;

/// Lanes of one vector of output columns.
const L: usize = 16;

/// Output rows per task.
const BAND: usize = 4;

/// Most input channels: the taps of all of them stay in one list.
pub const MAX_CHANNELS: usize = 4;

/// Most f32 elements of one task's band buffer.
pub const MAX_BAND_FLOATS: usize = 1 << 22;

/// Where every tap reads in a task's band buffer, and its size.
#[derive(Clone, Debug)]
pub struct StemLayout {
    /// Input rows one band reads.
    rows: usize,
    /// Floats per phase row: the widest tap shift plus every computed column.
    pitch: usize,
    /// Columns computed per output row (whole chunks of V vectors).
    cols: usize,
    /// Offset of each tap (c, r, s) from the band's output row start.
    taps: Vec<usize>,
}

impl StemLayout {
    /// The layout of a 2-D geometry, None where the band buffer would exceed `MAX_BAND_FLOATS`.
    pub fn of(g: &Geom) -> Option<StemLayout> {
        let [_, sh, sw] = g.stride;
        let [_, fh, fw] = g.filter;
        let rows = (BAND - 1).checked_mul(sh)?.checked_add(fh)?;
        let cols = g.output[2].checked_next_multiple_of(chunk_cols())?;
        let pitch = cols.checked_add((fw - 1) / sw)?;
        let total = g.c.checked_mul(rows)?.checked_mul(sw)?.checked_mul(pitch)?;
        if total > MAX_BAND_FLOATS {
            return None;
        }
        let mut taps = Vec::with_capacity(g.c * fh * fw);
        for c in 0..g.c {
            for r in 0..fh {
                for s in 0..fw {
                    taps.push(((c * rows + r) * sw + s % sw) * pitch + s / sw);
                }
            }
        }
        Some(StemLayout { rows, pitch, cols, taps })
    }

    fn band_len(&self, g: &Geom) -> usize { g.c * self.rows * g.stride[2] * self.pitch }
}

/// Vectors per register block and output channels per block: 2 × 4 vectors of sums (eight
/// AVX-512 registers; sixteen AVX2 ones) with AVX-512, 2 × 2 with AVX2. (Blocks of 4 × 4 made
/// the compiler keep the sums in memory.)
fn blocking() -> (usize, usize) {
    if crate::backend::cpu::lanes::level() >= 2 { (2, 4) } else { (2, 2) }
}

fn chunk_cols() -> usize { blocking().0 * L }

/// y = epilogue(α·conv(x, w) + β·y); `g` is 2-D, ungrouped, with at most `MAX_CHANNELS` input
/// channels and dilation 1 (the solver's check); `sp_off` is `spatial_offsets(g.output,
/// g.y_strides)`.
pub fn forward(g: &Geom, lay: &StemLayout, sp_off: &[usize], p: ConvPtrs, alpha: f32, beta: f32, epi: &CpuEpilogue) {
    let [_, oh_n, ow_n] = g.output;
    let out = OutTensor { ptr: p.y, dt: p.dt, strides: g.y_strides, dims: g.output, sp_off, alpha, beta, epi };
    // Filters as f32 taps in (c, r, s) order, one run per output channel.
    let ws = g.w_strides;
    let taps = g.c * g.filter[1] * g.filter[2];
    let mut w = Vec::with_capacity(g.k * taps);
    for k in 0..g.k {
        for c in 0..g.c {
            for r in 0..g.filter[1] {
                for s in 0..g.filter[2] {
                    // SAFETY: a weight element of filter k.
                    w.push(unsafe { load(p.dt, p.w, k * ws[0] + c * ws[1] + r * ws[3] + s * ws[4]) });
                }
            }
        }
    }
    let bands = oh_n.div_ceil(BAND);
    (0..g.n * bands).into_par_iter().for_each(|t| {
        let (n, band) = (t / bands, t % bands);
        let oy0 = band * BAND;
        with_scratch(Slot::Task, lay.band_len(g), |buf| {
            load_band(g, lay, p, n, oy0, buf);
            with_scratch(Slot::Task2, g.k * ow_n, |row| {
                for oy in oy0..(oy0 + BAND).min(oh_n) {
                    let base = (oy - oy0) * g.stride[1] * g.stride[2] * lay.pitch;
                    output_row(buf, base, &lay.taps, &w, g.k, ow_n, lay.cols, row);
                    for k in 0..g.k {
                        // SAFETY: this task owns output row oy of image n in every channel.
                        unsafe { out.write_span(&mut row[k * ow_n..(k + 1) * ow_n], n, k, oy * ow_n) };
                    }
                }
            });
        });
    });
}

/// The input rows of the band starting at output row oy0, zero-padded, each split into its
/// column phases: phase b of row i of channel c starts at ((c·rows + i)·sw + b)·pitch and holds
/// input columns b − pad, b − pad + sw, …
fn load_band(g: &Geom, lay: &StemLayout, p: ConvPtrs, n: usize, oy0: usize, buf: &mut [f32]) {
    buf.fill(0.0);
    let xs = g.x_strides;
    let [_, sh, sw] = g.stride;
    let [_, ph, pw] = g.pad;
    let (h_n, w_n) = (g.input[1], g.input[2]);
    // A converted row, for inputs whose rows are not consecutive f32 (channels-last x).
    let mut row = Vec::new();
    for c in 0..g.c {
        for i in 0..lay.rows {
            let Some(ih) = (oy0 * sh + i).checked_sub(ph).filter(|&ih| ih < h_n) else { continue };
            let src = n * xs[0] + c * xs[1] + ih * xs[3];
            let row: &[f32] = if p.dt == DataType::Float && xs[4] == 1 {
                // SAFETY: the W consecutive f32 elements of input row (n, c, ih).
                unsafe { std::slice::from_raw_parts((p.x as *const f32).add(src), w_n) }
            } else {
                row.resize(w_n, 0.0);
                for (iw, v) in row.iter_mut().enumerate() {
                    // SAFETY: (n, c, ih, iw) is an element of the caller's validated x.
                    *v = unsafe { load(p.dt, p.x, src + iw * xs[4]) };
                }
                &row
            };
            for b in 0..sw {
                // Phase b holds input columns j·sw + b − pw: the first j with a column ≥ 0.
                let j0 = pw.saturating_sub(b).div_ceil(sw);
                let first = j0 * sw + b - pw;
                if first >= w_n {
                    continue;
                }
                let count = (w_n - first).div_ceil(sw).min(lay.pitch - j0);
                let dst = &mut buf[((c * lay.rows + i) * sw + b) * lay.pitch + j0..][..count];
                if sw == 1 {
                    dst.copy_from_slice(&row[first..first + count]);
                } else {
                    strided_copy(&row[first..first + (count - 1) * sw + 1], sw, dst);
                }
            }
        }
    }
}

// One output row of every channel into row[k·ow..]: blocks of KB channels × V vectors.
simd!(output_row(buf: &[f32], base: usize, taps: &[usize], w: &[f32], k_n: usize, ow: usize, cols: usize, row: &mut [f32]) {
    let (v, kb) = blocking();
    let nt = taps.len();
    let mut k0 = 0;
    while k0 < k_n {
        let kn = (k_n - k0).min(kb);
        for x0 in (0..cols).step_by(v * L) {
            debug_assert_eq!(v, 2);
            match kn {
                4 => block::<2, 4>(buf, base, taps, &w[k0 * nt..], row, k0, ow, x0),
                3 => block::<2, 3>(buf, base, taps, &w[k0 * nt..], row, k0, ow, x0),
                2 => block::<2, 2>(buf, base, taps, &w[k0 * nt..], row, k0, ow, x0),
                _ => block::<2, 1>(buf, base, taps, &w[k0 * nt..], row, k0, ow, x0),
            }
        }
        k0 += kn;
    }
});

/// KB channels × V vectors of sums at columns x0.. of one output row; stores the columns
/// below `ow`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn block<const V: usize, const KB: usize>(buf: &[f32], base: usize, taps: &[usize], w: &[f32], row: &mut [f32], k0: usize, ow: usize, x0: usize) {
    let nt = taps.len();
    let mut acc = [[[0f32; L]; V]; KB];
    for (t, &off) in taps.iter().enumerate() {
        // The tap's vectors once, then every channel's multiply-adds on them.
        let src = &buf[base + off + x0..][..V * L];
        let mut xv = [[0f32; L]; V];
        for (vi, x) in xv.iter_mut().enumerate() {
            *x = src[vi * L..(vi + 1) * L].try_into().unwrap();
        }
        for (kb, a) in acc.iter_mut().enumerate() {
            let wt = w[kb * nt + t];
            for (av, x) in a.iter_mut().zip(&xv) {
                for l in 0..L {
                    av[l] = x[l].mul_add(wt, av[l]);
                }
            }
        }
    }
    // Whole vectors by constant index, so the sums stay in registers through the tap loop
    // (an element index computed at run time here made the compiler keep them in memory).
    let n = (ow - x0).min(V * L);
    for (kb, a) in acc.iter().enumerate() {
        let dst = &mut row[(k0 + kb) * ow + x0..][..n];
        for (vi, av) in a.iter().enumerate() {
            let lo = vi * L;
            if lo + L <= n {
                dst[lo..lo + L].copy_from_slice(av);
            } else if lo < n {
                dst[lo..].copy_from_slice(&av[..n - lo]);
            }
        }
    }
}
