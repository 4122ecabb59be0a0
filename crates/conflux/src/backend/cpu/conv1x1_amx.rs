//! Forward 1×1 convolution (stride 1, no padding) of f32 NCHW images on AMX tiles at f32
//! accuracy (`amx.rs`): per image and group, y (K × HW) = W (K × C) · x (C × HW) in blocks of
//! 32 filters × 32 positions, so each block row is a run of one of y's channel rows.
//!
//! W is split into three planes of bf16 rows once (`pack_w`: per call, or once per filter
//! address under the constant-weights promise); each task splits its x tiles into VNNI rows
//! in chunks (`Walk`), then runs every filter block of its group over the chunk, the
//! finished 32 × 32 blocks going through bias and ReLU to y.

use super::amx::{self, Tiles, ALIGN_SLACK, STEP, TILE};
use super::conv1x1::Problem;
use super::even_part as part;
use super::gemm::{with_scratch, Slot};
use rayon::prelude::*;

/// Filters and positions per block.
const BLOCK: usize = 32;
/// Most bytes of split x one task keeps per chunk of tiles (in L2 with the filter block):
/// 512-28-28-128 and 64-55-55-256 N=8 measured 15–20% slower with 1.5 MiB.
const CHUNK_BYTES: usize = 512 << 10;
/// Fewest tiles per chunk: each filter block's split W is read once per chunk, from memory
/// where C is large (2048-7-7-512 N=8: one tile per chunk 3.0–3.15 ms, three 2.59–2.63).
const MIN_CHUNK: usize = 3;

/// Steps of 32 channels (C rounded up).
fn steps(p: &Problem) -> usize { p.c.div_ceil(32) }

/// u16 values of W packed by `pack_w`: per block of 32 filters (K rounded up), one operand
/// step per 32 channels (`amx` module comment).
pub fn packed_len(p: &Problem) -> usize { p.k.div_ceil(BLOCK) * steps(p) * STEP }

/// W split into bf16 parts in A's layout (`amx` module comment), zero past K and C.
///
/// # Safety
/// `p.w` addresses K filters of C values at row stride `p.ws0`; `dst` has `packed_len(p)`
/// values; AVX-512F.
pub unsafe fn pack_w(p: &Problem, dst: &mut [u16]) {
    let st = steps(p);
    let base = dst.as_mut_ptr() as usize;
    (0..p.k.div_ceil(BLOCK) * BLOCK).into_par_iter().for_each(|k| {
        let (fb, row) = (k / BLOCK, k % BLOCK);
        for chunk in 0..2 * st {
            let c0 = 16 * chunk;
            let (s, half) = (chunk / 2, chunk % 2);
            // Part i of rows 0–15 / 16–31: tile 2i / 2i + 1 of the step.
            let tile = |i: usize| (fb * st + s) * STEP + (2 * i + row / 16) * TILE + (row % 16) * 32 + 16 * half;
            let dst: [*mut u16; 3] = std::array::from_fn(|i| (base as *mut u16).wrapping_add(tile(i)));
            let live = if k < p.k { p.c.saturating_sub(c0).min(16) } else { 0 };
            // SAFETY: the 16 values of each part lie inside dst; filter k's channels c0..c0 +
            // live are inside W.
            #[cfg(target_arch = "x86_64")]
            unsafe {
                amx::split_chunk(p.w.wrapping_add(k * p.ws0 + c0), live, dst)
            };
        }
    });
}
/// Whether W has at least twice as many 32-filter blocks as x has 32-position tiles: then x
/// is split whole first and each task takes filter blocks over all of it (`AmxSplit`).
/// 512-7-7-2048 and 256-14-14-1024 N=1 measured 20–25% faster than CpuConvGemm1x1 so;
/// 1024-14-14-256 N=1 (8 blocks, 7 tiles) 15–35% slower, either way.
pub fn shares_x(p: &Problem) -> bool { p.k.div_ceil(BLOCK) >= 2 * p.n * p.hw.div_ceil(BLOCK) }

