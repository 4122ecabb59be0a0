//! Direct convolution loops on the CPU, one output element at a time, threaded over
//! (n, channel) planes. Correct for every geometry; the epilogue is applied to each output
//! value before it is stored, so a fused plan makes a single pass over the output.

use crate::backend::cpu::tensor_io::access::{blend, load, store};
use crate::backend::cpu::pointwise::epilogue::CpuEpilogue;
use crate::problem::Geom;
use crate::types::DataType;
use rayon::prelude::*;

/// Raw addresses and types of the three tensors.
#[derive(Clone, Copy)]
pub struct ConvPtrs {
    pub x: u64,
    pub w: u64,
    pub y: u64,
    pub dt: DataType,
}

#[inline(always)]
fn in_range(o: usize, r: usize, g: &Geom, d: usize) -> Option<usize> {
    let i = (o * g.stride[d] + r * g.dilation[d]) as isize - g.pad[d] as isize;
    if i >= 0 && (i as usize) < g.input[d] { Some(i as usize) } else { None }
}

/// y = epilogue(α·conv(x, w) + β·y).
pub fn forward(g: &Geom, p: ConvPtrs, alpha: f32, beta: f32, epi: &CpuEpilogue) {
    let (kg, cg) = (g.kg(), g.cg());
    let (xs, ws, ys) = (g.x_strides, g.w_strides, g.y_strides);
    let sp_size = g.output_size();
    (0..g.n * g.k).into_par_iter().for_each(|nk| {
        let (n, k) = (nk / g.k, nk % g.k);
        let c0 = (k / kg) * cg;
        for od in 0..g.output[0] {
            for oh in 0..g.output[1] {
                for ow in 0..g.output[2] {
                    let mut acc = 0f32;
                    for c in 0..cg {
                        for rd in 0..g.filter[0] {
                            let Some(id) = in_range(od, rd, g, 0) else { continue };
                            for rh in 0..g.filter[1] {
                                let Some(ih) = in_range(oh, rh, g, 1) else { continue };
                                for rw in 0..g.filter[2] {
                                    let Some(iw) = in_range(ow, rw, g, 2) else { continue };
                                    let xo = n * xs[0] + (c0 + c) * xs[1] + id * xs[2] + ih * xs[3] + iw * xs[4];
                                    let wo = k * ws[0] + c * ws[1] + rd * ws[2] + rh * ws[3] + rw * ws[4];
                                    // SAFETY: indices are within the validated descriptors.
                                    acc += unsafe { load(p.dt, p.x, xo) * load(p.dt, p.w, wo) };
                                }
                            }
                        }
                    }
                    let yo = n * ys[0] + k * ys[1] + od * ys[2] + oh * ys[3] + ow * ys[4];
                    let sp = (od * g.output[1] + oh) * g.output[2] + ow;
                    // SAFETY: each (n, k) plane is written by exactly one task.
                    unsafe {
                        let v = blend(p.dt, p.y, yo, acc, alpha, beta);
                        store(p.dt, p.y, yo, epi.apply(v, n, k, [od, oh, ow], sp, sp_size));
                    }
                }
            }
        }
    });
}

/// x = epilogue(α·conv_bwd_data(y, w) + β·x)  (x is dx, y is dy). The epilogue is non-empty
/// for fused transpose convolutions, whose forward pass is this loop.
pub fn backward_data(g: &Geom, p: ConvPtrs, alpha: f32, beta: f32, epi: &CpuEpilogue) {
    let sp_size = g.input_size();
    let (kg, cg) = (g.kg(), g.cg());
    let (xs, ws, ys) = (g.x_strides, g.w_strides, g.y_strides);
    // Output position o contributes to input i when o·s − p + r·d = i.
    let out_of = |i: usize, r: usize, d: usize| -> Option<usize> {
        let t = i as isize + g.pad[d] as isize - (r * g.dilation[d]) as isize;
        if t < 0 || t % g.stride[d] as isize != 0 {
            return None;
        }
        let o = (t / g.stride[d] as isize) as usize;
        if o < g.output[d] { Some(o) } else { None }
    };
    (0..g.n * g.c).into_par_iter().for_each(|nc| {
        let (n, c) = (nc / g.c, nc % g.c);
        let (grp, cl) = (c / cg, c % cg);
        for id in 0..g.input[0] {
            for ih in 0..g.input[1] {
                for iw in 0..g.input[2] {
                    let mut acc = 0f32;
                    for kl in 0..kg {
                        let k = grp * kg + kl;
                        for rd in 0..g.filter[0] {
                            let Some(od) = out_of(id, rd, 0) else { continue };
                            for rh in 0..g.filter[1] {
                                let Some(oh) = out_of(ih, rh, 1) else { continue };
                                for rw in 0..g.filter[2] {
                                    let Some(ow) = out_of(iw, rw, 2) else { continue };
                                    let yo = n * ys[0] + k * ys[1] + od * ys[2] + oh * ys[3] + ow * ys[4];
                                    let wo = k * ws[0] + cl * ws[1] + rd * ws[2] + rh * ws[3] + rw * ws[4];
                                    // SAFETY: indices are within the validated descriptors.
                                    acc += unsafe { load(p.dt, p.y, yo) * load(p.dt, p.w, wo) };
                                }
                            }
                        }
                    }
                    let xo = n * xs[0] + c * xs[1] + id * xs[2] + ih * xs[3] + iw * xs[4];
                    let sp = (id * g.input[1] + ih) * g.input[2] + iw;
                    // SAFETY: each (n, c) plane is written by exactly one task.
                    unsafe {
                        let v = blend(p.dt, p.x, xo, acc, alpha, beta);
                        store(p.dt, p.x, xo, epi.apply(v, n, c, [id, ih, iw], sp, sp_size));
                    }
                }
            }
        }
    });
}

/// w = α·conv_bwd_weights(x, y) + β·w  (w is dw, y is dy).
pub fn backward_weights(g: &Geom, p: ConvPtrs, alpha: f32, beta: f32) {
    let (kg, cg) = (g.kg(), g.cg());
    let (xs, ws, ys) = (g.x_strides, g.w_strides, g.y_strides);
    (0..g.k * cg).into_par_iter().for_each(|kc| {
        let (k, c) = (kc / cg, kc % cg);
        let cin = (k / kg) * cg + c;
        for rd in 0..g.filter[0] {
            for rh in 0..g.filter[1] {
                for rw in 0..g.filter[2] {
                    let mut acc = 0f32;
                    for n in 0..g.n {
                        for od in 0..g.output[0] {
                            let Some(id) = in_range(od, rd, g, 0) else { continue };
                            for oh in 0..g.output[1] {
                                let Some(ih) = in_range(oh, rh, g, 1) else { continue };
                                for ow in 0..g.output[2] {
                                    let Some(iw) = in_range(ow, rw, g, 2) else { continue };
                                    let xo = n * xs[0] + cin * xs[1] + id * xs[2] + ih * xs[3] + iw * xs[4];
                                    let yo = n * ys[0] + k * ys[1] + od * ys[2] + oh * ys[3] + ow * ys[4];
                                    // SAFETY: indices are within the validated descriptors.
                                    acc += unsafe { load(p.dt, p.x, xo) * load(p.dt, p.y, yo) };
                                }
                            }
                        }
                    }
                    let wo = k * ws[0] + c * ws[1] + rd * ws[2] + rh * ws[3] + rw * ws[4];
                    // SAFETY: each (k, c) filter slice is written by exactly one task.
                    unsafe { store(p.dt, p.w, wo, blend(p.dt, p.w, wo, acc, alpha, beta)) };
                }
            }
        }
    });
}
