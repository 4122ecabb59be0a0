//! Forward 1×1 convolution (stride 1, no padding) of f32 images on AMX tiles at f32 accuracy
//! (`amx.rs`), in blocks of 32 filters × 32 positions. NCHW (x and y with positions
//! consecutive): y (K × HW) = W (K × C) · x (C × HW), W the A operand (rows of C) and x tiles
//! B (VNNI rows of channel pairs), so each block row is a run of one of y's channel rows.
//! NHWC (channels consecutive): yᵀ (HW × K) = xᵀ · Wᵀ, x tiles the A operand (each position's
//! channels a row) and W B, each block row a run of one position's channels.
//!
//! W is split into bf16 parts once (`pack_w`: per call, or once per filter address under the
//! constant-weights promise); each task splits its x tiles in chunks (`Walk`), then runs
//! every filter block of its group over the chunk, the finished 32 × 32 blocks going through
//! bias and ReLU to y. An image's last tile of ≤ 16 positions runs half the tile multiplies
//! (`Tiles::block_half`): 14×14 images are 6 tiles + 4 positions, so a full block would spend
//! half its multiplies on padding there (measured on the 14×14 layers:
//! bench/results/2026-11-25-cpu-session18.md).

use crate::backend::cpu::x86::amx::{self, Tiles, ALIGN_SLACK, STEP, TILE};
use crate::backend::cpu::conv1x1::channels::{self as conv1x1, Problem};
use crate::backend::cpu::conv1x1::channels_kernel;
use crate::backend::cpu::even_part as part;
use crate::backend::cpu::gemm::{with_scratch, Slot};
use rayon::prelude::*;

/// Filters and positions per block.
const BLOCK: usize = 32;
/// Most bytes of split x one task keeps per chunk of tiles, so the chunk stays in L2 beside
/// the filter block; larger chunks measured slower (bench/results/2026-11-25-cpu-amx.md).
const CHUNK_BYTES: usize = 512 << 10;
/// Fewest tiles per chunk: each filter block's split W is read once per chunk, from memory
/// where C is large, so one-tile chunks would read all of W once per tile (measured on
/// 2048-7-7-512: bench/results/2026-11-27-history-from-status.md, conv1x1_amx.rs).
const MIN_CHUNK: usize = 3;

/// Steps of 32 channels (C rounded up).
fn steps(p: &Problem) -> usize { p.c.div_ceil(32) }

/// u16 values of W packed by `pack_w`: per block of 32 filters (K rounded up), one operand
/// step per 32 channels (`amx` module comment).
pub fn packed_len(p: &Problem) -> usize { p.k.div_ceil(BLOCK) * steps(p) * STEP }

/// Whether `p` is NHWC-like (else NCHW-like: `forward` says which strides it takes).
fn channels_last(p: &Problem) -> bool { !(p.xp == 1 && p.yp == 1) }

/// Up to 32 rows of C values (`row(i)`, None past the last) split into A's layout (`amx`
/// module comment): `steps` operand steps at `dst`, zero past the rows and C.
///
/// # Safety
/// AVX-512F; every row `row` gives has C readable values; `dst` has steps·STEP writable ones.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn split_rows(row: impl Fn(usize) -> Option<*const f32>, c: usize, steps: usize, dst: *mut u16) {
    for i in 0..BLOCK {
        let src = row(i);
        for chunk in 0..2 * steps {
            let c0 = 16 * chunk;
            let (s, half) = (chunk / 2, chunk % 2);
            // Part j of rows 0–15 / 16–31: tile 2j / 2j + 1 of the step.
            let at = |j: usize| dst.add(s * STEP + (2 * j + i / 16) * TILE + (i % 16) * 32 + 16 * half);
            let live = if src.is_some() { c.saturating_sub(c0).min(16) } else { 0 };
            amx::split_chunk(src.unwrap_or(std::ptr::null()).wrapping_add(c0), live, [at(0), at(1), at(2)]);
        }
    }
}

/// Filter block fb of an NCHW-like problem's W split into A's layout at `dst` (zero past K
/// and C).
///
/// # Safety
/// As `pack_w`; `dst` has steps·STEP writable values.
unsafe fn split_w_block(p: &Problem, fb: usize, dst: *mut u16) {
    let row = |i: usize| (fb * BLOCK + i < p.k).then(|| p.w.wrapping_add((fb * BLOCK + i) * p.ws0));
    #[cfg(target_arch = "x86_64")]
    split_rows(row, p.c, steps(p), dst);
}

