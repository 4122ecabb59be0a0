//! AVX-512 input and filter transforms for f32 data (`wino4_math.rs` has the formulas): the
//! 16 lanes are loaded with gathers, transformed in registers and stored straight to the
//! panels. The lane-array versions assemble lanes with scalar stores and reload them as
//! vectors, which stalls store forwarding; that was ~60 cycles per filter.

use std::arch::x86_64::*;

#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn g_rows(a: __m512, b: __m512, c: __m512) -> [__m512; 6] {
    let ac = _mm512_add_ps(a, c);
    let b2 = _mm512_add_ps(b, b);
    let a4c = _mm512_fmadd_ps(_mm512_set1_ps(4.0), c, a);
    [a, _mm512_sub_ps(_mm512_setzero_ps(), _mm512_add_ps(ac, b)), _mm512_sub_ps(b, ac), _mm512_add_ps(a4c, b2), _mm512_sub_ps(a4c, b2), c]
}

/// U' of 16 filters (lanes) for one channel: tap t of lane l is at w + idx[l] + taps[t]
/// (lanes off in `mask` read as 0); U'[ξ] goes to dst + ξ·xi_stride (16 values).
///
/// # Safety
/// AVX-512F; every addressed weight readable; every destination writable.
#[target_feature(enable = "avx512f")]
pub unsafe fn filter16(w: *const f32, idx: __m512i, mask: __mmask16, taps: &[usize; 9], dst: *mut f32, xi_stride: usize) {
    let z = _mm512_setzero_ps();
    let g: [__m512; 9] = std::array::from_fn(|t| _mm512_mask_i32gather_ps::<4>(z, mask, idx, w.add(taps[t])));
    let cols: [[__m512; 6]; 3] = std::array::from_fn(|col| g_rows(g[col], g[3 + col], g[6 + col]));
    for i in 0..6 {
        let r = g_rows(cols[0][i], cols[1][i], cols[2][i]);
        for (j, v) in r.iter().enumerate() {
            _mm512_storeu_ps(dst.add((6 * i + j) * xi_stride), *v);
        }
    }
}

#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn b_rows(d: [__m512; 6]) -> [__m512; 6] {
    let [d0, d1, d2, d3, d4, d5] = d;
    let (c4, c5, c2) = (_mm512_set1_ps(4.0), _mm512_set1_ps(5.0), _mm512_set1_ps(2.0));
    let d42 = _mm512_sub_ps(d4, d2);
    let d31 = _mm512_mul_ps(c2, _mm512_sub_ps(d3, d1));
    [
        _mm512_add_ps(_mm512_fnmadd_ps(c5, d2, _mm512_mul_ps(c4, d0)), d4),
        _mm512_fnmadd_ps(c4, _mm512_add_ps(d1, d2), _mm512_add_ps(d3, d4)),
        _mm512_fmadd_ps(c4, _mm512_sub_ps(d1, d2), _mm512_sub_ps(d4, d3)),
        _mm512_add_ps(d42, d31),
        _mm512_sub_ps(d42, d31),
        _mm512_add_ps(_mm512_fnmadd_ps(c5, d3, _mm512_mul_ps(c4, d1)), d5),
    ]
}

/// V of up to 16 tiles (lanes) of one channel: element (r, s) of lane l's 6×6 tile is at
/// p + idx[l] + r·pw + s (lanes off in `mask` read as 0); V[ξ] lanes in `store` go to
/// dst + ξ·xi_stride.
///
/// # Safety
/// AVX-512F; every addressed element readable; every destination lane writable.
#[target_feature(enable = "avx512f")]
pub unsafe fn input16_masked(p: *const f32, idx: __m512i, mask: __mmask16, store: __mmask16, pw: usize, dst: *mut f32, xi_stride: usize) {
    let z = _mm512_setzero_ps();
    // Bᵀ down each column, then Bᵀ along each row of the result.
    let mut t = [[z; 6]; 6]; // t[i][col]
    for col in 0..6 {
        let d: [__m512; 6] = std::array::from_fn(|r| _mm512_mask_i32gather_ps::<4>(z, mask, idx, p.add(r * pw + col)));
        for (i, v) in b_rows(d).into_iter().enumerate() {
            t[i][col] = v;
        }
    }
    for (i, row) in t.iter().enumerate() {
        for (j, v) in b_rows(*row).iter().enumerate() {
            _mm512_mask_storeu_ps(dst.add((6 * i + j) * xi_stride), store, *v);
        }
    }
}
