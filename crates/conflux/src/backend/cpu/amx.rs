//! Intel AMX tiles for f32 GEMMs at f32 accuracy ("bf16×6").
//!
//! AMX multiplies bf16 tiles into f32 accumulators, 16× the multiply rate of AVX-512 f32 FMAs
//! on this machine (`bench_cpu kernel`). An f32 value splits exactly into three bf16 parts,
//! v = hi + mid + lo (8 significant bits each), so a product a·b is the sum of nine part
//! products; the six kept here (hi·hi, hi·mid, mid·hi, hi·lo, lo·hi, mid·mid) leave out terms
//! below 2⁻²¹ of |a·b|, under f32's own rounding of a long sum. The accumulation is f32, as in
//! the AVX-512 kernels. Small integers are exact (their mid and lo parts are 0). Differences
//! from f32 FMAs: an infinite operand gives NaN (∞ times a zero part), and parts below
//! bf16's normal range (|v| < 2⁻¹¹⁰) count as 0.
//!
//! Operands: A as three row-major planes of bf16 (`pack_rows`), B as three planes of VNNI rows
//! (`vnni_rows`: row r holds k = 2r and 2r + 1 side by side for 32 columns, 128 bytes).
//! `block_32x32` runs one 32 × 32 block of C over all six part pairs.

#[cfg(target_arch = "x86_64")]
use std::arch::{asm, x86_64::*};

/// The part pairs (A part, B part) whose products are summed.
const PAIRS: [(usize, usize); 6] = [(0, 0), (0, 1), (1, 0), (0, 2), (2, 0), (1, 1)];

/// Bytes of one VNNI row of B: 32 columns × 2 bf16.
pub const VNNI_ROW: usize = 128;