/// W split into bf16 parts, per block of 32 filters: NCHW in A's layout (rows are filters),
/// NHWC in B's (VNNI rows of channel pairs, columns are filters, from `conv1x1::pack_all`'s
/// transposed panels); zero past K and C.
///
/// # Safety
/// `p.w` addresses K filters of C values at row stride `p.ws0`; `dst` has `packed_len(p)`
/// values; AVX-512F.
pub unsafe fn pack_w(p: &Problem, dst: &mut [u16]) {
    assert_eq!(p.wc, 1, "conv1x1 (AMX): each filter's channels must be consecutive");
    let (st, fblocks) = (steps(p), p.k.div_ceil(BLOCK));
    let base = dst.as_mut_ptr() as usize;
    if !channels_last(p) {
        (0..fblocks).into_par_iter().for_each(|fb| {
            // SAFETY: this block's steps inside dst.
            unsafe { split_w_block(p, fb, (base as *mut u16).add(fb * st * STEP)) };
        });
        return;
    }
    // Wᵀ in 32-filter panels ([channel][32 filters], zero past K: the AVX-512 1×1 driver's
    // `pack_all`), then each panel's C rows as B.
    let kern = channels_kernel::best().expect("conv1x1_amx: AMX comes with AVX-512");
    with_scratch(Slot::Conv, conv1x1::packed_len(p), |wt| {
        conv1x1::pack_all(p, &kern, wt);
        let wt = &*wt;
        (0..fblocks).into_par_iter().for_each(|fb| {
            // SAFETY: this block's steps inside dst; panel fb holds C rows of 32 values.
            #[cfg(target_arch = "x86_64")]
            unsafe {
                amx::vnni_tile(wt.as_ptr().add(fb * p.c * BLOCK), BLOCK, p.c, BLOCK, st, (base as *mut u16).add(fb * st * STEP))
            };
        });
    });
}

/// x tile t (32 positions from p0 of image n) split into its operand's layout at `dst`: B
/// (NCHW) or A (NHWC).
///
/// # Safety
/// As `forward`; `dst` has steps·STEP writable values.
unsafe fn split_x(p: &Problem, n: usize, p0: usize, st: usize, dst: *mut u16) {
    let live = BLOCK.min(p.hw - p0);
    #[cfg(target_arch = "x86_64")]
    if channels_last(p) {
        split_rows(|i| (i < live).then(|| p.x.add(n * p.xs[0] + (p0 + i) * p.xp)), p.c, st, dst);
    } else {
        amx::vnni_tile(p.x.add(n * p.xs[0] + p0), p.xs[1], p.c, live, st, dst);
    }
}

/// Filter block `w` (at k0) times x tile `x` (positions p0.. of image n), through bias and
/// ReLU to y.
///
/// # Safety
/// As `forward`; `w` and `x` hold their operands' steps.
unsafe fn block(tiles: &Tiles, p: &Problem, w: *const u16, x: *const u16, st: usize, n: usize, k0: usize, p0: usize) {
    // Not zeroed first: the tile stores write all of it.
    let mut c = std::mem::MaybeUninit::<[f32; BLOCK * BLOCK]>::uninit();
    let nhwc = channels_last(p);
    let (a, b) = if nhwc { (x, w) } else { (w, x) };
    if BLOCK.min(p.hw - p0) <= 16 {
        // An image's last tile of at most 16 positions: x's other half is zeros.
        tiles.block_half(a, b, st, c.as_mut_ptr() as *mut f32, nhwc);
    } else {
        tiles.block_32x32(a, b, st, c.as_mut_ptr() as *mut f32, true);
    }
    // By reference: `assume_init` by value copied the 4 KiB block (a memcpy call per block,
    // ~5% of 64-55-55-256).
    let c = c.assume_init_ref();
    let (filters, positions) = (BLOCK.min(p.k - k0), BLOCK.min(p.hw - p0));
    #[cfg(target_arch = "x86_64")]
    if nhwc {
        store_rows(p, c, positions, filters, p.y.add(n * p.ys[0] + p0 * p.yp + k0), p.yp, p.bias.wrapping_add(k0), false);
    } else {
        store_rows(p, c, filters, positions, p.y.add(n * p.ys[0] + k0 * p.ys[1] + p0), p.ys[1], p.bias.wrapping_add(k0), true);
    }
}

/// Whether W has at least twice as many 32-filter blocks as x has 32-position tiles: then x
/// is split whole first and each task takes filter blocks over all of it (`AmxSplit`): W
/// dominates, so x is split once and W read once. Below that ratio neither this nor the split
/// by tiles beat CpuConvGemm1x1 (bench/results/2026-11-25-cpu-amx.md).
pub fn shares_x(p: &Problem) -> bool { p.k.div_ceil(BLOCK) >= 2 * p.n * p.hw.div_ceil(BLOCK) }

