//! Direct convolution for depthwise and few-channel problems (short reductions, where a GEMM
//! micro-kernel would run nearly empty). Each task copies the planes it reads into f32
//! buffers with the padding materialised, so the inner loops run over contiguous output rows
//! without bounds checks and vectorize (stride 1; other strides stay correct, gathered).
//! Tasks: forward (n, k), backward-data (n, c), backward-weights (k, c) — each owns its output.

use crate::backend::cpu::tensor_io::access::{blend, load, store};
use crate::backend::cpu::direct::naive::ConvPtrs;
use crate::backend::cpu::tensor_io::conv_out::{spatial_offsets, OutTensor};
use crate::backend::cpu::pointwise::epilogue::CpuEpilogue;
use crate::backend::cpu::gemm::{with_scratch, Slot};
use crate::problem::Geom;
use crate::types::DataType;
use rayon::prelude::*;

/// Most f32 elements of one task's padded plane: beyond it (huge padding) the solvers that
/// copy planes refuse rather than ask for memory they may not get.
pub const MAX_PADDED_PLANE: usize = 1 << 26;

/// Elements of the padded plane `padded` gives, None when they overflow.
pub fn padded_plane(g: &Geom) -> Option<usize> {
    padded(g).iter().try_fold(1usize, |a, &v| a.checked_mul(v))
}

/// Extents of the zero-padded input that covers every tap of every output.
#[allow(clippy::needless_range_loop)] // three parallel per-dimension arrays
pub(super) fn padded(g: &Geom) -> [usize; 3] {
    let mut p = [0; 3];
    for d in 0..3 {
        let need = (g.output[d].max(1) - 1) * g.stride[d] + (g.filter[d] - 1) * g.dilation[d] + 1;
        p[d] = (g.input[d] + 2 * g.pad[d]).max(need);
    }
    p
}

/// Copy input plane (n, c) into `dst` (padded extents `pd`), zeros around it. (Also the
/// taps-direct driver's planes, `conv_taps.rs`.)
pub(super) fn load_padded(g: &Geom, x: u64, dt: DataType, n: usize, c: usize, pd: [usize; 3], dst: &mut [f32]) {
    dst.fill(0.0);
    let xs = g.x_strides;
    for id in 0..g.input[0] {
        for ih in 0..g.input[1] {
            let row = ((id + g.pad[0]) * pd[1] + ih + g.pad[1]) * pd[2] + g.pad[2];
            let base = n * xs[0] + c * xs[1] + id * xs[2] + ih * xs[3];
            let dst = &mut dst[row..row + g.input[2]];
            if dt == DataType::Float && xs[4] == 1 {
                // SAFETY: the row's W consecutive f32 elements of x.
                dst.copy_from_slice(unsafe { std::slice::from_raw_parts((x as *const f32).add(base), g.input[2]) });
                continue;
            }
            for (iw, v) in dst.iter_mut().enumerate() {
                // SAFETY: (n, c, id, ih, iw) is an element of x.
                *v = unsafe { load(dt, x, base + iw * xs[4]) };
            }
        }
    }
}

/// Copy output plane (n, k) of y into `dst` (dense D×H×W).
fn load_plane(g: &Geom, y: u64, dt: DataType, n: usize, k: usize, sp_off: &[usize], dst: &mut [f32]) {
    let base = n * g.y_strides[0] + k * g.y_strides[1];
    for (v, &o) in dst.iter_mut().zip(sp_off) {
        // SAFETY: (n, k, sp) is an element of y.
        *v = unsafe { load(dt, y, base + o) };
    }
}

/// Filter taps of filter k, input channel cl (within the group), as f32 in (rd, rh, rw) order.
fn taps(g: &Geom, p: ConvPtrs, k: usize, cl: usize) -> Vec<f32> {
    let ws = g.w_strides;
    let [fd, fr, fw] = g.filter;
    let mut v = Vec::with_capacity(fd * fr * fw);
    for rd in 0..fd {
        for rh in 0..fr {
            for rw in 0..fw {
                // SAFETY: a weight element.
                v.push(unsafe { load(p.dt, p.w, k * ws[0] + cl * ws[1] + rd * ws[2] + rh * ws[3] + rw * ws[4]) });
            }
        }
    }
    v
}

/// `f(tap, out_row_start, in_row_start)` for every filter tap and output row (od, oh), where
/// the output row is dense (OW) and the input row lives in the padded buffer.
fn for_rows(g: &Geom, pd: [usize; 3], mut f: impl FnMut(usize, usize, usize)) {
    let [fd, fr, fw] = g.filter;
    let [od_n, oh_n, ow_n] = g.output;
    let mut t = 0;
    for rd in 0..fd {
        for rh in 0..fr {
            for rw in 0..fw {
                for od in 0..od_n {
                    for oh in 0..oh_n {
                        let ip = ((od * g.stride[0] + rd * g.dilation[0]) * pd[1] + oh * g.stride[1] + rh * g.dilation[1]) * pd[2]
                            + rw * g.dilation[2];
                        f(t, (od * oh_n + oh) * ow_n, ip);
                    }
                }
                t += 1;
            }
        }
    }
}

