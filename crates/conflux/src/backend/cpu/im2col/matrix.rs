//! Reading a convolution input as the im2col matrix of one group, without building it:
//! rows kk = (c, rd, rh, rw) with kk = c·FS + (rd·R + rh)·S + rw, columns j = (n, od, oh, ow)
//! counted from image `n0`. Used as the GEMM's B operand directly (implicit GEMM, and 1×1
//! convolutions) and to fill explicit im2col buffers.

use crate::backend::cpu::tensor_io::access::load;
use crate::backend::cpu::gemm::{copy_panel_row, Panels};
use crate::problem::Geom;
use crate::types::DataType;
use std::ops::Range;

pub struct Im2col<'a> {
    g: &'a Geom,
    x: u64,
    dt: DataType,
    n0: usize,
    /// 1×1, stride 1, no padding, f32, dense spatial strides: a column run may span a whole
    /// image (one contiguous copy instead of one per output row).
    flat: bool,
    /// Per row kk: offset of its input channel, and its filter displacement (d, h, w) · dilation.
    coff: Vec<usize>,
    disp: Vec<[usize; 3]>,
}

/// A run of columns of one output row: image n, output (od, oh), ow = ow0.. (len given by dst).
#[derive(Clone, Copy)]
struct Run {
    t: usize,
    len: usize,
    n: usize,
    od: usize,
    oh: usize,
    ow0: usize,
}

