//! Forward convolution as GEMM, per group: Y[k, (n, p)] = W[k, (c, r)] · im2col(X)[(c, r), (n, p)].
//! B comes either straight from x (`Im2col` panels: implicit GEMM, and 1×1 convolutions) or
//! from an explicit im2col buffer filled per image. Each finished C block goes through
//! α/β and the epilogue while still in cache (`OutSink`), so y is written once.

pub mod backward;
pub mod image_panels;
pub mod matrix;

use crate::backend::cpu::tensor_io::access::load;
use crate::backend::cpu::direct::naive::ConvPtrs;
use crate::backend::cpu::tensor_io::conv_out::{spatial_offsets, OutTensor};
use crate::backend::cpu::pointwise::epilogue::CpuEpilogue;
use crate::backend::cpu::gemm::{gemm, Dense, Direct, Panels, Sink};
use crate::types::DataType;
use crate::backend::cpu::im2col::matrix::Im2col;
use crate::problem::Geom;
use rayon::prelude::*;
use std::ops::Range;

/// Where the forward GEMM's B operand comes from.
pub enum FwdB<'a> {
    /// Packed straight from x.
    Implicit,
    /// An explicit im2col buffer of (C/G·filter) × (output spatial) f32, filled per image.
    Im2col(&'a mut [f32]),
}

/// f32 values needed by `FwdB::Im2col`.
pub fn im2col_len(g: &Geom) -> usize { g.cg() * g.filter_size() * g.output_size() }

/// Offsets of the weight element (c, rd, rh, rw) of one filter, indexed by kk.
pub fn weight_kk_offsets(g: &Geom) -> Vec<usize> {
    let ws = g.w_strides;
    let [fd, fr, fw] = g.filter;
    let mut v = Vec::with_capacity(g.cg() * g.filter_size());
    for c in 0..g.cg() {
        for rd in 0..fd {
            for rh in 0..fr {
                for rw in 0..fw {
                    v.push(c * ws[1] + rd * ws[2] + rh * ws[3] + rw * ws[4]);
                }
            }
        }
    }
    v
}

/// The weights of one group as the GEMM's A (rows = filters, inner = kk). Packed filter by
/// filter, so reads follow the filter's memory (contiguous for KCRS weights) and the strided
/// writes stay inside one L1-resident panel; packing A element-major was a large share of a
/// 1×1 layer's time (bench/results/2026-11-27-history-from-status.md, conv_gemm.rs).
pub struct WeightsA<'a> {
    pub p: ConvPtrs,
    pub row0: usize,
    pub ws0: usize,
    pub kk_off: &'a [usize],
}

impl Panels for WeightsA<'_> {
    fn pack(&self, outer: Range<usize>, inner: Range<usize>, w: usize, dst: &mut [f32]) {
        let kb = inner.len();
        let dense = self.p.dt == DataType::Float && self.kk_off[inner.clone()].iter().enumerate().all(|(i, &o)| o == self.kk_off[inner.start] + i);
        for (q, o0) in outer.clone().step_by(w).enumerate() {
            let panel = &mut dst[q * w * kb..(q + 1) * w * kb];
            let live = w.min(outer.end - o0);
            for t in 0..w {
                if t >= live {
                    (0..kb).for_each(|pi| panel[pi * w + t] = 0.0);
                    continue;
                }
                let base = (self.row0 + o0 + t) * self.ws0;
                if dense {
                    // SAFETY: kb consecutive weights of filter row0 + o0 + t.
                    let src = unsafe { std::slice::from_raw_parts((self.p.w as *const f32).add(base + self.kk_off[inner.start]), kb) };
                    src.iter().enumerate().for_each(|(pi, v)| panel[pi * w + t] = *v);
                } else {
                    for (pi, kk) in inner.clone().enumerate() {
                        // SAFETY: a weight element.
                        panel[pi * w + t] = unsafe { load(self.p.dt, self.p.w, base + self.kk_off[kk]) };
                    }
                }
            }
        }
    }

    /// f32 filters whose (c, r, s) elements are consecutive (KCRS): the kernels read them
    /// in place, row stride = the filter stride.
    fn in_place(&self) -> Option<(usize, usize)> {
        let dense = self.p.dt == DataType::Float && self.kk_off.iter().enumerate().all(|(i, &o)| o == i);
        dense.then(|| (self.p.w as usize + 4 * self.row0 * self.ws0, self.ws0))
    }
}

