//! Backward convolutions as GEMM, per group.
//! - backward-data: col = Wᵀ · dY per batch of images (a (C/G·filter) × (images · output
//!   spatial) f32 buffer; several images when their outputs are small), then col2im in parallel over input channels, each task owning its channel's dx plane, so
//!   α/β and the epilogue (fused transpose convolutions) apply once per element.
//! - backward-weights: dW = dY · im2col(X)ᵀ with the batch folded into K; im2col(X)ᵀ is packed
//!   straight from x (no buffer).
//!
//! - f32 operands over image positions (dY always, x of 1×1 layers) pack through
//!   `image_panels`; a 1×1 stride-1 unpadded backward-data without epilogue writes dx straight
//!   from the GEMM (its col2im would be a copy).
//! - f32 backward-weights with few im2col rows per group (few-channel stems, groups of a few
//!   channels) runs as dot products of dy's rows and the explicit im2col's rows
//!   (`conv1x1::weights`) instead of the GEMM.
//!
//! Both keep their buffers in per-thread scratch and need no caller workspace.

use crate::backend::cpu::tensor_io::access::{blend, load, store};
use crate::backend::cpu::im2col::weight_kk_offsets;
use crate::backend::cpu::direct::naive::ConvPtrs;
use crate::backend::cpu::tensor_io::conv_out::{spatial_offsets, OutTensor};
use crate::backend::cpu::pointwise::epilogue::CpuEpilogue;
use crate::backend::cpu::clamp::Clamp;
use crate::backend::cpu::conv1x1::weights::{self, WeightsKernels, WeightsProblem, WeightsSplit};
use crate::backend::cpu::gemm::{gemm, with_scratch, Dense, DenseSink, Direct, Elem, Sink, Slot};
use crate::backend::cpu::im2col::image_panels::{consecutive, ImageCols, ImageRows, ImageTensor};
use crate::backend::cpu::im2col::matrix::{Im2col, Im2colT};
use crate::problem::Geom;
use crate::types::DataType;
use rayon::prelude::*;
use std::ops::Range;

/// A 1×1, unpadded filter (any stride): the GEMMs read x at the outputs' subsampled positions.
fn pointwise_filter(g: &Geom) -> bool { g.filter == [1, 1, 1] && g.pad == [0, 0, 0] && g.pad_end == [0, 0, 0] }

/// Offsets in an input plane of the positions a 1×1 unpadded filter reads, output by output.
fn subsampled_offsets(g: &Geom) -> Vec<usize> {
    let s = g.x_strides;
    let sub = [0, 0, s[2] * g.stride[0], s[3] * g.stride[1], s[4] * g.stride[2]];
    spatial_offsets(g.output, sub)
}

/// dY of `group` as a GEMM operand over image positions (f32).
fn dy_view<'a>(g: &Geom, p: ConvPtrs, group: usize, y_off: &'a [usize]) -> ImageTensor<'a> {
    let ptr = (p.y as *const f32).wrapping_add(group * g.kg() * g.y_strides[1]);
    ImageTensor { ptr, image: g.y_strides[0], channel: g.y_strides[1], off: y_off, dense: consecutive(y_off) }
}