/// Work split. Tasks of consecutive position tiles (numbered across the batch) × groups of
/// filter blocks (only when there are too few tiles for three tasks per thread), each task
/// splitting its own x; or, where `shares_x` (`shared_x`), all of x split first, then one
/// task per filter block over all tiles, so each block of W is read once
/// (`forward_shared_x`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AmxSplit {
    pub tile_blocks: usize,
    pub filter_groups: usize,
    pub shared_x: bool,
}

impl AmxSplit {
    pub fn choose(p: &Problem, threads: usize) -> AmxSplit {
        let (tiles, fblocks) = (p.n * p.hw.div_ceil(BLOCK), p.k.div_ceil(BLOCK).max(1));
        let want = 3 * threads.max(1);
        if shares_x(p) {
            return AmxSplit { tile_blocks: 1, filter_groups: fblocks, shared_x: true };
        }
        let filter_groups = want.div_ceil(tiles.max(1)).clamp(1, fblocks);
        AmxSplit { tile_blocks: tiles.min(want.div_ceil(filter_groups)).max(1), filter_groups, shared_x: false }
    }
}

/// `forward` with x split whole first, then `groups` tasks of filter blocks over all tiles.
unsafe fn forward_shared_x(p: &Problem, w: &[u16], groups: usize) {
    let (st, per_image) = (steps(p), p.hw.div_ceil(BLOCK));
    let (tiles, fblocks) = (p.n * per_image, p.k.div_ceil(BLOCK));
    let tile_len = st * STEP;
    let at = |t: usize| (t / per_image, t % per_image * BLOCK);
    with_scratch(Slot::PackA, (tiles * tile_len + ALIGN_SLACK).div_ceil(2), |scratch| {
        let xt = scratch.as_mut_ptr() as *mut u16;
        let xt = xt.add(amx::skip_to_64(xt)) as usize;
        (0..tiles).into_par_iter().for_each(|t| {
            let (n, p0) = at(t);
            // SAFETY: tile t's part of the buffer; image n's positions p0.. are inside x.
            #[cfg(target_arch = "x86_64")]
            unsafe {
                amx::vnni_tile(p.x.add(n * p.xs[0] + p0), p.xs[1], p.c, BLOCK.min(p.hw - p0), st, (xt as *mut u16).add(t * tile_len))
            };
        });
        let groups = groups.clamp(1, fblocks);
        (0..groups).into_par_iter().for_each(|gi| {
            let tiles_amx = Tiles::configure();
            for fb in part(fblocks, groups, gi) {
                let a = w.as_ptr().add(fb * tile_len);
                for t in 0..tiles {
                    let (n, p0) = at(t);
                    let mut c = [0f32; BLOCK * BLOCK];
                    tiles_amx.block_32x32(a, (xt as *const u16).add(t * tile_len), st, c.as_mut_ptr(), true);
                    store(p, &c, n, fb * BLOCK, p0);
                }
            }
        });
    });
}

/// Tiles of x split per chunk.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Walk {
    pub chunk: usize,
}

impl Walk {
    pub fn choose(p: &Problem) -> Walk { Walk { chunk: (CHUNK_BYTES / (steps(p) * STEP * 2)).max(MIN_CHUNK) } }
}