/// Fewer 32-position tiles than this (N=1-sized layers) with at least `FEW_TILES_BLOCKS` filter
/// blocks per thread: one task per thread, each splitting all of x itself and taking its
/// share of the filter blocks, if that share of split W stays in L2 (`FEW_TILES_W_BYTES`)
/// across the chunks of x or x is one chunk (`AmxSplit::choose`).
pub const FEW_TILES: usize = 32;
/// See `FEW_TILES`.
pub const FEW_TILES_BLOCKS: usize = 4;
/// See `FEW_TILES`: half of a core's L2.
const FEW_TILES_W_BYTES: usize = 1 << 20;

/// Whether `AmxSplit::choose` gives one task per thread, each splitting all of x itself and
/// taking its share of the filter blocks (see `FEW_TILES`), for `tiles` 32-position tiles,
/// `fblocks` 32-filter blocks and C channels.
pub fn few_tiles_split(tiles: usize, fblocks: usize, c: usize, nhwc: bool, threads: usize) -> bool {
    let st = c.div_ceil(32);
    let w_share = fblocks.div_ceil(threads.max(1)) * st * STEP * 2;
    let x_once = tiles <= chunk_tiles(st);
    tiles < FEW_TILES && fblocks >= FEW_TILES_BLOCKS * threads && (x_once || (!nhwc && w_share <= FEW_TILES_W_BYTES))
}

