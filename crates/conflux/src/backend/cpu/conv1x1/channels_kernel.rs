//! Micro-tiles of the 1×1 NCHW forward convolution (`conv1x1.rs`): `rows` consecutive spatial
//! positions × 32 output channels, the channels in the vector lanes.
//!
//! Operands: x read in place, element (position i, input channel p) at `a + p·cs + i·ps`: an
//! NCHW image has ps = 1 (the `rows` values of one channel are consecutive, so they are
//! broadcast from consecutive addresses), an NHWC image cs = 1 (each position's channels are
//! one row, read front to back); W packed as 32-channel panels, `b[p·32 + j]`.
//!
//! A tile accumulates one K block. `first`: start from zero, else from the partial sum at `c`
//! (row stride `ldc`, one row per position). Then either back to `c`, or, on the last K block,
//! through an `Out`: plus the bias of each channel, ReLU, and written to y: NCHW y transposed
//! (row i of the tile is column `i` of y's channel rows), NHWC y row by row.

/// Where the last K block of a tile goes: y at (channel k0, position hw0), channel stride `ldy`,
/// position stride `yp` (one of them 1); `bias` at k0 (or null); only the first `cols` of the
/// 32 channels exist.
#[derive(Clone, Copy, Debug)]
pub struct Out {
    pub y: *mut f32,
    pub ldy: usize,
    pub yp: usize,
    pub bias: *const f32,
    pub relu: crate::backend::cpu::clamp::Clamp,
    pub cols: usize,
}

/// Channels per tile (two AVX-512 vectors).
pub const NR: usize = 32;
/// Spatial positions per full tile: 14 × 2 accumulators = 28 of the 32 zmm registers.
pub const MR: usize = 14;

/// `tile(rows, kc, a, cs, ps, b, c, ldc, first, out)` with `rows` in 1..=MR and cs = 1 or ps = 1.
pub type TileFn = unsafe fn(usize, usize, *const f32, usize, usize, *const f32, *mut f32, usize, bool, Option<&Out>);

/// `tile_taps(rows, kc, a, cs, toff, b, out)`: a whole tile summed over filter taps (direct
/// convolution, `conv_taps.rs`): position i, channel p of tap t at `a + toff[t] + p·cs + i`
/// (positions consecutive), W rows [tap][channel][32] from b; the result through `out`.
pub type TapsFn = unsafe fn(usize, usize, *const f32, usize, &[usize], *const f32, &Out);

/// The finished value of channel j at one position: bias, then the clamp (NaN becomes 0, like
/// the generic formulas).
#[inline(always)]
fn finish(v: f32, o: &Out, j: usize) -> f32 {
    // SAFETY: j < o.cols, and a non-null bias covers the tile's live channels.
    let v = if o.bias.is_null() { v } else { v + unsafe { *o.bias.add(j) } };
    o.relu.apply(v)
}

