//! Forward 1×1 convolution (stride 1, no padding) of f32 NCHW images with the output channels
//! in the vector lanes: per image and group, yᵀ (HW × K) = xᵀ (HW × C) · Wᵀ (C × K).
//!
//! Why not the generic GEMM (`conv_gemm.rs`), whose tiles put output positions in the lanes:
//! - x is read in place. The GEMM packs it into panels first, a large share of a layer with
//!   few channels such as 64-55-55-64 (bench/results/2026-11-22-cpu-gemm1x1.md).
//! - Tiles hold 14 positions and the last tile of an image is exactly as long as what is left,
//!   so nothing is padded. The GEMM pads each image's columns to 32: 49 → 64 on 7×7 layers.
//! - The price is W, transposed per call into 32-channel panels, and each finished tile
//!   transposed in registers before it is stored (a tile row is one position of 32 channels).

use crate::backend::cpu::conv1x1::channels_kernel::{Kernels, Out, Transpose, MR, NR};
use crate::backend::cpu::gemm::{with_scratch, Slot};
use rayon::prelude::*;

/// One group of a 1×1 forward convolution. Element strides: x (n, c) and position `xp`, W filter
/// rows of `c` consecutive values, y (n, k) and position `yp`. Per tensor, either the positions
/// (NCHW: xp = 1) or the channels (NHWC: xs[1] = 1) are consecutive.
#[derive(Clone, Copy, Debug)]
pub struct Problem {
    pub n: usize,
    pub c: usize,
    pub k: usize,
    pub hw: usize,
    pub x: *const f32,
    pub xs: [usize; 2],
    pub xp: usize,
    pub w: *const f32,
    /// Element strides of W between filters and between a filter's channels (1 for KCRS; the
    /// backward-data rewrite reads W transposed by swapping them). The channels-in-lanes and
    /// AMX drivers need wc = 1; the positions-in-lanes one takes any.
    pub ws0: usize,
    pub wc: usize,
    pub y: *mut f32,
    pub ys: [usize; 2],
    pub yp: usize,
    /// k values, or null.
    pub bias: *const f32,
    /// ReLU or ReLU6 after the bias, or none.
    pub relu: crate::backend::cpu::clamp::Clamp,
}

// SAFETY: tasks read x and W and write disjoint parts of y (see `forward_with`).
unsafe impl Sync for Problem {}
unsafe impl Send for Problem {}

/// Largest K block: a 32-channel panel of it (32 KiB) stays in L1 while the tiles stream x.
const KC_MAX: usize = 256;
/// Largest K block when each channel row of x lies in a 4 KiB page of its own (x channel
/// stride ≥ 4 KiB: 32×32 positions and up): a tile then touches one page per channel, and 256
/// pages overflow the first-level TLB. 64 measured best among 32–256 on the 55×55 layers and
/// changed nothing on 7×7–28×28 ones (bench/results/2026-11-25-cpu-constant-weights.md).
const KC_MAX_PAGED: usize = 64;

/// The K block limit for `p`'s x (see `KC_MAX_PAGED`).
pub(crate) fn kc_max(p: &Problem) -> usize {
    if p.xs[1] * 4 >= 4096 { KC_MAX_PAGED } else { KC_MAX }
}

/// Work split: tasks of `mb` tiles (MR positions of one image each, numbered across the batch)
/// × `gp` channel panels.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Split {
    pub mb: usize,
    pub gp: usize,
}