/// y = epilogue(α·conv(x, w) + β·y).
pub fn forward(g: &Geom, p: ConvPtrs, alpha: f32, beta: f32, epi: &CpuEpilogue) {
    let (kg, cg) = (g.kg(), g.cg());
    let pd = padded(g);
    let (ow_n, s) = (g.output[2], g.stride[2]);
    let sp_off = spatial_offsets(g.output, g.y_strides);
    let out = OutTensor { ptr: p.y, dt: p.dt, strides: g.y_strides, dims: g.output, sp_off: &sp_off, alpha, beta, epi };
    (0..g.n * g.k).into_par_iter().for_each(|nk| {
        let (n, k) = (nk / g.k, nk % g.k);
        let c0 = (k / kg) * cg;
        with_scratch(Slot::Task, g.output_size(), |acc| {
            acc.fill(0.0);
            with_scratch(Slot::Task2, pd.iter().product(), |xp| {
                for cl in 0..cg {
                    load_padded(g, p.x, p.dt, n, c0 + cl, pd, xp);
                    let w = taps(g, p, k, cl);
                    for_rows(g, pd, |t, o, i| {
                        let wv = w[t];
                        let dst = &mut acc[o..o + ow_n];
                        if s == 1 {
                            dst.iter_mut().zip(&xp[i..i + ow_n]).for_each(|(a, x)| *a += wv * x);
                        } else {
                            dst.iter_mut().enumerate().for_each(|(ow, a)| *a += wv * xp[i + ow * s]);
                        }
                    });
                }
            });
            // SAFETY: this task owns y plane (n, k).
            unsafe { out.write_span(acc, n, k, 0) };
        });
    });
}

/// x = epilogue(α·conv_bwd_data(y, w) + β·x): each output tap scatters into a padded dx plane.
pub fn backward_data(g: &Geom, p: ConvPtrs, alpha: f32, beta: f32, epi: &CpuEpilogue) {
    let (kg, cg) = (g.kg(), g.cg());
    let pd = padded(g);
    let (ow_n, s) = (g.output[2], g.stride[2]);
    let y_off = spatial_offsets(g.output, g.y_strides);
    let x_off = spatial_offsets(g.input, g.x_strides);
    let out = OutTensor { ptr: p.x, dt: p.dt, strides: g.x_strides, dims: g.input, sp_off: &x_off, alpha, beta, epi };
    (0..g.n * g.c).into_par_iter().for_each(|nc| {
        let (n, c) = (nc / g.c, nc % g.c);
        let (grp, cl) = (c / cg, c % cg);
        with_scratch(Slot::Task, pd.iter().product(), |accp| {
            accp.fill(0.0);
            with_scratch(Slot::Task2, g.output_size() + g.input[2], |dy| {
                let (dy, row) = dy.split_at_mut(g.output_size());
                for k in grp * kg..(grp + 1) * kg {
                    load_plane(g, p.y, p.dt, n, k, &y_off, dy);
                    let w = taps(g, p, k, cl);
                    for_rows(g, pd, |t, o, i| {
                        let wv = w[t];
                        let src = &dy[o..o + ow_n];
                        if s == 1 {
                            accp[i..i + ow_n].iter_mut().zip(src).for_each(|(a, d)| *a += wv * d);
                        } else {
                            src.iter().enumerate().for_each(|(ow, d)| accp[i + ow * s] += wv * d);
                        }
                    });
                }
                // Crop the padding away, one dx row at a time.
                let iw_n = g.input[2];
                for id in 0..g.input[0] {
                    for ih in 0..g.input[1] {
                        let src = ((id + g.pad[0]) * pd[1] + ih + g.pad[1]) * pd[2] + g.pad[2];
                        row[..iw_n].copy_from_slice(&accp[src..src + iw_n]);
                        // SAFETY: this task owns dx plane (n, c).
                        unsafe { out.write_span(&mut row[..iw_n], n, c, (id * g.input[1] + ih) * iw_n) };
                    }
                }
            });
        });
    });
}

/// w = α·conv_bwd_weights(x, y) + β·w: per filter slice, dot products of dy with shifted x.
pub fn backward_weights(g: &Geom, p: ConvPtrs, alpha: f32, beta: f32) {
    let (kg, cg, fs) = (g.kg(), g.cg(), g.filter_size());
    let pd = padded(g);
    let (ow_n, s) = (g.output[2], g.stride[2]);
    let y_off = spatial_offsets(g.output, g.y_strides);
    let ws = g.w_strides;
    (0..g.k * cg).into_par_iter().for_each(|kc| {
        let (k, cl) = (kc / cg, kc % cg);
        let c = (k / kg) * cg + cl;
        let mut acc = vec![0f32; fs];
        with_scratch(Slot::Task, pd.iter().product(), |xp| {
            with_scratch(Slot::Task2, g.output_size() + ow_n, |dy| {
                let (dy, strided) = dy.split_at_mut(g.output_size());
                for n in 0..g.n {
                    load_padded(g, p.x, p.dt, n, c, pd, xp);
                    load_plane(g, p.y, p.dt, n, k, &y_off, dy);
                    for_rows(g, pd, |t, o, i| {
                        let d = &dy[o..o + ow_n];
                        acc[t] += if s == 1 {
                            dot(d, &xp[i..i + ow_n])
                        } else {
                            strided.iter_mut().enumerate().for_each(|(ow, v)| *v = xp[i + ow * s]);
                            dot(d, strided)
                        };
                    });
                }
            });
        });
        let [_, fr, fw] = g.filter;
        for (t, v) in acc.into_iter().enumerate() {
            let (rd, rh, rw) = (t / (fr * fw), (t / fw) % fr, t % fw);
            let o = k * ws[0] + cl * ws[1] + rd * ws[2] + rh * ws[3] + rw * ws[4];
            // SAFETY: this task owns filter slice (k, cl).
            unsafe { store(p.dt, p.w, o, blend(p.dt, p.w, o, v, alpha, beta)) };
        }
    });
}

/// Σ a·b in 16 running partial sums (lanes a vector unit fills; a single running sum is a
/// chain of dependent adds the compiler may not reorder).
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; 16];
    let (ca, cb) = (a.chunks_exact(16), b[..a.len()].chunks_exact(16));
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for l in 0..16 {
            lanes[l] += x[l] * y[l];
        }
    }
    lanes.iter().sum::<f32>() + tail
}
