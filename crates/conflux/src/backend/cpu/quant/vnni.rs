//! int8 convolutions on AVX-512 VNNI: output pixels in tiles of 32 (flattened over the batch,
//! so small images fill them), each tile's input patches gathered once into a u8 panel, then
//! multiplied with every filter of its group, 8 filters at a time.
//!
//! Panel layout: for each 4-element step s of the reduction, 32 pixels × 4 bytes (two 64-byte
//! vectors). One `vpdpbusd` multiplies a vector of 16 pixels' 4 bytes with one filter's 4
//! bytes broadcast and adds into that filter's 16 i32 sums, so a tile's sums are 16-pixel
//! vectors per filter: runs along y's pixels, stored a vector at a time where y allows.
//!
//! `vpdpbusd` multiplies unsigned by signed bytes, so the panel holds x + 128 (x ^ 0x80) and
//! each filter's 128·Σw is subtracted from its sums; the panel's padding past the reduction
//! holds 0, which adds nothing. The instruction wraps rather than saturates, and so does the
//! subtraction: the result is Σ x·w modulo 2³², which is Σ x·w itself, since the problem is
//! refused where that could leave i32 (`quant.rs`: at most 2¹⁷ products).
//!
//! The reduction runs in the filter's own memory order ([c][t] for KCRS, [t][c] for KRSC), so a
//! dense filter whose rows are a multiple of 4 bytes is read in place, with no copy per call.

use super::{finish, QuantRun};
use crate::backend::cpu::weight_cache::Transformed;
use std::sync::Arc;
use crate::problem::Geom;
use rayon::prelude::*;

/// Pixels per tile: two vectors of 16.
pub(super) const PX: usize = 32;
/// Filters per micro-tile (16 accumulators with two pixel vectors).
pub(super) const ROWS: usize = 8;

/// `$f::<R>(args)` for R = `rows` (1 ..= 8): the micro-tile kernels are monomorphized per
/// filter count, so the accumulators stay in registers.
macro_rules! by_rows {
    ($rows:expr, $f:ident($($arg:expr),*)) => {
        match $rows {
            8 => $f::<8>($($arg),*),
            7 => $f::<7>($($arg),*),
            6 => $f::<6>($($arg),*),
            5 => $f::<5>($($arg),*),
            4 => $f::<4>($($arg),*),
            3 => $f::<3>($($arg),*),
            2 => $f::<2>($($arg),*),
            _ => $f::<1>($($arg),*),
        }
    };
}
pub(super) use by_rows;