/// Plain loops: machines without AVX-512, and the tests' second opinion.
///
/// # Safety
/// `a` covers `rows` positions (stride `ps`) × kc channels (stride `cs`); `b` kc·32 values;
/// `c` a rows × 32 tile with row stride `ldc` (read unless `first`, written unless `out`);
/// `out` addresses `cols` channels × `rows` positions of writable values.
#[allow(clippy::too_many_arguments)]
pub unsafe fn tile_portable(rows: usize, kc: usize, a: *const f32, cs: usize, ps: usize, b: *const f32, c: *mut f32, ldc: usize, first: bool, out: Option<&Out>) {
    let mut acc = [[0f32; NR]; MR];
    for p in 0..kc {
        let bp = b.add(p * NR);
        for (i, row) in acc.iter_mut().enumerate().take(rows) {
            let av = *a.add(p * cs + i * ps);
            for (j, v) in row.iter_mut().enumerate() {
                *v += av * *bp.add(j);
            }
        }
    }
    for (i, row) in acc.iter().enumerate().take(rows) {
        for (j, v) in row.iter().enumerate() {
            let v = if first { *v } else { *v + *c.add(i * ldc + j) };
            match out {
                Some(o) if j < o.cols => *o.y.add(j * o.ldy + i * o.yp) = finish(v, o, j),
                Some(_) => {}
                None => *c.add(i * ldc + j) = v,
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub mod x86 {
    use crate::backend::cpu::x86::transpose::transpose16;
    use super::{Out, MR, NR};
    use std::arch::x86_64::*;

    /// `R` × 32 accumulators over kc channels, x positions consecutive (NCHW: ps = 1).
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn acc<const R: usize, const PF: bool>(kc: usize, a: *const f32, cs: usize, b: *const f32) -> [[__m512; 2]; R] {
        let mut acc = [[_mm512_setzero_ps(); 2]; R];
        acc_into::<R, PF>(kc, a, cs, b, &mut acc);
        acc
    }

    /// `acc` added onto `acc`.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn acc_into<const R: usize, const PF: bool>(kc: usize, a: *const f32, cs: usize, b: *const f32, acc: &mut [[__m512; 2]; R]) {
        let (mut ap, mut bp) = (a, b);
        for _ in 0..kc {
            let b0 = _mm512_loadu_ps(bp);
            let b1 = _mm512_loadu_ps(bp.add(16));
            if PF {
                crate::backend::cpu::gemm::kernel::x86::prefetch_b(bp);
            }
            // The next tile's positions of this channel (x is read in place, one line per
            // channel per tile: too many streams for the hardware prefetchers).
            _mm_prefetch::<_MM_HINT_T0>(ap.add(32) as *const i8);
            for (i, row) in acc.iter_mut().enumerate() {
                let av = _mm512_set1_ps(*ap.add(i));
                row[0] = _mm512_fmadd_ps(av, b0, row[0]);
                row[1] = _mm512_fmadd_ps(av, b1, row[1]);
            }
            ap = ap.add(cs);
            bp = bp.add(NR);
        }
    }

    /// The same with each position's channels consecutive (NHWC: cs = 1, positions at stride
    /// ps): `R` rows read front to back from one pointer each.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn acc_rows<const R: usize, const PF: bool>(kc: usize, a: *const f32, ps: usize, b: *const f32) -> [[__m512; 2]; R] {
        let mut acc = [[_mm512_setzero_ps(); 2]; R];
        let rows: [*const f32; R] = std::array::from_fn(|i| a.wrapping_add(i * ps));
        for p in 0..kc {
            let b0 = _mm512_loadu_ps(b.add(p * NR));
            let b1 = _mm512_loadu_ps(b.add(p * NR + 16));
            if PF {
                crate::backend::cpu::gemm::kernel::x86::prefetch_b(b.wrapping_add(p * NR));
            }
            for i in 0..R {
                let av = _mm512_set1_ps(*rows[i].add(p));
                acc[i][0] = _mm512_fmadd_ps(av, b0, acc[i][0]);
                acc[i][1] = _mm512_fmadd_ps(av, b1, acc[i][1]);
            }
        }
        acc
    }

    /// One tile of `R` positions (see the module comment).
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn tile<const R: usize, const PF: bool>(kc: usize, a: *const f32, cs: usize, ps: usize, b: *const f32, c: *mut f32, ldc: usize, first: bool, out: Option<&Out>) {
        let acc = if ps == 1 { acc::<R, PF>(kc, a, cs, b) } else { acc_rows::<R, PF>(kc, a, ps, b) };
        finish_tile::<R>(acc, c, ldc, first, out)
    }

    /// A tile summed over filter taps (`TapsFn`): the accumulators stay in registers from the
    /// first tap to the last.
    #[target_feature(enable = "avx512f")]
    unsafe fn tile_taps<const R: usize>(kc: usize, a: *const f32, cs: usize, toff: &[usize], b: *const f32, out: &Out) {
        let mut acc = [[_mm512_setzero_ps(); 2]; R];
        for (t, &o) in toff.iter().enumerate() {
            acc_into::<R, false>(kc, a.add(o), cs, b.add(t * kc * NR), &mut acc);
        }
        finish_tile::<R>(acc, std::ptr::null_mut(), 0, true, Some(out))
    }

    /// `tile_taps` for rows in 1..=MR.
    ///
    /// # Safety
    /// As `TapsFn`; AVX-512F must be available.
    pub unsafe fn tile_taps_avx512(rows: usize, kc: usize, a: *const f32, cs: usize, toff: &[usize], b: *const f32, out: &Out) {
        macro_rules! by_rows {
            ($($r:literal)*) => {
                match rows {
                    $($r => tile_taps::<$r>(kc, a, cs, toff, b, out),)*
                    _ => unreachable!("conv1x1 taps tile of {rows} rows"),
                }
            };
        }
        by_rows!(1 2 3 4 5 6 7 8 9 10 11 12 13 14)
    }

    /// The end of a tile: plus C's partial sum unless `first`, then back to C or through `out`.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn finish_tile<const R: usize>(mut acc: [[__m512; 2]; R], c: *mut f32, ldc: usize, first: bool, out: Option<&Out>) {
        if !first {
            for (i, row) in acc.iter_mut().enumerate() {
                for (h, v) in row.iter_mut().enumerate() {
                    *v = _mm512_add_ps(*v, _mm512_loadu_ps(c.add(i * ldc + 16 * h)));
                }
            }
        }
        let Some(o) = out else {
            for (i, row) in acc.iter().enumerate() {
                for (h, v) in row.iter().enumerate() {
                    _mm512_storeu_ps(c.add(i * ldc + 16 * h), *v);
                }
            }
            return;
        };
        let live = |h: usize| -> __mmask16 {
            let n = o.cols.saturating_sub(16 * h).min(16);
            if n == 16 { 0xffff } else { (1u16 << n) - 1 }
        };
        let (zero, hi) = (_mm512_setzero_ps(), _mm512_set1_ps(o.relu.hi));
        if o.ldy == 1 {
            // NHWC y: each position's channels are a row; bias and ReLU on the accumulators and
            // two masked stores per position.
            let bias: [__m512; 2] = std::array::from_fn(|h| if o.bias.is_null() { zero } else { _mm512_maskz_loadu_ps(live(h), o.bias.add(16 * h)) });
            for (i, row) in acc.iter().enumerate() {
                for (h, v) in row.iter().enumerate() {
                    let v = _mm512_add_ps(*v, bias[h]);
                    // v first: a NaN v gives 0.
                    let v = if o.relu.on { _mm512_min_ps(_mm512_max_ps(v, zero), hi) } else { v };
                    _mm512_mask_storeu_ps(o.y.add(i * o.yp + 16 * h), live(h), v);
                }
            }
            return;
        }
        // Each 16-channel half: bias and ReLU on the accumulators (channels in the lanes), then a
        // 16×16 transpose so each channel's R positions are one masked store. (Scatters
        // measured much slower on layers of few channels:
        // bench/results/2026-11-22-cpu-gemm1x1.md.)
        // R ≤ MR = 14 < 16.
        let rows_mask: __mmask16 = (1u16 << R) - 1;
        for h in 0..2 {
            let mask = live(h);
            if mask == 0 {
                break;
            }
            let bias = if o.bias.is_null() { zero } else { _mm512_maskz_loadu_ps(mask, o.bias.add(16 * h)) };
            let r: [__m512; 16] = std::array::from_fn(|i| {
                if i >= R {
                    return zero;
                }
                let v = _mm512_add_ps(acc[i][h], bias);
                // v first: a NaN v gives 0.
                if o.relu.on { _mm512_min_ps(_mm512_max_ps(v, zero), hi) } else { v }
            });
            for (l, col) in transpose16(r).iter().enumerate() {
                if mask >> l & 1 == 1 {
                    _mm512_mask_storeu_ps(o.y.add((16 * h + l) * o.ldy), rows_mask, *col);
                }
            }
        }
    }

    /// dst[c·32 + j] = src[j·lds + c] for 16 channels c and 32 filters j: two 16×16 transposes.
    ///
    /// # Safety
    /// AVX-512F; src covers 32 rows of 16 values at stride lds; dst 16·32 writable values.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn transpose_16x32(src: *const f32, lds: usize, dst: *mut f32) {
        for half in 0..2 {
            let r: [__m512; 16] = std::array::from_fn(|j| _mm512_loadu_ps(src.add((16 * half + j) * lds)));
            for (c, col) in transpose16(r).iter().enumerate() {
                _mm512_storeu_ps(dst.add(c * 32 + 16 * half), *col);
            }
        }
    }

    /// `tile::<rows>` for rows in 1..=MR.
    ///
    /// # Safety
    /// As `tile_portable`; AVX-512F must be available.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn tile_avx512(rows: usize, kc: usize, a: *const f32, cs: usize, ps: usize, b: *const f32, c: *mut f32, ldc: usize, first: bool, out: Option<&Out>) {
        by_rows::<false>(rows, kc, a, cs, ps, b, c, ldc, first, out)
    }

    /// `tile_avx512` prefetching the W panel ahead (`Kernels::tile_pf`).
    ///
    /// # Safety
    /// As `tile_avx512`.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn tile_avx512_pf(rows: usize, kc: usize, a: *const f32, cs: usize, ps: usize, b: *const f32, c: *mut f32, ldc: usize, first: bool, out: Option<&Out>) {
        by_rows::<true>(rows, kc, a, cs, ps, b, c, ldc, first, out)
    }

    #[allow(clippy::too_many_arguments)]
    unsafe fn by_rows<const PF: bool>(rows: usize, kc: usize, a: *const f32, cs: usize, ps: usize, b: *const f32, c: *mut f32, ldc: usize, first: bool, out: Option<&Out>) {
        macro_rules! by_rows {
            ($($r:literal)*) => {
                match rows {
                    $($r => tile::<$r, PF>(kc, a, cs, ps, b, c, ldc, first, out),)*
                    _ => unreachable!("conv1x1 tile of {rows} rows"),
                }
            };
        }
        const _: () = assert!(MR == 14);
        by_rows!(1 2 3 4 5 6 7 8 9 10 11 12 13 14)
    }
}

