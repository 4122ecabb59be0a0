//! Forward 1×1 convolution (stride 1, no padding) of f32 NCHW images on AMX tiles at f32
//! accuracy (`amx.rs`): per image and group, y (K × HW) = W (K × C) · x (C × HW) in blocks of
//! 32 filters × 32 positions, so each block row is a run of one of y's channel rows.
//!
//! W is split into three planes of bf16 rows once (`pack_w`: per call, or once per filter
//! address under the constant-weights promise); each task splits its x tiles into VNNI rows
//! in chunks (`Walk`), then runs every filter block of its group over the chunk, the
//! finished 32 × 32 blocks going through bias and ReLU to y.

use super::amx::{self, Tiles, VNNI_ROW};
use super::conv1x1::Problem;
use super::even_part as part;
use super::gemm::{with_scratch, Slot};
use rayon::prelude::*;

/// Filters and positions per block.
const BLOCK: usize = 32;
/// Most bytes of split x one task keeps per chunk of tiles (in L2 with the filter block).
const CHUNK_BYTES: usize = 512 << 10;

/// C rounded up to whole tile steps (32 bf16).
fn c_padded(p: &Problem) -> usize { p.c.div_ceil(32) * 32 }
/// K rounded up to whole blocks.
fn k_padded(p: &Problem) -> usize { p.k.div_ceil(BLOCK) * BLOCK }

/// u16 values of W packed by `pack_w`: three planes of K (padded) rows × C (padded).
pub fn packed_len(p: &Problem) -> usize { 3 * k_padded(p) * c_padded(p) }

/// W split into three bf16 planes (`amx::split_row`), each K_pad rows of C_pad values, zero
/// past K and C.
///
/// # Safety
/// `p.w` addresses K filters of C values at row stride `p.ws0`; `dst` has `packed_len(p)`
/// values; AVX-512F.
pub unsafe fn pack_w(p: &Problem, dst: &mut [u16]) {
    let (kp, cp) = (k_padded(p), c_padded(p));
    let plane = kp * cp;
    let base = dst.as_mut_ptr() as usize;
    (0..kp).into_par_iter().for_each(|k| {
        let rows: [*mut u16; 3] = std::array::from_fn(|i| (base as *mut u16).wrapping_add(i * plane + k * cp));
        // SAFETY: row k of each plane is inside dst; filter k < K is a row of W (a padding
        // filter reads nothing).
        #[cfg(target_arch = "x86_64")]
        unsafe {
            let len = if k < p.k { p.c } else { 0 };
            amx::split_row(p.w.wrapping_add(k * p.ws0), len, rows, cp)
        };
    });
}

/// Work split: tasks of consecutive position tiles (numbered across the batch) × groups of
/// filter blocks; enough tasks for three per thread, filter groups only when there are too
/// few tiles for that.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AmxSplit {
    pub tile_blocks: usize,
    pub filter_groups: usize,
}

impl AmxSplit {
    pub fn choose(p: &Problem, threads: usize) -> AmxSplit {
        let tiles = p.n * p.hw.div_ceil(BLOCK);
        let want = 3 * threads.max(1);
        let filter_groups = want.div_ceil(tiles.max(1)).clamp(1, p.k.div_ceil(BLOCK).max(1));
        AmxSplit { tile_blocks: tiles.min(want.div_ceil(filter_groups)).max(1), filter_groups }
    }
}

/// Tiles of x split per chunk.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Walk {
    pub chunk: usize,
}

impl Walk {
    pub fn choose(p: &Problem) -> Walk { Walk { chunk: (CHUNK_BYTES / (3 * c_padded(p) * 64)).max(1) } }
}

/// y = ReLU?(conv(x, W) + bias?) for an NCHW `p` with W packed by `pack_w`.
///
/// # Safety
/// The pointers and strides of `p` address valid tensors with x and y positions consecutive
/// (xp = yp = 1); y does not overlap x or W; `w` holds `pack_w`'s result for this W;
/// `amx::available()` is true.
pub unsafe fn forward(p: &Problem, w: &[u16], split: AmxSplit, walk: Walk) {
    assert!(p.xp == 1 && p.yp == 1, "conv1x1_amx: positions must be consecutive in x and y");
    assert!(w.len() >= packed_len(p), "conv1x1_amx: packed W too short");
    if p.n == 0 || p.k == 0 || p.hw == 0 {
        return;
    }
    let (kp, cp) = (k_padded(p), c_padded(p));
    let per_image = p.hw.div_ceil(BLOCK);
    let tiles = p.n * per_image;
    let fblocks = kp / BLOCK;
    let (tb, fg) = (split.tile_blocks.clamp(1, tiles), split.filter_groups.clamp(1, fblocks));
    let chunk = walk.chunk.max(1);
    // One tile's split x: C_pad/2 VNNI rows per plane.
    let tile_len = cp / 2 * (VNNI_ROW / 2);
    let at = |t: usize| (t / per_image, t % per_image * BLOCK);
    (0..tb * fg).into_par_iter().for_each(|task| {
        let (ti, gi) = (task / fg, task % fg);
        let (blocks, task_tiles) = (part(fblocks, fg, gi), part(tiles, tb, ti));
        let tiles_amx = Tiles::configure();
        with_scratch(Slot::Task, (3 * chunk.min(task_tiles.len()) * tile_len).div_ceil(2), |scratch| {
            let xt = scratch.as_mut_ptr() as *mut u16;
            let plane_len = chunk.min(task_tiles.len()) * tile_len;
            for first in task_tiles.clone().step_by(chunk) {
                let chunk_tiles = first..(first + chunk).min(task_tiles.end);
                for (j, t) in chunk_tiles.clone().enumerate() {
                    let (n, p0) = at(t);
                    let live = BLOCK.min(p.hw - p0);
                    for r in 0..cp / 2 {
                        let row = |c: usize| if c < p.c { p.x.add(n * p.xs[0] + c * p.xs[1] + p0) } else { std::ptr::null() };
                        let dst: [*mut u16; 3] = std::array::from_fn(|i| xt.add(i * plane_len + j * tile_len + r * (VNNI_ROW / 2)));
                        #[cfg(target_arch = "x86_64")]
                        amx::vnni_rows(row(2 * r), row(2 * r + 1), live, dst);
                    }
                }
                for fb in blocks.clone() {
                    let k0 = fb * BLOCK;
                    let a: [*const u16; 3] = std::array::from_fn(|i| w.as_ptr().add(i * kp * cp + k0 * cp));
                    for (j, t) in chunk_tiles.clone().enumerate() {
                        let (n, p0) = at(t);
                        let b: [*const u16; 3] = std::array::from_fn(|i| xt.add(i * plane_len + j * tile_len) as *const u16);
                        let mut c = [0f32; BLOCK * BLOCK];
                        tiles_amx.block_32x32(a, cp * 2, b, cp, c.as_mut_ptr());
                        store(p, &c, n, k0, p0);
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