impl<'a> Im2col<'a> {
    pub fn new(g: &'a Geom, x: u64, dt: DataType, group: usize, n0: usize) -> Im2col<'a> {
        let fs = g.filter_size();
        let [_, fr, fw] = g.filter;
        let kk = g.cg() * fs;
        let mut coff = Vec::with_capacity(kk);
        let mut disp = Vec::with_capacity(kk);
        for c in 0..g.cg() {
            for r in 0..fs {
                let (rd, rh, rw) = (r / (fr * fw), (r / fw) % fr, r % fw);
                coff.push((group * g.cg() + c) * g.x_strides[1]);
                disp.push([rd * g.dilation[0], rh * g.dilation[1], rw * g.dilation[2]]);
            }
        }
        let xs = g.x_strides;
        let flat = g.filter == [1, 1, 1]
            && g.stride == [1, 1, 1]
            && g.pad == [0, 0, 0]
            && g.pad_end == [0, 0, 0]
            && dt == DataType::Float
            && xs[4] == 1
            && xs[3] == g.input[2]
            && (g.input[0] == 1 || xs[2] == g.input[1] * g.input[2]);
        Im2col { g, x, dt, n0, flat, coff, disp }
    }

    pub fn rows(&self) -> usize { self.coff.len() }

    /// Row kk at columns (n, od, oh, ow0..ow0 + dst.len()) into dst; padding reads as 0.
    pub fn gather_run(&self, kk: usize, n: usize, od: usize, oh: usize, ow0: usize, dst: &mut [f32]) {
        let g = self.g;
        let xs = g.x_strides;
        let [dd, dh, dw] = self.disp[kk];
        let id = (od * g.stride[0] + dd) as isize - g.pad[0] as isize;
        let ih = (oh * g.stride[1] + dh) as isize - g.pad[1] as isize;
        if id < 0 || id as usize >= g.input[0] || ih < 0 || ih as usize >= g.input[1] {
            dst.fill(0.0);
            return;
        }
        let base = n * xs[0] + self.coff[kk] + id as usize * xs[2] + ih as usize * xs[3];
        let (s, wdim) = (g.stride[2] as isize, g.input[2] as isize);
        let iw0 = (ow0 * g.stride[2] + dw) as isize - g.pad[2] as isize;
        // Columns t with 0 ≤ iw0 + t·s < W.
        let len = dst.len() as isize;
        let lo = if iw0 >= 0 { 0 } else { ((-iw0) + s - 1) / s }.min(len);
        let hi = if iw0 >= wdim { 0 } else { ((wdim - iw0 + s - 1) / s).min(len) }.max(lo);
        let (lo, hi) = (lo as usize, hi as usize);
        dst[..lo].fill(0.0);
        dst[hi..].fill(0.0);
        if lo == hi {
            return;
        }
        let first = (iw0 + lo as isize * s) as usize;
        if self.dt == DataType::Float && s == 1 && xs[4] == 1 {
            // SAFETY: positions first..first + (hi − lo) lie inside the validated input.
            let src = unsafe { std::slice::from_raw_parts((self.x as *const f32).add(base + first), hi - lo) };
            dst[lo..hi].copy_from_slice(src);
        } else if self.dt == DataType::Float && xs[4] == 1 {
            // Strided f32 rows (stems, strided 3×3): a plain strided copy, which the compiler
            // turns into shuffles for a constant stride; the per-element `load` dispatches on
            // the data type.
            let s = s as usize;
            // SAFETY: positions first, first + s, …, first + (hi − lo − 1)·s lie inside the
            // validated input.
            let src = unsafe { std::slice::from_raw_parts((self.x as *const f32).add(base + first), (hi - lo - 1) * s + 1) };
            crate::backend::cpu::lanes::strided_copy(src, s, &mut dst[lo..hi]);
        } else {
            for (i, v) in dst[lo..hi].iter_mut().enumerate() {
                // SAFETY: as above, for every strided position.
                *v = unsafe { load(self.dt, self.x, base + (first + i * s as usize) * xs[4]) };
            }
        }
    }

    /// Row kk at column (n, od, oh, ow), one element.
    #[inline]
    #[allow(clippy::needless_range_loop)] // three parallel per-dimension arrays
    pub fn value(&self, kk: usize, n: usize, od: usize, oh: usize, ow: usize) -> f32 {
        let g = self.g;
        let [dd, dh, dw] = self.disp[kk];
        let pos = [od * g.stride[0] + dd, oh * g.stride[1] + dh, ow * g.stride[2] + dw];
        let mut off = n * g.x_strides[0] + self.coff[kk];
        for d in 0..3 {
            let i = pos[d] as isize - g.pad[d] as isize;
            if i < 0 || i as usize >= g.input[d] {
                return 0.0;
            }
            off += i as usize * g.x_strides[2 + d];
        }
        // SAFETY: every index was checked against the input's lengths.
        unsafe { load(self.dt, self.x, off) }
    }

    fn runs(&self, cols: Range<usize>, out: &mut Vec<Run>) {
        let g = self.g;
        let [od_n, oh_n, ow_n] = g.output;
        let p = g.output_size();
        out.clear();
        let mut j = cols.start;
        while j < cols.end {
            let (n, sp) = (self.n0 + j / p, j % p);
            let (od, oh, ow) = (sp / (oh_n * ow_n), (sp / ow_n) % oh_n, sp % ow_n);
            debug_assert!(od < od_n);
            let len = (ow_n - ow).min(cols.end - j);
            out.push(Run { t: j - cols.start, len, n, od, oh, ow0: ow });
            j += len;
        }
    }
}

impl Panels for Im2col<'_> {
    fn pack(&self, outer: Range<usize>, inner: Range<usize>, w: usize, dst: &mut [f32]) {
        let kb = inner.len();
        let mut runs = Vec::with_capacity(8);
        for (q, o0) in outer.clone().step_by(w).enumerate() {
            let live = w.min(outer.end - o0);
            self.runs(o0..o0 + live, &mut runs);
            let panel = &mut dst[q * w * kb..(q + 1) * w * kb];
            if self.flat {
                // Runs of whole images: x[n, c, sp] is contiguous in sp.
                let p = self.g.output_size();
                for (pi, kk) in inner.clone().enumerate() {
                    let row = &mut panel[pi * w..(pi + 1) * w];
                    let mut j = o0;
                    while j < o0 + live {
                        let (n, sp) = (self.n0 + j / p, j % p);
                        let len = (p - sp).min(o0 + live - j);
                        let at = n * self.g.x_strides[0] + self.coff[kk] + sp;
                        // SAFETY: len consecutive spatial elements of plane (n, channel of kk).
                        let src = unsafe { std::slice::from_raw_parts((self.x as *const f32).add(at), len) };
                        // A whole panel row is the common case: an inlined fixed-size copy
                        // (a memmove call per 128-byte row was 11% of 64-55-55-64 1×1 N=1).
                        copy_panel_row(&mut row[j - o0..j - o0 + len], src);
                        j += len;
                    }
                    row[live..].fill(0.0);
                }
                continue;
            }
            for (pi, kk) in inner.clone().enumerate() {
                let row = &mut panel[pi * w..(pi + 1) * w];
                for r in &runs {
                    self.gather_run(kk, r.n, r.od, r.oh, r.ow0, &mut row[r.t..r.t + r.len]);
                }
                row[live..].fill(0.0);
            }
        }
    }
}

/// The transposed im2col matrix (rows (n, p), columns kk) as panels over kk: the B operand of
/// backward-weights, dW[k, kk] = Σ_(n,p) dY[k, (n, p)] · im2col(X)[kk, (n, p)].
pub struct Im2colT<'a>(pub Im2col<'a>);

impl Panels for Im2colT<'_> {
    fn pack(&self, outer: Range<usize>, inner: Range<usize>, w: usize, dst: &mut [f32]) {
        let g = self.0.g;
        let [_, oh_n, ow_n] = g.output;
        let p = g.output_size();
        let kb = inner.len();
        for (q, o0) in outer.clone().step_by(w).enumerate() {
            let live = w.min(outer.end - o0);
            let panel = &mut dst[q * w * kb..(q + 1) * w * kb];
            for (pi, j) in inner.clone().enumerate() {
                let (n, sp) = (self.0.n0 + j / p, j % p);
                let (od, oh, ow) = (sp / (oh_n * ow_n), (sp / ow_n) % oh_n, sp % ow_n);
                let row = &mut panel[pi * w..(pi + 1) * w];
                for (t, v) in row[..live].iter_mut().enumerate() {
                    *v = self.0.value(o0 + t, n, od, oh, ow);
                }
                row[live..].fill(0.0);
            }
        }
    }
}
