//! Backward convolutions as GEMM, per group.
//! - backward-data: col = Wᵀ · dY per image (a (C/G·filter) × (output spatial) f32 buffer),
//!   then col2im in parallel over input channels, each task owning its channel's dx plane, so
//!   α/β and the epilogue (fused transpose convolutions) apply once per element.
//! - backward-weights: dW = dY · im2col(X)ᵀ with the batch folded into K; im2col(X)ᵀ is packed
//!   straight from x (no buffer).
//!
//! Both keep their buffers in per-thread scratch and need no caller workspace.

use crate::backend::cpu::tensor_io::access::{blend, load, store};
use crate::backend::cpu::im2col::weight_kk_offsets;
use crate::backend::cpu::direct::naive::ConvPtrs;
use crate::backend::cpu::tensor_io::conv_out::{spatial_offsets, OutTensor};
use crate::backend::cpu::pointwise::epilogue::CpuEpilogue;
use crate::backend::cpu::gemm::{gemm, with_scratch, DenseSink, Elem, Sink, Slot};
use crate::backend::cpu::im2col::matrix::{Im2col, Im2colT};
use crate::problem::Geom;
use rayon::prelude::*;
use std::ops::Range;

/// x = epilogue(α·conv_bwd_data(y, w) + β·x)  (x is dx, y is dy).
pub fn backward_data(g: &Geom, p: ConvPtrs, alpha: f32, beta: f32, epi: &CpuEpilogue) {
    let (kg, cg, fs, np) = (g.kg(), g.cg(), g.filter_size(), g.output_size());
    let y_off = spatial_offsets(g.output, g.y_strides);
    let x_off = spatial_offsets(g.input, g.x_strides);
    let kk_off = weight_kk_offsets(g);
    let out = OutTensor { ptr: p.x, dt: p.dt, strides: g.x_strides, dims: g.input, sp_off: &x_off, alpha, beta, epi };
    with_scratch(Slot::Conv, cg * fs * np, |col| {
        for n in 0..g.n {
            for group in 0..g.groups {
                let a = Elem(|kk: usize, m: usize| {
                    // SAFETY: (group·kg + m, kk) is a weight element.
                    unsafe { load(p.dt, p.w, (group * kg + m) * g.w_strides[0] + kk_off[kk]) }
                });
                let b = Elem(|sp: usize, m: usize| {
                    // SAFETY: (n, group·kg + m, sp) is an element of dy.
                    unsafe { load(p.dt, p.y, n * g.y_strides[0] + (group * kg + m) * g.y_strides[1] + y_off[sp]) }
                });
                // SAFETY: col is (cg·fs) × np, row-major, and outlives the GEMM.
                let sink = unsafe { DenseSink::new(col.as_mut_ptr(), np, false) };
                gemm(cg * fs, np, kg, &a, &b, &sink);
                let col = &*col;
                (0..cg).into_par_iter().for_each(|c| {
                    with_scratch(Slot::Task, g.input_size(), |acc| {
                        col2im_channel(g, &col[c * fs * np..(c + 1) * fs * np], acc);
                        // SAFETY: this task owns dx channel group·cg + c of image n.
                        unsafe { out.write_span(acc, n, group * cg + c, 0) };
                    })
                });
            }
        }
    });
}

/// acc (one input plane) = Σ over filter taps of the col rows scattered back to the input.
fn col2im_channel(g: &Geom, col: &[f32], acc: &mut [f32]) {
    acc.fill(0.0);
    let [fd, fr, fw] = g.filter;
    let [od_n, oh_n, ow_n] = g.output;
    let [_, ih_n, iw_n] = g.input;
    let np = g.output_size();
    let at = |o: usize, r: usize, d: usize| -> Option<usize> {
        let i = (o * g.stride[d] + r * g.dilation[d]) as isize - g.pad[d] as isize;
        (i >= 0 && (i as usize) < g.input[d]).then_some(i as usize)
    };
    let mut r = 0;
    for rd in 0..fd {
        for rh in 0..fr {
            for rw in 0..fw {
                let row = &col[r * np..(r + 1) * np];
                r += 1;
                for od in 0..od_n {
                    let Some(id) = at(od, rd, 0) else { continue };
                    for oh in 0..oh_n {
                        let Some(ih) = at(oh, rh, 1) else { continue };
                        let dst = (id * ih_n + ih) * iw_n;
                        let src = &row[(od * oh_n + oh) * ow_n..][..ow_n];
                        for (ow, v) in src.iter().enumerate() {
                            if let Some(iw) = at(ow, rw, 2) {
                                acc[dst + iw] += v;
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Sink of backward-weights: rows are the group's filters, columns kk.
struct WeightSink<'a> {
    p: ConvPtrs,
    g: &'a Geom,
    k0: usize,
    kk_off: &'a [usize],
    alpha: f32,
    beta: f32,
}

impl Sink for WeightSink<'_> {
    fn store(&self, rows: Range<usize>, cols: Range<usize>, c: &mut [f32], ld: usize) {
        for (ri, m) in rows.enumerate() {
            let base = (self.k0 + m) * self.g.w_strides[0];
            for (ci, kk) in cols.clone().enumerate() {
                let o = base + self.kk_off[kk];
                // SAFETY: each weight element belongs to exactly one GEMM block.
                unsafe { store(self.p.dt, self.p.w, o, blend(self.p.dt, self.p.w, o, c[ri * ld + ci], self.alpha, self.beta)) };
            }
        }
    }
}

/// w = α·conv_bwd_weights(x, y) + β·w  (w is dw, y is dy).
pub fn backward_weights(g: &Geom, p: ConvPtrs, alpha: f32, beta: f32) {
    let (kg, cg, fs, np) = (g.kg(), g.cg(), g.filter_size(), g.output_size());
    let y_off = spatial_offsets(g.output, g.y_strides);
    let kk_off = weight_kk_offsets(g);
    for group in 0..g.groups {
        let a = Elem(|m: usize, q: usize| {
            let (n, sp) = (q / np, q % np);
            // SAFETY: (n, group·kg + m, sp) is an element of dy.
            unsafe { load(p.dt, p.y, n * g.y_strides[0] + (group * kg + m) * g.y_strides[1] + y_off[sp]) }
        });
        let b = Im2colT(Im2col::new(g, p.x, p.dt, group, 0));
        let sink = WeightSink { p, g, k0: group * kg, kk_off: &kk_off, alpha, beta };
        gemm(kg, cg * fs, g.n * np, &a, &b, &sink);
    }
}