/// GEMM sink for one group: rows are output channels in the group, columns (n, p) from n0.
pub struct OutSink<'a> {
    pub out: OutTensor<'a>,
    /// First channel of the group and first image of column 0.
    pub c0: usize,
    pub n0: usize,
    /// Spatial size of the output (columns per image).
    pub p: usize,
}

impl Sink for OutSink<'_> {
    fn store(&self, rows: Range<usize>, cols: Range<usize>, c: &mut [f32], ld: usize) {
        for (ri, m) in rows.enumerate() {
            let row = &mut c[ri * ld..ri * ld + cols.len()];
            let mut j = cols.start;
            while j < cols.end {
                let (n, sp) = (self.n0 + j / self.p, j % self.p);
                let len = (self.p - sp).min(cols.end - j);
                let t = j - cols.start;
                // SAFETY: GEMM blocks are disjoint, so each (n, channel, sp) is written by one task.
                unsafe { self.out.write_span(&mut row[t..t + len], n, self.c0 + m, sp) };
                j += len;
            }
        }
    }

    fn direct(&self, rows: Range<usize>, cols: Range<usize>) -> Option<Direct> {
        // Columns of one image, and rows (channels) that are packed f32 spatial rows: then the
        // block is a row-major matrix with the channel stride as row stride.
        let n = self.n0 + cols.start / self.p;
        if cols.is_empty() || self.n0 + (cols.end - 1) / self.p != n {
            return None;
        }
        let base = self.out.direct_base(n, self.c0 + rows.start, cols.start % self.p)?;
        let (bias, relu) = self.out.epi.bias_relu_all()?;
        let bias = bias.map_or(std::ptr::null(), |b| b[self.c0 + rows.start..].as_ptr());
        Some(Direct { ptr: base, ld: self.out.strides[1], bias, relu })
    }
}

/// y = epilogue(α·conv(x, w) + β·y).
pub fn forward(g: &Geom, p: ConvPtrs, alpha: f32, beta: f32, epi: &CpuEpilogue, mut b: FwdB) {
    let (kg, cg, fs, np) = (g.kg(), g.cg(), g.filter_size(), g.output_size());
    let sp_off = spatial_offsets(g.output, g.y_strides);
    let kk_off = weight_kk_offsets(g);
    for group in 0..g.groups {
        let a = WeightsA { p, row0: group * kg, ws0: g.w_strides[0], kk_off: &kk_off };
        let out = || OutTensor { ptr: p.y, dt: p.dt, strides: g.y_strides, dims: g.output, sp_off: &sp_off, alpha, beta, epi };
        match &mut b {
            FwdB::Implicit => {
                let bx = Im2col::new(g, p.x, p.dt, group, 0);
                let sink = OutSink { out: out(), c0: group * kg, n0: 0, p: np };
                gemm(kg, g.n * np, cg * fs, &a, &bx, &sink);
            }
            FwdB::Im2col(col) => {
                for n in 0..g.n {
                    let bx = Im2col::new(g, p.x, p.dt, group, n);
                    fill_im2col(g, &bx, n, 1, np, col);
                    let bv = Dense { data: col, outer_stride: 1, inner_stride: np };
                    let sink = OutSink { out: out(), c0: group * kg, n0: n, p: np };
                    gemm(kg, np, cg * fs, &a, &bv, &sink);
                }
            }
        }
    }
}

/// The im2col matrix of images n0..n0 + nb into `col` (rows of `cols` values, image i from
/// column i·positions), rows in parallel.
fn fill_im2col(g: &Geom, src: &Im2col, n0: usize, nb: usize, cols: usize, col: &mut [f32]) {
    let [od_n, oh_n, ow_n] = g.output;
    let np = g.output_size();
    col[..src.rows() * cols].par_chunks_mut(cols).enumerate().for_each(|(kk, row)| {
        for i in 0..nb {
            for od in 0..od_n {
                for oh in 0..oh_n {
                    let s = i * np + (od * oh_n + oh) * ow_n;
                    src.gather_run(kk, n0 + i, od, oh, 0, &mut row[s..s + ow_n]);
                }
            }
        }
    });
}
