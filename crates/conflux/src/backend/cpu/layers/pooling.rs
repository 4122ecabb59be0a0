//! Pooling forward and backward. Forward walks each output's window; backward gathers, for
//! each input element, the outputs whose windows cover it (one writer per dx element, so no
//! atomics and bit-identical reruns). Indices are stored packed in N, C, D, H, W order.

use super::{blend, by_dtype, load_index, store_index, LayerPtrs};
use crate::element::Element;
use crate::error::Result;
use crate::pooling::{PoolGeom, PoolingMode};
use crate::problem::shape5;
use crate::tensor::TensorDesc;
use rayon::prelude::*;

/// Shapes of one pooling: N, C, input and output extents, x-side and y-side strides.
#[derive(Clone, Copy)]
struct Shape {
    n: usize,
    c: usize,
    input: [usize; 3],
    output: [usize; 3],
    xs: [usize; 5],
    ys: [usize; 5],
}

impl Shape {
    fn of(input: &TensorDesc, output: &TensorDesc) -> Shape {
        let ((nc, isp, xs), (_, osp, ys)) = (shape5(input), shape5(output));
        Shape { n: nc[0], c: nc[1], input: isp, output: osp, xs, ys }
    }
    /// Channels are the contiguous dimension of both tensors.
    fn channels_inner(&self) -> bool { self.c > 1 && self.xs[1] == 1 && self.ys[1] == 1 }
    #[inline(always)]
    fn xo(&self, p: [usize; 3]) -> usize { p[0] * self.xs[2] + p[1] * self.xs[3] + p[2] * self.xs[4] }
    #[inline(always)]
    fn yo(&self, p: [usize; 3]) -> usize { p[0] * self.ys[2] + p[1] * self.ys[3] + p[2] * self.ys[4] }
    /// Packed index position of output `o` of plane (n, c).
    #[inline(always)]
    fn ko(&self, n: usize, c: usize, o: [usize; 3]) -> usize {
        (((n * self.c + c) * self.output[0] + o[0]) * self.output[1] + o[1]) * self.output[2] + o[2]
    }
}

fn positions(ext: [usize; 3]) -> impl Iterator<Item = [usize; 3]> {
    (0..ext[0]).flat_map(move |d| (0..ext[1]).flat_map(move |h| (0..ext[2]).map(move |w| [d, h, w])))
}

/// y = α·pool(x) + β·y; with `save`, each maximum's index is written to `p.index`.
pub fn forward(x: &TensorDesc, y: &TensorDesc, g: &PoolGeom, save: bool, p: &LayerPtrs) -> Result<()> {
    by_dtype!(x.dtype(), forward_t(Shape::of(x, y), g, save && g.mode == PoolingMode::Max, p));
    Ok(())
}

