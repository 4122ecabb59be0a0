//! Channels-last depthwise forward rows on AVX-512: for 16 channels at a time, a chunk of up to
//! eight outputs of one row keeps its sums in zmm registers across every tap of the filter,
//! each filter vector loaded once per chunk. The input pixel of each (tap, output) comes from
//! a table built once per row; taps in the padding point at a vector of zeros, so the loop has
//! no branch and the input is read where it lies (no staged copy per channel block).

use crate::problem::Geom;
use std::arch::x86_64::*;

/// Outputs per register chunk: eight sums, the filter vector and the input vector stay well
/// inside the 32 zmm registers.
const CHUNK: usize = 8;

/// A row's tap table: for each filter tap whose input row lies inside the image (row-major taps
/// in `taps`, their filter indices), the address of every output's input pixel (`at`, taps
/// × outputs), or of `zeros` where the tap falls in the padding. Addresses are usize so the
/// table may live in per-thread state.
#[derive(Default)]
pub struct RowTable {
    taps: Vec<usize>,
    at: Vec<usize>,
}

impl RowTable {
    /// The table of output row (n, oh) of channels-last x at `x`; `zeros` holds at least C
    /// zero floats.
    pub fn build(&mut self, g: &Geom, x: *const f32, zeros: *const f32, n: usize, oh: usize) {
        let ([_, fr, fw], xs, outs) = (g.filter, g.x_strides, g.output[2]);
        self.taps.clear();
        self.at.clear();
        for r in 0..fr {
            let ih = (oh * g.stride[1] + r * g.dilation[1]) as isize - g.pad[1] as isize;
            if ih < 0 || ih as usize >= g.input[1] {
                continue;
            }
            let row = x.wrapping_add(n * xs[0] + ih as usize * xs[3]);
            for s in 0..fw {
                self.taps.push(r * fw + s);
                for ow in 0..outs {
                    let iw = (ow * g.stride[2] + s * g.dilation[2]) as isize - g.pad[2] as isize;
                    let inside = iw >= 0 && (iw as usize) < g.input[2];
                    self.at.push(if inside { row.wrapping_add(iw as usize * xs[4]) as usize } else { zeros as usize });
                }
            }
        }
    }
}

/// acc (outputs × C, channels-last) = Σ over the table's taps of x·wt for every output of the
/// row: `wt` is the filter as [tap][C].
///
/// # Safety
/// The CPU has AVX-512F; the table was built for this geometry over x (channels contiguous,
/// C of them per pixel) and a zero vector of ≥ C floats; `wt` holds taps × C floats and `acc`
/// outputs × C.
#[target_feature(enable = "avx512f")]
pub unsafe fn row_sums(t: &RowTable, g: &Geom, wt: &[f32], acc: &mut [f32]) {
    let (cn, outs) = (g.c, g.output[2]);
    debug_assert!(acc.len() >= outs * cn && wt.len() >= g.filter_size() * cn);
    let mut c0 = 0;
    while c0 < cn {
        // The last block of a channel count off 16 loads and stores under a mask.
        let mask: __mmask16 = if cn - c0 >= 16 { 0xffff } else { (1u16 << (cn - c0)) - 1 };
        let mut o = 0;
        while o + CHUNK <= outs {
            chunk::<CHUNK>(t, outs, o, wt, cn, c0, mask, acc);
            o += CHUNK;
        }
        match outs - o {
            0 => {}
            1 => chunk::<1>(t, outs, o, wt, cn, c0, mask, acc),
            2 => chunk::<2>(t, outs, o, wt, cn, c0, mask, acc),
            3 => chunk::<3>(t, outs, o, wt, cn, c0, mask, acc),
            4 => chunk::<4>(t, outs, o, wt, cn, c0, mask, acc),
            5 => chunk::<5>(t, outs, o, wt, cn, c0, mask, acc),
            6 => chunk::<6>(t, outs, o, wt, cn, c0, mask, acc),
            _ => chunk::<7>(t, outs, o, wt, cn, c0, mask, acc),
        }
        c0 += 16;
    }
}

/// Outputs o0..o0 + W of the row for the channels of `mask` at c0.
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
#[inline]
unsafe fn chunk<const W: usize>(t: &RowTable, outs: usize, o0: usize, wt: &[f32], cn: usize, c0: usize, mask: __mmask16, acc: &mut [f32]) {
    let mut a = [_mm512_setzero_ps(); W];
    for (k, &tap) in t.taps.iter().enumerate() {
        // SAFETY (loads): tap < taps of the [tap][C] filter and the masked lanes are channels
        // < C; each table entry is a pixel of x (or the zero vector) with C channels.
        let w = _mm512_maskz_loadu_ps(mask, wt.as_ptr().add(tap * cn + c0));
        let row = t.at.as_ptr().add(k * outs + o0);
        for (j, aj) in a.iter_mut().enumerate() {
            let x = _mm512_maskz_loadu_ps(mask, (*row.add(j) as *const f32).add(c0));
            *aj = _mm512_fmadd_ps(x, w, *aj);
        }
    }
    for (j, aj) in a.iter().enumerate() {
        let dst = acc.as_mut_ptr().add((o0 + j) * cn + c0);
        if mask == 0xffff {
            _mm512_storeu_ps(dst, *aj);
        } else {
            _mm512_mask_storeu_ps(dst, mask, *aj);
        }
    }
}
