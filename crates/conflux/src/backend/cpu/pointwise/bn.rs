//! Batch-norm forward training (+ activation) and backward (+ activation backward) on the
//! CPU: one pass for the statistics, one pass for the output.

use crate::backend::cpu::tensor_io::access::{load, load_vec, store};
use crate::backend::cpu::pointwise::{off5, shape5};
use crate::activation::ActivationDesc;
use crate::tensor::TensorDesc;
use crate::types::{BnMode, DataType};
use rayon::prelude::*;

/// Parameter tensors are Float (MIOpen's derived BN descriptor type).
const PARAM: DataType = DataType::Float;

/// Which elements share one statistic: spatial → all (n, d, h, w) of a channel;
/// per-activation → all n of a (c, d, h, w).
struct Groups {
    mode: BnMode,
    nc: [usize; 2],
    sp: [usize; 3],
}

impl Groups {
    fn new(x: &TensorDesc, mode: BnMode) -> Groups {
        let (nc, sp, _) = shape5(x);
        Groups { mode, nc, sp }
    }
    fn sp_size(&self) -> usize { self.sp.iter().product() }
    fn count(&self) -> usize {
        match self.mode {
            BnMode::Spatial => self.nc[1],
            BnMode::PerActivation => self.nc[1] * self.sp_size(),
        }
    }
    /// Elements per statistic (M).
    fn m(&self) -> usize {
        match self.mode {
            BnMode::Spatial => self.nc[0] * self.sp_size(),
            BnMode::PerActivation => self.nc[0],
        }
    }
    fn pos(&self, s: usize) -> [usize; 3] {
        [s / (self.sp[1] * self.sp[2]), (s / self.sp[2]) % self.sp[1], s % self.sp[2]]
    }
    /// Visit (n, c, pos) of every member of statistic `j`.
    fn members(&self, j: usize, mut f: impl FnMut(usize, usize, [usize; 3])) {
        match self.mode {
            BnMode::Spatial => {
                for n in 0..self.nc[0] {
                    for s in 0..self.sp_size() {
                        f(n, j, self.pos(s));
                    }
                }
            }
            BnMode::PerActivation => {
                let (c, s) = (j / self.sp_size(), j % self.sp_size());
                for n in 0..self.nc[0] {
                    f(n, c, self.pos(s));
                }
            }
        }
    }
}

/// Pointers of a BN forward-training execution (Float parameters; NULL = not requested).
pub struct BnTrainPtrs {
    pub x: u64,
    pub y: u64,
    pub scale: u64,
    pub bias: u64,
    pub saved_mean: u64,
    pub saved_inv_var: u64,
    pub running_mean: u64,
    pub running_var: u64,
}

/// y = act(γ·(x − μ)·invStd + β) with batch statistics; saved and running statistics are
/// written when their pointers are non-NULL.
pub fn forward_training(
    x: &TensorDesc,
    y: &TensorDesc,
    mode: BnMode,
    p: &BnTrainPtrs,
    exp_avg: f64,
    eps: f64,
    act: Option<&ActivationDesc>,
) {
    let g = Groups::new(x, mode);
    let (_, _, xs) = shape5(x);
    let (_, _, ys) = shape5(y);
    let (xd, yd) = (x.dtype(), y.dtype());
    let m = g.m();
    // SAFETY: parameter vectors have g.count() Float elements (derived descriptor shape).
    let (gamma, beta) = unsafe { (load_vec(PARAM, p.scale, g.count()), load_vec(PARAM, p.bias, g.count())) };
    let stats: Vec<(f64, f64)> = (0..g.count())
        .into_par_iter()
        .map(|j| {
            let (mut s, mut s2) = (0f64, 0f64);
            // SAFETY: member offsets lie within x's validated descriptor.
            g.members(j, |n, c, pos| {
                let v = unsafe { load(xd, p.x, off5(&xs, n, c, pos)) } as f64;
                s += v;
                s2 += v * v;
            });
            let mean = s / m as f64;
            let var = (s2 / m as f64 - mean * mean).max(0.0);
            (mean, var)
        })
        .collect();
    for (j, &(mean, var)) in stats.iter().enumerate() {
        let inv = 1.0 / (var + eps).sqrt();
        // SAFETY: each statistic index is written once, by this loop only.
        unsafe {
            if p.saved_mean != 0 && p.saved_inv_var != 0 {
                store(PARAM, p.saved_mean, j, mean as f32);
                store(PARAM, p.saved_inv_var, j, inv as f32);
            }
            if p.running_mean != 0 && p.running_var != 0 {
                let unbiased = if m > 1 { var * m as f64 / (m as f64 - 1.0) } else { var };
                let rm = load(PARAM, p.running_mean, j) as f64;
                let rv = load(PARAM, p.running_var, j) as f64;
                store(PARAM, p.running_mean, j, ((1.0 - exp_avg) * rm + exp_avg * mean) as f32);
                store(PARAM, p.running_var, j, ((1.0 - exp_avg) * rv + exp_avg * unbiased) as f32);
            }
        }
    }
    (0..g.count()).into_par_iter().for_each(|j| {
        let (mean, var) = stats[j];
        let inv = (1.0 / (var + eps).sqrt()) as f32;
        let mean = mean as f32;
        g.members(j, |n, c, pos| {
            // SAFETY: each element belongs to exactly one statistic, so one writer.
            unsafe {
                let v = load(xd, p.x, off5(&xs, n, c, pos));
                let mut r = gamma[j] * (v - mean) * inv + beta[j];
                if let Some(a) = act {
                    r = a.forward(r);
                }
                store(yd, p.y, off5(&ys, n, c, pos), r);
            }
        });
    });
}

