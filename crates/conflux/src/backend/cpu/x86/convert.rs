//! f16 chunk conversions with F16C, 8 lanes per instruction in one loop. `half`'s slice
//! conversions make a call per 8 elements (and detect the feature on every call), which
//! made f16 tensors far slower than f32 ones (bench/results/2026-11-27-history-from-status.md,
//! convert_x86.rs). Same instruction and rounding (nearest even) as
//! `half`'s scalar F16C path, so results are identical to the per-element path.

use half::f16;
use std::arch::x86_64::*;

/// Whether the CPU can run these functions (cached by std after the first call).
#[inline]
pub fn available() -> bool {
    std::is_x86_feature_detected!("f16c") && std::is_x86_feature_detected!("avx")
}

/// dst[i] = f32(src[i]).
///
/// # Safety
/// `available()` must be true; `src` must point to `dst.len()` readable f16 values.
#[target_feature(enable = "avx,f16c")]
pub unsafe fn f16_to_f32(src: *const f16, dst: &mut [f32]) {
    let (n, d) = (dst.len(), dst.as_mut_ptr());
    let mut i = 0;
    while i + 8 <= n {
        _mm256_storeu_ps(d.add(i), _mm256_cvtph_ps(_mm_loadu_si128(src.add(i) as *const __m128i)));
        i += 8;
    }
    for j in i..n {
        *d.add(j) = (*src.add(j)).to_f32();
    }
}

/// dst[i] = f16(src[i]), rounded to nearest even.
///
/// # Safety
/// `available()` must be true; `dst` must point to `src.len()` writable f16 values.
#[target_feature(enable = "avx,f16c")]
pub unsafe fn f32_to_f16(src: &[f32], dst: *mut f16) {
    let (n, s) = (src.len(), src.as_ptr());
    let mut i = 0;
    while i + 8 <= n {
        let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm256_loadu_ps(s.add(i)));
        _mm_storeu_si128(dst.add(i) as *mut __m128i, h);
        i += 8;
    }
    for j in i..n {
        *dst.add(j) = f16::from_f32(*s.add(j));
    }
}
