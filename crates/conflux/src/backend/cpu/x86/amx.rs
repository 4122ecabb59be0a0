//! Intel AMX tiles for f32 GEMMs at f32 accuracy ("bf16×6").
//!
//! AMX multiplies bf16 tiles into f32 accumulators many times faster than AVX-512 f32 FMAs
//! (bench/results/2026-11-25-cpu-amx.md), enough that six bf16 products per f32 product still
//! win. An f32 value splits exactly into three bf16 parts,
//! v = hi + mid + lo (8 significant bits each), so a product a·b is the sum of nine part
//! products; the six kept here (hi·hi, hi·mid, mid·hi, hi·lo, lo·hi, mid·mid) leave out terms
//! below 2⁻²¹ of |a·b|, under f32's own rounding of a long sum. The accumulation is f32, as in
//! the AVX-512 kernels. Small integers are exact (their mid and lo parts are 0). Differences
//! from f32 FMAs: an infinite operand gives NaN (∞ times a zero part), and parts below
//! bf16's normal range (|v| < 2⁻¹¹⁰) count as 0.
//!
//! Operands are stored as whole tiles of 16 rows × 64 bytes, 1 KiB each, per step of 32
//! along the reduction (k): A, 32 rows, as [part][rows 0–15 | rows 16–31][32 k]
//! (`split_chunk` per 16 values of a row); B, 32 columns, as [part][columns 0–15 | 16–31][16
//! VNNI rows: k = 2r and 2r + 1 side by side] (`vnni_tile`). A step is three parts × two
//! tiles: `STEP` values, 64-byte aligned (`skip_to_64`).
//! `Tiles::block_32x32` runs one 32 × 32 block of C over the steps, `Tiles::block_half` one of
//! at most 16 positions (half the multiplies).

#[cfg(target_arch = "x86_64")]
use std::arch::{asm, x86_64::*};

/// One phase of `Tiles::block_32x32`: the four C tiles += the two A tiles × the two B tiles.
#[cfg(target_arch = "x86_64")]
macro_rules! four_products {
    () => {
        "tdpbf16ps tmm0, tmm4, tmm6\ntdpbf16ps tmm1, tmm4, tmm7\ntdpbf16ps tmm2, tmm5, tmm6\ntdpbf16ps tmm3, tmm5, tmm7"
    };
}

/// u16 values of one tile (16 rows × 64 bytes).
pub const TILE: usize = 512;
/// u16 values a buffer needs beyond its operands to start them on a 64-byte boundary.
pub const ALIGN_SLACK: usize = 32;

/// u16 values from `p` to its next 64-byte boundary: operand tiles must start on one, or
/// every 64-byte tile row spans two cache lines and the kernel slows down markedly
/// (bench/results/2026-11-25-cpu-amx.md).
pub fn skip_to_64(p: *const u16) -> usize { (64 - p as usize % 64) % 64 / 2 }

