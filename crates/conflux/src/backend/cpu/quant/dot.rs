//! Dot products of one filter row with four patch rows, the inner loop of the quantized
//! convolution. int8: sign-extended to i16 and multiplied pairwise into exact i32 sums
//! (`_mm256_madd_epi16`: |x·w| ≤ 2^14, so a pair sum fits i16·i16 → i32 without loss). f32
//! (fp8 inputs decoded on load): eight partial sums per row, added in one fixed order on every
//! CPU, so results do not depend on the instruction set. Rows are padded with zeros to
//! `INT8_STEP` / `F32_STEP` elements.
//!
//! CPUs with AVX-512 VNNI take `vnni.rs` instead (16 filter rows per block, `vpdpbusd`).
//! AMX-INT8 tiles (`tdpbssd`, s8 × s8 straight into i32) would be the next such kernel; the
//! exact i32 result is the same.

/// Patch and filter rows of int8 are padded to a multiple of this many elements.
pub const INT8_STEP: usize = 16;
/// ... and of f32 to a multiple of this many.
pub const F32_STEP: usize = 8;

/// Σ w·p over four patch rows, exact in i32.
pub fn dot4_i8(w: &[i8], p: [&[i8]; 4]) -> [i32; 4] {
    debug_assert!(w.len().is_multiple_of(INT8_STEP) && p.iter().all(|r| r.len() == w.len()));
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: AVX2 was detected; every row holds w.len() elements, a multiple of 16.
        return unsafe { dot4_avx2(w, p) };
    }
    let mut acc = [0i32; 4];
    for (j, row) in p.iter().enumerate() {
        acc[j] = w.iter().zip(row.iter()).map(|(&a, &b)| a as i32 * b as i32).sum();
    }
    acc
}

#[cfg(target_arch = "x86_64")]
fn has_avx2() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| is_x86_feature_detected!("avx2"))
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn dot4_avx2(w: &[i8], p: [&[i8]; 4]) -> [i32; 4] {
    use std::arch::x86_64::*;
    let mut acc = [_mm256_setzero_si256(); 4];
    let mut i = 0;
    while i < w.len() {
        let wv = _mm256_cvtepi8_epi16(_mm_loadu_si128(w.as_ptr().add(i) as *const __m128i));
        for j in 0..4 {
            let pv = _mm256_cvtepi8_epi16(_mm_loadu_si128(p[j].as_ptr().add(i) as *const __m128i));
            acc[j] = _mm256_add_epi32(acc[j], _mm256_madd_epi16(wv, pv));
        }
        i += INT8_STEP;
    }
    let mut out = [0i32; 4];
    for j in 0..4 {
        let s = _mm_add_epi32(_mm256_castsi256_si128(acc[j]), _mm256_extracti128_si256(acc[j], 1));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b01_00_11_10));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b10_11_00_01));
        out[j] = _mm_cvtsi128_si32(s);
    }
    out
}

/// Σ w·p over four patch rows in f32: lane l of each row sums elements ≡ l (mod 8), then the
/// lanes are added pairwise (0+4, 1+5, 2+6, 3+7, then 0+2, 1+3, then 0+1).
pub fn dot4_f32(w: &[f32], p: [&[f32]; 4]) -> [f32; 4] {
    #[inline(always)]
    fn body(w: &[f32], p: [&[f32]; 4]) -> [f32; 4] {
        let mut acc = [[0f32; F32_STEP]; 4];
        for (i, wc) in w.chunks_exact(F32_STEP).enumerate() {
            for j in 0..4 {
                let pc = &p[j][i * F32_STEP..(i + 1) * F32_STEP];
                for l in 0..F32_STEP {
                    acc[j][l] += wc[l] * pc[l];
                }
            }
        }
        acc.map(|a| {
            let b = [a[0] + a[4], a[1] + a[5], a[2] + a[6], a[3] + a[7]];
            (b[0] + b[2]) + (b[1] + b[3])
        })
    }
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        #[target_feature(enable = "avx2")]
        unsafe fn wide(w: &[f32], p: [&[f32]; 4]) -> [f32; 4] { body(w, p) }
        // SAFETY: AVX2 was detected. No FMA is enabled, so the sums round as in `body`.
        return unsafe { wide(w, p) };
    }
    body(w, p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int8_dot_is_exact_at_the_extremes() {
        let n = 4096;
        let w = vec![-128i8; n];
        let rows: Vec<Vec<i8>> = vec![vec![-128; n], vec![127; n], (0..n).map(|i| (i % 256) as u8 as i8).collect(), vec![0; n]];
        let got = dot4_i8(&w, [&rows[0], &rows[1], &rows[2], &rows[3]]);
        for (j, r) in rows.iter().enumerate() {
            let want: i64 = w.iter().zip(r).map(|(&a, &b)| a as i64 * b as i64).sum();
            assert_eq!(got[j] as i64, want, "row {j}");
        }
    }
}