/// `transpose(src, lds, dst)`: dst[c·32 + j] = src[j·lds + c] for c < 16, j < 32.
pub type Transpose = unsafe fn(*const f32, usize, *mut f32);

/// The tile and, where there is one, the vectorized W transpose of one instruction set.
#[derive(Clone, Copy, Debug)]
pub struct Kernels {
    pub name: &'static str,
    pub tile: TileFn,
    /// `tile` prefetching the W panel ahead: for the first tile over a panel when the
    /// panels stream from memory (as `gemm::Kernel::fb`).
    pub tile_pf: TileFn,
    pub transpose: Option<Transpose>,
    /// The tile summed over filter taps, where there is one.
    pub tile_taps: Option<TapsFn>,
}

/// The kernels for this CPU. AVX-512 only; elsewhere the generic GEMM's kernels are faster
/// than `tile_portable`, so the solver declines.
pub fn best() -> Option<Kernels> {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx512f") {
        return Some(Kernels { name: "avx512", tile: x86::tile_avx512, tile_pf: x86::tile_avx512_pf, transpose: Some(x86::transpose_16x32), tile_taps: Some(x86::tile_taps_avx512) });
    }
    None
}

/// Every set this CPU can run (tests run them all).
pub fn available() -> Vec<Kernels> {
    let mut v: Vec<Kernels> = best().into_iter().collect();
    v.push(Kernels { name: "portable", tile: tile_portable, tile_pf: tile_portable, transpose: None, tile_taps: None });
    v
}
