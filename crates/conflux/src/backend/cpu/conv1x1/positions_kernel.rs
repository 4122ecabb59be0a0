//! Micro-tiles of the 1×1 NCHW forward convolution with the spatial positions in the vector
//! lanes (`conv1x1_pos.rs`): `rows` filters × up to 64 consecutive positions of one image.
//!
//! Filter i's channel p is at `w + i·ws + p·wc` (broadcast): W in place has wc = 1, W packed
//! per row block as [channel][rows] (`conv1x1_pos::pack_rows`) ws = 1 and wc = rows. The
//! positions of channel p are at `x + p·xs` (V vectors, masked to `live` positions): x in
//! place, or a tile of it copied out (`conv1x1_pos::forward_packed`). The tile
//! accumulates one K block into y's rows (filter i at `y + i·ys`): `first` starts from zero,
//! otherwise from what y holds; `last` adds the bias of each filter and applies ReLU.

/// Vectors of 16 positions per tile row.
pub const V: usize = 2;
/// Positions per tile.
pub const PR: usize = 16 * V;
/// Filters per full tile: KR × V accumulators = 28 of the 32 zmm registers.
pub const KR: usize = 28 / V;

/// The finishing step of a tile's last K block: bias (one value per filter, or null) and the
/// clamp (ReLU, ReLU6).
#[derive(Clone, Copy, Debug)]
pub struct Finish {
    pub bias: *const f32,
    pub relu: crate::backend::cpu::clamp::Clamp,
}

/// One tile's operands (see the module comment).
#[derive(Clone, Copy, Debug)]
pub struct PosTile {
    pub rows: usize,
    pub live: usize,
    pub kc: usize,
    pub w: *const f32,
    pub ws: usize,
    pub wc: usize,
    pub x: *const f32,
    pub xs: usize,
    pub y: *mut f32,
    pub ys: usize,
    pub first: bool,
    /// Prefetch the next tile's positions of each channel into L2 (set for the first filter
    /// block of a tile; with packed W the copying tiles always prefetch).
    pub prefetch: bool,
    /// Where to copy the x tile while it is read, or null: kc channels of PR values at
    /// channel stride PR, zeros past `live`. Packed W only.
    pub copy_to: *mut f32,
    /// x is such a copy (zeros past `live`), so it is loaded without masks.
    pub x_padded: bool,
}

/// `tile(t, finish)` with rows in 1..=KR and live in 1..=PR.
pub type PosTileFn = unsafe fn(&PosTile, Option<&Finish>);

