//! AVX-512 pieces of the FFT convolution (`fft_conv.rs`).

use std::arch::x86_64::*;

/// The s×s windows of 16 lanes (tiles) of one f32 channel, as lane arrays: `a[(r·s + q)·16 + l]`
/// = `x[idx[l] + r·rs + q·cs]` where row r and column q of lane l's window lie inside the image
/// (bit l of `rows[r]` and `cols[q]`), else 0. One masked gather per window element.
///
/// # Safety
/// AVX-512F must be available; every unmasked offset must address an element of x, and fit
/// in i32 together with (s − 1)·(rs + cs); `a` must hold s·s·16 values.
#[target_feature(enable = "avx512f")]
pub unsafe fn gather_window16(x: *const f32, idx: &[i32; 16], rows: &[u16], cols: &[u16], rs: usize, cs: usize, s: usize, a: *mut f32) {
    let base = _mm512_loadu_si512(idx.as_ptr() as *const _);
    let zero = _mm512_setzero_ps();
    for r in 0..s {
        let row = _mm512_add_epi32(base, _mm512_set1_epi32((r * rs) as i32));
        let dst = a.add(r * s * 16);
        if rows[r] == 0 {
            for q in 0..s {
                _mm512_storeu_ps(dst.add(q * 16), zero);
            }
            continue;
        }
        for q in 0..s {
            let m = rows[r] & cols[q];
            let at = _mm512_add_epi32(row, _mm512_set1_epi32((q * cs) as i32));
            let v = _mm512_mask_i32gather_ps::<4>(zero, m, at, x);
            _mm512_storeu_ps(dst.add(q * 16), v);
        }
    }
}

/// `fft_conv::store_parts` for 16 lanes with streaming stores (U is written once and is
/// larger than the caches; ordinary stores read each line first): for (offset, imaginary,
/// scale) in `rows`, bin b's real or imaginary parts times scale go to dst + b·stride +
/// offset. Ends with a store fence.
///
/// # Safety
/// AVX-512F must be available; every destination must be 64-byte aligned and hold 16 values
/// written by no one else.
#[target_feature(enable = "avx512f")]
pub unsafe fn store_parts16_stream(re: &[[f32; 16]], im: &[[f32; 16]], dst: *mut f32, stride: usize, rows: &[(usize, bool, f32)]) {
    for (b, (r, i)) in re.iter().zip(im).enumerate() {
        for &(off, imag, scale) in rows {
            let v = _mm512_loadu_ps(if imag { i.as_ptr() } else { r.as_ptr() });
            _mm512_stream_ps(dst.add(b * stride + off), _mm512_mul_ps(v, _mm512_set1_ps(scale)));
        }
    }
    _mm_sfence();
}
