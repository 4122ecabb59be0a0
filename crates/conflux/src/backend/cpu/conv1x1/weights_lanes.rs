//! Backward-weights of a 1×1 stride-1 f32 convolution with channels-first x and dy on small
//! maps (7 × 7, 14 × 14), with the input channels in the vector lanes: per image,
//! dW[k][c .. c + 32] += Σ over positions q of dy[k][q] · xᵀ[q][c .. c + 32], on the forward
//! positions-in-lanes tiles (`positions_kernel`): dy's rows are broadcast in place, and x is
//! transposed per image into scratch (a row of C channels per position).
//!
//! Why beside the dot products (`weights`): a small map gives each dot-product tile a short run
//! against its 24 sums' round trip, with a 49-position row leaving 15 of 64 lanes masked. Here
//! the lanes are channels, full but for the last tile, and a tile's reduction over an image's
//! positions needs one load and store of its 14 × 32 sums. Images are added into dW in order
//! (the first overwrites it), so reruns give the same bits. α = 1, β = 0 and dW's channels
//! consecutive only (the tiles store rows of channels).

use super::positions_kernel::{PosKernels, PosTile, KR, PR};
use super::weights::WeightsProblem;
use crate::backend::cpu::even_part as part;
use crate::backend::cpu::gemm::{with_scratch, Slot};
use rayon::prelude::*;

/// Channels of x transposed per block: a block's rows of x are read once, and its columns of
/// the transposed image written while they stay in L1.
const TRANSPOSE_BLOCK: usize = 16;

/// xᵀ of each image into `dst` (n × hw × C, position-major).
///
/// # Safety
/// `p.x` addresses p.n images of p.c channels of p.hw consecutive positions at strides `p.xs`.
unsafe fn transpose_x(p: &WeightsProblem, dst: &mut [f32]) {
    let (c, hw) = (p.c, p.hw);
    dst.par_chunks_mut(hw * c).enumerate().for_each(|(n, img)| {
        for c0 in (0..c).step_by(TRANSPOSE_BLOCK) {
            for ch in c0..(c0 + TRANSPOSE_BLOCK).min(c) {
                // SAFETY: channel ch of image n has hw consecutive positions.
                let row = unsafe { std::slice::from_raw_parts(p.x.add(n * p.xs[0] + ch * p.xs[1]), hw) };
                for (q, v) in row.iter().enumerate() {
                    img[q * c + ch] = *v;
                }
            }
        }
    });
}

/// dW = Σ over images of the products (α = 1, β = 0) for `p`, whose dW has its channels
/// consecutive (`p.dws[1] == 1`).
///
/// # Safety
/// As `weights::backward_weights`; `kern` runs on this CPU.
pub unsafe fn backward_weights(p: &WeightsProblem, kern: &PosKernels, threads: usize) {
    assert!(p.dws[1] == 1 && p.alpha == 1.0 && p.beta == 0.0, "conv1x1 weights (lanes): dW rows of consecutive channels, α = 1, β = 0");
    if p.k == 0 || p.c == 0 {
        return;
    }
    if p.n == 0 {
        // An empty batch: dW = 0.
        for k in 0..p.k {
            // SAFETY: dW's row k holds C consecutive channels.
            unsafe { std::slice::from_raw_parts_mut(p.dw.add(k * p.dws[0]), p.c).fill(0.0) };
        }
        return;
    }
    let (rblocks, ctiles) = (p.k.div_ceil(KR), p.c.div_ceil(PR));
    // Units (a row block × a channel tile) in row-block-major order, three tasks per thread
    // where there are that many units; a unit runs all images before the next (its 14 × 32
    // sums stay in L1 between images). Walking images outermost, all of a task's units per
    // image, measured slower on the layers this path takes
    // (bench/results/2026-11-29-cpu-bwd-1x1.md).
    let units = rblocks * ctiles;
    let tasks = units.min(3 * threads.max(1)).max(1);
    with_scratch(Slot::Conv, p.n * p.hw * p.c, |xt| {
        // SAFETY: as the function's.
        unsafe { transpose_x(p, xt) };
        let xt = &*xt;
        (0..tasks).into_par_iter().for_each(|t| {
            for u in part(units, tasks, t) {
                let (r, ct) = (u / ctiles, u % ctiles);
                let ks = part(p.k, rblocks, r);
                let c0 = ct * PR;
                for n in 0..p.n {
                    let tile = PosTile {
                        rows: ks.len(),
                        live: PR.min(p.c - c0),
                        kc: p.hw,
                        w: p.dy.wrapping_add(n * p.ys[0] + ks.start * p.ys[1]),
                        ws: p.ys[1],
                        wc: 1,
                        x: xt[n * p.hw * p.c + c0..].as_ptr(),
                        xs: p.c,
                        y: p.dw.wrapping_add(ks.start * p.dws[0] + c0),
                        ys: p.dws[0],
                        first: n == 0,
                        prefetch: false,
                        copy_to: std::ptr::null_mut(),
                        x_padded: false,
                    };
                    // SAFETY: rows ks of dy's image n hold hw positions each, xᵀ's rows of
                    // image n hold C channels (live of them from c0), dW's rows ks hold C
                    // channels from c0; units write disjoint tiles of dW.
                    unsafe { (kern.tile)(&tile, None) };
                }
            }
        });
    });
}