/// u16 values of one operand step: three parts × two tiles.
pub const STEP: usize = 6 * TILE;

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

    /// C (32 × 32 f32 at `c`, rows of 32 values) += Σ over the six part pairs of A_i · B_j,
    /// C starting from zero when `fresh`, over `steps` steps of A at `a` and B at `b` (the
    /// layouts of the module comment). Per step, 14 tile loads feed 24 multiplies: hi·lo,
    /// hi·mid, hi·hi with A's hi tiles kept, then lo·hi and mid·hi with B's hi tiles kept,
    /// then mid·mid. (Ordering each phase's products so the tile loaded next is freed after
    /// two of them gained nothing: bench/results/2026-11-25-cpu-amx.md.)
    ///
    /// # Safety
    /// The operands hold `steps` steps each; `c` has 1024 f32, readable unless `fresh`, and
    /// writable.
    pub unsafe fn block_32x32(&self, a: *const u16, b: *const u16, steps: usize, c: *mut f32, fresh: bool) {
        #[cfg(target_arch = "x86_64")]
        {
            let (c0, c1, c2, c3, s) = (c, c.wrapping_add(16), c.wrapping_add(16 * 32), c.wrapping_add(16 * 32 + 16), 128usize);
            if fresh {
                asm!("tilezero tmm0", "tilezero tmm1", "tilezero tmm2", "tilezero tmm3", options(nostack, nomem));
            } else {
                asm!(
                    "tileloadd tmm0, [{c0} + {s}*1]",
                    "tileloadd tmm1, [{c1} + {s}*1]",
                    "tileloadd tmm2, [{c2} + {s}*1]",
                    "tileloadd tmm3, [{c3} + {s}*1]",
                    c0 = in(reg) c0, c1 = in(reg) c1, c2 = in(reg) c2, c3 = in(reg) c3, s = in(reg) s,
                    options(nostack, readonly),
                );
            }
            for step in 0..steps {
                // Byte offsets in a step: part i, tile t at (2i + t) KiB.
                asm!(
                    "tileloadd tmm4, [{a} + {ld}*1]",
                    "tileloadd tmm5, [{a} + {ld}*1 + 1024]",
                    "tileloadd tmm6, [{b} + {ld}*1 + 4096]",
                    "tileloadd tmm7, [{b} + {ld}*1 + 5120]",
                    four_products!(),
                    "tileloadd tmm6, [{b} + {ld}*1 + 2048]",
                    "tileloadd tmm7, [{b} + {ld}*1 + 3072]",
                    four_products!(),
                    "tileloadd tmm6, [{b} + {ld}*1]",
                    "tileloadd tmm7, [{b} + {ld}*1 + 1024]",
                    four_products!(),
                    "tileloadd tmm4, [{a} + {ld}*1 + 4096]",
                    "tileloadd tmm5, [{a} + {ld}*1 + 5120]",
                    four_products!(),
                    "tileloadd tmm4, [{a} + {ld}*1 + 2048]",
                    "tileloadd tmm5, [{a} + {ld}*1 + 3072]",
                    four_products!(),
                    "tileloadd tmm6, [{b} + {ld}*1 + 2048]",
                    "tileloadd tmm7, [{b} + {ld}*1 + 3072]",
                    four_products!(),
                    a = in(reg) a.add(step * STEP),
                    b = in(reg) b.add(step * STEP),
                    ld = in(reg) 64usize,
                    options(nostack, readonly),
                );
            }
            store_c(c);
        }
    }

    /// `block_32x32` (fresh) for a block of at most 16 positions: only the first position
    /// tile of x's operand is multiplied, half the tile multiplies. NCHW-like (`x_is_a` false):
    /// x is B, its first column tile (C columns 0–15); NHWC-like: x is A, its first row tile
    /// (C rows 0–15). The other half of C is stored as zeros, so all of `c` is written. Per
    /// step, 9 tile loads (NHWC-like 11) feed 12 multiplies, the six part pairs as in
    /// `block_32x32`.
    ///
    /// # Safety
    /// As `block_32x32`; `c` writable.
    pub unsafe fn block_half(&self, a: *const u16, b: *const u16, steps: usize, c: *mut f32, x_is_a: bool) {
        #[cfg(target_arch = "x86_64")]
        {
            asm!("tilezero tmm0", "tilezero tmm1", "tilezero tmm2", "tilezero tmm3", options(nostack, nomem));
            for step in 0..steps {
                let (a, b) = (a.add(step * STEP), b.add(step * STEP));
                if x_is_a {
                    // C rows 0–15 (tmm0, tmm1) += A's row tile 0 × both B column tiles.
                    asm!(
                        "tileloadd tmm4, [{a} + {ld}*1]",
                        "tileloadd tmm6, [{b} + {ld}*1 + 4096]",
                        "tileloadd tmm7, [{b} + {ld}*1 + 5120]",
                        "tdpbf16ps tmm0, tmm4, tmm6\ntdpbf16ps tmm1, tmm4, tmm7",
                        "tileloadd tmm6, [{b} + {ld}*1 + 2048]",
                        "tileloadd tmm7, [{b} + {ld}*1 + 3072]",
                        "tdpbf16ps tmm0, tmm4, tmm6\ntdpbf16ps tmm1, tmm4, tmm7",
                        "tileloadd tmm6, [{b} + {ld}*1]",
                        "tileloadd tmm7, [{b} + {ld}*1 + 1024]",
                        "tdpbf16ps tmm0, tmm4, tmm6\ntdpbf16ps tmm1, tmm4, tmm7",
                        "tileloadd tmm4, [{a} + {ld}*1 + 4096]",
                        "tdpbf16ps tmm0, tmm4, tmm6\ntdpbf16ps tmm1, tmm4, tmm7",
                        "tileloadd tmm5, [{a} + {ld}*1 + 2048]",
                        "tdpbf16ps tmm0, tmm5, tmm6\ntdpbf16ps tmm1, tmm5, tmm7",
                        "tileloadd tmm6, [{b} + {ld}*1 + 2048]",
                        "tileloadd tmm7, [{b} + {ld}*1 + 3072]",
                        "tdpbf16ps tmm0, tmm5, tmm6\ntdpbf16ps tmm1, tmm5, tmm7",
                        a = in(reg) a,
                        b = in(reg) b,
                        ld = in(reg) 64usize,
                        options(nostack, readonly),
                    );
                } else {
                    // C columns 0–15 (tmm0, tmm2) += both A row tiles × B's column tile 0; B's
                    // mid part stays in tmm7 for mid·mid.
                    asm!(
                        "tileloadd tmm4, [{a} + {ld}*1]",
                        "tileloadd tmm5, [{a} + {ld}*1 + 1024]",
                        "tileloadd tmm6, [{b} + {ld}*1 + 4096]",
                        "tdpbf16ps tmm0, tmm4, tmm6\ntdpbf16ps tmm2, tmm5, tmm6",
                        "tileloadd tmm7, [{b} + {ld}*1 + 2048]",
                        "tdpbf16ps tmm0, tmm4, tmm7\ntdpbf16ps tmm2, tmm5, tmm7",
                        "tileloadd tmm6, [{b} + {ld}*1]",
                        "tdpbf16ps tmm0, tmm4, tmm6\ntdpbf16ps tmm2, tmm5, tmm6",
                        "tileloadd tmm4, [{a} + {ld}*1 + 4096]",
                        "tileloadd tmm5, [{a} + {ld}*1 + 5120]",
                        "tdpbf16ps tmm0, tmm4, tmm6\ntdpbf16ps tmm2, tmm5, tmm6",
                        "tileloadd tmm4, [{a} + {ld}*1 + 2048]",
                        "tileloadd tmm5, [{a} + {ld}*1 + 3072]",
                        "tdpbf16ps tmm0, tmm4, tmm6\ntdpbf16ps tmm2, tmm5, tmm6",
                        "tdpbf16ps tmm0, tmm4, tmm7\ntdpbf16ps tmm2, tmm5, tmm7",
                        a = in(reg) a,
                        b = in(reg) b,
                        ld = in(reg) 64usize,
                        options(nostack, readonly),
                    );
                }
            }
            store_c(c);
        }
    }
}