/// Whether this process may use AMX bf16 tiles: the CPU has them, Linux granted the tile
/// state, AVX-512 is there for packing, and `CONFLUX_CPU_AMX` is not `0`.
pub fn available() -> bool {
    static OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OK.get_or_init(|| std::env::var("CONFLUX_CPU_AMX").map_or(true, |v| v != "0") && detect())
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn detect() -> bool {
    if !std::is_x86_feature_detected!("avx512f") {
        return false;
    }
    let leaf7 = (__cpuid(0).eax >= 7).then(|| __cpuid_count(7, 0));
    let Some(l7) = leaf7 else { return false };
    let (tile, bf16) = (l7.edx >> 24 & 1 == 1, l7.edx >> 22 & 1 == 1);
    if !tile || !bf16 {
        return false;
    }
    // arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA): Linux enables the 8 KiB tile state
    // per process on request.
    let ret: i64;
    // SAFETY: a plain system call; it reads and writes no memory of ours.
    unsafe {
        asm!("syscall", inlateout("rax") 158i64 => ret, in("rdi") 0x1023i64, in("rsi") 18i64, lateout("rcx") _, lateout("r11") _, options(nostack));
    }
    ret == 0
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
fn detect() -> bool { false }

/// The tile configuration (palette 1: eight tiles of 16 rows × 64 bytes) for the life of
/// the value; the tiles are released when it is dropped. One per task: the configuration is
/// per thread.
pub struct Tiles(());

#[repr(C, align(64))]
struct Config {
    palette: u8,
    start_row: u8,
    reserved: [u8; 14],
    colsb: [u16; 16],
    rows: [u8; 16],
}

impl Tiles {
    /// # Safety
    /// `available()` must have returned true.
    pub unsafe fn configure() -> Tiles {
        let mut cfg = Config { palette: 1, start_row: 0, reserved: [0; 14], colsb: [0; 16], rows: [0; 16] };
        for t in 0..8 {
            cfg.colsb[t] = 64;
            cfg.rows[t] = 16;
        }
        #[cfg(target_arch = "x86_64")]
        asm!("ldtilecfg [{0}]", in(reg) &cfg as *const Config, options(nostack, readonly));
        Tiles(())
    }

    /// C (32 × 32 f32 at `c`, rows of 32 values) = Σ over `PAIRS` of A_i · B_j: A_i is 32 rows
    /// × `kd` bf16 at `a[i]` (row stride `lda` bytes), B_j `kd`/2 VNNI rows at `b[j]`.
    ///
    /// # Safety
    /// `kd` is a multiple of 32; the planes hold what is described; `c` has 1024 writable f32.
    pub unsafe fn block_32x32(&self, a: [*const u16; 3], lda: usize, b: [*const u16; 3], kd: usize, c: *mut f32) {
        #[cfg(target_arch = "x86_64")]
        {
            asm!("tilezero tmm0", "tilezero tmm1", "tilezero tmm2", "tilezero tmm3", options(nostack, nomem));
            for (i, j) in PAIRS {
                let (mut ap, mut bp) = (a[i] as *const u8, b[j] as *const u8);
                for _ in 0..kd / 32 {
                    // Two A tiles (rows 0–15, 16–31) × two B tiles (columns 0–15, 16–31).
                    asm!(
                        "tileloadd tmm4, [{a0} + {lda}*1]",
                        "tileloadd tmm6, [{b0} + {ldb}*1]",
                        "tdpbf16ps tmm0, tmm4, tmm6",
                        "tileloadd tmm7, [{b1} + {ldb}*1]",
                        "tdpbf16ps tmm1, tmm4, tmm7",
                        "tileloadd tmm5, [{a1} + {lda}*1]",
                        "tdpbf16ps tmm2, tmm5, tmm6",
                        "tdpbf16ps tmm3, tmm5, tmm7",
                        a0 = in(reg) ap,
                        a1 = in(reg) ap.wrapping_add(16 * lda),
                        lda = in(reg) lda,
                        b0 = in(reg) bp,
                        b1 = in(reg) bp.wrapping_add(64),
                        ldb = in(reg) VNNI_ROW,
                        options(nostack, readonly),
                    );
                    ap = ap.add(64);
                    bp = bp.add(16 * VNNI_ROW);
                }
            }
            asm!(
                "tilestored [{c0} + {s}*1], tmm0",
                "tilestored [{c1} + {s}*1], tmm1",
                "tilestored [{c2} + {s}*1], tmm2",
                "tilestored [{c3} + {s}*1], tmm3",
                c0 = in(reg) c,
                c1 = in(reg) c.wrapping_add(16),
                c2 = in(reg) c.wrapping_add(16 * 32),
                c3 = in(reg) c.wrapping_add(16 * 32 + 16),
                s = in(reg) 128usize,
                options(nostack),
            );
        }
    }
}

impl Drop for Tiles {
    fn drop(&mut self) {
        // SAFETY: releases the tile state configured in `configure`.
        #[cfg(target_arch = "x86_64")]
        unsafe {
            asm!("tilerelease", options(nostack, nomem))
        };
    }
}

/// The three bf16 parts of `v` (bit patterns): hi + mid + lo == v exactly for finite v
/// (each part truncated to 8 significant bits of what is left); an infinite or NaN v gives
/// (v, 0, 0) with a NaN kept a NaN. The scalar statement of `split16`.
pub fn split(v: f32) -> [u16; 3] {
    if !v.is_finite() {
        return [if v.is_nan() { 0x7fc0 } else { (v.to_bits() >> 16) as u16 }, 0, 0];
    }
    let top = |x: f32| f32::from_bits(x.to_bits() & 0xffff_0000);
    let hi = top(v);
    let r = v - hi;
    let mid = top(r);
    let lo = r - mid;
    [(hi.to_bits() >> 16) as u16, (mid.to_bits() >> 16) as u16, (lo.to_bits() >> 16) as u16]
}

/// `split` of 16 lanes, each part in the high half of its 32-bit lane (low half zero).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn split16(v: __m512) -> [__m512i; 3] {
    let top = _mm512_set1_epi32(0xffff_0000u32 as i32);
    let exp = _mm512_set1_epi32(0x7f80_0000);
    let vi = _mm512_castps_si512(v);
    let hi = _mm512_and_si512(vi, top);
    let r = _mm512_sub_ps(v, _mm512_castsi512_ps(hi));
    let mid = _mm512_and_si512(_mm512_castps_si512(r), top);
    let lo = _mm512_castps_si512(_mm512_sub_ps(r, _mm512_castsi512_ps(mid)));
    let finite = _mm512_cmpneq_epi32_mask(_mm512_and_si512(vi, exp), exp);
    let nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v);
    let hi = _mm512_mask_mov_epi32(hi, nan, _mm512_set1_epi32(0x7fc0_0000));
    [hi, _mm512_maskz_mov_epi32(finite, mid), _mm512_maskz_mov_epi32(finite, _mm512_and_si512(lo, top))]
}

