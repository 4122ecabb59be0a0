//! Micro-kernels that read A in place from a row-major f32 matrix (row stride `lda`) instead
//! of from a packed panel. Convolution weights in KCRS order are such a matrix, and packing
//! them on every call (MIOpen lets the caller change the weights between calls, so a packed
//! copy cannot be kept without re-reading them all) is a large share of a layer whose weights
//! outweigh its activations (e.g. 2048→512 1×1 at 7×7; bench/results/2026-11-21-cpu-conv-2.md).
//! Same tiles and C contract as
//! `kernel.rs`; row i of the tile is read at a + i·lda + p.

/// `kernel(kc, a, lda, b, c, ldc, accumulate)`.
pub type KernelFnA = unsafe fn(usize, *const f32, usize, *const f32, *mut f32, usize, bool);

pub(super) unsafe fn k_portable_a(kc: usize, a: *const f32, lda: usize, b: *const f32, c: *mut f32, ldc: usize, accumulate: bool) {
    const MR: usize = 4;
    const NR: usize = 8;
    let mut acc = [[0f32; NR]; MR];
    for p in 0..kc {
        let bv: [f32; NR] = std::ptr::read_unaligned(b.add(p * NR) as *const [f32; NR]);
        for (i, row) in acc.iter_mut().enumerate() {
            let ai = *a.add(i * lda + p);
            for j in 0..NR {
                row[j] += ai * bv[j];
            }
        }
    }
    for (i, row) in acc.iter().enumerate() {
        for (j, v) in row.iter().enumerate() {
            let out = c.add(i * ldc + j);
            *out = if accumulate { *out + v } else { *v };
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(super) mod x86 {
    use super::super::kernel::x86::{store_tile_256, store_tile_512, store_tile_512_out};
    use super::super::kernel::TileOut;
    use std::arch::x86_64::*;

    /// 12×32.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn k_avx512_a(kc: usize, a: *const f32, lda: usize, b: *const f32, c: *mut f32, ldc: usize, accumulate: bool) {
        store_tile_512(&acc_avx512_a::<12>(kc, a, lda, b), c, ldc, accumulate);
    }

    /// The same, stored through a `TileOut`.
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn k_avx512_a_out(kc: usize, a: *const f32, lda: usize, b: *const f32, c: *const f32, ldc: usize, accumulate: bool, out: &TileOut) {
        store_tile_512_out(&acc_avx512_a::<12>(kc, a, lda, b), c, ldc, accumulate, out);
    }

    /// 8×32.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn k_avx512_8_a(kc: usize, a: *const f32, lda: usize, b: *const f32, c: *mut f32, ldc: usize, accumulate: bool) {
        store_tile_512(&acc_avx512_a::<8>(kc, a, lda, b), c, ldc, accumulate);
    }

    /// The same, stored through a `TileOut`.
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn k_avx512_8_a_out(kc: usize, a: *const f32, lda: usize, b: *const f32, c: *const f32, ldc: usize, accumulate: bool, out: &TileOut) {
        store_tile_512_out(&acc_avx512_a::<8>(kc, a, lda, b), c, ldc, accumulate, out);
    }

    /// MR×32 accumulators (MR ≤ 12). Rows are addressed from base pointers every third row
    /// (0, 3, 6, 9) plus 0/1/2·lda, which x86 addressing expresses without extra registers per
    /// row.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn acc_avx512_a<const MR: usize>(kc: usize, a: *const f32, lda: usize, b: *const f32) -> [[__m512; 2]; MR] {
        let mut acc = [[_mm512_setzero_ps(); 2]; MR];
        let bases = [a, a.wrapping_add(3 * lda), a.wrapping_add(6 * lda), a.wrapping_add(9 * lda)];
        for p in 0..kc {
            let b0 = _mm512_loadu_ps(b.add(p * 32));
            let b1 = _mm512_loadu_ps(b.add(p * 32 + 16));
            for (q, base) in bases.iter().enumerate() {
                for r in 0..3 {
                    if 3 * q + r < MR {
                        let av = _mm512_set1_ps(*base.add(r * lda + p));
                        let row = &mut acc[3 * q + r];
                        row[0] = _mm512_fmadd_ps(av, b0, row[0]);
                        row[1] = _mm512_fmadd_ps(av, b1, row[1]);
                    }
                }
            }
        }
        acc
    }

    /// 6×16.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn k_avx2_a(kc: usize, a: *const f32, lda: usize, b: *const f32, c: *mut f32, ldc: usize, accumulate: bool) {
        let mut acc = [[_mm256_setzero_ps(); 2]; 6];
        let bases = [a, a.add(3 * lda)];
        for p in 0..kc {
            let b0 = _mm256_loadu_ps(b.add(p * 16));
            let b1 = _mm256_loadu_ps(b.add(p * 16 + 8));
            for (q, base) in bases.iter().enumerate() {
                for r in 0..3 {
                    let av = _mm256_broadcast_ss(&*base.add(r * lda + p));
                    let row = &mut acc[3 * q + r];
                    row[0] = _mm256_fmadd_ps(av, b0, row[0]);
                    row[1] = _mm256_fmadd_ps(av, b1, row[1]);
                }
            }
        }
        store_tile_256(&acc, c, ldc, accumulate);
    }
}
