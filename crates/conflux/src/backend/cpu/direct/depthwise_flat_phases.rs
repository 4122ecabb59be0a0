//! Stride-2 depthwise backward-data with AVX-512 on channels-first planes: per (image, channel)
//! plane, dx's four stride phases — each a stride-1 forward of dy with a sub-filter
//! (`problem::backward_data_phases`) — are computed by the flat kernel into a scratch that stays
//! in L2, then interleaved into dx's rows with α/β: dy is read from cache and dx written once,
//! in full vectors, where a phase at a time would store every other element through offsets.

use crate::backend::cpu::direct::depthwise_flat::FlatPlan;
use crate::backend::cpu::direct::naive::ConvPtrs;
use crate::backend::cpu::gemm::{with_scratch, Slot};
use crate::backend::cpu::x86::depthwise_flat::{self as k, LANES};
use crate::problem::Geom;
use rayon::prelude::*;
use std::arch::x86_64::*;

/// One phase of dx (residue (a, b), index 2a + b): the flat plan of its forward over the dy
/// window, that window's element offset in a dy plane, and per sub-filter tap the source tap
/// (r, s) of the caller's filter.
pub struct Phase {
    pub plan: FlatPlan,
    pub dy_offset: usize,
    pub taps: Vec<(usize, usize)>,
}

/// dx = α·conv_bwd_data(dy, w) + β·dx for a 2-D depthwise f32 convolution of stride 2 with one
/// output channel per group over a dx of even height and width, `phases` in residue order,
/// each computing (H/2) × (W/2) outputs.
///
/// # Safety
/// The CPU has AVX-512F; the pointers hold the tensors `g` describes (x = dx, written; y = dy;
/// w = w); dx's rows are dense (unit W stride); every phase's plan reads inside dy's planes.
pub unsafe fn backward_data(g: &Geom, phases: &[Phase; 4], p: ConvPtrs, alpha: f32, beta: f32) {
    let (xs, ys, ws) = (g.x_strides, g.y_strides, g.w_strides);
    let (h2, w2) = (g.input[1] / 2, g.input[2] / 2);
    let plane = h2 * w2;
    let (xp, yp, wp) = (p.x as usize, p.y as usize, p.w as usize);
    let planes = g.n * g.c;
    let chunk = planes.div_ceil(4 * rayon::current_num_threads()).max(1);
    (0..planes.div_ceil(chunk)).into_par_iter().for_each(|t| {
        with_scratch(Slot::Task, 4 * plane, |buf| {
            for nc in t * chunk..((t + 1) * chunk).min(planes) {
                let (n, c) = (nc / g.c, nc % g.c);
                let dy = (yp as *const f32).add(n * ys[0] + c * ys[1]);
                for (q, ph) in phases.iter().enumerate() {
                    let mut w = [0.0f32; 9];
                    for (t, &(r, s)) in ph.taps.iter().enumerate() {
                        w[t] = *(wp as *const f32).add(c * ws[0] + r * ws[3] + s * ws[4]);
                    }
                    let pt = ph.plan.taps();
                    k::plane(&pt, 0..pt.vectors, dy.add(ph.dy_offset), w.as_ptr(), buf.as_mut_ptr().add(q * plane), 0.0, false, 0.0);
                }
                let dx = (xp as *mut f32).add(n * xs[0] + c * xs[1]);
                for i in 0..h2 {
                    for a in 0..2 {
                        let (even, odd) = (buf.as_ptr().add(2 * a * plane + i * w2), buf.as_ptr().add((2 * a + 1) * plane + i * w2));
                        interleave(even, odd, w2, dx.add((2 * i + a) * xs[3]), alpha, beta);
                    }
                }
            }
        });
    });
}

/// dst[2j] = α·even[j] + β·dst[2j], dst[2j + 1] = α·odd[j] + β·dst[2j + 1] for j < n (dst not
/// read when β = 0).
#[target_feature(enable = "avx512f")]
unsafe fn interleave(even: *const f32, odd: *const f32, n: usize, dst: *mut f32, alpha: f32, beta: f32) {
    let lo_idx = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    let hi_idx = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    let upto = |m: usize| if m >= LANES { 0xffffu16 } else { (1u16 << m) - 1 };
    let (va, vb) = (_mm512_set1_ps(alpha), _mm512_set1_ps(beta));
    let mut j = 0;
    while j < n {
        let m = (n - j).min(LANES);
        let e = _mm512_maskz_loadu_ps(upto(m), even.add(j));
        let o = _mm512_maskz_loadu_ps(upto(m), odd.add(j));
        for (half, idx) in [(0, lo_idx), (1, hi_idx)] {
            let count = (2 * m).saturating_sub(half * LANES).min(LANES);
            if count == 0 {
                continue;
            }
            let at = dst.add(2 * j + half * LANES);
            let mut v = _mm512_mul_ps(va, _mm512_permutex2var_ps(e, idx, o));
            if beta != 0.0 {
                v = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(upto(count), at), v);
            }
            _mm512_mask_storeu_ps(at, upto(count), v);
        }
        j += LANES;
    }
}
