//! Backward-weights of a 1×1 stride-1 f32 convolution with channels-first x and dy (positions
//! consecutive): dW[k][c] = α·Σ over images and positions of dy[k][p]·x[c][p] + β·dW[k][c].
//!
//! Both operands run along the reduction, so the products are dot products of rows: a tile of
//! 4 dy rows × 6 x rows keeps 24 vectors of 16 partial sums in registers while it streams the
//! rows' positions, and nothing is transposed or packed (the GEMM path packs dy or x into
//! panels across the reduction first, a transpose of the larger tensor). Positions go in chunks
//! whose rows of x stay in L1 and of dy in L2 while every tile of the block reads them; the
//! tiles' vector sums live in a per-task buffer across chunks and images and are added across
//! lanes once, at the task's end. Tasks are blocks of (dy rows, x rows, images); the image
//! blocks' sums are added in block order, so reruns give the same bits.

use crate::backend::cpu::even_part as part;
use crate::backend::cpu::gemm::{with_scratch, Slot};
use rayon::prelude::*;

/// One group. Element strides: x (image, channel), dy (image, channel), positions consecutive
/// in both; dW (filter k, channel c).
#[derive(Clone, Copy, Debug)]
pub struct WeightsProblem {
    pub n: usize,
    pub c: usize,
    pub k: usize,
    pub hw: usize,
    pub x: *const f32,
    pub xs: [usize; 2],
    pub dy: *const f32,
    pub ys: [usize; 2],
    pub dw: *mut f32,
    pub dws: [usize; 2],
    pub alpha: f32,
    pub beta: f32,
}

// SAFETY: tasks read x and dy and write their own partial sums; dW is written once per element
// after the tasks (see `backward_weights`).
unsafe impl Sync for WeightsProblem {}
unsafe impl Send for WeightsProblem {}

/// dy rows and x rows of a register tile.
pub const TK: usize = 4;
pub const TC: usize = 6;
/// Most (dy row, x row) pairs of a task: its vector sums (64 bytes each, 256 KiB) stay in L2.
const MAX_PAIRS: usize = 4096;
/// Bytes of the rows of one chunk of positions (the block's dy and x rows) kept in L2.
const CHUNK_BYTES: usize = 384 << 10;

/// How the work is cut: blocks of `kb` dy rows and `cb` x rows (multiples of the tile), image
/// blocks `nb` of them, chunks of `pc` positions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WeightsSplit {
    pub kb: usize,
    pub cb: usize,
    pub image_blocks: usize,
    pub pc: usize,
}

impl WeightsSplit {
    /// Blocks as large as the sums' buffer allows (each extra dy block reads x again, and each
    /// extra x block dy), the smaller side whole where it fits; image blocks until there are
    /// three tasks per thread (their partial sums are small next to the rows they read).
    pub fn choose(p: &WeightsProblem, threads: usize) -> WeightsSplit {
        // x is read once per dy block and dy once per x block: square blocks of 64 where both
        // sides are larger, else the smaller side whole and the other as large as fits.
        let (k4, c6) = (p.k.next_multiple_of(TK), p.c.next_multiple_of(TC));
        let kb = k4.min(64);
        let cb = c6.min((MAX_PAIRS / kb / TC).max(1) * TC);
        let kb = k4.min((MAX_PAIRS / cb / TK).max(1) * TK);
        let blocks = p.k.div_ceil(kb) * p.c.div_ceil(cb);
        let image_blocks = (3 * threads.max(1)).div_ceil(blocks).clamp(1, p.n.max(1));
        let pc = (CHUNK_BYTES / ((kb + cb) * 4)).clamp(16, 4096) / 16 * 16;
        WeightsSplit { kb, cb, image_blocks, pc }
    }
}

/// One run of a tile: `len` positions of each of `images` images (rows `dy[i]`, `x[j]` in the
/// first; the next image's rows `dy_image` and `x_image` elements on).
#[derive(Clone, Copy, Debug)]
pub struct Span {
    pub len: usize,
    pub images: usize,
    pub dy_image: usize,
    pub x_image: usize,
}

/// The tile function: the TK × TC vectors of 16 lane sums at `acc` += the products of dy rows
/// `dy[i]` and x rows `x[j]` over the span.
pub type WeightsTileFn = unsafe fn(acc: *mut f32, dy: &[*const f32; TK], x: &[*const f32; TC], span: Span);

/// The sums of each 16 lanes of `acc` into `out` (one per vector).
pub type LaneSumsFn = fn(acc: &[f32], out: &mut [f32]);

