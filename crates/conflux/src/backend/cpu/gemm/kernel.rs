//! Register-blocked micro-kernels: C[MR×NR] (+)= Σ_p A_panel[p][0..MR] ⊗ B_panel[p][0..NR].
//!
//! Shapes: AVX-512 12×32 (24 zmm accumulators; 8×32 for some Winograd panel counts, see
//! `avx512_8`), AVX2+FMA 6×16 (12 ymm), portable 4×8; picked once at run time (`is_x86_feature_detected!`). The x86 kernels use `std::arch` intrinsics:
//! the same loops written with `[f32; N]` arrays under `#[target_feature]` spilled their
//! accumulators and ran many times slower (bench/results/2026-11-27-history-from-status.md,
//! gemm/kernel.rs). The portable kernel is the auto-vectorized array version.

use crate::backend::cpu::clamp::Clamp;
use std::sync::OnceLock;

/// How far ahead (values: 12 rows of 32) the B-prefetching kernels fetch. A sweep on a
/// Winograd layer found 128–512 values equal and far larger distances losing most of the gain
/// (bench/results/2026-11-27-history-from-status.md, gemm/kernel.rs).
pub const B_PREFETCH_AHEAD: usize = 384;

/// `kernel(kc, a, b, c, ldc, accumulate)`: a points to kc·MR packed values, b to kc·NR, c to
/// an MR×NR tile with row stride ldc (always fully writable: callers pad their C buffers).
pub type KernelFn = unsafe fn(usize, *const f32, *const f32, *mut f32, usize, bool);

/// Where a finished tile goes when it is written straight from the accumulators: `rows` ×
/// `cols` (≤ MR × NR) values at `ptr`, row stride `ld`, each row r plus `bias[r]` (when
/// `bias` is not null), then `relu`'s clamp (NaN becomes 0, like the generic formulas).
#[derive(Clone, Copy, Debug)]
pub struct TileOut {
    pub ptr: *mut f32,
    pub ld: usize,
    pub bias: *const f32,
    pub relu: Clamp,
    pub rows: usize,
    pub cols: usize,
}

/// `kernel(kc, a, lda, b, c, ldc, accumulate, out)`: as `KernelFn` (A in place with row stride
/// `lda` for the in-place variant, `lda` unused otherwise), but the result, plus C's partial
/// sum when `accumulate`, goes through `out` instead of back to C.
pub type KernelFnE = unsafe fn(usize, *const f32, usize, *const f32, *const f32, usize, bool, &TileOut);

/// A micro-kernel and its tile shape.
#[derive(Clone, Copy, Debug)]
pub struct Kernel {
    pub name: &'static str,
    pub mr: usize,
    pub nr: usize,
    pub f: KernelFn,
    /// `f` prefetching B ahead, for a B panel's first pass when it streams from memory
    /// (Winograd at small batches reads each transformed filter panel once or twice, and the
    /// hardware prefetchers alone leave the kernel waiting on memory). Later passes find B in
    /// cache, where prefetching measured slower (bench/results/2026-11-25-cpu-session14.md).
    /// Kernels without a variant repeat `f`.
    pub fb: KernelFn,
    /// The same tile reading A in place (`kernel_a.rs`).
    pub fa: super::kernel_a::KernelFnA,
    /// Packed-A and in-place-A tiles that store through a `TileOut` (AVX-512 only; the GEMM
    /// driver stores other kernels' tiles with `store_tile_out`).
    pub fe: Option<(KernelFnE, KernelFnE)>,
}

/// `out` ← the C tile at `c` (row stride `ldc`), through `out`'s bias and ReLU: the portable
/// version of the AVX-512 kernels' register epilogue.
///
/// # Safety
/// `c` holds out.rows × out.cols readable values; `out` addresses as many writable ones.
/// (The bias is added after the K sum, as in the AVX-512 kernels.)
pub unsafe fn store_tile_out(c: *const f32, ldc: usize, out: &TileOut) {
    for r in 0..out.rows {
        let b = if out.bias.is_null() { 0.0 } else { *out.bias.add(r) };
        for j in 0..out.cols {
            let v = *c.add(r * ldc + j) + b;
            *out.ptr.add(r * out.ld + j) = out.relu.apply(v);
        }
    }
}