/// Whether this CPU has AVX-512 VNNI.
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *ON.get_or_init(|| is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512vnni"))
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// The filter as the kernel reads it: K rows of `4·steps` bytes, `stride` bytes apart, in the
/// reduction `Order`; each row's 128·Σw.
pub(super) struct FilterRows {
    pub(super) base: *const i8,
    pub(super) stride: usize,
    pub(super) comp: Vec<i32>,
    /// Owns the rows when they had to be copied, or holds the cached copy.
    _copy: Option<Vec<i8>>,
    _kept: Option<Arc<Transformed<i32>>>,
}
// SAFETY: the rows are only read, by the threads of one call, while the caller's filter lives.
unsafe impl Sync for FilterRows {}

impl FilterRows {
    /// Pointers to rows k0..k0 + R.
    pub(super) fn rows_from<const R: usize>(&self, k0: usize) -> [*const i8; R] {
        std::array::from_fn(|j| self.base.wrapping_add((k0 + j) * self.stride))
    }
}

fn comp_of(row: &[i8]) -> i32 { 128 * row.iter().map(|&v| v as i32).sum::<i32>() }

/// Filter rows in place where w is dense in the reduction order and rows are whole 4-byte
/// steps; else a zero-padded copy. Under the constant-weights promise (`r.filters`), the padded
/// rows and their sums are made once per filter address and kept.
pub(super) fn filter_rows(g: &Geom, r: &QuantRun, order: Order, steps: usize) -> FilterRows {
    let (kred, stride, w) = (g.cg() * g.filter_size(), 4 * steps, r.w);
    if let Some(cache) = r.filters {
        let rows_len = g.k * steps;
        // SAFETY: w holds the filter's `w_bytes` bytes (the problem's descriptor).
        let t = unsafe {
            cache.get_or_make(w as *const u8, r.w_bytes, rows_len + g.k, |d| {
                let (rows, comp) = d.split_at_mut(rows_len);
                // SAFETY: the i32 words hold the rows' bytes.
                let bytes = std::slice::from_raw_parts_mut(rows.as_mut_ptr() as *mut i8, rows_len * 4);
                copy_rows(g, w, order, stride, bytes);
                bytes.chunks(stride).zip(comp.iter_mut()).for_each(|(row, c)| *c = comp_of(row));
            })
        };
        let words = t.as_slice();
        return FilterRows { base: words.as_ptr() as *const i8, stride, comp: words[g.k * steps..].to_vec(), _copy: None, _kept: Some(t) };
    }
    let ws = g.w_strides;
    let dense = in_order(g, order) && (g.k == 1 || ws[0] == kred);
    if dense && kred.is_multiple_of(4) {
        // SAFETY: w holds K dense rows of kred int8 values (the problem's descriptor).
        let all = unsafe { std::slice::from_raw_parts(w as *const i8, g.k * kred) };
        let comp = all.par_chunks(kred).map(comp_of).collect();
        return FilterRows { base: w as *const i8, stride: kred, comp, _copy: None, _kept: None };
    }
    let mut copy = vec![0i8; g.k * stride];
    copy_rows(g, w, order, stride, &mut copy);
    let comp = copy.par_chunks(stride).map(comp_of).collect();
    FilterRows { base: copy.as_ptr(), stride, comp, _copy: Some(copy), _kept: None }
}

/// Offset of tap t's element of channel 0 in a filter row.
fn tap_offset(g: &Geom, t: usize) -> usize {
    let ([_, fh, fw], ws) = (g.filter, g.w_strides);
    let (td, th, tw) = (t / (fh * fw), (t / fw) % fh, t % fw);
    td * ws[2] + th * ws[3] + tw * ws[4]
}

/// Whether w's rows already lie in `order` (reduction index i at element i).
fn in_order(g: &Geom, order: Order) -> bool {
    let ws = g.w_strides;
    (0..g.filter_size()).all(|t| (0..g.cg()).all(|c| c * ws[1] + tap_offset(g, t) == c * order.c_step + t * order.t_step))
}

/// Filter rows in `order` into `out` (K rows of `stride` bytes, zero past the reduction).
fn copy_rows(g: &Geom, w: u64, order: Order, stride: usize, out: &mut [i8]) {
    let ws = g.w_strides;
    let taps_at: Vec<usize> = (0..g.filter_size()).map(|t| tap_offset(g, t)).collect();
    out.par_chunks_mut(stride).enumerate().for_each(|(k, row)| {
        let src = (w as *const i8).wrapping_add(k * ws[0]);
        for (t, &at) in taps_at.iter().enumerate() {
            for c in 0..g.cg() {
                // SAFETY: (k, c, t) is inside w.
                row[c * order.c_step + t * order.t_step] = unsafe { *src.add(c * ws[1] + at) };
            }
        }
    });
}

/// y = convert(epilogue(α·conv(x, w) + β·y)) for int8 x and w. Call only where `available()`.
pub fn run(g: &Geom, r: &QuantRun) {
    if super::vnni_direct::applies(g, r.filters.is_some()) {
        return super::vnni_direct::run(g, r);
    }
    let (cg, kg) = (g.cg(), g.kg());
    let staged = staged_x(g, r.x);
    let (x, xs, flip) = match &staged {
        Some((v, s)) => (v.as_ptr() as u64, *s, 0),
        None => (r.x, g.x_strides, 0x80),
    };
    let order = Order::of(g, xs[1] == 1);
    let kred = cg * g.filter_size();
    let steps = kred.div_ceil(4);
    let f = filter_rows(g, r, order, steps);
    let src = Source { x, xs, flip };
    let spatial = g.output_size();
    let pixels = g.n * spatial;
    let raw = r.raw_int32();
    (0..pixels.div_ceil(PX)).into_par_iter().for_each(|tile| {
        let m0 = tile * PX;
        let cnt = PX.min(pixels - m0);
        let mut panel = vec![0u8; steps * PX * 4];
        let mut sums = [[0i32; PX]; ROWS];
        let mut vals = [0f32; PX];
        for grp in 0..g.groups {
            gather(g, &src, grp * cg * xs[1], order, m0, cnt, &mut panel);
            for k0 in (grp * kg..(grp + 1) * kg).step_by(ROWS) {
                let rows = ROWS.min((grp + 1) * kg - k0);
                // SAFETY: `available()` was checked by the caller; the panel holds `steps`
                // steps; filter rows k0.. k0 + rows exist with 4·steps bytes each.
                unsafe { multiply(&panel, steps, &f, k0, rows, &mut sums) };
                for (j, s) in sums.iter().enumerate().take(rows) {
                    let k = k0 + j;
                    // Runs of pixels within one image.
                    let mut p = 0;
                    while p < cnt {
                        let (n, sp) = ((m0 + p) / spatial, (m0 + p) % spatial);
                        let len = (spatial - sp).min(cnt - p);
                        finish(g, r, raw, n, k, sp, &s[p..p + len], &mut vals[..len]);
                        p += len;
                    }
                }
            }
        }
    });
}

/// Where reduction index i = c·`c_step` + t·`t_step` of channel c and tap t lies.
#[derive(Clone, Copy)]
pub(super) struct Order {
    pub(super) c_step: usize,
    pub(super) t_step: usize,
}

impl Order {
    /// Channels innermost ([t][c]) where x's channels are contiguous (given or staged so) or
    /// the filter already lies that way; else the filter's KCRS order ([c][t]).
    fn of(g: &Geom, x_channels_last: bool) -> Order {
        let (cg, taps) = (g.cg(), g.filter_size());
        if x_channels_last || (g.w_strides[1] == 1 && cg > 1) { Order { c_step: 1, t_step: cg } } else { Order { c_step: taps, t_step: 1 } }
    }
}

/// Channels-first x staged channels-last as x + 128 (one pass over x), where the panels'
/// gathers then copy whole 4-channel words: worth it when the filter (which the [t][c] order
/// makes us copy too, were it KCRS) is no larger than the patches gathered from x.
fn staged_x(g: &Geom, x: u64) -> Option<(Vec<u8>, [usize; 5])> {
    let xs = g.x_strides;
    let [id, ih, iw] = g.input;
    let (c, sp) = (g.c, id * ih * iw);
    let patches = g.n * g.output_size() * c * g.filter_size();
    if xs[1] == 1 || g.cg() < 4 || !g.cg().is_multiple_of(4) || g.k * g.cg() * g.filter_size() > patches {
        return None;
    }
    let mut out = vec![0u8; g.n * sp * c];
    out.par_chunks_mut(iw * c).enumerate().for_each(|(row, dst)| {
        let (n, d, h) = (row / (id * ih), (row / ih) % id, row % ih);
        // Four channels' rows at a time, written as one 4-byte word per pixel (c is a multiple
        // of 4: the channels per group are).
        for ch in (0..c).step_by(4) {
            let src: [*const u8; 4] = std::array::from_fn(|j| (x as *const u8).wrapping_add(n * xs[0] + (ch + j) * xs[1] + d * xs[2] + h * xs[3]));
            for w in 0..iw {
                // SAFETY: (n, ch + j, d, h, w) is inside x.
                let b: [u8; 4] = std::array::from_fn(|j| unsafe { *src[j].add(w * xs[4]) } ^ 0x80);
                dst[w * c + ch..w * c + ch + 4].copy_from_slice(&b);
            }
        }
    });
    Some((out, [sp * c, 1, ih * iw * c, iw * c, c]))
}

/// Where the panels read x: the caller's int8 x (`flip` 0x80 makes it x + 128) or the staged
/// copy (already shifted, `flip` 0), with its strides.
struct Source {
    x: u64,
    xs: [usize; 5],
    flip: u8,
}

/// Words [r0[w], r1[w], r2[w], r3[w]] ^ 0x80 of four contiguous byte rows into `out`, 16
/// pixels at a time (SSE2 byte and word unpacks); returns how many pixels it wrote (a multiple
/// of 16, at most `cols`).
pub(super) fn interleave16(rows: [*const u8; 4], cols: usize, out: &mut [u8]) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        let whole = cols / 16 * 16;
        debug_assert!(out.len() >= 4 * whole);
        // SAFETY: SSE2 is part of x86-64; each row holds `cols` bytes from its pointer, and
        // `out` 4·cols bytes.
        unsafe {
            let flip = _mm_set1_epi8(-128);
            for w in (0..whole).step_by(16) {
                let [a, b, c, d] = rows.map(|r| _mm_xor_si128(_mm_loadu_si128(r.add(w) as *const __m128i), flip));
                let (ab_lo, ab_hi) = (_mm_unpacklo_epi8(a, b), _mm_unpackhi_epi8(a, b));
                let (cd_lo, cd_hi) = (_mm_unpacklo_epi8(c, d), _mm_unpackhi_epi8(c, d));
                let words = [_mm_unpacklo_epi16(ab_lo, cd_lo), _mm_unpackhi_epi16(ab_lo, cd_lo), _mm_unpacklo_epi16(ab_hi, cd_hi), _mm_unpackhi_epi16(ab_hi, cd_hi)];
                for (q, v) in words.iter().enumerate() {
                    _mm_storeu_si128(out.as_mut_ptr().add(4 * w + 16 * q) as *mut __m128i, *v);
                }
            }
        }
        whole
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (rows, cols, out);
        0
    }
}

