//! Softmax forward and backward. A group (what one softmax normalizes: the channels of a pixel,
//! or a whole image) is walked as element offsets shared by every group plus a base offset per
//! group. Channel mode over planar tensors takes up to 16 neighbouring pixels side by side,
//! whose elements are consecutive in memory; channels-last groups are contiguous already.
//! Sums are kept in f64, so long groups lose no accuracy.

use super::{blend, by_dtype, LayerPtrs};
use crate::element::Element;
use crate::error::Result;
use crate::problem::shape5;
use crate::softmax::{SoftmaxAlgorithm, SoftmaxMode};
use crate::tensor::TensorDesc;
use rayon::prelude::*;

const LANES: usize = 16;

/// Offsets of every group (`bases`) and of every element inside a group (`elems`), for up to
/// three tensors of equal lengths: [src, aux, dst].
struct Groups {
    bases: Vec<[usize; 3]>,
    elems: Vec<[usize; 3]>,
    /// Groups processed side by side: consecutive groups' elements are adjacent in memory.
    lanes: usize,
}

impl Groups {
    fn new(mode: SoftmaxMode, t: [&TensorDesc; 3]) -> Groups {
        let sh = t.map(shape5);
        let (nc, sp) = (sh[0].0, sh[0].1);
        let pixel = |k: usize, [d, h, w]: [usize; 3]| d * sh[k].2[2] + h * sh[k].2[3] + w * sh[k].2[4];
        let pixels: Vec<[usize; 3]> = (0..sp[0]).flat_map(|d| (0..sp[1]).flat_map(move |h| (0..sp[2]).map(move |w| [d, h, w]))).collect();
        let cs = |k: usize| sh[k].2[1];
        let ns = |k: usize| sh[k].2[0];
        match mode {
            SoftmaxMode::Channel => {
                let bases = (0..nc[0]).flat_map(|n| pixels.iter().map(move |&p| std::array::from_fn(|k| n * ns(k) + pixel(k, p)))).collect();
                let elems = (0..nc[1]).map(|c| std::array::from_fn(|k| c * cs(k))).collect();
                // Consecutive pixels one element apart in every tensor (planar rows).
                let adjacent = (0..3).all(|k| sp[2] > 1 && sh[k].2[4] == 1) && cs(0) > 1;
                Groups { bases, elems, lanes: if adjacent { LANES } else { 1 } }
            }
            SoftmaxMode::Instance => {
                let bases = (0..nc[0]).map(|n| std::array::from_fn(|k| n * ns(k))).collect();
                let mut elems: Vec<[usize; 3]> = (0..nc[1]).flat_map(|c| pixels.iter().map(move |&p| std::array::from_fn(|k| c * cs(k) + pixel(k, p)))).collect();
                // Memory order of the source: the reductions do not depend on the order.
                elems.sort_unstable_by_key(|e| e[0]);
                Groups { bases, elems, lanes: 1 }
            }
        }
    }

    /// Run `f` on blocks of groups in parallel: up to `lanes` groups of one image whose bases
    /// are consecutive.
    fn par_blocks(&self, f: impl Fn(&[[usize; 3]]) + Sync) {
        self.bases.par_chunks(self.lanes).for_each(|block| {
            // Split a block where bases stop being consecutive (an image or row boundary).
            let mut start = 0;
            for j in 1..=block.len() {
                if j == block.len() || block[j][0] != block[j - 1][0] + 1 {
                    f(&block[start..j]);
                    start = j;
                }
            }
        });
    }
}

/// y = α·softmax(x) + β·y.
pub fn forward(algo: SoftmaxAlgorithm, mode: SoftmaxMode, x: &TensorDesc, y: &TensorDesc, p: &LayerPtrs) -> Result<()> {
    by_dtype!(x.dtype(), forward_t(algo, &Groups::new(mode, [x, y, y]), p));
    Ok(())
}

fn forward_t<T: Element>(algo: SoftmaxAlgorithm, g: &Groups, p: &LayerPtrs) {
    g.par_blocks(|block| {
        let (src, dst) = (p.src as *const T, p.dst as *mut T);
        let lanes = block.len();
        let mut m = [0f32; LANES];
        let mut s = [0f64; LANES];
        // SAFETY (every access below): offsets within the validated element spaces; each
        // group is written by one task.
        let ld = |e: &[usize; 3], l: usize| unsafe { (*src.add(block[l][0] + e[0])).to_f32() };
        if algo != SoftmaxAlgorithm::Fast {
            m[..lanes].fill(f32::NEG_INFINITY);
            for e in &g.elems {
                for l in 0..lanes {
                    m[l] = m[l].max(ld(e, l));
                }
            }
        }
        for e in &g.elems {
            for l in 0..lanes {
                s[l] += ((ld(e, l) - m[l]) as f64).exp();
            }
        }
        let log_s: [f32; LANES] = std::array::from_fn(|l| s[l].ln() as f32);
        let inv_s: [f32; LANES] = std::array::from_fn(|l| (1.0 / s[l]) as f32);
        for e in &g.elems {
            for l in 0..lanes {
                let v = ld(e, l) - m[l];
                let r = if algo == SoftmaxAlgorithm::Log { v - log_s[l] } else { v.exp() * inv_s[l] };
                let o = block[l][2] + e[2];
                unsafe { *dst.add(o) = blend::<T>(p.dst, o, r, p.alpha, p.beta) };
            }
        }
    });
}

/// dx = α·grad + β·dx from dy (`p.src`) and the forward output y (`p.aux`).
pub fn backward(algo: SoftmaxAlgorithm, mode: SoftmaxMode, y: &TensorDesc, dy: &TensorDesc, dx: &TensorDesc, p: &LayerPtrs) -> Result<()> {
    by_dtype!(dy.dtype(), backward_t(algo, &Groups::new(mode, [dy, y, dx]), p));
    Ok(())
}

fn backward_t<T: Element>(algo: SoftmaxAlgorithm, g: &Groups, p: &LayerPtrs) {
    let log = algo == SoftmaxAlgorithm::Log;
    g.par_blocks(|block| {
        let (dy, y, dx) = (p.src as *const T, p.aux as *const T, p.dst as *mut T);
        let lanes = block.len();
        let mut s = [0f64; LANES];
        // SAFETY (every access below): offsets within the validated element spaces; each
        // group is written by one task.
        let ld = |e: &[usize; 3], l: usize| unsafe { ((*dy.add(block[l][0] + e[0])).to_f32(), (*y.add(block[l][1] + e[1])).to_f32()) };
        for e in &g.elems {
            for l in 0..lanes {
                let (d, yv) = ld(e, l);
                s[l] += if log { d as f64 } else { (d * yv) as f64 };
            }
        }
        let s32: [f32; LANES] = std::array::from_fn(|l| s[l] as f32);
        for e in &g.elems {
            for l in 0..lanes {
                let (d, yv) = ld(e, l);
                let r = if log { d - yv.exp() * s32[l] } else { yv * (d - s32[l]) };
                let o = block[l][2] + e[2];
                unsafe { *dx.add(o) = blend::<T>(p.dst, o, r, p.alpha, p.beta) };
            }
        }
    });
}