/// A CPU's tile and lane sums.
#[derive(Clone, Copy)]
pub struct WeightsKernels {
    pub tile: WeightsTileFn,
    pub lane_sums: LaneSumsFn,
}

/// dW = α·(dyᵀ-products) + β·dW for `p` with tile function `tile`.
///
/// # Safety
/// The pointers and strides of `p` address valid tensors (positions consecutive in x and dy);
/// dW does not overlap x or dy; `tile` runs on this CPU.
pub unsafe fn backward_weights(p: &WeightsProblem, kern: WeightsKernels, split: WeightsSplit) {
    if p.k == 0 || p.c == 0 {
        return;
    }
    let (kblocks, cblocks, nblocks) = (p.k.div_ceil(split.kb), p.c.div_ceil(split.cb), split.image_blocks.clamp(1, p.n.max(1)));
    let pairs = split.kb * split.cb;
    // Partial sums: [k block][c block][image block][kb × cb], each task's own.
    with_scratch(Slot::Conv, kblocks * cblocks * nblocks * pairs, |partial| {
        partial.par_chunks_mut(pairs).enumerate().for_each(|(t, out)| {
            let (kbi, rest) = (t / (cblocks * nblocks), t % (cblocks * nblocks));
            let (cbi, nbi) = (rest / nblocks, rest % nblocks);
            let ks = kbi * split.kb..((kbi + 1) * split.kb).min(p.k);
            let cs = cbi * split.cb..((cbi + 1) * split.cb).min(p.c);
            // SAFETY: as the function's; the task reads its rows and writes its own sums.
            unsafe { task(p, kern, split, ks, cs, part(p.n, nblocks, nbi), out) };
        });
        for kbi in 0..kblocks {
            for cbi in 0..cblocks {
                let sums = &partial[(kbi * cblocks + cbi) * nblocks * pairs..][..nblocks * pairs];
                for k in kbi * split.kb..((kbi + 1) * split.kb).min(p.k) {
                    for c in cbi * split.cb..((cbi + 1) * split.cb).min(p.c) {
                        let at = (k - kbi * split.kb) * split.cb + c - cbi * split.cb;
                        let s: f32 = (0..nblocks).fold(0.0, |s, nbi| s + sums[nbi * pairs + at]);
                        // SAFETY: (k, c) is an element of dW, written once.
                        unsafe {
                            let o = p.dw.add(k * p.dws[0] + c * p.dws[1]);
                            *o = if p.beta == 0.0 { p.alpha * s } else { p.alpha * s + p.beta * *o };
                        }
                    }
                }
            }
        }
    });
}

/// One task: the sums of dy rows `ks` × x rows `cs` over images `images`, into `out` (kb × cb,
/// row k, column c). Chunks are runs of positions of one image, or whole images where several
/// fit one chunk (small maps: each tile then runs over all of them at once).
unsafe fn task(p: &WeightsProblem, kern: WeightsKernels, split: WeightsSplit, ks: std::ops::Range<usize>, cs: std::ops::Range<usize>, images: std::ops::Range<usize>, out: &mut [f32]) {
    let (kt, ct) = (ks.len().div_ceil(TK), cs.len().div_ceil(TC));
    let tile_len = TK * TC * 16;
    let per_chunk = (split.pc / p.hw.max(1)).max(1);
    with_scratch(Slot::Task, kt * ct * (tile_len + TK * TC), |buf| {
        let (acc, sums) = buf.split_at_mut(kt * ct * tile_len);
        acc.fill(0.0);
        let mut run = |n: usize, p0: usize, span: Span| {
            // Rows past the block's end repeat its last row; their sums are never read.
            let x0 = p.x.wrapping_add(n * p.xs[0] + p0);
            let dy0 = p.dy.wrapping_add(n * p.ys[0] + p0);
            for cj in 0..ct {
                let xr: [*const f32; TC] = std::array::from_fn(|j| x0.wrapping_add((cs.start + (cj * TC + j).min(cs.len() - 1)) * p.xs[1]));
                for ki in 0..kt {
                    let dyr: [*const f32; TK] = std::array::from_fn(|i| dy0.wrapping_add((ks.start + (ki * TK + i).min(ks.len() - 1)) * p.ys[1]));
                    // SAFETY: each row pointer addresses a row of image n with the span's
                    // positions, as do its images' rows after it; acc holds the tile's sums.
                    unsafe { (kern.tile)(acc[(ki * ct + cj) * tile_len..].as_mut_ptr(), &dyr, &xr, span) };
                }
            }
        };
        if per_chunk > 1 {
            for n0 in images.clone().step_by(per_chunk) {
                let span = Span { len: p.hw, images: per_chunk.min(images.end - n0), dy_image: p.ys[0], x_image: p.xs[0] };
                run(n0, 0, span);
            }
        } else {
            for n in images {
                for p0 in (0..p.hw).step_by(split.pc) {
                    run(n, p0, Span { len: split.pc.min(p.hw - p0), images: 1, dy_image: 0, x_image: 0 });
                }
            }
        }
        // Each tile's vectors added across lanes into the task's sums.
        (kern.lane_sums)(acc, sums);
        for ki in 0..kt {
            for cj in 0..ct {
                let t = &sums[(ki * ct + cj) * TK * TC..][..TK * TC];
                for i in 0..TK.min(ks.len() - ki * TK) {
                    for j in 0..TC.min(cs.len() - cj * TC) {
                        out[(ki * TK + i) * split.cb + cj * TC + j] = t[i * TC + j];
                    }
                }
            }
        }
    });
}