/// Stores C (tmm0–3) as the 32 × 32 f32 block at `c`, rows of 32 values: tmm0 rows 0–15 ×
/// columns 0–15, tmm1 columns 16–31, tmm2 and tmm3 rows 16–31.
///
/// # Safety
/// Tiles configured (`Tiles::configure`); `c` has 1024 writable f32.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn store_c(c: *mut f32) {
    let (c0, c1, c2, c3, s) = (c, c.wrapping_add(16), c.wrapping_add(16 * 32), c.wrapping_add(16 * 32 + 16), 128usize);
    asm!(
        "tilestored [{c0} + {s}*1], tmm0",
        "tilestored [{c1} + {s}*1], tmm1",
        "tilestored [{c2} + {s}*1], tmm2",
        "tilestored [{c3} + {s}*1], tmm3",
        c0 = in(reg) c0, c1 = in(reg) c1, c2 = in(reg) c2, c3 = in(reg) c3, s = in(reg) s,
        options(nostack),
    );
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

/// Up to 16 values at `src` (`live` of them read, zeros after) split, 16 u16 of each part
/// stored at `dst[i]`.
///
/// # Safety
/// AVX-512F; `src` has `live` ≤ 16 readable values; each `dst[i]` 16 writable u16.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
pub unsafe fn split_chunk(src: *const f32, live: usize, dst: [*mut u16; 3]) {
    let m: __mmask16 = if live >= 16 { 0xffff } else { (1u16 << live) - 1 };
    let parts = split16(if m == 0 { _mm512_setzero_ps() } else { _mm512_maskz_loadu_ps(m, src) });
    for (i, part) in parts.iter().enumerate() {
        _mm256_storeu_si256(dst[i] as *mut __m256i, _mm512_cvtepi32_epi16(_mm512_srli_epi32::<16>(*part)));
    }
}