/// `gather` for a 1×1, stride-1, unpadded convolution over dense channels-first planes, when
/// the tile's pixels lie in one image: they are consecutive bytes of each channel's plane, and
/// four planes interleave into a step's words 16 pixels at a time. None where that does not
/// hold.
fn gather_planes(g: &Geom, src: &Source, grp_off: usize, order: Order, m0: usize, cnt: usize, panel: &mut [u8]) -> Option<()> {
    let (xs, [id, ih, iw]) = (src.xs, g.input);
    let plain = g.filter_size() == 1 && g.stride == [1; 3] && g.pad == [0; 3] && g.pad_end == [0; 3] && g.dilation == [1; 3];
    let dense = xs[4] == 1 && xs[3] == iw && (id == 1 || xs[2] == ih * iw);
    let spatial = id * ih * iw;
    let one_image = m0 / spatial == (m0 + cnt - 1) / spatial;
    if !(plain && dense && one_image && order.c_step == 1 && g.cg().is_multiple_of(4) && src.flip == 0x80) {
        return None;
    }
    let (n, sp0) = (m0 / spatial, m0 % spatial);
    let base = (src.x as *const u8).wrapping_add(n * xs[0] + grp_off + sp0);
    for (c4, step) in panel.chunks_exact_mut(PX * 4).take(g.cg() / 4).enumerate() {
        let rows: [*const u8; 4] = std::array::from_fn(|j| base.wrapping_add((4 * c4 + j) * xs[1]));
        let done = interleave16(rows, cnt, step);
        for p in done..cnt {
            // SAFETY: pixel sp0 + p of channels 4·c4 .. + 4 is inside x.
            let word: [u8; 4] = std::array::from_fn(|j| unsafe { *rows[j].add(p) } ^ 0x80);
            step[4 * p..4 * p + 4].copy_from_slice(&word);
        }
    }
    Some(())
}

