//! Backward convolutions as GEMM, per group.
//! - backward-data: col = Wᵀ · dY per batch of images (a (C/G·filter) × (images · output
//!   spatial) f32 buffer; several images when their outputs are small), then col2im in parallel over input channels, each task owning its channel's dx plane, so
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
    // Images per GEMM: small outputs (downsampling layers, 7×7 maps) share one GEMM so the
    // filter is packed once per batch of images and the GEMM has columns enough to fill its
    // tiles; the column buffer stays within COL_BATCH_ELEMS.
    let per_image = cg * fs * np;
    let batch = (COL_BATCH_ELEMS / per_image.max(1)).clamp(1, g.n);
    with_scratch(Slot::Conv, per_image * batch, |col| {
        for n0 in (0..g.n).step_by(batch) {
            let nb = batch.min(g.n - n0);
            let cols = nb * np;
            for group in 0..g.groups {
                let a = Elem(|kk: usize, m: usize| {
                    // SAFETY: (group·kg + m, kk) is a weight element.
                    unsafe { load(p.dt, p.w, (group * kg + m) * g.w_strides[0] + kk_off[kk]) }
                });
                let b = Elem(|j: usize, m: usize| {
                    let (n, sp) = (n0 + j / np, j % np);
                    // SAFETY: (n, group·kg + m, sp) is an element of dy.
                    unsafe { load(p.dt, p.y, n * g.y_strides[0] + (group * kg + m) * g.y_strides[1] + y_off[sp]) }
                });
                // SAFETY: col is (cg·fs) × (nb·np), row-major, and outlives the GEMM.
                let sink = unsafe { DenseSink::new(col.as_mut_ptr(), cols, false) };
                gemm(cg * fs, cols, kg, &a, &b, &sink);
                let col = &*col;
                (0..nb * cg).into_par_iter().for_each(|ic| {
                    let (i, c) = (ic / cg, ic % cg);
                    with_scratch(Slot::Task, g.input_size(), |acc| {
                        col2im_channel(g, &col[c * fs * cols + i * np..], cols, acc);
                        // SAFETY: this task owns dx channel group·cg + c of image n0 + i.
                        unsafe { out.write_span(acc, n0 + i, group * cg + c, 0) };
                    })
                });
            }
        }
    });
}

/// Most f32 elements of backward-data's column buffer when it batches images.
const COL_BATCH_ELEMS: usize = 1 << 22;

/// acc (one input plane) = Σ over filter taps of the col rows scattered back to the input;
/// tap row r of this image starts at col[r·row_stride].
fn col2im_channel(g: &Geom, col: &[f32], row_stride: usize, acc: &mut [f32]) {
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
                let row = &col[r * row_stride..r * row_stride + np];
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
