//! int8 stride-1 convolutions on rows of at least 16 output pixels, on AVX-512 VNNI without
//! patches: x is staged once as x + 128 in blocks of 4 channels, [n][c/4][h][w][4 bytes], with
//! its padding (as 128) around each plane. For a filter tap and a channel block, 16
//! consecutive output pixels of a row read 16 consecutive 4-byte words of that block's plane
//! shifted by the tap: one vector load, no gather. Tiles are two vectors against 8 filters: 32
//! pixels of one output row, or for rows of 8–16 pixels the first 16 words of two rows (the
//! lanes past the row are discarded); the filter runs in [t][c] order (`vnni::Order`).

use super::vnni::{by_rows, filter_rows, interleave16, FilterRows, Order, PX, ROWS};
#[cfg(target_arch = "x86_64")]
use super::vnni::{dot_step, store_sums};
use super::{finish, QuantRun};
use crate::problem::Geom;
use rayon::prelude::*;

/// Ungrouped 2-D stride-1 convolutions with whole 4-channel blocks, symmetric or asymmetric
/// padding, whose output rows fill at least half a 16-pixel vector, and whose filter (copied
/// into [t][c] order unless it lies that way) is no larger than the patches it replaces, or is
/// copied once and kept (`promised`: the constant-weights promise).
pub fn applies(g: &Geom, promised: bool) -> bool {
    let krsc = g.w_strides[1] == 1;
    let patches = g.n * g.output_size() * g.c * g.filter_size();
    g.groups == 1
        && g.is_2d()
        && g.stride == [1; 3]
        && g.c.is_multiple_of(4)
        && g.output[2] >= 8
        && (krsc || g.k * g.c * g.filter_size() <= patches || promised)
}

/// The staged x: planes of `hp` × `wp` words per 4-channel block; `wp` leaves a vector of
/// slack past the widest read.
struct Staged {
    data: Vec<u8>,
    hp: usize,
    wp: usize,
}

fn stage(g: &Geom, x: u64) -> Staged {
    let [_, oh, ow] = g.output;
    let [_, ih, iw] = g.input;
    let ([_, fh, fw], [_, dh, dw], [_, ph, pw]) = (g.filter, g.dilation, g.pad);
    let (hp, wp) = (oh + (fh - 1) * dh, ow + (fw - 1) * dw + 16);
    let c4 = g.c / 4;
    let xs = g.x_strides;
    // (A tile's second vector may read up to a row and a vector past the last plane.)
    let mut data = vec![0x80u8; g.n * c4 * hp * wp * 4 + (wp + PX) * 4];
    data.par_chunks_mut(hp * wp * 4).take(g.n * c4).enumerate().for_each(|(plane, dst)| {
        let (n, b) = (plane / c4, plane % c4);
        for h in 0..ih {
            let hr = h + ph;
            if hr >= hp {
                continue;
            }
            let src: [*const u8; 4] = std::array::from_fn(|j| (x as *const u8).wrapping_add(n * xs[0] + (4 * b + j) * xs[1] + h * xs[3]));
            let cols = iw.min(wp - pw.min(wp));
            let row = &mut dst[(hr * wp + pw) * 4..];
            // Contiguous channel rows (NCHW): 16 pixels of the four rows interleaved at once.
            let done = if xs[4] == 1 { interleave16(src, cols, row) } else { 0 };
            if xs[1] == 1 {
                // Channels-last x: each pixel's four channels are one word already.
                for w in done..cols {
                    // SAFETY: (n, 4b .. 4b + 4, h, w) is inside x.
                    let word = unsafe { (src[0].add(w * xs[4]) as *const u32).read_unaligned() } ^ 0x8080_8080;
                    row[4 * w..4 * w + 4].copy_from_slice(&word.to_ne_bytes());
                }
                continue;
            }
            for w in done..cols {
                // SAFETY: (n, 4b + j, h, w) is inside x.
                let word: [u8; 4] = std::array::from_fn(|j| unsafe { *src[j].add(w * xs[4]) } ^ 0x80);
                row[4 * w..4 * w + 4].copy_from_slice(&word);
            }
        }
    });
    Staged { data, hp, wp }
}