#[inline(always)]
unsafe fn body<const MR: usize, const NR: usize, const FMA: bool>(
    kc: usize,
    mut a: *const f32,
    mut b: *const f32,
    c: *mut f32,
    ldc: usize,
    accumulate: bool,
) {
    let mut acc = [[0f32; NR]; MR];
    for _ in 0..kc {
        let bv: [f32; NR] = std::ptr::read_unaligned(b as *const [f32; NR]);
        for (i, row) in acc.iter_mut().enumerate() {
            let ai = *a.add(i);
            for j in 0..NR {
                // With FMA enabled `mul_add` is one instruction; without it, it would be a
                // libm call, so the portable kernel multiplies and adds.
                row[j] = if FMA { ai.mul_add(bv[j], row[j]) } else { row[j] + ai * bv[j] };
            }
        }
        a = a.add(MR);
        b = b.add(NR);
    }
    for (i, row) in acc.iter().enumerate() {
        let out = c.add(i * ldc);
        for (j, v) in row.iter().enumerate() {
            if accumulate {
                *out.add(j) += *v;
            } else {
                *out.add(j) = *v;
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(in crate::backend::cpu) mod x86 {
    use std::arch::x86_64::*;

    /// Write an accumulator tile of two zmm per row to C (row stride `ldc`), adding C's old
    /// values when `accumulate`. Shared by the packed and in-place (`kernel_a`) kernels.
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub unsafe fn store_tile_512(acc: &[[__m512; 2]], c: *mut f32, ldc: usize, accumulate: bool) {
        for (i, row) in acc.iter().enumerate() {
            for (h, v) in row.iter().enumerate() {
                let out = c.add(i * ldc + 16 * h);
                let v = if accumulate { _mm512_add_ps(*v, _mm512_loadu_ps(out)) } else { *v };
                _mm512_storeu_ps(out, v);
            }
        }
    }

    /// The same for two ymm per row.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    pub unsafe fn store_tile_256(acc: &[[__m256; 2]], c: *mut f32, ldc: usize, accumulate: bool) {
        for (i, row) in acc.iter().enumerate() {
            for (h, v) in row.iter().enumerate() {
                let out = c.add(i * ldc + 8 * h);
                let v = if accumulate { _mm256_add_ps(*v, _mm256_loadu_ps(out)) } else { *v };
                _mm256_storeu_ps(out, v);
            }
        }
    }

    /// Write an accumulator tile through `out` (`TileOut`): plus C's partial sum when
    /// `accumulate`, plus the row's bias, ReLU, then masked stores of the live columns. Rows
    /// past `out.rows` are not written.
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub unsafe fn store_tile_512_out(acc: &[[__m512; 2]], c: *const f32, ldc: usize, accumulate: bool, out: &super::TileOut) {
        let live = |h: usize| -> __mmask16 {
            let n = out.cols.saturating_sub(16 * h).min(16);
            if n == 16 { 0xffff } else { (1u16 << n) - 1 }
        };
        let masks = [live(0), live(1)];
        let (zero, hi) = (_mm512_setzero_ps(), _mm512_set1_ps(out.relu.hi));
        for (i, row) in acc.iter().enumerate().take(out.rows) {
            for (h, v) in row.iter().enumerate() {
                // The K sum first, then the bias: the order of the tile-buffer path.
                let mut v = if accumulate { _mm512_add_ps(*v, _mm512_loadu_ps(c.add(i * ldc + 16 * h))) } else { *v };
                if !out.bias.is_null() {
                    v = _mm512_add_ps(v, _mm512_set1_ps(*out.bias.add(i)));
                }
                if out.relu.on {
                    // v first: a NaN v gives 0.
                    v = _mm512_min_ps(_mm512_max_ps(v, zero), hi);
                }
                _mm512_mask_storeu_ps(out.ptr.add(i * out.ld + 16 * h), masks[h], v);
            }
        }
    }

    /// MR×32 accumulators (MR ≤ 12): two B vectors, A broadcast from memory. `PF`: prefetch B
    /// `B_PREFETCH_AHEAD` values ahead (see `Kernel::fb`).
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn acc_avx512<const MR: usize, const PF: bool>(kc: usize, a: *const f32, b: *const f32) -> [[__m512; 2]; MR] {
        let mut acc = [[_mm512_setzero_ps(); 2]; MR];
        for p in 0..kc {
            let b0 = _mm512_loadu_ps(b.add(p * 32));
            let b1 = _mm512_loadu_ps(b.add(p * 32 + 16));
            if PF {
                prefetch_b(b.wrapping_add(p * 32));
            }
            let ap = a.add(p * MR);
            for (i, row) in acc.iter_mut().enumerate() {
                let av = _mm512_set1_ps(*ap.add(i));
                row[0] = _mm512_fmadd_ps(av, b0, row[0]);
                row[1] = _mm512_fmadd_ps(av, b1, row[1]);
            }
        }
        acc
    }

    /// Both lines of the 32-value B row `B_PREFETCH_AHEAD` values past `row` (never
    /// dereferenced: prefetches do not fault).
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub unsafe fn prefetch_b(row: *const f32) {
        _mm_prefetch::<_MM_HINT_T0>(row.wrapping_add(super::B_PREFETCH_AHEAD) as *const i8);
        _mm_prefetch::<_MM_HINT_T0>(row.wrapping_add(super::B_PREFETCH_AHEAD + 16) as *const i8);
    }

    /// `k_avx512` prefetching B (`Kernel::fb`).
    #[target_feature(enable = "avx512f")]
    pub unsafe fn k_avx512_pf(kc: usize, a: *const f32, b: *const f32, c: *mut f32, ldc: usize, accumulate: bool) {
        store_tile_512(&acc_avx512::<12, true>(kc, a, b), c, ldc, accumulate);
    }

    /// 12×32: 24 zmm accumulators.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn k_avx512(kc: usize, a: *const f32, b: *const f32, c: *mut f32, ldc: usize, accumulate: bool) {
        store_tile_512(&acc_avx512::<12, false>(kc, a, b), c, ldc, accumulate);
    }

    /// The same, stored through a `TileOut` (`lda` unused: A is packed).
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn k_avx512_out(kc: usize, a: *const f32, _lda: usize, b: *const f32, c: *const f32, ldc: usize, accumulate: bool, out: &super::TileOut) {
        store_tile_512_out(&acc_avx512::<12, false>(kc, a, b), c, ldc, accumulate, out);
    }

    /// 8×32: 16 zmm accumulators, still twice the FMA pipeline's depth (see `avx512_8`).
    #[target_feature(enable = "avx512f")]
    pub unsafe fn k_avx512_8(kc: usize, a: *const f32, b: *const f32, c: *mut f32, ldc: usize, accumulate: bool) {
        store_tile_512(&acc_avx512::<8, false>(kc, a, b), c, ldc, accumulate);
    }

    /// `k_avx512_8` prefetching B.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn k_avx512_8_pf(kc: usize, a: *const f32, b: *const f32, c: *mut f32, ldc: usize, accumulate: bool) {
        store_tile_512(&acc_avx512::<8, true>(kc, a, b), c, ldc, accumulate);
    }

    /// `k_avx512_8` stored through a `TileOut`.
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn k_avx512_8_out(kc: usize, a: *const f32, _lda: usize, b: *const f32, c: *const f32, ldc: usize, accumulate: bool, out: &super::TileOut) {
        store_tile_512_out(&acc_avx512::<8, false>(kc, a, b), c, ldc, accumulate, out);
    }

    /// 6×16: 12 ymm accumulators (16 ymm registers without AVX-512).
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn k_avx2(kc: usize, a: *const f32, b: *const f32, c: *mut f32, ldc: usize, accumulate: bool) {
        const MR: usize = 6;
        let mut acc = [[_mm256_setzero_ps(); 2]; MR];
        for p in 0..kc {
            let b0 = _mm256_loadu_ps(b.add(p * 16));
            let b1 = _mm256_loadu_ps(b.add(p * 16 + 8));
            let ap = a.add(p * MR);
            for (i, row) in acc.iter_mut().enumerate() {
                let av = _mm256_broadcast_ss(&*ap.add(i));
                row[0] = _mm256_fmadd_ps(av, b0, row[0]);
                row[1] = _mm256_fmadd_ps(av, b1, row[1]);
            }
        }
        store_tile_256(&acc, c, ldc, accumulate);
    }
}

unsafe fn k_portable(kc: usize, a: *const f32, b: *const f32, c: *mut f32, ldc: usize, acc: bool) {
    body::<4, 8, false>(kc, a, b, c, ldc, acc)
}

/// The AVX-512 kernel with 8 rows instead of 12, where this CPU has AVX-512. Not the GEMMs'
/// choice: the Winograd GEMMs take it where 12-row panels would end in a panel of ≤ 4 rows
/// (`wino4::panel_kernel`), since a kernel of ≤ 4 rows has ≤ 8 accumulators, too few to keep
/// both FMA pipes busy through their latency.
pub fn avx512_8() -> Option<Kernel> {
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("fma") {
        return Some(Kernel {
            name: "avx512_8",
            mr: 8,
            nr: 32,
            f: x86::k_avx512_8,
            fb: x86::k_avx512_8_pf,
            fa: super::kernel_a::x86::k_avx512_8_a,
            fe: Some((x86::k_avx512_8_out, super::kernel_a::x86::k_avx512_8_a_out)),
        });
    }
    None
}

/// Every kernel this CPU can run, best first (tests run them all).
pub fn available() -> Vec<Kernel> {
    let mut v = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("fma") {
            v.push(Kernel {
                name: "avx512",
                mr: 12,
                nr: 32,
                f: x86::k_avx512,
                fb: x86::k_avx512_pf,
                fa: super::kernel_a::x86::k_avx512_a,
                fe: Some((x86::k_avx512_out, super::kernel_a::x86::k_avx512_a_out)),
            });
            v.extend(avx512_8());
        }
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            v.push(Kernel { name: "avx2", mr: 6, nr: 16, f: x86::k_avx2, fb: x86::k_avx2, fa: super::kernel_a::x86::k_avx2_a, fe: None });
        }
    }
    v.push(Kernel { name: "portable", mr: 4, nr: 8, f: k_portable, fb: k_portable, fa: super::kernel_a::k_portable_a, fe: None });
    v
}

/// The best kernel for this CPU (detected once).
pub fn best() -> Kernel {
    static BEST: OnceLock<Kernel> = OnceLock::new();
    *BEST.get_or_init(|| available()[0])
}