/// y = ReLU?(conv(x, W) + bias?) for an NCHW `p` with W packed by `pack_w` (64-byte aligned).
///
/// # Safety
/// The pointers and strides of `p` address valid tensors with x and y positions consecutive
/// (xp = yp = 1); y does not overlap x or W; `w` holds `pack_w`'s result for this W;
/// `amx::available()` is true.
pub unsafe fn forward(p: &Problem, w: &[u16], split: AmxSplit, walk: Walk) {
    assert!(p.xp == 1 && p.yp == 1, "conv1x1_amx: positions must be consecutive in x and y");
    assert!(w.len() >= packed_len(p), "conv1x1_amx: packed W too short");
    assert!(w.as_ptr() as usize % 64 == 0, "conv1x1_amx: packed W not 64-byte aligned (`amx::skip_to_64`)");
    if p.n == 0 || p.k == 0 || p.hw == 0 {
        return;
    }
    if split.shared_x {
        return forward_shared_x(p, w, split.filter_groups);
    }
    let st = steps(p);
    let per_image = p.hw.div_ceil(BLOCK);
    let tiles = p.n * per_image;
    let fblocks = p.k.div_ceil(BLOCK);
    let (tb, fg) = (split.tile_blocks.clamp(1, tiles), split.filter_groups.clamp(1, fblocks));
    let chunk = walk.chunk.max(1);
    let at = |t: usize| (t / per_image, t % per_image * BLOCK);
    (0..tb * fg).into_par_iter().for_each(|task| {
        let (ti, gi) = (task / fg, task % fg);
        let (blocks, task_tiles) = (part(fblocks, fg, gi), part(tiles, tb, ti));
        let tiles_amx = Tiles::configure();
        let cl = chunk.min(task_tiles.len()).max(1);
        with_scratch(Slot::Task, (cl * st * STEP + ALIGN_SLACK).div_ceil(2), |scratch| {
            let xt = scratch.as_mut_ptr() as *mut u16;
            let xt = xt.add(amx::skip_to_64(xt));
            for first in task_tiles.clone().step_by(cl) {
                let chunk_tiles = first..(first + cl).min(task_tiles.end);
                // x split into B's layout, tile by tile.
                for (j, t) in chunk_tiles.clone().enumerate() {
                    let (n, p0) = at(t);
                    #[cfg(target_arch = "x86_64")]
                    amx::vnni_tile(p.x.add(n * p.xs[0] + p0), p.xs[1], p.c, BLOCK.min(p.hw - p0), st, xt.add(j * st * STEP));
                }
                for fb in blocks.clone() {
                    let a = w.as_ptr().add(fb * st * STEP);
                    for (j, t) in chunk_tiles.clone().enumerate() {
                        let (n, p0) = at(t);
                        let mut c = [0f32; BLOCK * BLOCK];
                        tiles_amx.block_32x32(a, xt.add(j * st * STEP), st, c.as_mut_ptr(), true);
                        store(p, &c, n, fb * BLOCK, p0);
                    }
                }
            }
        });
    });
}

/// A finished block (filters k0.., positions p0.. of image n) through bias and ReLU to y.
unsafe fn store(p: &Problem, c: &[f32; BLOCK * BLOCK], n: usize, k0: usize, p0: usize) {
    let (rows, live) = (BLOCK.min(p.k - k0), BLOCK.min(p.hw - p0));
    #[cfg(target_arch = "x86_64")]
    store_avx512(p, c, n, k0, p0, rows, live);
    #[cfg(not(target_arch = "x86_64"))]
    unreachable!("conv1x1_amx without AMX ({rows}×{live} block of {:?})", (c.len(), n, p0));
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn store_avx512(p: &Problem, c: &[f32; BLOCK * BLOCK], n: usize, k0: usize, p0: usize, rows: usize, live: usize) {
    use std::arch::x86_64::*;
    let zero = _mm512_setzero_ps();
    for i in 0..rows {
        let k = k0 + i;
        let bias = if p.bias.is_null() { zero } else { _mm512_set1_ps(*p.bias.add(k)) };
        let y = p.y.add(n * p.ys[0] + k * p.ys[1] + p0);
        for h in 0..2 {
            let m = live.saturating_sub(16 * h).min(16);
            if m == 0 {
                break;
            }
            let mask: __mmask16 = if m == 16 { 0xffff } else { (1u16 << m) - 1 };
            let v = _mm512_add_ps(_mm512_loadu_ps(c.as_ptr().add(i * BLOCK + 16 * h)), bias);
            // v first: a NaN v gives 0, like the generic ReLU.
            let v = if p.relu { _mm512_max_ps(v, zero) } else { v };
            _mm512_mask_storeu_ps(y.add(16 * h), mask, v);
        }
    }
}