/// y = convert(epilogue(α·conv(x, w) + β·y)) for int8 x and w where `applies`; call only
/// where `vnni::available()`.
pub fn run(g: &Geom, r: &QuantRun) {
    let [_, oh, ow] = g.output;
    let ([_, fh, fw], [_, dh, dw]) = (g.filter, g.dilation);
    let c4 = g.c / 4;
    let steps = g.filter_size() * c4;
    let f = filter_rows(g, r, Order { c_step: 1, t_step: g.c }, steps);
    let st = stage(g, r.x);
    // Byte offset of each tap's shifted plane position.
    let taps: Vec<usize> = (0..fh * fw).map(|t| ((t / fw) * dh * st.wp + (t % fw) * dw) * 4).collect();
    let plane = st.hp * st.wp * 4;
    // Rows of under 16 pixels: each tile's second vector is the next output row.
    let two_rows = ow <= 16;
    let (per_row, rows_per_task) = if two_rows { (1, 2) } else { (ow.div_ceil(PX), 1) };
    let second = if two_rows { st.wp * 4 } else { 64 };
    let tasks = g.n * oh.div_ceil(rows_per_task) * per_row;
    let raw = r.raw_int32();
    (0..tasks).into_par_iter().for_each(|task| {
        let (row, ow0) = (task / per_row, task % per_row * PX);
        let (n, h) = (row / oh.div_ceil(rows_per_task), row % oh.div_ceil(rows_per_task) * rows_per_task);
        let base = st.data[n * c4 * plane + (h * st.wp + ow0) * 4..].as_ptr();
        // (pixels of y's plane, lanes of the sums, count) of each output run of the tile.
        let runs: [(usize, usize, usize); 2] = if two_rows {
            [(h * ow, 0, ow), ((h + 1) * ow, 16, if h + 1 < oh { ow } else { 0 })]
        } else {
            [(h * ow + ow0, 0, PX.min(ow - ow0)), (0, 0, 0)]
        };
        let mut sums = [[0i32; PX]; ROWS];
        let mut vals = [0f32; PX];
        for k0 in (0..g.k).step_by(ROWS) {
            let rows = ROWS.min(g.k - k0);
            // SAFETY: `vnni::available()` was checked by the caller; every read stays inside
            // the staged planes (the slack covers the second vector past the row).
            unsafe { multiply(base, second, &taps, plane, c4, &f, k0, rows, &mut sums) };
            for (j, s) in sums.iter().enumerate().take(rows) {
                for &(sp, lane, cnt) in runs.iter().filter(|r| r.2 > 0) {
                    finish(g, r, raw, n, k0 + j, sp, &s[lane..lane + cnt], &mut vals[..cnt]);
                }
            }
        }
    });
}

#[allow(clippy::too_many_arguments)]
unsafe fn multiply(base: *const u8, second: usize, taps: &[usize], plane: usize, c4: usize, f: &FilterRows, k0: usize, rows: usize, sums: &mut [[i32; PX]; ROWS]) {
    #[cfg(target_arch = "x86_64")]
    by_rows!(rows, tile(base, second, taps, plane, c4, f, k0, sums));
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (base, second, taps, plane, c4, f, k0, rows, sums);
        unreachable!("AVX-512 VNNI is x86-64 only")
    }
}

/// Sums of `R` filters from k0 over 32 pixels: for each tap and channel block, two 16-word
/// loads of the shifted plane (the second `second` bytes after the first) against each
/// filter's word broadcast.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vnni")]
#[allow(clippy::too_many_arguments)]
unsafe fn tile<const R: usize>(base: *const u8, second: usize, taps: &[usize], plane: usize, c4: usize, f: &FilterRows, k0: usize, sums: &mut [[i32; PX]; ROWS]) {
    use std::arch::x86_64::*;
    let mut acc = [[_mm512_setzero_si512(); 2]; R];
    let rows = f.rows_from::<R>(k0);
    for (t, &toff) in taps.iter().enumerate() {
        for b in 0..c4 {
            let p = base.add(toff + b * plane);
            let x0 = _mm512_loadu_si512(p as *const __m512i);
            let x1 = _mm512_loadu_si512(p.add(second) as *const __m512i);
            dot_step(&mut acc, x0, x1, &rows, t * c4 + b);
        }
    }
    store_sums(&acc, f, k0, sums);
}
