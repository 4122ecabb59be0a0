//! Pointwise plans on the CPU: epilogue chains without a convolution, and activation
//! backward. One pass over the data: dense tensors take the chunked path
//! (`pointwise_dense.rs`), others go element by element, threaded over (n, c) planes.

pub mod activation;
pub mod bias;
pub mod bn;
mod dense;
pub mod fast_math;
pub mod epilogue;
pub mod fused_store;

use crate::backend::cpu::tensor_io::access::{load, store};
use crate::backend::cpu::pointwise::epilogue::CpuEpilogue;
use crate::activation::ActivationDesc;
use crate::tensor::TensorDesc;
use rayon::prelude::*;

pub(crate) use crate::problem::shape5;

/// Visit every element of an N×C×D×H×W shape, threaded over (n, c): `f(n, c, pos, sp)`.
pub(crate) fn par_for_each(nc: [usize; 2], sp: [usize; 3], f: impl Fn(usize, usize, [usize; 3], usize) + Sync) {
    (0..nc[0] * nc[1]).into_par_iter().for_each(|i| {
        let (n, c) = (i / nc[1], i % nc[1]);
        let mut s = 0;
        for d in 0..sp[0] {
            for h in 0..sp[1] {
                for w in 0..sp[2] {
                    f(n, c, [d, h, w], s);
                    s += 1;
                }
            }
        }
    });
}

#[inline(always)]
pub(crate) fn off5(s: &[usize; 5], n: usize, c: usize, p: [usize; 3]) -> usize {
    n * s[0] + c * s[1] + p[0] * s[2] + p[1] * s[3] + p[2] * s[4]
}

/// y = chain(x), elementwise.
pub fn chain(x: &TensorDesc, xp: u64, y: &TensorDesc, yp: u64, epi: &CpuEpilogue) {
    if crate::backend::cpu::pointwise::dense::chain(x, xp, y, yp, epi) {
        return;
    }
    let (nc, sp, xs) = shape5(x);
    let (_, _, ys) = shape5(y);
    let sp_size: usize = sp.iter().product();
    let (xd, yd) = (x.dtype(), y.dtype());
    par_for_each(nc, sp, |n, c, p, s| {
        // SAFETY: offsets come from validated descriptors; each (n, c) plane has one writer.
        unsafe {
            let v = load(xd, xp, off5(&xs, n, c, p));
            store(yd, yp, off5(&ys, n, c, p), epi.apply(v, n, c, p, s, sp_size));
        }
    });
}

/// dx = act_backward(dy, x, y), all four tensors shaped like `dy_desc` except dx.
pub fn activation_backward(act: &ActivationDesc, dy: &TensorDesc, dyp: u64, dx: &TensorDesc, dxp: u64, xp: u64, yp: u64) {
    if crate::backend::cpu::pointwise::dense::activation_backward(act, dy, dyp, dx, dxp, xp, yp) {
        return;
    }
    let (nc, sp, ds) = shape5(dy);
    let (_, _, dxs) = shape5(dx);
    let dt = dy.dtype();
    par_for_each(nc, sp, |n, c, p, _| {
        let o = off5(&ds, n, c, p);
        // SAFETY: x and y share dy's descriptor (documented); dx has one writer per plane.
        unsafe {
            let g = load(dt, dyp, o);
            let xv = if xp != 0 { load(dt, xp, o) } else { 0.0 };
            let yv = if yp != 0 { load(dt, yp, o) } else { activation::forward_one(act, xv) };
            store(dx.dtype(), dxp, off5(&dxs, n, c, p), act.backward(g, xv, yv));
        }
    });
}
