//! ConvolutionForwardBias / BackwardBias on the CPU, threaded over channels. Forward takes
//! the dense chunked path (`dense.rs`) when y is dense and b varies along C only.

use crate::backend::cpu::tensor_io::access::{load, store};
use crate::backend::cpu::tensor_io::convert;
use crate::backend::cpu::tensor_io::dense::{Dense, Rows, CHUNK};
use crate::problem::shape5;
use crate::tensor::TensorDesc;
use rayon::prelude::*;

/// Strides of `b` over `y`'s 5-D index space: 0 along dims where b has length 1.
pub fn broadcast_strides(b: &TensorDesc) -> [usize; 5] {
    let (nc, sp, s) = shape5(b);
    let lens = [nc[0], nc[1], sp[0], sp[1], sp[2]];
    std::array::from_fn(|i| if lens[i] == 1 { 0 } else { s[i] })
}

/// y = α·(y + b) + β·y (MIOpen's formula; (1, 0) is y += b).
pub fn forward(y: &TensorDesc, yp: u64, b: &TensorDesc, bp: u64, alpha: f32, beta: f32) {
    let bs = broadcast_strides(b);
    if forward_dense(y, yp, b, bp, &bs, alpha, beta) {
        return;
    }
    let ([n, c], [dd, hh, ww], ys) = shape5(y);
    let (ydt, bdt) = (y.dtype(), b.dtype());
    (0..n * c).into_par_iter().for_each(|nc| {
        let (ni, ci) = (nc / c, nc % c);
        for d in 0..dd {
            for h in 0..hh {
                for w in 0..ww {
                    let yo = ni * ys[0] + ci * ys[1] + d * ys[2] + h * ys[3] + w * ys[4];
                    let bo = ni * bs[0] + ci * bs[1] + d * bs[2] + h * bs[3] + w * bs[4];
                    // SAFETY: offsets lie inside the validated descriptors; each (n, c) plane of
                    // y is written by one task only.
                    unsafe {
                        let v = load(ydt, yp, yo);
                        store(ydt, yp, yo, alpha * (v + load(bdt, bp, bo)) + beta * v);
                    }
                }
            }
        }
    });
}

/// `forward` over dense chunks when b is per-channel (or a scalar); false (nothing written)
/// otherwise. Same formula and order as the per-element loop, so the results are identical.
fn forward_dense(y: &TensorDesc, yp: u64, b: &TensorDesc, bp: u64, bs: &[usize; 5], alpha: f32, beta: f32) -> bool {
    let (ydt, bdt) = (y.dtype(), b.dtype());
    let Some(d) = Dense::of(y).filter(|_| convert::supported(ydt) && bs.iter().enumerate().all(|(i, &s)| i == 1 || s == 0)) else {
        return false;
    };
    // SAFETY: b holds C elements at stride bs[1] (0 when broadcast), inside its descriptor.
    let bv: Vec<f32> = (0..d.c).map(|c| unsafe { load(bdt, bp, c * bs[1]) }).collect();
    // Channels-last chunks read the bias as a slice starting at channel e0 % C.
    let tiled: Vec<f32> = match d.rows {
        Rows::Planar => Vec::new(),
        Rows::ChannelsLast => (0..d.c + CHUNK).map(|i| bv[i % d.c]).collect(),
    };
    d.for_each_chunk(2 * ydt.size(), |k, [buf]| {
        let v = &mut buf[..k.len];
        // SAFETY: the chunk lies inside y (dense arrangement of y); chunks are disjoint.
        unsafe { convert::load(ydt, yp, k.off, v) };
        match d.rows {
            Rows::Planar => {
                let bc = bv[k.c];
                v.iter_mut().for_each(|x| *x = alpha * (*x + bc) + beta * *x);
            }
            Rows::ChannelsLast => {
                let bt = &tiled[k.e0 % d.c..][..k.len];
                v.iter_mut().zip(bt).for_each(|(x, bc)| *x = alpha * (*x + bc) + beta * *x);
            }
        }
        // SAFETY: as for the load.
        unsafe { convert::store(ydt, yp, k.off, v) };
    });
    true
}

/// db[c] = α·Σ_{n,spatial} dy + β·db[c] (f64 accumulation; β = 0 never reads db).
pub fn backward(dy: &TensorDesc, dyp: u64, db: &TensorDesc, dbp: u64, alpha: f32, beta: f32) {
    let ([n, c], [dd, hh, ww], s) = shape5(dy);
    let dbc = shape5(db).2[1];
    let (dt, bdt) = (dy.dtype(), db.dtype());
    let sums: Vec<f64> = (0..c)
        .into_par_iter()
        .map(|ci| {
            let mut acc = 0f64;
            for ni in 0..n {
                for d in 0..dd {
                    for h in 0..hh {
                        for w in 0..ww {
                            // SAFETY: inside the validated dy descriptor.
                            acc += unsafe { load(dt, dyp, ni * s[0] + ci * s[1] + d * s[2] + h * s[3] + w * s[4]) } as f64;
                        }
                    }
                }
            }
            acc
        })
        .collect();
    for (ci, sum) in sums.into_iter().enumerate() {
        // SAFETY: db has C elements at stride dbc (validated).
        unsafe {
            let mut r = alpha * sum as f32;
            if beta != 0.0 {
                r += beta * load(bdt, dbp, ci * dbc);
            }
            store(bdt, dbp, ci * dbc, r);
        }
    }
}