/// The panel of pixels m0 .. m0 + cnt (flattened n, d, h, w) for the group whose channels
/// start `grp_off` elements into each image: x + 128, 128 for taps in the padding, 0 past the
/// reduction and past `cnt`.
fn gather(g: &Geom, src: &Source, grp_off: usize, order: Order, m0: usize, cnt: usize, panel: &mut [u8]) {
    if gather_planes(g, src, grp_off, order, m0, cnt, panel).is_some() {
        return;
    }
    let [od, oh, ow] = g.output;
    let (x, xs, flip) = (src.x, src.xs, src.flip);
    // 4-channel words: channels innermost in both the order and x, whole words per tap.
    let words = order.c_step == 1 && xs[1] == 1 && g.cg().is_multiple_of(4);
    let [_, fh, fw] = g.filter;
    let cg = g.cg();
    // Each tap's offset along (d, h, w) from a window's corner, dilation applied.
    let reach: Vec<[isize; 3]> = (0..g.filter_size())
        .map(|t| {
            let tap = [t / (fh * fw), (t / fw) % fh, t % fw];
            std::array::from_fn(|a| (tap[a] * g.dilation[a]) as isize - g.pad[a] as isize)
        })
        .collect();
    panel.fill(0);
    for p in 0..cnt {
        let m = m0 + p;
        let (n, o) = (m / (od * oh * ow), [(m / (oh * ow)) % od, (m / ow) % oh, m % ow]);
        let corner: [isize; 3] = std::array::from_fn(|a| (o[a] * g.stride[a]) as isize);
        for (t, r) in reach.iter().enumerate() {
            let mut off = n * xs[0] + grp_off;
            let mut inside = true;
            for a in 0..3 {
                let i = corner[a] + r[a];
                inside &= i >= 0 && (i as usize) < g.input[a];
                off = off.wrapping_add((i as usize).wrapping_mul(xs[2 + a]));
            }
            let at = |c: usize| {
                let i = c * order.c_step + t * order.t_step;
                (i / 4) * (PX * 4) + p * 4 + i % 4
            };
            let from = (x as *const u8).wrapping_add(off);
            if inside && words {
                let flip4 = u32::from_ne_bytes([flip; 4]);
                for c4 in (0..cg).step_by(4) {
                    // SAFETY: the position's channels c4 .. c4 + 4 are inside x; the word's
                    // panel bytes are consecutive (i % 4 == 0 at c4).
                    let v = unsafe { (from.add(c4) as *const u32).read_unaligned() } ^ flip4;
                    let at = at(c4);
                    panel[at..at + 4].copy_from_slice(&v.to_ne_bytes());
                }
            } else if inside {
                for c in 0..cg {
                    // SAFETY: the position is inside x.
                    panel[at(c)] = unsafe { *from.add(c * xs[1]) } ^ flip;
                }
            } else {
                for c in 0..cg {
                    panel[at(c)] = 0x80;
                }
            }
        }
    }
}

