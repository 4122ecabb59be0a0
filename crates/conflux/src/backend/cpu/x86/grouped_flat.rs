//! Grouped forward (a few input channels per group) on channels-first planes with AVX-512: the
//! flat-plane scheme of `depthwise_flat` with a reduction over the group's input channels. The
//! lanes are 16 consecutive outputs of one output plane; a block of `KB` output channels of one
//! group keeps KB × G vectors of sums in registers, and each masked load of an input vector (one
//! input channel, one tap) feeds KB FMAs with the weights broadcast from memory. A tap's masks
//! are loaded once for all the group's input channels.

use super::depthwise_flat::{PlaneTaps, LANES};
use std::arch::x86_64::*;

/// Where one block of output channels reads and writes.
#[derive(Clone, Copy)]
pub struct Block {
    /// The group's first input plane (or its first phase); `x_step` floats to the next channel.
    pub x: *const f32,
    pub x_step: usize,
    /// Input channels of the group.
    pub cg: usize,
    /// The block's first filter as [channel][tap] f32; `w_step` floats to the next output's.
    pub w: *const f32,
    pub w_step: usize,
    /// Output p of the block's first plane goes to y + p (y may point before a buffer that holds
    /// only a band of the plane: it is offset with wrapping arithmetic); `y_step` floats to the
    /// next plane.
    pub y: *mut f32,
    pub y_step: usize,
    /// The block's bias (KB floats) or null, then the clamp when `clamp` (max 0, min `hi`).
    pub bias: *const f32,
    pub clamp: bool,
    pub hi: f32,
}

/// Output vectors `vectors` of the KB output planes of `b`.
///
/// # Safety
/// The CPU has AVX-512F; KB is 4 or 8; every unmasked lane of every tap reads an element
/// written in each of the group's input planes; the filters, bias and output planes are as
/// `Block` describes.
#[target_feature(enable = "avx512f")]
pub unsafe fn block<const KB: usize>(t: &PlaneTaps, vectors: std::ops::Range<usize>, b: &Block) {
    let g = if KB == 8 { 3 } else { 6 };
    let mut v = vectors.start;
    while v < vectors.end {
        let nb = (vectors.end - v).min(g);
        match (KB, nb) {
            (8, 3) => sums::<8, 3>(t, v, b),
            (8, 2) => sums::<8, 2>(t, v, b),
            (8, _) => sums::<8, 1>(t, v, b),
            (_, 6) => sums::<4, 6>(t, v, b),
            (_, 5) => sums::<4, 5>(t, v, b),
            (_, 4) => sums::<4, 4>(t, v, b),
            (_, 3) => sums::<4, 3>(t, v, b),
            (_, 2) => sums::<4, 2>(t, v, b),
            _ => sums::<4, 1>(t, v, b),
        }
        v += nb;
    }
}

/// KB output channels × G output vectors from v0: Σ over taps and input channels.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn sums<const KB: usize, const G: usize>(t: &PlaneTaps, v0: usize, b: &Block) {
    let mut a = [[_mm512_setzero_ps(); G]; KB];
    let taps = t.offsets.len();
    for (ti, &off) in t.offsets.iter().enumerate() {
        let masks = t.masks.as_ptr().add(ti * t.vectors + v0);
        let m: [__mmask16; G] = std::array::from_fn(|j| *masks.add(j));
        let xt = b.x.wrapping_offset(off).wrapping_add(v0 * LANES);
        for ci in 0..b.cg {
            let xc = xt.wrapping_add(ci * b.x_step);
            let xv: [__m512; G] = std::array::from_fn(|j| _mm512_maskz_loadu_ps(m[j], xc.wrapping_add(j * LANES)));
            let wc = b.w.add(ci * taps + ti);
            for (k, ak) in a.iter_mut().enumerate() {
                let wv = _mm512_set1_ps(*wc.add(k * b.w_step));
                for (aj, &xj) in ak.iter_mut().zip(&xv) {
                    *aj = _mm512_fmadd_ps(xj, wv, *aj);
                }
            }
        }
    }
    // The store is written out here rather than shared with `depthwise_flat::store`: a shared
    // store, not inlined, made the 4-output blocks 1.5× slower (their sums left registers).
    let (zero, top) = (_mm512_setzero_ps(), _mm512_set1_ps(b.hi));
    for (k, ak) in a.iter().enumerate() {
        let bias = if b.bias.is_null() { zero } else { _mm512_set1_ps(*b.bias.add(k)) };
        let y = b.y.wrapping_add(k * b.y_step);
        for (j, aj) in ak.iter().enumerate() {
            let mut r = _mm512_add_ps(*aj, bias);
            if b.clamp {
                r = _mm512_min_ps(_mm512_max_ps(r, zero), top);
            }
            let p = (v0 + j) * LANES;
            let left = t.outputs - p;
            if left >= LANES {
                _mm512_storeu_ps(y.wrapping_add(p), r);
            } else {
                _mm512_mask_storeu_ps(y.wrapping_add(p), (1u16 << left) - 1, r);
            }
        }
    }
}
