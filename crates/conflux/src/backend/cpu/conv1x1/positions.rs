//! Forward 1×1 convolution (stride 1, no padding) of f32 NCHW images with the spatial positions
//! in the vector lanes: per image and group, y (K × HW) = W (K × C) · x (C × HW), with x, W and
//! y all used in place.
//!
//! Why beside `conv1x1.rs` (channels in the lanes): nothing is packed or transposed. That
//! driver transposes W into 32-channel panels on every call (unless the weights are
//! constant) and every finished tile in registers before the NCHW store. The price here is
//! the last tile of each image, masked to what is left (a 14×14 image fills 196 of 224
//! lanes), and every tile reading all of W, so this driver takes mid-sized images only
//! (`suits`).

use crate::backend::cpu::conv1x1::channels::{kc_max, Problem};
use crate::backend::cpu::even_part as part;
use crate::backend::cpu::conv1x1::positions_kernel::{Finish, PosKernels, PosTile, KR, PR};
use crate::backend::cpu::gemm::{with_scratch, Slot};
use rayon::prelude::*;

/// Fewest positions per image: at 14×14 (196) the masked last tile makes this driver slower
/// than the channels-in-lanes one (bench/results/2026-11-25-cpu-session14.md).
pub const MIN_POSITIONS: usize = 256;
/// Largest channel row of x and y (bytes) for calls that move more than `LARGE_ROWS_MAX_BYTES`:
/// rows of 4 KiB and more each sit in a page of their own, and a tile touches kc + K of them.
/// At 55×55 (12100 bytes) and batch 8 this driver measured up to 1.5× slower than the
/// channels-in-lanes one (bench/results/2026-11-25-cpu-session14.md,
/// 2026-11-28-cpu-1x1-positions-large-rows.md).
pub const MAX_ROW_BYTES: usize = 4096;
/// Most bytes of x and y together for which rows of any length are taken: at batch 1 every
/// 1×1 layer of the zoo with rows of 4 KiB or more (56×56 to 112×112, up to 6.4 MB) ran
/// 0.47–0.95 of the channels-in-lanes driver's time (same file); the 31 MB of batch-8 55×55
/// layers ran up to 1.5× slower.
pub const LARGE_ROWS_MAX_BYTES: usize = 16 << 20;
/// Largest W (bytes): every tile reads all of W, which must stay in the 2 MiB L2.
pub const MAX_W_BYTES: usize = 1 << 20;

/// Whether `p` is NCHW on both sides with images of a size where this driver beats the
/// channels-in-lanes one on the whole: 28×28, where it measured faster except on the expanding
/// 128-28-28-512 at N=1 (bench/results/2026-11-25-cpu-session14.md and
/// bench/results/2026-11-27-history-from-status.md, conv1x1_pos.rs), and larger images while
/// the call's x and y stay within `LARGE_ROWS_MAX_BYTES`.
pub fn suits(p: &Problem) -> bool {
    let row_bytes = p.xs[1].max(p.ys[1]) * 4;
    let moved = p.n.saturating_mul(p.c + p.k).saturating_mul(p.hw).saturating_mul(4);
    let rows_fit = row_bytes < MAX_ROW_BYTES || moved <= LARGE_ROWS_MAX_BYTES;
    p.xp == 1 && p.yp == 1 && p.hw >= MIN_POSITIONS && rows_fit && p.c * p.k * 4 <= MAX_W_BYTES
}

/// Work split: tasks of consecutive position tiles (numbered across the batch) × groups of
/// filter row blocks. Enough tasks for three per thread; row groups only when there are too
/// few tiles for that.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PosSplit {
    pub tile_blocks: usize,
    pub row_groups: usize,
}

impl PosSplit {
    pub fn choose(p: &Problem, threads: usize) -> PosSplit {
        let tiles = p.n * p.hw.div_ceil(PR);
        let want = 3 * threads.max(1);
        let row_groups = want.div_ceil(tiles.max(1)).clamp(1, p.k.div_ceil(KR).max(1));
        PosSplit { tile_blocks: tiles.min(want.div_ceil(row_groups)).max(1), row_groups }
    }
}