impl Split {
    /// Each task packs the W panels it uses, and reads x once per panel group, so: the fewest
    /// tile blocks × K (W packed again per block) + panel groups × N·HW (x read again per group),
    /// with at least three tasks per thread where there are that many tiles, and, with more
    /// than 256 channels, a partial-sum block (mb·MR × gp·32 f32) of at most 128 KiB. (Not for
    /// the 64-channel blocks of paged x, `KC_MAX_PAGED`: with C ≤ 256 that limit measured
    /// slower; bench/results/2026-11-27-history-from-status.md, conv1x1.rs.)
    pub fn choose(p: &Problem, threads: usize) -> Split {
        let (tiles, panels) = (p.n * p.hw.div_ceil(MR), p.k.div_ceil(NR));
        let want = 3 * threads;
        let mut best: Option<(usize, Split)> = None;
        let mut gp = panels;
        loop {
            let groups = panels.div_ceil(gp);
            for hs in 1..=tiles {
                let mb = tiles.div_ceil(hs);
                let (blocks, tasks) = (tiles.div_ceil(mb), groups * tiles.div_ceil(mb));
                if (p.c > KC_MAX && mb * MR * gp * NR > 32 * 1024 && mb > 1) || (tasks < want && mb > 1) {
                    continue;
                }
                let cost = blocks * p.k + groups * p.n * p.hw;
                if best.is_none_or(|(c, _)| cost < c) {
                    best = Some((cost, Split { mb, gp }));
                }
                break;
            }
            if gp == 1 {
                break;
            }
            gp = gp.div_ceil(2);
        }
        best.map_or(Split { mb: 1, gp: 1 }, |(_, s)| s)
    }
}

/// One W block as a 32-channel panel, `dst[c·32 + j]` = W[k0 + j][c0 + c] for c < kc (0 past
/// K): 16 × 32 transposes where the block is whole, plain copies at its edges.
fn pack_w(p: &Problem, k0: usize, c0: usize, kc: usize, dst: &mut [f32], transpose: Option<Transpose>) {
    let live = NR.min(p.k - k0);
    for cb in (0..kc).step_by(16) {
        let cw = 16.min(kc - cb);
        let block = &mut dst[cb * NR..(cb + cw) * NR];
        // SAFETY (pointer arithmetic): filter k0 + j, channel c0 + cb is inside W.
        let src = unsafe { p.w.add(k0 * p.ws0 + c0 + cb) };
        if let (Some(t), true) = (transpose, cw == 16 && live == NR) {
            // SAFETY: 32 filters × 16 channels; block holds 16·32 values.
            unsafe { t(src, p.ws0, block.as_mut_ptr()) };
            continue;
        }
        for j in 0..NR {
            for t in 0..cw {
                // SAFETY: filter k0 + j < K, channel c0 + cb + t < C.
                block[t * NR + j] = if j < live { unsafe { *src.add(j * p.ws0 + t) } } else { 0.0 };
            }
        }
    }
}

/// Values of `p`'s W packed whole by `pack_all`.
pub fn packed_len(p: &Problem) -> usize { p.k.div_ceil(NR) * p.c * NR }

/// W packed whole, panel by panel: panel q's channel c at `dst[(q·C + c)·32 + j]` = W[32q + j][c]
/// (0 past K). The K blocks of `forward_with` are slices of it, so with constant weights the
/// per-call packing goes away.
///
/// # Safety
/// `p.w` addresses K filters of C values at row stride `p.ws0`; `dst` has `packed_len(p)` values.
pub unsafe fn pack_all(p: &Problem, kern: &Kernels, dst: &mut [f32]) {
    assert_eq!(p.wc, 1, "conv1x1: the channels-in-lanes driver reads each filter's channels consecutively");
    dst[..packed_len(p)].par_chunks_mut(p.c * NR).enumerate().for_each(|(q, panel)| pack_w(p, q * NR, 0, p.c, panel, kern.transpose));
}

