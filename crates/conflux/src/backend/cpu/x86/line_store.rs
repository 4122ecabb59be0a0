//! Stores of a short run of f32 (up to 32 values) in pieces that never cross a 64-byte line.
//!
//! NCHW output rows of an odd width (55×55, 7×7) start anywhere in a line, so a run stored
//! with plain or masked vector stores splits lines at almost every store; a masked store
//! whose live lanes all lie in one line still counts as split when its 64 bytes do not. Here
//! each piece is permuted into place and stored at its line's start, which made the AMX 1×1
//! NCHW layers of odd width faster; the AVX-512 1×1 driver's 14-position runs measured slower
//! so (its 16×16 transposes already keep the permute port busy), so it stores them as they
//! are. Microbenchmark and A/Bs: bench/results/2026-11-25-cpu-session17.md.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// The first `n` (≤ 16·V) values of `v` (lanes of v[0], then of v[1]) stored at `y`, each
/// store inside one line.
///
/// # Safety
/// AVX-512F; `y .. y + n` writable and 4-byte aligned.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
pub unsafe fn store<const V: usize>(y: *mut f32, v: [__m512; V], n: usize) {
    let live = |n: usize| -> __mmask16 { if n >= 16 { 0xffff } else { (1u16 << n) - 1 } };
    let m = (y as usize / 4) % 16;
    if m == 0 {
        for (j, v) in v.iter().enumerate() {
            let mask = live(n.saturating_sub(16 * j));
            if mask != 0 {
                _mm512_mask_storeu_ps(y.add(16 * j), mask, *v);
            }
        }
        return;
    }
    if m + n <= 16 {
        // All in y's own line.
        _mm512_mask_storeu_ps(y, live(n), v[0]);
        return;
    }
    // Lane l of line j (starting at y − m + 16j) holds value 16j + l − m.
    let idx = _mm512_add_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32(16 - m as i32));
    let zero = _mm512_setzero_ps();
    let line = y.sub(m);
    for j in 0..=V {
        // Values present in line j: lanes l with 0 ≤ 16j + l − m < n.
        let lo = m.saturating_sub(16 * j);
        let hi = (n + m).saturating_sub(16 * j).min(16);
        if hi <= lo {
            continue;
        }
        let (below, above) = (if j == 0 { zero } else { v[j - 1] }, if j < V { v[j] } else { zero });
        _mm512_mask_storeu_ps(line.add(16 * j), live(hi) & !live(lo), _mm512_permutex2var_ps(below, idx, above));
    }
}
