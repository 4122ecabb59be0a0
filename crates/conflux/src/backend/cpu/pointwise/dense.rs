//! Dense fast paths of the pointwise kernels: every tensor of the operation shares one
//! dense arrangement (`dense.rs`), so each chunk is loaded to f32 once, transformed step by
//! step in vectorizable loops, and stored once. Returning false means "not dense: use the
//! per-element path"; nothing has been written then.

use crate::backend::cpu::pointwise::activation as act_chunk;
use crate::backend::cpu::tensor_io::convert::{self, load, store};
use crate::backend::cpu::tensor_io::dense::Dense;
use crate::backend::cpu::pointwise::epilogue::{CpuEpilogue, DenseEpilogue};
use crate::activation::ActivationDesc;
use crate::tensor::TensorDesc;

/// y = chain(x).
pub fn chain(x: &TensorDesc, xp: u64, y: &TensorDesc, yp: u64, epi: &CpuEpilogue) -> bool {
    let (xd, yd) = (x.dtype(), y.dtype());
    let Some(d) = Dense::shared(y, &[x]).filter(|_| convert::supported(xd) && convert::supported(yd)) else { return false };
    let Some(de) = DenseEpilogue::new(epi, y, &d) else { return false };
    d.for_each_chunk(xd.size() + yd.size(), |k, [buf, zbuf]| {
        let v = &mut buf[..k.len];
        // SAFETY: x and y share the dense arrangement, so the chunk's elements lie inside both;
        // chunks are disjoint, so each output element has one writer. x is read in full before
        // y is written, so x == y (in place) is fine.
        unsafe { load(xd, xp, k.off, v) };
        de.apply(v, &k, zbuf);
        unsafe { store(yd, yp, k.off, v) };
    });
    true
}

/// dx = act_backward(dy, x, y); x and y (0 when absent) share dy's descriptor.
pub fn activation_backward(act: &ActivationDesc, dy: &TensorDesc, dyp: u64, dx: &TensorDesc, dxp: u64, xp: u64, yp: u64) -> bool {
    let (dt, dxt) = (dy.dtype(), dx.dtype());
    let Some(d) = Dense::shared(dy, &[dx]).filter(|_| convert::supported(dt) && convert::supported(dxt)) else { return false };
    let reads = 1 + (xp != 0) as usize + (yp != 0) as usize;
    d.for_each_chunk(reads * dt.size() + dxt.size(), |k, [g, xv, yv]| {
        let (g, xv, yv) = (&mut g[..k.len], &mut xv[..k.len], &mut yv[..k.len]);
        // SAFETY: dy, x, y and dx share the dense arrangement (x and y have dy's descriptor by
        // contract), so the chunk lies inside each; chunks are disjoint (one writer of dx).
        unsafe {
            load(dt, dyp, k.off, g);
            // The per-element path's defaults: x = 0 when absent, y = f(x) when absent.
            if xp != 0 {
                load(dt, xp, k.off, xv);
            } else {
                xv.fill(0.0);
            }
            if yp != 0 {
                load(dt, yp, k.off, yv);
            } else {
                yv.copy_from_slice(xv);
                act_chunk::forward(act, yv);
            }
        }
        act_chunk::backward(act, g, xv, yv);
        // SAFETY: as above.
        unsafe { store(dxt, dxp, k.off, g) };
    });
    true
}