/// y = ReLU?(conv(x, W) + bias?) with `kern` and `split`; W read from `packed` (`pack_all`'s
/// layout) when given, else packed per task.
///
/// # Safety
/// The pointers and strides of `p` address valid tensors; `kern` runs on this CPU; y does not
/// overlap x or W; `packed`, if given, holds `pack_all`'s result for this W.
pub unsafe fn forward_with(p: &Problem, kern: &Kernels, split: Split, packed: Option<&[f32]>) {
    assert_eq!(p.wc, 1, "conv1x1: the channels-in-lanes driver reads each filter's channels consecutively");
    if p.n == 0 || p.k == 0 || p.hw == 0 {
        return;
    }
    let (per_image, panels) = (p.hw.div_ceil(MR), p.k.div_ceil(NR));
    let tiles = p.n * per_image;
    let kblocks = p.c.div_ceil(kc_max(p)).max(1);
    let kc = p.c.div_ceil(kblocks).max(1);
    let (mb, gp) = (split.mb.clamp(1, tiles), split.gp.clamp(1, panels));
    let (tblocks, groups) = (tiles.div_ceil(mb), panels.div_ceil(gp));
    // Kept W streams from memory on its first tile, so that tile prefetches it; W packed per
    // task is already in cache (bench/results/2026-11-25-cpu-session14.md).
    let pf = packed.is_some();
    (0..tblocks * groups).into_par_iter().for_each(|task| {
        let (g, tb) = (task / tblocks, task % tblocks);
        let tile_range = tb * mb..((tb + 1) * mb).min(tiles);
        let panel_range = g * gp..((g + 1) * gp).min(panels);
        let ldc = panel_range.len() * NR;
        let cbuf_len = if p.c > kc { tile_range.len() * MR * ldc } else { 0 };
        with_scratch(Slot::Tile, cbuf_len, |cbuf| {
            let cbuf_ptr = cbuf.as_mut_ptr();
            let wlen = if packed.is_some() { 0 } else { panel_range.len() * kc * NR };
            with_scratch(Slot::PackB, wlen, |wblocks| {
                for kb in 0..kblocks {
                    let c0 = kb * kc;
                    let kcb = kc.min(p.c - c0);
                    let (first, last) = (kb == 0, c0 + kcb == p.c);
                    // Pack W for the whole group first, so each panel's block is transposed once.
                    if packed.is_none() {
                        for (qi, q) in panel_range.clone().enumerate() {
                            pack_w(p, q * NR, c0, kcb, &mut wblocks[qi * kc * NR..], kern.transpose);
                        }
                    }
                    let block = |qi: usize| match packed {
                        Some(w) => w[((panel_range.start + qi) * p.c + c0) * NR..].as_ptr(),
                        None => wblocks[qi * kc * NR..].as_ptr(),
                    };
                    let run = |ti: usize, qi: usize| {
                        let gt = tile_range.start + ti;
                        let (n, hw0) = (gt / per_image, gt % per_image * MR);
                        let k0 = (panel_range.start + qi) * NR;
                        let out = Out {
                            y: p.y.add(n * p.ys[0] + k0 * p.ys[1] + hw0 * p.yp),
                            ldy: p.ys[1],
                            yp: p.yp,
                            bias: if p.bias.is_null() { p.bias } else { p.bias.add(k0) },
                            relu: p.relu,
                            cols: NR.min(p.k - k0),
                        };
                        let a = p.x.add(n * p.xs[0] + c0 * p.xs[1] + hw0 * p.xp);
                        let c = cbuf_ptr.wrapping_add(ti * MR * ldc + qi * NR);
                        let tile = if ti == 0 && pf { kern.tile_pf } else { kern.tile };
                        tile(MR.min(p.hw - hw0), kcb, a, p.xs[1], p.xp, block(qi), c, ldc, first, last.then_some(&out));
                    };
                    let (nt, nq) = (tile_range.len(), panel_range.len());
                    if nt * MR > nq * NR {
                        // More x than W in the task: tile by tile over the panels, so each tile's
                        // x (one line per channel) comes from memory once, then from L1.
                        (0..nt).for_each(|ti| (0..nq).for_each(|qi| run(ti, qi)));
                    } else {
                        // More W: panel by panel, its block staying in L1 over the tiles; the
                        // first tile streams the block in.
                        (0..nq).for_each(|qi| (0..nt).for_each(|ti| run(ti, qi)));
                    }
                }
            });
        });
    });
}