/// The portable tile (the tests' second opinion).
///
/// # Safety
/// `acc` holds TK·TC·16 values; every row holds the span's positions in each of its images.
pub unsafe fn tile_portable(acc: *mut f32, dy: &[*const f32; TK], x: &[*const f32; TC], span: Span) {
    for img in 0..span.images {
        for (i, d) in dy.iter().enumerate() {
            for (j, xr) in x.iter().enumerate() {
                for q in 0..span.len {
                    *acc.add((i * TC + j) * 16 + q % 16) += *d.add(img * span.dy_image + q) * *xr.add(img * span.x_image + q);
                }
            }
        }
    }
}

/// Lane sums in plain Rust, lanes added in order.
pub fn lane_sums_portable(acc: &[f32], out: &mut [f32]) {
    for (v, o) in acc.chunks_exact(16).zip(out.iter_mut()) {
        *o = v.iter().sum();
    }
}

/// The portable kernels.
pub const PORTABLE: WeightsKernels = WeightsKernels { tile: tile_portable, lane_sums: lane_sums_portable };

/// The AVX-512 kernels where the CPU has them.
pub fn best() -> Option<WeightsKernels> {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx512f") {
        return Some(WeightsKernels { tile: x86::tile, lane_sums: x86::lane_sums });
    }
    None
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Span, TC, TK};
    use std::arch::x86_64::*;

    /// TK × TC vectors of sums in registers: per 16 positions, TC x loads kept and TK dy
    /// loads each multiplied into TC sums (24 FMAs per 10 loads); the last vector masked.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn tile(acc: *mut f32, dy: &[*const f32; TK], x: &[*const f32; TC], span: Span) {
        let mut s: [[__m512; TC]; TK] = std::array::from_fn(|i| std::array::from_fn(|j| _mm512_loadu_ps(acc.add((i * TC + j) * 16))));
        let tail: __mmask16 = if span.len % 16 == 0 { 0xffff } else { (1u16 << (span.len % 16)) - 1 };
        for img in 0..span.images {
            let (xo, dyo) = (img * span.x_image, img * span.dy_image);
            let mut q = 0;
            while q < span.len {
                let m = if span.len - q >= 16 { 0xffff } else { tail };
                let xv: [__m512; TC] = std::array::from_fn(|j| _mm512_maskz_loadu_ps(m, x[j].add(xo + q)));
                for (i, row) in s.iter_mut().enumerate() {
                    let d = _mm512_maskz_loadu_ps(m, dy[i].add(dyo + q));
                    for j in 0..TC {
                        row[j] = _mm512_fmadd_ps(d, xv[j], row[j]);
                    }
                }
                q += 16;
            }
        }
        for (i, row) in s.iter().enumerate() {
            for (j, v) in row.iter().enumerate() {
                _mm512_storeu_ps(acc.add((i * TC + j) * 16), *v);
            }
        }
    }

    /// Lane sums, a vector at a time.
    pub fn lane_sums(acc: &[f32], out: &mut [f32]) {
        // SAFETY: `best` hands this out only where the CPU has AVX-512.
        unsafe { sums(acc, out) }
    }

    #[target_feature(enable = "avx512f")]
    unsafe fn sums(acc: &[f32], out: &mut [f32]) {
        for (v, o) in acc.chunks_exact(16).zip(out.iter_mut()) {
            *o = _mm512_reduce_add_ps(_mm512_loadu_ps(v.as_ptr()));
        }
    }
}