/// x = epilogue(α·conv_bwd_data(y, w) + β·x)  (x is dx, y is dy).
pub fn backward_data(g: &Geom, p: ConvPtrs, alpha: f32, beta: f32, epi: &CpuEpilogue) {
    if p.dt == DataType::Float && pointwise_filter(g) && g.stride == [1, 1, 1] && epi.is_empty() {
        return backward_data_1x1(g, p, alpha, beta);
    }
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
                // SAFETY: col is (cg·fs) × (nb·np), row-major, and outlives the GEMM.
                let sink = unsafe { DenseSink::new(col.as_mut_ptr(), cols, false) };
                if p.dt == DataType::Float {
                    // f32: dY over image positions, and W in place where each filter's
                    // (channel, tap) rows are consecutive (KCRS).
                    let dy = dy_view(g, p, group, &y_off);
                    let b = ImageCols(ImageTensor { ptr: dy.ptr.wrapping_add(n0 * g.y_strides[0]), ..dy });
                    let ws = g.w_strides;
                    if consecutive(&kk_off) {
                        // SAFETY: the group's filters span (kg − 1)·ws[0] + cg·fs elements from here.
                        let w = unsafe { std::slice::from_raw_parts((p.w as *const f32).add(group * kg * ws[0]), (kg - 1) * ws[0] + cg * fs) };
                        gemm(cg * fs, cols, kg, &Dense { data: w, outer_stride: 1, inner_stride: ws[0] }, &b, &sink);
                    } else {
                        gemm(cg * fs, cols, kg, &weights_a(g, p, group, &kk_off), &b, &sink);
                    }
                } else {
                    let b = Elem(|j: usize, m: usize| {
                        let (n, sp) = (n0 + j / np, j % np);
                        // SAFETY: (n, group·kg + m, sp) is an element of dy.
                        unsafe { load(p.dt, p.y, n * g.y_strides[0] + (group * kg + m) * g.y_strides[1] + y_off[sp]) }
                    });
                    gemm(cg * fs, cols, kg, &weights_a(g, p, group, &kk_off), &b, &sink);
                }
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

/// Wᵀ of `group` element by element (any filter layout and type): row kk, column m.
fn weights_a<'a>(g: &'a Geom, p: ConvPtrs, group: usize, kk_off: &'a [usize]) -> Elem<impl Fn(usize, usize) -> f32 + 'a> {
    let (kg, ws0) = (g.kg(), g.w_strides[0]);
    // SAFETY: (group·kg + m, kk) is a weight element.
    Elem(move |kk: usize, m: usize| unsafe { load(p.dt, p.w, (group * kg + m) * ws0 + kk_off[kk]) })
}

/// Sink of a 1×1 stride-1 backward-data: rows are the group's input channels, columns image
/// positions; dx = α·block + β·dx.
struct PlaneSink<'a> {
    x: u64,
    g: &'a Geom,
    c0: usize,
    x_off: &'a [usize],
    /// x_off is 0, 1, 2, …
    dense: bool,
    alpha: f32,
    beta: f32,
}

impl Sink for PlaneSink<'_> {
    fn store(&self, rows: Range<usize>, cols: Range<usize>, c: &mut [f32], ld: usize) {
        let np = self.x_off.len();
        let (xs, x) = (self.g.x_strides, self.x as *mut f32);
        for (ri, ch) in rows.enumerate() {
            let (mut n, mut sp) = (cols.start / np, cols.start % np);
            for ci in 0..cols.len() {
                let o = n * xs[0] + (self.c0 + ch) * xs[1] + self.x_off[sp];
                let v = self.alpha * c[ri * ld + ci];
                // SAFETY: each dx element belongs to exactly one GEMM block; β = 0 never reads.
                unsafe { *x.add(o) = if self.beta == 0.0 { v } else { v + self.beta * *x.add(o) } };
                sp += 1;
                if sp == np {
                    (n, sp) = (n + 1, 0);
                }
            }
        }
    }

    fn direct(&self, rows: Range<usize>, cols: Range<usize>) -> Option<Direct> {
        // Register stores where the block's columns are consecutive positions of one image.
        let np = self.x_off.len();
        let (n, sp) = (cols.start / np, cols.start % np);
        if !(self.dense && self.alpha == 1.0 && self.beta == 0.0 && sp + cols.len() <= np) {
            return None;
        }
        let xs = self.g.x_strides;
        // SAFETY (pointer arithmetic): the block's rows and columns lie inside dx.
        let ptr = unsafe { (self.x as *mut f32).add(n * xs[0] + (self.c0 + rows.start) * xs[1] + sp) };
        Some(Direct { ptr, ld: xs[1], bias: std::ptr::null(), relu: Clamp::NONE })
    }
}

/// 1×1 stride-1 unpadded f32 backward-data, no epilogue: dx = Wᵀ · dY per group, images folded
/// into the columns, stored straight into dx.
fn backward_data_1x1(g: &Geom, p: ConvPtrs, alpha: f32, beta: f32) {
    let (kg, cg) = (g.kg(), g.cg());
    let y_off = spatial_offsets(g.output, g.y_strides);
    let x_off = spatial_offsets(g.input, g.x_strides);
    let ws = g.w_strides;
    for group in 0..g.groups {
        // SAFETY: the group's filters span kg·ws[0] elements from here.
        let w = unsafe { std::slice::from_raw_parts((p.w as *const f32).add(group * kg * ws[0]), (kg - 1) * ws[0] + (cg - 1) * ws[1] + 1) };
        let a = Dense { data: w, outer_stride: ws[1], inner_stride: ws[0] };
        let b = ImageCols(dy_view(g, p, group, &y_off));
        let sink = PlaneSink { x: p.x, g, c0: group * cg, x_off: &x_off, dense: consecutive(&x_off), alpha, beta };
        gemm(cg, g.n * g.output_size(), kg, &a, &b, &sink);
    }
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

impl WeightSink<'_> {
    /// dW element (filter m of the group, row kk) = α·v + β·dW.
    fn put(&self, m: usize, kk: usize, v: f32) {
        let o = (self.k0 + m) * self.g.w_strides[0] + self.kk_off[kk];
        // SAFETY: each weight element is put exactly once.
        unsafe { store(self.p.dt, self.p.w, o, blend(self.p.dt, self.p.w, o, v, self.alpha, self.beta)) };
    }
}

