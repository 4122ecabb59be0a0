//! AVX-512 pieces of the F(4×4) driver (`wino4.rs`; formulas in `wino4_math.rs`), for f32:
//! input and filter transforms whose 16 lanes are loaded with gathers and stored straight from
//! registers to the panels (the lane-array versions assemble lanes with scalar stores and
//! reload them as vectors, which stalls store forwarding: ~60 cycles per filter), the output
//! transform with an in-register 16×16 transpose, and a GEMM kernel of any height below 12.

// Index loops mirror the matrix formulas.
#![allow(clippy::needless_range_loop)]

use crate::backend::cpu::clamp::Clamp;
use crate::backend::cpu::x86::transpose::transpose16;
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

/// F(2×2): G' applied to one column (a, b, c): four rows (`wino4_math::f2`).
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn g_rows2(a: __m512, b: __m512, c: __m512) -> [__m512; 4] {
    let ac = _mm512_add_ps(a, c);
    [a, _mm512_add_ps(ac, b), _mm512_sub_ps(ac, b), c]
}

/// `filter16` for F(2×2): U' (4×4) of 16 filters for one channel.
///
/// # Safety
/// As `filter16`.
#[target_feature(enable = "avx512f")]
pub unsafe fn filter16_f2(w: *const f32, idx: __m512i, mask: __mmask16, taps: &[usize; 9], dst: *mut f32, xi_stride: usize) {
    let z = _mm512_setzero_ps();
    let g: [__m512; 9] = std::array::from_fn(|t| _mm512_mask_i32gather_ps::<4>(z, mask, idx, w.add(taps[t])));
    let cols: [[__m512; 4]; 3] = std::array::from_fn(|col| g_rows2(g[col], g[3 + col], g[6 + col]));
    for i in 0..4 {
        let r = g_rows2(cols[0][i], cols[1][i], cols[2][i]);
        for (j, v) in r.iter().enumerate() {
            _mm512_storeu_ps(dst.add((4 * i + j) * xi_stride), *v);
        }
    }
}

/// F(2×2): Bᵀ applied to four values.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn b_rows2(d: [__m512; 4]) -> [__m512; 4] {
    let [d0, d1, d2, d3] = d;
    [_mm512_sub_ps(d0, d2), _mm512_add_ps(d1, d2), _mm512_sub_ps(d2, d1), _mm512_sub_ps(d1, d3)]
}