/// Σ x·w of `rows` filters from k0 over the panel's 32 pixels: sums[j][p].
unsafe fn multiply(panel: &[u8], steps: usize, f: &FilterRows, k0: usize, rows: usize, sums: &mut [[i32; PX]; ROWS]) {
    #[cfg(target_arch = "x86_64")]
    by_rows!(rows, tile(panel, steps, f, k0, sums));
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (panel, steps, f, k0, rows, sums);
        unreachable!("AVX-512 VNNI is x86-64 only")
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vnni")]
unsafe fn tile<const R: usize>(panel: &[u8], steps: usize, f: &FilterRows, k0: usize, sums: &mut [[i32; PX]; ROWS]) {
    use std::arch::x86_64::*;
    let mut acc = [[_mm512_setzero_si512(); 2]; R];
    let rows = f.rows_from::<R>(k0);
    let pp = panel.as_ptr();
    for s in 0..steps {
        let x0 = _mm512_loadu_si512(pp.add(s * PX * 4) as *const __m512i);
        let x1 = _mm512_loadu_si512(pp.add(s * PX * 4 + 64) as *const __m512i);
        dot_step(&mut acc, x0, x1, &rows, s);
    }
    store_sums(&acc, f, k0, sums);
}

/// Word `s` (4 bytes of the reduction) of each of R filter rows, broadcast against the two
/// 16-pixel halves x0, x1 of a 32-pixel block: both VNNI kernels' inner step.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vnni")]
#[inline]
pub(super) unsafe fn dot_step<const R: usize>(acc: &mut [[std::arch::x86_64::__m512i; 2]; R], x0: std::arch::x86_64::__m512i, x1: std::arch::x86_64::__m512i, rows: &[*const i8; R], s: usize) {
    use std::arch::x86_64::*;
    for (a, row) in acc.iter_mut().zip(rows) {
        let w = _mm512_set1_epi32((row.add(4 * s) as *const i32).read_unaligned());
        a[0] = _mm512_dpbusd_epi32(a[0], x0, w);
        a[1] = _mm512_dpbusd_epi32(a[1], x1, w);
    }
}

/// sums[j] = the 32 pixel sums of filter k0 + j less its compensation 128·Σw (x was shifted
/// to unsigned by +128).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vnni")]
#[inline]
pub(super) unsafe fn store_sums<const R: usize>(acc: &[[std::arch::x86_64::__m512i; 2]; R], f: &FilterRows, k0: usize, sums: &mut [[i32; PX]; ROWS]) {
    use std::arch::x86_64::*;
    for (j, a) in acc.iter().enumerate() {
        let comp = _mm512_set1_epi32(f.comp[k0 + j]);
        _mm512_storeu_si512(sums[j].as_mut_ptr() as *mut __m512i, _mm512_sub_epi32(a[0], comp));
        _mm512_storeu_si512(sums[j].as_mut_ptr().add(16) as *mut __m512i, _mm512_sub_epi32(a[1], comp));
    }
}
