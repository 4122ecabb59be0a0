//! Depthwise forward on one channels-first plane with AVX-512: the lanes are 16 consecutive
//! outputs of the flat output plane, and each tap is one masked load and one FMA with the tap's
//! weight broadcast. The kernel reads a plane whose rows are as wide as the output's: the input
//! plane itself at stride 1 (outputs as wide as the input), or at stride 2 one of its stride
//! phases (even or odd rows and columns, `split_phases`), so that output p reads element
//! p + (the tap's offset) for every lane. The mask drops the lanes whose tap falls in the
//! padding (a column off the row's edge, a row above or below the image) or past the plane's
//! end; masked-off lanes are never read (AVX-512 masked loads suppress faults), so there is no
//! padded copy, no transpose and no dropped column.

use std::arch::x86_64::*;

/// Outputs per vector: 16 f32 lanes.
pub const LANES: usize = 16;

/// Output vectors summed at once: independent FMA chains to cover the FMA latency (eight sums,
/// the broadcast weight and the loaded vector stay well inside the 32 zmm registers).
const GROUP: usize = 8;

/// A plane's taps as the kernel reads them.
#[derive(Clone, Copy)]
pub struct PlaneTaps<'a> {
    /// Per tap (row-major), the offset of output 0's input from the start of what the kernel
    /// reads (the input plane, or the first of its phases).
    pub offsets: &'a [isize],
    /// Per tap and output vector ([tap][vector]): the lanes whose input lies in the plane.
    pub masks: &'a [u16],
    /// Output vectors per plane: ⌈outputs / 16⌉.
    pub vectors: usize,
    /// Outputs per plane.
    pub outputs: usize,
}

/// y[p] = clamp(Σ over taps of w[t] · x[p + offset_t] + bias) for the outputs p of output
/// vectors `vectors` of the plane, the clamp (max with 0, NaN → 0, then min with `hi`) only
/// when `clamp`.
///
/// # Safety
/// The CPU has AVX-512F; every unmasked lane of every tap of these vectors reads an element
/// written at `x`; `w` holds one f32 per tap; `y` holds the plane's `outputs` f32.
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn plane(t: &PlaneTaps, vectors: std::ops::Range<usize>, x: *const f32, w: *const f32, y: *mut f32, bias: f32, clamp: bool, top: f32) {
    let st = Out { y, bias, clamp, hi: top };
    let mut v = vectors.start;
    while v < vectors.end {
        let nb = (vectors.end - v).min(GROUP);
        match nb {
            8 => group::<8>(t, v, x, w, st),
            7 => group::<7>(t, v, x, w, st),
            6 => group::<6>(t, v, x, w, st),
            5 => group::<5>(t, v, x, w, st),
            4 => group::<4>(t, v, x, w, st),
            3 => group::<3>(t, v, x, w, st),
            2 => group::<2>(t, v, x, w, st),
            _ => group::<1>(t, v, x, w, st),
        }
        v += nb;
    }
}

/// Where and how a group's sums are stored.
#[derive(Clone, Copy)]
struct Out {
    y: *mut f32,
    bias: f32,
    clamp: bool,
    hi: f32,
}

/// Output vectors v0..v0 + G: per tap, the weight broadcast once and one masked load per vector.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn group<const G: usize>(t: &PlaneTaps, v0: usize, x: *const f32, w: *const f32, st: Out) {
    let mut a = [_mm512_setzero_ps(); G];
    for (ti, &off) in t.offsets.iter().enumerate() {
        let wv = _mm512_set1_ps(*w.add(ti));
        let xs = x.wrapping_offset(off).wrapping_add(v0 * LANES);
        let masks = t.masks.as_ptr().add(ti * t.vectors + v0);
        for (j, aj) in a.iter_mut().enumerate() {
            let xv = _mm512_maskz_loadu_ps(*masks.add(j), xs.wrapping_add(j * LANES));
            *aj = _mm512_fmadd_ps(xv, wv, *aj);
        }
    }
    store(t, v0, a, st);
}