impl Sink for WeightSink<'_> {
    fn store(&self, rows: Range<usize>, cols: Range<usize>, c: &mut [f32], ld: usize) {
        for (ri, m) in rows.enumerate() {
            for (ci, kk) in cols.clone().enumerate() {
                self.put(m, kk, c[ri * ld + ci]);
            }
        }
    }
}

/// w = α·conv_bwd_weights(x, y) + β·w  (w is dw, y is dy).
pub fn backward_weights(g: &Geom, p: ConvPtrs, alpha: f32, beta: f32) {
    let (kg, cg, fs, np) = (g.kg(), g.cg(), g.filter_size(), g.output_size());
    let y_off = spatial_offsets(g.output, g.y_strides);
    let kk_off = weight_kk_offsets(g);
    let x_sub = subsampled_offsets(g);
    let f32_1x1 = p.dt == DataType::Float && pointwise_filter(g);
    for group in 0..g.groups {
        let sink = WeightSink { p, g, k0: group * kg, kk_off: &kk_off, alpha, beta };
        let (m, n, k) = (kg, cg * fs, g.n * np);
        if p.dt != DataType::Float {
            let a = Elem(|m: usize, q: usize| {
                let (n, sp) = (q / np, q % np);
                // SAFETY: (n, group·kg + m, sp) is an element of dy.
                unsafe { load(p.dt, p.y, n * g.y_strides[0] + (group * kg + m) * g.y_strides[1] + y_off[sp]) }
            });
            gemm(m, n, k, &a, &Im2colT(Im2col::new(g, p.x, p.dt, group, 0)), &sink);
            continue;
        }
        if f32_1x1 && g.stride == [1, 1, 1] && consecutive(&x_sub) && np >= MIN_WEIGHTS_K {
            // x itself is the im2col matrix of a 1×1 stride-1 layer.
            weights_through_im2col(g, p, group, &y_off, &sink, true);
        } else if f32_1x1 {
            let ptr = (p.x as *const f32).wrapping_add(group * cg * g.x_strides[1]);
            let x = ImageTensor { ptr, image: g.x_strides[0], channel: g.x_strides[1], off: &x_sub, dense: consecutive(&x_sub) };
            gemm(m, n, k, &ImageRows(dy_view(g, p, group, &y_off)), &ImageRows(x), &sink);
        } else if cg * fs * np <= MAX_COL_ELEMS {
            weights_through_im2col(g, p, group, &y_off, &sink, false);
        } else {
            gemm(m, n, k, &ImageRows(dy_view(g, p, group, &y_off)), &Im2colT(Im2col::new(g, p.x, p.dt, group, 0)), &sink);
        }
    }
}

/// Largest explicit im2col (f32 values) backward-weights builds.
const MAX_COL_ELEMS: usize = 1 << 24;
/// Images share one im2col matrix until its rows are this long (maps of 7×7 or 14×14).
const MIN_WEIGHTS_K: usize = 1024;