/// Row `src` (`len` f32) split into the three planes at `dst[i]` (`len` bf16 each, then
/// zeros up to `padded`).
///
/// # Safety
/// AVX-512F; `src` has `len` readable values, each `dst[i]` `padded` ≥ `len` writable ones.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
pub unsafe fn split_row(src: *const f32, len: usize, dst: [*mut u16; 3], padded: usize) {
    for c in (0..padded).step_by(16) {
        let live = len.saturating_sub(c).min(16);
        let m: __mmask16 = if live == 16 { 0xffff } else { (1u16 << live) - 1 };
        let parts = split16(_mm512_maskz_loadu_ps(m, src.wrapping_add(c)));
        let n = (padded - c).min(16);
        let store: __mmask16 = if n == 16 { 0xffff } else { (1u16 << n) - 1 };
        for (i, part) in parts.iter().enumerate() {
            let halves = _mm512_cvtepi32_epi16(_mm512_srli_epi32::<16>(*part));
            _mm256_mask_storeu_epi16(dst[i].add(c) as *mut i16, store, halves);
        }
    }
}

/// Two rows of B (`k0`, `k1`: 32 columns each, `live` of them read, the rest and a null row
/// zero) as one VNNI row in each plane (`dst[j]`, 128 bytes).
///
/// # Safety
/// AVX-512F; the non-null rows have `live` ≤ 32 readable values; each `dst[j]` 64 writable u16.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
pub unsafe fn vnni_rows(k0: *const f32, k1: *const f32, live: usize, dst: [*mut u16; 3]) {
    for h in 0..2 {
        let n = live.saturating_sub(16 * h).min(16);
        let m: __mmask16 = if n == 16 { 0xffff } else { (1u16 << n) - 1 };
        let load = |row: *const f32| if row.is_null() || m == 0 { _mm512_setzero_ps() } else { _mm512_maskz_loadu_ps(m, row.add(16 * h)) };
        let (p0, p1) = (split16(load(k0)), split16(load(k1)));
        for j in 0..3 {
            // Lane l: row k0's part in the low half, row k1's in the high half.
            let pair = _mm512_or_si512(_mm512_srli_epi32::<16>(p0[j]), p1[j]);
            _mm512_storeu_si512(dst[j].add(32 * h) as *mut __m512i, pair);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_is_exact_and_keeps_nan() {
        let join = |p: [u16; 3]| p.iter().map(|b| f32::from_bits((*b as u32) << 16) as f64).sum::<f64>();
        let mut s = 0x1234_5678u32;
        for _ in 0..10_000 {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let v = f32::from_bits(s & 0xbfff_ffff) * if s & 1 == 1 { 1e20 } else { 1e-20 };
            if v.is_finite() && v.abs() > 1e-30 {
                assert_eq!(join(split(v)), v as f64, "{v:e}");
            }
        }
        assert_eq!(split(3.0), [0x4040, 0, 0]);
        assert!(f32::from_bits((split(f32::NAN)[0] as u32) << 16).is_nan());
        assert_eq!(split(f32::INFINITY), [0x7f80, 0, 0]);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn vector_split_matches_scalar() {
        if !std::is_x86_feature_detected!("avx512f") {
            return;
        }
        let vals: Vec<f32> = (0..37).map(|i| if i == 5 { f32::NAN } else if i == 6 { f32::NEG_INFINITY } else { (i as f32 * 0.377).sin() * 1e3 }).collect();
        let mut planes = vec![vec![0xffffu16; 48]; 3];
        let dst = [planes[0].as_mut_ptr(), planes[1].as_mut_ptr(), planes[2].as_mut_ptr()];
        // SAFETY: 37 values read, 48 written per plane.
        unsafe { split_row(vals.as_ptr(), 37, dst, 48) };
        for (c, v) in vals.iter().enumerate() {
            let want = split(*v);
            for i in 0..3 {
                assert_eq!(planes[i][c], want[i], "value {c} part {i}");
            }
        }
        assert!(planes.iter().all(|p| p[37..].iter().all(|b| *b == 0)));
    }
}