/// y = ReLU?(conv(x, W) + bias?) for an NCHW `p` (xp = yp = 1).
///
/// # Safety
/// The pointers and strides of `p` address valid tensors; `kern` runs on this CPU; y does not
/// overlap x or W.
pub unsafe fn forward(p: &Problem, kern: &PosKernels, split: PosSplit) {
    assert!(p.xp == 1 && p.yp == 1, "conv1x1_pos: positions must be consecutive in x and y");
    assert!(p.wc == 1 || p.ws0 == 1, "conv1x1_pos: W needs its channels or its filters consecutive");
    if p.n == 0 || p.k == 0 || p.hw == 0 {
        return;
    }
    let per_image = p.hw.div_ceil(PR);
    let tiles = p.n * per_image;
    let rblocks = p.k.div_ceil(KR);
    let kblocks = p.c.div_ceil(kc_max(p)).max(1);
    let (tb, rg) = (split.tile_blocks.clamp(1, tiles), split.row_groups.clamp(1, rblocks));
    (0..tb * rg).into_par_iter().for_each(|task| {
        let (ti, gi) = (task / rg, task % rg);
        let rows = part(rblocks, rg, gi);
        for t in part(tiles, tb, ti) {
            let (n, p0) = (t / per_image, t % per_image * PR);
            let live = PR.min(p.hw - p0);
            for kb in 0..kblocks {
                let cs = part(p.c, kblocks, kb);
                for r in rows.clone() {
                    let ks = part(p.k, rblocks, r);
                    let tile = PosTile {
                        rows: ks.len(),
                        live,
                        kc: cs.len(),
                        w: p.w.add(ks.start * p.ws0 + cs.start * p.wc),
                        ws: p.ws0,
                        wc: p.wc,
                        x: p.x.add(n * p.xs[0] + cs.start * p.xs[1] + p0),
                        xs: p.xs[1],
                        y: p.y.add(n * p.ys[0] + ks.start * p.ys[1] + p0),
                        ys: p.ys[1],
                        first: kb == 0,
                        prefetch: r == rows.start,
                        copy_to: std::ptr::null_mut(),
                        x_padded: false,
                    };
                    let bias = if p.bias.is_null() { p.bias } else { p.bias.add(ks.start) };
                    let fin = Finish { bias, relu: p.relu };
                    (kern.tile)(&tile, (kb + 1 == kblocks).then_some(&fin));
                }
            }
        }
    });
}

/// Largest K block of `forward_packed`: a row block of packed W (14 filters × 512 channels,
/// 28 KiB) stays in L1 while the x tiles stream through from L2.
const KC_PACKED: usize = 512;
/// Most bytes of x one task copies out at a time (a chunk of tiles): the chunk is read again
/// from L2 for every row block of W.
const CHUNK_BYTES: usize = 256 << 10;

/// How `forward_packed` walks a task: `chunk` tiles of x copied out at a time, K blocks of
/// at most `kc` channels.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PackedWalk {
    pub chunk: usize,
    pub kc: usize,
}

impl PackedWalk {
    pub fn choose(p: &Problem) -> PackedWalk {
        PackedWalk { chunk: (CHUNK_BYTES / (p.c.max(1) * PR * 4)).max(1), kc: KC_PACKED }
    }
}

/// Values of W packed by `pack_rows`.
pub fn packed_rows_len(p: &Problem) -> usize { p.k * p.c }