/// Plain loops: the tests' second opinion.
///
/// # Safety
/// `t.w` covers rows filters × kc channels, `t.x` kc channels × live positions, `t.y` rows ×
/// live writable values (read unless `first`); a non-null bias covers `rows` values; a
/// non-null `t.copy_to` kc·PR writable values.
pub unsafe fn tile_portable(t: &PosTile, fin: Option<&Finish>) {
    if !t.copy_to.is_null() {
        for p in 0..t.kc {
            for l in 0..PR {
                *t.copy_to.add(p * PR + l) = if l < t.live { *t.x.add(p * t.xs + l) } else { 0.0 };
            }
        }
    }
    for i in 0..t.rows {
        for l in 0..t.live {
            let mut s = 0f32;
            for p in 0..t.kc {
                s += *t.w.add(i * t.ws + p * t.wc) * *t.x.add(p * t.xs + l);
            }
            let y = t.y.add(i * t.ys + l);
            let mut v = if t.first { s } else { s + *y };
            if let Some(f) = fin {
                if !f.bias.is_null() {
                    v += *f.bias.add(i);
                }
                // NaN becomes 0, like the generic formulas.
                v = f.relu.apply(v);
            }
            *y = v;
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub mod x86 {
    use super::{Finish, PosTile, KR, V};
    use std::arch::x86_64::*;

    /// `R` × V vectors of accumulators over the tile's kc channels.
    /// - `PACKED`: W's filters consecutive (`ws` = 1: packed as [channel][R] with `wc` = R, or a
    ///   filter read transposed with `wc` = its filter stride), so the broadcasts come from one
    ///   pointer at fixed offsets; else each filter row read in place (`wc` = 1).
    /// - `PF`: prefetch the next tile's lines of each channel into L2 (x read in place, V lines
    ///   per channel per tile: too many streams for the hardware prefetchers; into L1 they were
    ///   evicted by W before use).
    /// - `FULL`: all PR positions live, so x is loaded without masks (masked loads measured a
    ///   few per cent slower in a tile running from L1).
    /// - `COPY`: also store each channel's x vectors to `copy_to` (stride PR), the dead lanes
    ///   as zeros.
    ///
    /// A function of its own, like `conv1x1_kernel`'s: with the loop inside the tile the
    /// accumulators were spilled to the stack, which costs far more than the call. V = 4 with
    /// R = 7 needs 33 registers and spilled too.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn acc<const R: usize, const PACKED: bool, const PF: bool, const FULL: bool, const COPY: bool>(t: &PosTile, m: [__mmask16; V]) -> [[__m512; V]; R] {
        let mut acc = [[_mm512_setzero_ps(); V]; R];
        let rows: [*const f32; R] = std::array::from_fn(|i| t.w.wrapping_add(i * t.ws));
        let (mut wp, mut xp, mut dp) = (t.w, t.x, t.copy_to);
        for p in 0..t.kc {
            let b: [__m512; V] = std::array::from_fn(|h| if FULL { _mm512_loadu_ps(xp.add(16 * h)) } else { _mm512_maskz_loadu_ps(m[h], xp.add(16 * h)) });
            for h in 0..V {
                if PF {
                    _mm_prefetch::<_MM_HINT_T1>(xp.wrapping_add(16 * (V + h)) as *const i8);
                }
                if COPY {
                    _mm512_storeu_ps(dp.add(16 * h), b[h]);
                }
            }
            for (i, row) in acc.iter_mut().enumerate() {
                let a = _mm512_set1_ps(if PACKED { *wp.add(i) } else { *rows[i].add(p) });
                for h in 0..V {
                    row[h] = _mm512_fmadd_ps(a, b[h], row[h]);
                }
            }
            wp = wp.wrapping_add(t.wc);
            xp = xp.add(t.xs);
            if COPY {
                dp = dp.add(16 * V);
            }
        }
        acc
    }

    /// One tile of `R` filters.
    #[target_feature(enable = "avx512f")]
    unsafe fn tile<const R: usize>(t: &PosTile, fin: Option<&Finish>) {
        let mask = |h: usize| -> __mmask16 {
            let n = t.live.saturating_sub(16 * h).min(16);
            if n == 16 { 0xffff } else { (1u16 << n) - 1 }
        };
        let m: [__mmask16; V] = std::array::from_fn(mask);
        let full = t.live == 16 * V;
        let acc = if t.wc == 1 {
            match (t.prefetch, full) {
                (true, true) => acc::<R, false, true, true, false>(t, m),
                (true, false) => acc::<R, false, true, false, false>(t, m),
                (false, true) => acc::<R, false, false, true, false>(t, m),
                (false, false) => acc::<R, false, false, false, false>(t, m),
            }
        } else {
            debug_assert!(t.ws == 1, "conv1x1 position tile: W has neither its channels (wc = 1) nor its filters (ws = 1) consecutive");
            match (t.copy_to.is_null(), t.x_padded, t.prefetch, full) {
                (false, _, _, true) => acc::<R, true, true, true, true>(t, m),
                (false, _, _, false) => acc::<R, true, true, false, true>(t, m),
                // Copied tiles hold zeros past `live`.
                (true, true, _, _) => acc::<R, true, false, true, false>(t, m),
                // W read transposed in place (backward-data), x in place.
                (true, false, true, true) => acc::<R, true, true, true, false>(t, m),
                (true, false, true, false) => acc::<R, true, true, false, false>(t, m),
                (true, false, false, true) => acc::<R, true, false, true, false>(t, m),
                (true, false, false, false) => acc::<R, true, false, false, false>(t, m),
            }
        };
        let zero = _mm512_setzero_ps();
        for (i, row) in acc.iter().enumerate() {
            let y = t.y.add(i * t.ys);
            for (h, v) in row.iter().enumerate() {
                if m[h] == 0 {
                    break;
                }
                let mut v = *v;
                if !t.first {
                    v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m[h], y.add(16 * h)));
                }
                if let Some(f) = fin {
                    if !f.bias.is_null() {
                        v = _mm512_add_ps(v, _mm512_set1_ps(*f.bias.add(i)));
                    }
                    // v first: a NaN v gives 0.
                    if f.relu.on {
                        v = _mm512_min_ps(_mm512_max_ps(v, zero), _mm512_set1_ps(f.relu.hi));
                    }
                }
                _mm512_mask_storeu_ps(y.add(16 * h), m[h], v);
            }
        }
    }

    /// `tile::<rows>` for rows in 1..=KR.
    ///
    /// # Safety
    /// As `tile_portable`; AVX-512F must be available.
    pub unsafe fn tile_avx512(t: &PosTile, fin: Option<&Finish>) {
        macro_rules! by_rows {
            ($($r:literal)*) => {
                match t.rows {
                    $($r => tile::<$r>(t, fin),)*
                    _ => unreachable!("conv1x1 position tile of {} rows", t.rows),
                }
            };
        }
        const _: () = assert!(KR == 14);
        by_rows!(1 2 3 4 5 6 7 8 9 10 11 12 13 14)
    }
}

/// A tile function with its name.
#[derive(Clone, Copy, Debug)]
pub struct PosKernels {
    pub name: &'static str,
    pub tile: PosTileFn,
}

/// The kernel for this CPU (AVX-512 only, as `conv1x1_kernel::best`).
pub fn best() -> Option<PosKernels> {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx512f") {
        return Some(PosKernels { name: "avx512", tile: x86::tile_avx512 });
    }
    None
}

/// Every kernel this CPU can run (tests run them all).
pub fn available() -> Vec<PosKernels> {
    let mut v: Vec<PosKernels> = best().into_iter().collect();
    v.push(PosKernels { name: "portable", tile: tile_portable });
    v
}