fn forward_t<T: Element>(s: Shape, g: &PoolGeom, save: bool, p: &LayerPtrs) {
    let max = g.mode == PoolingMode::Max;
    if s.channels_inner() {
        // One task per output row (n, od, oh); vectors over C.
        (0..s.n * s.output[0] * s.output[1]).into_par_iter().for_each(|row| {
            let (n, od, oh) = (row / (s.output[0] * s.output[1]), row / s.output[1] % s.output[0], row % s.output[1]);
            let mut acc = vec![0f32; s.c];
            let mut idx = vec![0u64; s.c];
            for ow in 0..s.output[2] {
                let o = [od, oh, ow];
                acc.fill(if max { f32::NEG_INFINITY } else { 0.0 });
                idx.fill(0);
                let r: [(usize, usize); 3] = std::array::from_fn(|a| g.window_range(a, o[a], s.input[a]));
                for pos in positions([r[0].1 - r[0].0, r[1].1 - r[1].0, r[2].1 - r[2].0]) {
                    let i = [pos[0] + r[0].0, pos[1] + r[1].0, pos[2] + r[2].0];
                    // SAFETY: offsets within x's validated element space.
                    let xs = unsafe { std::slice::from_raw_parts((p.src as *const T).add(n * s.xs[0] + s.xo(i)), s.c) };
                    if !max {
                        acc.iter_mut().zip(xs).for_each(|(a, v)| *a += v.to_f32());
                    } else if save {
                        let k = g.index_of(i, o, s.input);
                        for ((a, ix), v) in acc.iter_mut().zip(idx.iter_mut()).zip(xs) {
                            let v = v.to_f32();
                            if v > *a {
                                *a = v;
                                *ix = k;
                            }
                        }
                    } else {
                        acc.iter_mut().zip(xs).for_each(|(a, v)| *a = if v.to_f32() > *a { v.to_f32() } else { *a });
                    }
                }
                let div = if max { 1.0 } else { 1.0 / g.divisor(o, s.input) as f32 };
                let yb = n * s.ys[0] + s.yo(o);
                for c in 0..s.c {
                    // SAFETY: each output row belongs to one task.
                    unsafe {
                        *(p.dst as *mut T).add(yb + c) = blend::<T>(p.dst, yb + c, acc[c] * div, p.alpha, p.beta);
                        if save {
                            store_index(g.index_type, p.index, s.ko(n, c, o), idx[c]);
                        }
                    }
                }
            }
        });
        return;
    }
    // One task per (n, c) plane.
    (0..s.n * s.c).into_par_iter().for_each(|plane| {
        let (n, c) = (plane / s.c, plane % s.c);
        let xb = (p.src as *const T).wrapping_add(n * s.xs[0] + c * s.xs[1]);
        for o in positions(s.output) {
            let r: [(usize, usize); 3] = std::array::from_fn(|a| g.window_range(a, o[a], s.input[a]));
            let (mut best, mut k, mut sum) = (f32::NEG_INFINITY, 0u64, 0f32);
            for d in r[0].0..r[0].1 {
                for h in r[1].0..r[1].1 {
                    for w in r[2].0..r[2].1 {
                        // SAFETY: offsets within x's validated element space.
                        let v = unsafe { (*xb.add(s.xo([d, h, w]))).to_f32() };
                        sum += v;
                        if v > best {
                            best = v;
                            if save {
                                k = g.index_of([d, h, w], o, s.input);
                            }
                        }
                    }
                }
            }
            let v = if max { best } else { sum / g.divisor(o, s.input) as f32 };
            let yo = n * s.ys[0] + c * s.ys[1] + s.yo(o);
            // SAFETY: each plane belongs to one task.
            unsafe {
                *(p.dst as *mut T).add(yo) = blend::<T>(p.dst, yo, v, p.alpha, p.beta);
                if save {
                    store_index(g.index_type, p.index, s.ko(n, c, o), k);
                }
            }
        }
    });
}

/// dx = α·grad + β·dx from dy (and, for max pooling, the indices at `p.index`).
pub fn backward(dy: &TensorDesc, dx: &TensorDesc, g: &PoolGeom, p: &LayerPtrs) -> Result<()> {
    by_dtype!(dy.dtype(), backward_t(Shape::of(dx, dy), g, p));
    Ok(())
}

/// The gradient of input element `i` of plane (n, c).
#[inline(always)]
fn grad_at<T: Element>(s: &Shape, g: &PoolGeom, p: &LayerPtrs, n: usize, c: usize, i: [usize; 3]) -> f32 {
    let r: [(usize, usize); 3] = std::array::from_fn(|a| g.outputs_covering(a, i[a], s.output[a]));
    let dyb = (p.src as *const T).wrapping_add(n * s.ys[0] + c * s.ys[1]);
    let mut sum = 0f32;
    for od in r[0].0..r[0].1 {
        for oh in r[1].0..r[1].1 {
            for ow in r[2].0..r[2].1 {
                let o = [od, oh, ow];
                // SAFETY: offsets within dy's element space and the index array.
                unsafe {
                    let d = (*dyb.add(s.yo(o))).to_f32();
                    if g.mode == PoolingMode::Max {
                        if load_index(g.index_type, p.index, s.ko(n, c, o)) == g.index_of(i, o, s.input) {
                            sum += d;
                        }
                    } else {
                        sum += d / g.divisor(o, s.input) as f32;
                    }
                }
            }
        }
    }
    sum
}

fn backward_t<T: Element>(s: Shape, g: &PoolGeom, p: &LayerPtrs) {
    let store = |n: usize, c: usize, i: [usize; 3]| {
        let v = grad_at::<T>(&s, g, p, n, c, i);
        let o = n * s.xs[0] + c * s.xs[1] + s.xo(i);
        // SAFETY: one task owns each dx element (by row or plane below).
        unsafe { *(p.dst as *mut T).add(o) = blend::<T>(p.dst, o, v, p.alpha, p.beta) };
    };
    if s.channels_inner() {
        (0..s.n * s.input[0] * s.input[1]).into_par_iter().for_each(|row| {
            let (n, d, h) = (row / (s.input[0] * s.input[1]), row / s.input[1] % s.input[0], row % s.input[1]);
            for w in 0..s.input[2] {
                for c in 0..s.c {
                    store(n, c, [d, h, w]);
                }
            }
        });
    } else {
        (0..s.n * s.c).into_par_iter().for_each(|plane| {
            for i in positions(s.input) {
                store(plane / s.c, plane % s.c, i);
            }
        });
    }
}