/// Pointers of a BN backward execution.
pub struct BnBwdPtrs {
    pub dy: u64,
    pub dx: u64,
    pub x: u64,
    pub scale: u64,
    pub bias: u64,
    pub dscale: u64,
    pub dbias: u64,
    pub saved_mean: u64,
    pub saved_inv_var: u64,
    /// Activation forward output (for the fused activation backward); 0 = recompute it.
    pub act_y: u64,
}

/// dx, dscale, dbias of batch norm, with an optional activation backward applied to dy first
/// (the activation's input is the BN output recomputed from x and the statistics).
pub fn backward(dy: &TensorDesc, dx: &TensorDesc, mode: BnMode, p: &BnBwdPtrs, eps: f64, act: Option<&ActivationDesc>) {
    let g = Groups::new(dy, mode);
    let (_, _, ds) = shape5(dy);
    let (_, _, dxs) = shape5(dx);
    let dt = dy.dtype();
    let m = g.m() as f64;
    // SAFETY: parameter vectors have g.count() Float elements; bias is only read when given.
    let gamma = unsafe { load_vec(PARAM, p.scale, g.count()) };
    let beta = if p.bias != 0 { unsafe { load_vec(PARAM, p.bias, g.count()) } } else { vec![0.0; g.count()] };
    let stats: Vec<(f32, f32)> = if p.saved_mean != 0 && p.saved_inv_var != 0 {
        // SAFETY: as above.
        unsafe {
            let mu = load_vec(PARAM, p.saved_mean, g.count());
            let inv = load_vec(PARAM, p.saved_inv_var, g.count());
            mu.into_iter().zip(inv).collect()
        }
    } else {
        (0..g.count())
            .into_par_iter()
            .map(|j| {
                let (mut s, mut s2) = (0f64, 0f64);
                g.members(j, |n, c, pos| {
                    // SAFETY: x shares dy's descriptor.
                    let v = unsafe { load(dt, p.x, off5(&ds, n, c, pos)) } as f64;
                    s += v;
                    s2 += v * v;
                });
                let mean = s / m;
                let var = (s2 / m - mean * mean).max(0.0);
                (mean as f32, (1.0 / (var + eps).sqrt()) as f32)
            })
            .collect()
    };
    // dy' = act_backward(dy, ŷ, y) at one element, and x̂ there.
    let grad = |j: usize, o: usize| -> (f32, f32) {
        let (mean, inv) = stats[j];
        // SAFETY: x, dy and the activation output share dy's descriptor.
        unsafe {
            let xhat = (load(dt, p.x, o) - mean) * inv;
            let mut d = load(dt, p.dy, o);
            if let Some(a) = act {
                let yhat = gamma[j] * xhat + beta[j];
                let ya = if p.act_y != 0 { load(dt, p.act_y, o) } else { a.forward(yhat) };
                d = a.backward(d, yhat, ya);
            }
            (d, xhat)
        }
    };
    let sums: Vec<(f64, f64)> = (0..g.count())
        .into_par_iter()
        .map(|j| {
            let (mut db, mut dg) = (0f64, 0f64);
            g.members(j, |n, c, pos| {
                let (d, xhat) = grad(j, off5(&ds, n, c, pos));
                db += d as f64;
                dg += (d * xhat) as f64;
            });
            (db, dg)
        })
        .collect();
    (0..g.count()).into_par_iter().for_each(|j| {
        let (db, dg) = sums[j];
        let k = gamma[j] as f64 * stats[j].1 as f64 / m;
        g.members(j, |n, c, pos| {
            let (d, xhat) = grad(j, off5(&ds, n, c, pos));
            let v = k * (m * d as f64 - db - xhat as f64 * dg);
            // SAFETY: one writer per element.
            unsafe { store(dx.dtype(), p.dx, off5(&dxs, n, c, pos), v as f32) };
        });
    });
    for (j, &(db, dg)) in sums.iter().enumerate() {
        // SAFETY: each index written once.
        unsafe {
            if p.dbias != 0 {
                store(PARAM, p.dbias, j, db as f32);
            }
            if p.dscale != 0 {
                store(PARAM, p.dscale, j, dg as f32);
            }
        }
    }
}