/// f32 backward-weights of one group over explicit im2col matrices: the matrix of a batch of
/// images (filled by runs, rows in parallel; several images where their maps are small, so each
/// GEMM still has a long reduction), or x itself when `x_is_col` (a 1×1 stride-1 layer with its
/// positions consecutive, one image at a time), is read in place as A of dWᵀ = col · dYᵀ: the
/// large operand is never packed; the batches add up in an f32 dWᵀ the sink blends once.
/// (Packing im2col(x)ᵀ element by element from x cost more than the products.)
fn weights_through_im2col(g: &Geom, p: ConvPtrs, group: usize, y_off: &[usize], sink: &WeightSink, x_is_col: bool) {
    let (kg, rows, np) = (g.kg(), g.cg() * g.filter_size(), g.output_size());
    if let (false, Some(kern)) = (x_is_col, dot_products_suit(g, rows)) {
        return weights_by_dot_products(g, p, group, sink, kern);
    }
    let dy = dy_view(g, p, group, y_off);
    let xs = g.x_strides;
    let batch = if x_is_col { 1 } else { (MIN_WEIGHTS_K / np).clamp(1, g.n).min((MAX_COL_ELEMS / (rows * np)).max(1)) };
    let cols = batch * np;
    with_scratch(Slot::Conv, if x_is_col { 0 } else { rows * cols } + rows * kg, |buf| {
        let (col, acc) = buf.split_at_mut(if x_is_col { 0 } else { rows * cols });
        for n0 in (0..g.n).step_by(batch) {
            let nb = batch.min(g.n - n0);
            let a = if x_is_col {
                // SAFETY: the group's channels of image n0 span (rows − 1)·xs[1] + np elements.
                let x = unsafe { std::slice::from_raw_parts((p.x as *const f32).add(n0 * xs[0] + group * rows * xs[1]), (rows - 1) * xs[1] + np) };
                Dense { data: x, outer_stride: xs[1], inner_stride: 1 }
            } else {
                super::fill_im2col(g, &Im2col::new(g, p.x, p.dt, group, n0), n0, nb, cols, col);
                Dense { data: col, outer_stride: cols, inner_stride: 1 }
            };
            let b = ImageRows(ImageTensor { ptr: dy.ptr.wrapping_add(n0 * g.y_strides[0]), ..dy });
            // SAFETY: acc is rows × kg, row-major, and outlives the GEMM.
            let to_acc = unsafe { DenseSink::new(acc.as_mut_ptr(), kg, n0 > 0) };
            gemm(rows, kg, nb * np, &a, &b, &to_acc);
        }
        // acc is dWᵀ: row kk, column m.
        for (kk, r) in acc.chunks(kg).enumerate() {
            for (m, &v) in r.iter().enumerate() {
                sink.put(m, kk, v);
            }
        }
    });
}

/// The dot-product kernels (`conv1x1::weights`) where they suit an explicit im2col of `rows`
/// rows: dense dy rows of many positions, and few im2col rows per group (few-channel stems:
/// 27–147; ResNeXt's groups of 4 channels: 36), so that the GEMM would pack dy across its long
/// reduction for few products per element. With hundreds of rows (64-56-56 3×3: 576) the GEMM's
/// register tiles reuse each load more and measured faster
/// (bench/results/2026-11-29-cpu-bwd-1x1.md).
fn dot_products_suit(g: &Geom, rows: usize) -> Option<WeightsKernels> {
    let dense_dy = g.y_strides[4] == 1 && consecutive(&spatial_offsets(g.output, g.y_strides));
    (dense_dy && g.output_size() >= 256 && rows <= MAX_DOT_ROWS).then(weights::best).flatten()
}

/// Most im2col rows per group for the dot products (`dot_products_suit`).
const MAX_DOT_ROWS: usize = 256;

/// f32 backward-weights of one group as dot products of dy's rows and an explicit im2col's rows
/// (one matrix for as many images as `MAX_COL_ELEMS` allows), batches added into dW in order.
fn weights_by_dot_products(g: &Geom, p: ConvPtrs, group: usize, sink: &WeightSink, kern: WeightsKernels) {
    let (kg, rows, np) = (g.kg(), g.cg() * g.filter_size(), g.output_size());
    let batch = (MAX_COL_ELEMS / (rows * np)).clamp(1, g.n);
    let threads = rayon::current_num_threads();
    with_scratch(Slot::Conv, rows * batch * np + kg * rows, |buf| {
        let (col, acc) = buf.split_at_mut(rows * batch * np);
        for n0 in (0..g.n).step_by(batch) {
            let nb = batch.min(g.n - n0);
            let cols = nb * np;
            super::fill_im2col(g, &Im2col::new(g, p.x, p.dt, group, n0), n0, nb, cols, col);
            // Each batch's sums, row k of dW, column kk of the im2col rows; later batches add.
            let wp = WeightsProblem {
                n: nb,
                c: rows,
                k: kg,
                hw: np,
                x: col.as_ptr(),
                xs: [np, cols],
                dy: (p.y as *const f32).wrapping_add(n0 * g.y_strides[0] + group * kg * g.y_strides[1]),
                ys: [g.y_strides[0], g.y_strides[1]],
                dw: acc.as_mut_ptr(),
                dws: [rows, 1],
                alpha: 1.0,
                beta: if n0 == 0 { 0.0 } else { 1.0 },
            };
            // SAFETY: col holds the batch's im2col rows (cols values each, an image every np),
            // dy's rows of the group hold np consecutive positions per image (`dot_products_suit`),
            // acc holds kg × rows sums.
            unsafe { weights::backward_weights(&wp, kern, WeightsSplit::choose(&wp, threads)) };
        }
        for (m, r) in acc.chunks(rows).enumerate() {
            for (kk, &v) in r.iter().enumerate() {
                sink.put(m, kk, v);
            }
        }
    });
}