/// Work split. Tasks of consecutive position tiles (numbered across the batch) × groups of
/// filter blocks, each task splitting its own x: by tiles where there are many (no x split
/// twice), by filter blocks where there are few tiles and many blocks; or, where `shares_x`
/// and the blocks are too few for that (`shared_x`), all of x split first, then one task
/// per filter block over all tiles (`forward_shared_x`).
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
        // Few tiles: split by tiles, each task would hold one or two and read all of W per
        // tile, from memory; one task per thread instead splits all of x itself and reads its
        // share of W once per chunk. With few filter blocks x split twice costs more than W
        // read per tile, and at N=8 (enough tiles) the split by tiles wins, hence the
        // conditions of `few_tiles_split`. NHWC splits x by rows, which costs more, so it takes
        // this split only where x is one chunk. Measurements:
        // bench/results/2026-11-25-cpu-session16.md and
        // bench/results/2026-11-27-history-from-status.md (conv1x1_amx.rs).
        if few_tiles_split(tiles, fblocks, p.c, channels_last(p), threads) {
            return AmxSplit { tile_blocks: 1, filter_groups: threads.max(1), shared_x: false };
        }
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
            // SAFETY: tile t's part of the buffer.
            unsafe { split_x(p, n, p0, st, (xt as *mut u16).add(t * tile_len)) };
        });
        let groups = groups.clamp(1, fblocks);
        (0..groups).into_par_iter().for_each(|gi| {
            let tiles_amx = Tiles::configure();
            for fb in part(fblocks, groups, gi) {
                for t in 0..tiles {
                    let (n, p0) = at(t);
                    block(&tiles_amx, p, w.as_ptr().add(fb * tile_len), (xt as *const u16).add(t * tile_len), st, n, fb * BLOCK, p0);
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
    pub fn choose(p: &Problem) -> Walk { Walk { chunk: chunk_tiles(steps(p)) } }
}

/// Tiles of x per chunk for `st` steps of 32 channels.
fn chunk_tiles(st: usize) -> usize { (CHUNK_BYTES / (st * STEP * 2)).max(MIN_CHUNK) }

/// Whether W is better split by the tasks of `split` themselves (`SplitW::PerTask`) than by
/// `pack_w` first: NCHW-like, and every filter block in one task (no tile blocks, not
/// `shared_x`), so no block is split twice.
pub fn splits_w_per_task(p: &Problem, split: AmxSplit) -> bool { !channels_last(p) && split.tile_blocks == 1 && !split.shared_x }

/// Where `forward` finds W split into bf16 parts.
#[derive(Clone, Copy)]
pub enum SplitW<'a> {
    /// Split by `pack_w` (64-byte aligned).
    Packed(&'a [u16]),
    /// Each task splits its own filter blocks from `p.w` as it first needs them (NCHW-like
    /// problems, splits other than `shared_x`): no pass over all of W first, and with few tiles
    /// (`few_tiles_split`) each block is used while it is in cache.
    PerTask,
}

/// y = ReLU?(conv(x, W) + bias?) with W split as `w` says.
///
/// # Safety
/// The pointers and strides of `p` address valid tensors with, in x and y alike, either the
/// positions consecutive (xp = yp = 1: NCHW) or the channels (xs[1] = ys[1] = 1: NHWC); y
/// does not overlap x or W; a packed `w` holds `pack_w`'s result for this W; `amx::available()`.
pub unsafe fn forward(p: &Problem, w: SplitW, split: AmxSplit, walk: Walk) {
    let nchw = p.xp == 1 && p.yp == 1;
    assert_eq!(p.wc, 1, "conv1x1 (AMX): each filter's channels must be consecutive");
    assert!(nchw || (p.xs[1] == 1 && p.ys[1] == 1), "conv1x1_amx: x and y need their positions or their channels consecutive");
    if let SplitW::Packed(w) = w {
        assert!(w.len() >= packed_len(p), "conv1x1_amx: packed W too short");
        assert!(w.as_ptr() as usize % 64 == 0, "conv1x1_amx: packed W not 64-byte aligned (`amx::skip_to_64`)");
    } else {
        assert!(nchw && !split.shared_x, "conv1x1_amx: W split per task needs NCHW and a split other than shared_x");
    }
    if p.n == 0 || p.k == 0 || p.hw == 0 {
        return;
    }
    if let (true, SplitW::Packed(w)) = (split.shared_x, w) {
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
        let own_w = if let SplitW::PerTask = w { blocks.len() * st * STEP + ALIGN_SLACK } else { 0 };
        with_scratch(Slot::Task, (cl * st * STEP + ALIGN_SLACK).div_ceil(2), |scratch| {
            with_scratch(Slot::Task2, own_w.div_ceil(2), |wscratch| {
                let xt = scratch.as_mut_ptr() as *mut u16;
                let xt = xt.add(amx::skip_to_64(xt));
                let wt = wscratch.as_mut_ptr() as *mut u16;
                let wt = wt.wrapping_add(amx::skip_to_64(wt));
                for first in task_tiles.clone().step_by(cl) {
                    let chunk_tiles = first..(first + cl).min(task_tiles.end);
                    for (j, t) in chunk_tiles.clone().enumerate() {
                        let (n, p0) = at(t);
                        split_x(p, n, p0, st, xt.add(j * st * STEP));
                    }
                    for (bi, fb) in blocks.clone().enumerate() {
                        let wb = match w {
                            SplitW::Packed(w) => w.as_ptr().add(fb * st * STEP),
                            SplitW::PerTask => {
                                let dst = wt.add(bi * st * STEP);
                                if first == task_tiles.start {
                                    split_w_block(p, fb, dst);
                                }
                                dst as *const u16
                            }
                        };
                        for (j, t) in chunk_tiles.clone().enumerate() {
                            let (n, p0) = at(t);
                            block(&tiles_amx, p, wb, xt.add(j * st * STEP), st, n, fb * BLOCK, p0);
                        }
                    }
                }
            });
        });
    });
}

/// A finished block (`rows` × `cols` of its 32 × 32) through bias and ReLU to y: row i at
/// `y + i·ys`, its columns consecutive. The bias (at `bias`, or null) goes per row
/// (`bias_per_row`: NCHW, rows are filters) or per column (NHWC).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn store_rows(p: &Problem, c: &[f32; BLOCK * BLOCK], rows: usize, cols: usize, y: *mut f32, ys: usize, bias: *const f32, bias_per_row: bool) {
    use std::arch::x86_64::*;
    let (zero, hi) = (_mm512_setzero_ps(), _mm512_set1_ps(p.relu.hi));
    let col_bias: [__m512; 2] = std::array::from_fn(|h| {
        let n = cols.saturating_sub(16 * h).min(16);
        let mask = if n == 16 { 0xffff } else { (1u16 << n) - 1 };
        if p.bias.is_null() || bias_per_row { zero } else { _mm512_maskz_loadu_ps(mask, bias.add(16 * h)) }
    });
    for i in 0..rows {
        let row_bias = if p.bias.is_null() || !bias_per_row { zero } else { _mm512_set1_ps(*bias.add(i)) };
        let v: [__m512; 2] = std::array::from_fn(|h| {
            let v = _mm512_add_ps(_mm512_add_ps(_mm512_loadu_ps(c.as_ptr().add(i * BLOCK + 16 * h)), row_bias), col_bias[h]);
            // v first: a NaN v gives 0, like the generic ReLU.
            if p.relu.on { _mm512_min_ps(_mm512_max_ps(v, zero), hi) } else { v }
        });
        crate::backend::cpu::x86::line_store::store(y.add(i * ys), v, cols);
    }
}