/// `input16_masked` for F(2×2): 4×4 windows (rows and cols: their first four masks).
///
/// # Safety
/// As `input16_masked`.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f")]
pub unsafe fn input16_masked_f2(p: *const f32, idx: __m512i, rows: [__mmask16; 6], cols: [__mmask16; 6], rs: usize, cs: usize, store: __mmask16, dst: *mut f32, xi_stride: usize) {
    let z = _mm512_setzero_ps();
    let mut t = [[z; 4]; 4]; // t[i][col]
    for col in 0..4 {
        let d: [__m512; 4] = std::array::from_fn(|r| _mm512_mask_i32gather_ps::<4>(z, rows[r] & cols[col], idx, p.wrapping_add(r * rs + col * cs)));
        for (i, v) in b_rows2(d).into_iter().enumerate() {
            t[i][col] = v;
        }
    }
    for (i, row) in t.iter().enumerate() {
        for (j, v) in b_rows2(*row).iter().enumerate() {
            _mm512_mask_storeu_ps(dst.add((4 * i + j) * xi_stride), store, *v);
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
/// p + idx[l] + r·rs + s·cs, read where lane l is set in both rows[r] and cols[s] and 0
/// elsewhere (padding, lanes past the last tile); V[ξ] lanes in `store` go to
/// dst + ξ·xi_stride. `p` itself need not point into the tensor (a border tile's window
/// starts before it); only the read elements are dereferenced.
///
/// # Safety
/// AVX-512F; every element read (per the masks) readable; every destination lane writable.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f")]
pub unsafe fn input16_masked(p: *const f32, idx: __m512i, rows: [__mmask16; 6], cols: [__mmask16; 6], rs: usize, cs: usize, store: __mmask16, dst: *mut f32, xi_stride: usize) {
    let z = _mm512_setzero_ps();
    // Bᵀ down each column, then Bᵀ along each row of the result.
    let mut t = [[z; 6]; 6]; // t[i][col]
    for col in 0..6 {
        let d: [__m512; 6] = std::array::from_fn(|r| _mm512_mask_i32gather_ps::<4>(z, rows[r] & cols[col], idx, p.wrapping_add(r * rs + col * cs)));
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

#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn a_rows(m: [__m512; 6]) -> [__m512; 4] {
    let [m0, m1, m2, m3, m4, m5] = m;
    let (s12, d12, s34, d34) = (_mm512_add_ps(m1, m2), _mm512_sub_ps(m1, m2), _mm512_add_ps(m3, m4), _mm512_sub_ps(m3, m4));
    let (c2, c4, c6, c8, c24) = (_mm512_set1_ps(2.0), _mm512_set1_ps(4.0), _mm512_set1_ps(6.0), _mm512_set1_ps(8.0), _mm512_set1_ps(24.0));
    [
        _mm512_add_ps(_mm512_fmadd_ps(c4, s12, _mm512_mul_ps(c6, m0)), s34),
        _mm512_fmadd_ps(c2, d34, _mm512_mul_ps(c4, d12)),
        _mm512_mul_ps(c4, _mm512_add_ps(s12, s34)),
        _mm512_fmadd_ps(c24, m5, _mm512_fmadd_ps(c8, d34, _mm512_mul_ps(c4, d12))),
    ]
}

/// Y = A''ᵀ m A'' / 576 for 16 filters (lanes) of one tile: m[ξ] at m + ξ·ms (16 values);
/// element 4r + s of the result is output (r, s) of the 16 filters.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn output_lanes(m: *const f32, ms: usize) -> [__m512; 16] {
    let mut t = [[_mm512_setzero_ps(); 6]; 4]; // t[i][col]
    for col in 0..6 {
        let r = a_rows(std::array::from_fn(|i| _mm512_loadu_ps(m.add((6 * i + col) * ms))));
        for i in 0..4 {
            t[i][col] = r[i];
        }
    }
    let (r9, n9, s64) = (_mm512_set1_ps(1.0 / 9.0), _mm512_set1_ps(-9.0), _mm512_set1_ps(1.0 / 64.0));
    let mut y = [_mm512_setzero_ps(); 16];
    for i in 0..4 {
        for (j, v) in a_rows(t[i]).into_iter().enumerate() {
            // v / 576: exact 1/64, then /9 with one FMA-residual correction (see `wino4_math`).
            let x = _mm512_mul_ps(v, s64);
            let q = _mm512_mul_ps(x, r9);
            let res = _mm512_fmadd_ps(n9, q, x);
            y[4 * i + j] = _mm512_fmadd_ps(res, r9, q);
        }
    }
    y
}

/// `output_lanes`, with output (r, s) of filter l going to stage + (4l + r)·span + s.
///
/// # Safety
/// AVX-512F; the 36 rows readable; the 64 destinations (4 per row) writable.
#[target_feature(enable = "avx512f")]
pub unsafe fn output16(m: *const f32, ms: usize, stage: *mut f32, span: usize) {
    let y = output_lanes(m, ms);
    // Lanes are filters; the stage wants each filter's 4×4 block as four rows of four.
    let tr = transpose16(y);
    for (l, v) in tr.iter().enumerate() {
        let dst = stage.add(4 * l * span);
        _mm_storeu_ps(dst, _mm512_castps512_ps128(*v));
        _mm_storeu_ps(dst.add(span), _mm512_extractf32x4_ps::<1>(*v));
        _mm_storeu_ps(dst.add(2 * span), _mm512_extractf32x4_ps::<2>(*v));
        _mm_storeu_ps(dst.add(3 * span), _mm512_extractf32x4_ps::<3>(*v));
    }
}

/// `relu`'s clamp on a vector: max(o, 0) with o first (a NaN o gives 0, as the generic
/// formulas do), then min(·, hi).
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn clamp16(o: __m512, relu: Clamp) -> __m512 {
    if relu.on { _mm512_min_ps(_mm512_max_ps(o, _mm512_setzero_ps()), _mm512_set1_ps(relu.hi)) } else { o }
}

/// `output_lanes` stored into an f32 output whose rows are consecutive (NCHW-like): output
/// (r, s) of filter l < `live` at y + l·ks + r·rs + s, plus bias[l] (null: none), then `relu`'s clamp;
/// only `rows` × `cols` outputs of the tile exist. One 16×16 transpose makes each filter's
/// 4×4 block one vector; each of its rows is a masked store.
///
/// # Safety
/// AVX-512F; the 36 rows of m readable; the addressed outputs writable; a non-null bias
/// covers `live` values.
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn output16_rows(m: *const f32, ms: usize, y: *mut f32, ks: usize, rs: usize, rows: usize, cols: usize, live: usize, bias: *const f32, relu: Clamp) {
    let tr = transpose16(output_lanes(m, ms));
    let cmask = (1u16 << cols) - 1;
    for (l, v) in tr.iter().enumerate().take(live) {
        let o = if bias.is_null() { *v } else { _mm512_add_ps(*v, _mm512_set1_ps(*bias.add(l))) };
        let o = clamp16(o, relu);
        for r in 0..rows {
            // Lanes 4r.. of the vector are row r: store them from a base 4r values back.
            let dst = y.add(l * ks + r * rs).wrapping_sub(4 * r);
            _mm512_mask_storeu_ps(dst, cmask << (4 * r), o);
        }
    }
}

/// F(2×2): A''ᵀ applied to four values: two rows (`wino4_math::f2`).
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn a_rows2(m: [__m512; 4]) -> [__m512; 2] {
    let [m0, m1, m2, m3] = m;
    let two = _mm512_set1_ps(2.0);
    [_mm512_add_ps(_mm512_fmadd_ps(two, m0, m1), m2), _mm512_fnmadd_ps(two, m3, _mm512_sub_ps(m1, m2))]
}

/// F(2×2): Y = A''ᵀ m A'' / 4 for 16 filters (lanes) of one tile: m[ξ] at m + ξ·ms (16
/// values, ξ < 16); element 2r + s of the result is output (r, s) of the 16 filters.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn output_lanes_f2(m: *const f32, ms: usize) -> [__m512; 4] {
    let mut t = [[_mm512_setzero_ps(); 4]; 2]; // t[i][col]
    for col in 0..4 {
        let r = a_rows2(std::array::from_fn(|i| _mm512_loadu_ps(m.add((4 * i + col) * ms))));
        t[0][col] = r[0];
        t[1][col] = r[1];
    }
    let quarter = _mm512_set1_ps(0.25);
    let [y00, y01] = a_rows2(t[0]);
    let [y10, y11] = a_rows2(t[1]);
    [y00, y01, y10, y11].map(|v| _mm512_mul_ps(v, quarter))
}

/// `output16_rows` for F(2×2): output (r, s) of filter l < `live` at y + l·ks + r·rs + s, plus
/// bias[l] (null: none), then `relu`'s clamp; only `rows` × `cols` (≤ 2 × 2) outputs exist. Four
/// unpacks and four shuffles put each filter's 2×2 outputs side by side in one 128-bit lane;
/// each row is a masked store.
///
/// # Safety
/// AVX-512F; the 16 rows of m readable; the addressed outputs writable; a non-null bias covers
/// `live` values.
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn output4_rows_f2(m: *const f32, ms: usize, y: *mut f32, ks: usize, rs: usize, rows: usize, cols: usize, live: usize, bias: *const f32, relu: Clamp) {
    let zero = _mm512_setzero_ps();
    let lanes: __mmask16 = if live >= 16 { 0xffff } else { (1u16 << live) - 1 };
    let b = if bias.is_null() { zero } else { _mm512_maskz_loadu_ps(lanes, bias) };
    let [y00, y01, y10, y11] = output_lanes_f2(m, ms).map(|v| {
        let o = _mm512_add_ps(v, b);
        clamp16(o, relu)
    });
    // u[q], 128-bit lane j: (y00, y01, y10, y11) of filter 4j + q.
    let (a0, a1) = (_mm512_unpacklo_ps(y00, y01), _mm512_unpackhi_ps(y00, y01));
    let (b0, b1) = (_mm512_unpacklo_ps(y10, y11), _mm512_unpackhi_ps(y10, y11));
    let u = [_mm512_shuffle_ps::<0x44>(a0, b0), _mm512_shuffle_ps::<0xee>(a0, b0), _mm512_shuffle_ps::<0x44>(a1, b1), _mm512_shuffle_ps::<0xee>(a1, b1)];
    let cmask = (1u16 << cols) - 1;
    for l in 0..live {
        let (q, j) = (l % 4, l / 4);
        for r in 0..rows {
            // Lanes 4j + 2r.. of u[q] are row r of filter l: store them from a base that far back.
            let dst = y.add(l * ks + r * rs).wrapping_sub(4 * j + 2 * r);
            _mm512_mask_storeu_ps(dst, cmask << (4 * j + 2 * r), u[q]);
        }
    }
}

/// `output16_channels_last` for F(2×2): output (r, s) of the 16 filters (the `mask` lanes) at
/// y + r·rs + s·cs.
///
/// # Safety
/// As `output16_channels_last`, with the 16 rows of m readable.
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn output4_channels_last_f2(m: *const f32, ms: usize, y: *mut f32, rs: usize, cs: usize, rows: usize, cols: usize, mask: __mmask16, bias: *const f32, relu: Clamp) {
    store_channels_last(&output_lanes_f2(m, ms), 2, y, rs, cs, rows, cols, mask, bias, relu)
}

/// A tile's outputs `v` (element side·r + s is output (r, s) of the 16 filters) through bias
/// and the clamp to an NHWC-like y, as `output16_channels_last` describes.
///
/// # Safety
/// As `output16_channels_last`.
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn store_channels_last(v: &[__m512], side: usize, y: *mut f32, rs: usize, cs: usize, rows: usize, cols: usize, mask: __mmask16, bias: *const f32, relu: Clamp) {
    let zero = _mm512_setzero_ps();
    let b = if bias.is_null() { zero } else { _mm512_maskz_loadu_ps(mask, bias) };
    for r in 0..rows {
        for c in 0..cols {
            let o = _mm512_add_ps(v[side * r + c], b);
            let o = clamp16(o, relu);
            _mm512_mask_storeu_ps(y.add(r * rs + c * cs), mask, o);
        }
    }
}

/// `output_lanes` stored into an f32 output whose channels are consecutive (NHWC): output
/// (r, s) of the 16 filters (the `mask` lanes) at y + r·rs + s·cs, plus `bias` (null: none),
/// then `relu`'s clamp; only `rows` × `cols` outputs of the tile exist. No transpose: the lanes are
/// already the channel run of one position.
///
/// # Safety
/// AVX-512F; the 36 rows of m readable; the addressed outputs writable; a non-null bias
/// covers the mask lanes.
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn output16_channels_last(m: *const f32, ms: usize, y: *mut f32, rs: usize, cs: usize, rows: usize, cols: usize, mask: __mmask16, bias: *const f32, relu: Clamp) {
    store_channels_last(&output_lanes(m, ms), 4, y, rs, cs, rows, cols, mask, bias, relu)
}

/// C[R×32] = Σ_p A[p][0..R] ⊗ B[p][0..32] for the packed 12×32 panels of the AVX-512 GEMM
/// kernel (A rows at a stride of 12), computing and storing only the first R rows: the last
/// tile panel of a small layer is mostly padding (16 tiles = 12 + 4).
#[target_feature(enable = "avx512f")]
unsafe fn rows_kernel<const R: usize, const PF: bool>(kc: usize, a: *const f32, b: *const f32, c: *mut f32, ldc: usize, accumulate: bool) {
    let mut acc = [[_mm512_setzero_ps(); 2]; R];
    for p in 0..kc {
        let b0 = _mm512_loadu_ps(b.add(p * 32));
        let b1 = _mm512_loadu_ps(b.add(p * 32 + 16));
        if PF {
            crate::backend::cpu::gemm::kernel::x86::prefetch_b(b.wrapping_add(p * 32));
        }
        let ap = a.add(p * 12);
        for (i, row) in acc.iter_mut().enumerate() {
            let av = _mm512_set1_ps(*ap.add(i));
            row[0] = _mm512_fmadd_ps(av, b0, row[0]);
            row[1] = _mm512_fmadd_ps(av, b1, row[1]);
        }
    }
    for (i, row) in acc.iter().enumerate() {
        for (h, v) in row.iter().enumerate() {
            let out = c.add(i * ldc + 16 * h);
            let v = if accumulate { _mm512_add_ps(*v, _mm512_loadu_ps(out)) } else { *v };
            _mm512_storeu_ps(out, v);
        }
    }
}

/// `rows_kernel` for 1 ≤ rows ≤ 11 (12 is the full kernel); `prefetch`: B streams from memory
/// (as `Kernel::fb`).
///
/// # Safety
/// AVX-512F; panels of kc·12 and kc·32 values; the rows×32 tile of C writable.
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm_rows(rows: usize, kc: usize, a: *const f32, b: *const f32, c: *mut f32, ldc: usize, accumulate: bool, prefetch: bool) {
    macro_rules! by_rows {
        ($($r:literal)*) => {
            match (rows, prefetch) {
                $(($r, false) => rows_kernel::<$r, false>(kc, a, b, c, ldc, accumulate),
                  ($r, true) => rows_kernel::<$r, true>(kc, a, b, c, ldc, accumulate),)*
                _ => unreachable!("wino4 GEMM rows {rows}"),
            }
        };
    }
    by_rows!(1 2 3 4 5 6 7 8 9 10 11)
}