/// W packed for `forward_packed`: K split evenly into K.div_ceil(KR) row blocks, block `ks`
/// stored as [channel][ks.len()] from `ks.start·C`, so a tile's broadcasts come from one
/// pointer and each K block of a row block is contiguous.
///
/// # Safety
/// `p.w` addresses K filters of C values at row stride `p.ws0`; `dst` has `packed_rows_len(p)`
/// values.
pub unsafe fn pack_rows(p: &Problem, dst: &mut [f32]) {
    let rblocks = p.k.div_ceil(KR);
    for r in 0..rblocks {
        let ks = part(p.k, rblocks, r);
        let block = &mut dst[ks.start * p.c..ks.end * p.c];
        for (i, k) in ks.clone().enumerate() {
            for c in 0..p.c {
                // SAFETY: filter k < K, channel c < C.
                block[c * ks.len() + i] = unsafe { *p.w.add(k * p.ws0 + c * p.wc) };
            }
        }
    }
}

/// y = ReLU?(conv(x, W) + bias?) for an NCHW `p` with W packed by `pack_rows` (`w`, the
/// constant-weights path). Per task and chunk of tiles: the first row block of W reads x in
/// place and copies it out ([tile][channel][32 positions], zeros past the image's end); the
/// other row blocks read the copy, one contiguous run per tile, while their block of W stays
/// in L1. Against `forward`: no address arithmetic per filter, and W read from L1, not L2.
///
/// # Safety
/// As `forward`; `w` holds `pack_rows`'s result for this W.
pub unsafe fn forward_packed(p: &Problem, kern: &PosKernels, split: PosSplit, walk: PackedWalk, w: &[f32]) {
    assert!(p.xp == 1 && p.yp == 1, "conv1x1_pos: positions must be consecutive in x and y");
    assert!(w.len() >= packed_rows_len(p), "conv1x1_pos: packed W too short");
    if p.n == 0 || p.k == 0 || p.hw == 0 {
        return;
    }
    let per_image = p.hw.div_ceil(PR);
    let tiles = p.n * per_image;
    let rblocks = p.k.div_ceil(KR);
    let kblocks = p.c.div_ceil(walk.kc.max(1));
    let chunk = walk.chunk.max(1);
    let (tb, rg) = (split.tile_blocks.clamp(1, tiles), split.row_groups.clamp(1, rblocks));
    let at = |t: usize| (t / per_image, t % per_image * PR);
    (0..tb * rg).into_par_iter().for_each(|task| {
        let (ti, gi) = (task / rg, task % rg);
        let (rows, task_tiles) = (part(rblocks, rg, gi), part(tiles, tb, ti));
        with_scratch(Slot::Task, chunk.min(task_tiles.len()) * p.c * PR, |xt| {
            for first_tile in task_tiles.clone().step_by(chunk) {
                let chunk_tiles = first_tile..(first_tile + chunk).min(task_tiles.end);
                for kb in 0..kblocks {
                    let cs = part(p.c, kblocks, kb);
                    for r in rows.clone() {
                        let ks = part(p.k, rblocks, r);
                        let bias = if p.bias.is_null() { p.bias } else { p.bias.add(ks.start) };
                        let fin = Finish { bias, relu: p.relu };
                        let copying = r == rows.start;
                        for (j, t) in chunk_tiles.clone().enumerate() {
                            let (n, p0) = at(t);
                            let copy = xt[(j * p.c + cs.start) * PR..].as_mut_ptr();
                            let tile = PosTile {
                                rows: ks.len(),
                                live: PR.min(p.hw - p0),
                                kc: cs.len(),
                                w: w[ks.start * p.c + cs.start * ks.len()..].as_ptr(),
                                ws: 1,
                                wc: ks.len(),
                                x: if copying { p.x.add(n * p.xs[0] + cs.start * p.xs[1] + p0) } else { copy },
                                xs: if copying { p.xs[1] } else { PR },
                                y: p.y.add(n * p.ys[0] + ks.start * p.ys[1] + p0),
                                ys: p.ys[1],
                                first: kb == 0,
                                prefetch: copying,
                                copy_to: if copying { copy } else { std::ptr::null_mut() },
                                x_padded: !copying,
                            };
                            (kern.tile)(&tile, (kb + 1 == kblocks).then_some(&fin));
                        }
                    }
                }
            }
        });
    });
}