/// x tiles of at most this many rows (channels) prefetch the next tile's rows into L2 as they
/// are read: each tile reads one short run of each of its rows, too many streams for the
/// hardware prefetcher. Taller tiles (256 rows) measured slower with the prefetch, so they
/// do without (bench/results/2026-11-25-cpu-session17.md).
const PF_ROWS: usize = 64;
/// Values ahead of each row's read: the next 32-position tile.
const PF_AHEAD: usize = 32;

/// One tile of B: 32 columns (`live` of them read, zeros after) of `rows` rows at `b` (row
/// stride `rs`; rows past `rows` are zeros), split into `steps` operand steps at `dst` (the
/// module comment's layout). Each VNNI row holds rows 2r and 2r + 1 side by side.
///
/// # Safety
/// AVX-512F; rows `0..rows` have `live` ≤ 32 readable values at `b + row·rs`; `dst` has
/// `steps · STEP` writable values, and 2·16·steps ≥ rows.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
pub unsafe fn vnni_tile(b: *const f32, rs: usize, rows: usize, live: usize, steps: usize, dst: *mut u16) {
    let masks: [__mmask16; 2] = std::array::from_fn(|h| {
        let n = live.saturating_sub(16 * h).min(16);
        if n == 16 { 0xffff } else { (1u16 << n) - 1 }
    });
    let prefetch = rows <= PF_ROWS;
    for r in 0..16 * steps {
        let at = dst.add(r / 16 * STEP + r % 16 * 32);
        for h in 0..2 {
            let load = |row: usize| {
                if row < rows && masks[h] != 0 {
                    if prefetch {
                        _mm_prefetch::<_MM_HINT_T1>(b.wrapping_add(row * rs + 16 * h + PF_AHEAD) as *const i8);
                    }
                    _mm512_maskz_loadu_ps(masks[h], b.add(row * rs + 16 * h))
                } else {
                    _mm512_setzero_ps()
                }
            };
            let (p0, p1) = (split16(load(2 * r)), split16(load(2 * r + 1)));
            for j in 0..3 {
                // Lane l: row 2r's part in the low half, row 2r + 1's in the high half.
                let pair = _mm512_or_si512(_mm512_srli_epi32::<16>(p0[j]), p1[j]);
                _mm512_storeu_si512(at.add((2 * j + h) * TILE) as *mut __m512i, pair);
            }
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
        let vals: Vec<f32> = (0..16).map(|i| if i == 5 { f32::NAN } else if i == 6 { f32::NEG_INFINITY } else { (i as f32 * 0.377).sin() * 1e3 }).collect();
        for live in [16, 11, 0] {
            let mut planes = vec![vec![0xffffu16; 16]; 3];
            let dst = [planes[0].as_mut_ptr(), planes[1].as_mut_ptr(), planes[2].as_mut_ptr()];
            // SAFETY: `live` values read, 16 written per part.
            unsafe { split_chunk(vals.as_ptr(), live, dst) };
            for (c, v) in vals.iter().enumerate() {
                let want = if c < live { split(*v) } else { [0; 3] };
                for i in 0..3 {
                    assert_eq!(planes[i][c], want[i], "live {live}: value {c} part {i}");
                }
            }
        }
    }
}