/// Sums + bias, clamped when asked (max with 0, NaN → 0, then min with `hi`), into outputs
/// v0·16.. (the plane's last vector masked). The sums come by value: a reference kept the
/// caller's accumulators in memory through its loop where this was not inlined.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn store<const G: usize>(t: &PlaneTaps, v0: usize, a: [__m512; G], st: Out) {
    let (bias, zero, top) = (_mm512_set1_ps(st.bias), _mm512_setzero_ps(), _mm512_set1_ps(st.hi));
    for (j, aj) in a.iter().enumerate() {
        let mut r = _mm512_add_ps(*aj, bias);
        if st.clamp {
            r = _mm512_min_ps(_mm512_max_ps(r, zero), top);
        }
        let p = (v0 + j) * LANES;
        let left = t.outputs - p;
        if left >= LANES {
            _mm512_storeu_ps(st.y.add(p), r);
        } else {
            _mm512_mask_storeu_ps(st.y.add(p), (1u16 << left) - 1, r);
        }
    }
}

/// Backward-weights over one plane: for every tap t, `acc[t]` += the 16-lane partial sums of
/// dy[p] · x[p + offset_t] over the plane's outputs p (lanes masked as `plane` masks them, and
/// dy's last vector to the plane's outputs). TAPS is the plane's tap count.
///
/// # Safety
/// As `plane`, with `dy` holding the plane's `outputs` f32 and `acc` TAPS entries.
#[target_feature(enable = "avx512f")]
pub unsafe fn plane_weights<const TAPS: usize>(t: &PlaneTaps, x: *const f32, dy: *const f32, acc: &mut [[f32; LANES]]) {
    debug_assert!(t.offsets.len() == TAPS && acc.len() == TAPS);
    let mut a = [_mm512_setzero_ps(); TAPS];
    for v in 0..t.vectors {
        let left = t.outputs - v * LANES;
        let d = _mm512_maskz_loadu_ps(if left >= LANES { 0xffff } else { (1u16 << left) - 1 }, dy.add(v * LANES));
        for (ti, at) in a.iter_mut().enumerate() {
            let xv = _mm512_maskz_loadu_ps(*t.masks.get_unchecked(ti * t.vectors + v), x.wrapping_offset(*t.offsets.get_unchecked(ti)).wrapping_add(v * LANES));
            *at = _mm512_fmadd_ps(d, xv, *at);
        }
    }
    for (ti, at) in a.iter().enumerate() {
        let mut sums = [0.0f32; LANES];
        _mm512_storeu_ps(sums.as_mut_ptr(), *at);
        for (dst, s) in acc[ti].iter_mut().zip(sums) {
            *dst += s;
        }
    }
}

/// Split input rows `rows` of a plane of `width` floats per row (row r at `x + r·width`) into
/// stride phases of `pitch` columns: row r, column c goes to phase (r mod sh, c mod sw), row
/// r / sh, column c / sw, phase (a, b) starting at `buf + (a·sw + b)·phase_len`; `sw` is 1 or 2.
///
/// # Safety
/// The CPU has AVX-512F; x holds the rows; `buf` holds sh·sw phases of `phase_len` floats, each
/// of the plane's ⌈rows / sh⌉ rows of `pitch` ≥ ⌈width / sw⌉ columns.
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn split_phases(x: *const f32, rows: std::ops::Range<usize>, width: usize, sh: usize, sw: usize, buf: *mut f32, pitch: usize, phase_len: usize) {
    debug_assert!(sw == 1 || sw == 2);
    let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    let odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    let upto = |n: usize| if n >= LANES { 0xffffu16 } else { (1u16 << n) - 1 };
    for r in rows {
        let src = x.add(r * width);
        let row = buf.add((r % sh) * sw * phase_len + (r / sh) * pitch);
        if sw == 1 {
            std::ptr::copy_nonoverlapping(src, row, width);
            continue;
        }
        let odd_row = row.add(phase_len);
        let mut c = 0;
        while c < width {
            let n = (width - c).min(2 * LANES);
            if n == 2 * LANES {
                let (lo, hi) = (_mm512_loadu_ps(src.add(c)), _mm512_loadu_ps(src.add(c + LANES)));
                _mm512_storeu_ps(row.add(c / 2), _mm512_permutex2var_ps(lo, even, hi));
                _mm512_storeu_ps(odd_row.add(c / 2), _mm512_permutex2var_ps(lo, odd, hi));
            } else {
                let lo = _mm512_maskz_loadu_ps(upto(n), src.add(c));
                let hi = _mm512_maskz_loadu_ps(upto(n.saturating_sub(LANES)), src.add(c + LANES));
                _mm512_mask_storeu_ps(row.add(c / 2), upto(n.div_ceil(2)), _mm512_permutex2var_ps(lo, even, hi));
                _mm512_mask_storeu_ps(odd_row.add(c / 2), upto(n / 2), _mm512_permutex2var_ps(lo, odd, hi));
            }
            c += 2 * LANES;
        }
    }
}
