//! GEMM operands over the positions of a batch of f32 images, for the backward convolutions:
//! element (channel c, column j) of a tensor at `ptr + n·image + c·channel + off[sp]`, where
//! j = n·positions + sp counts positions image after image and `off` gives each position's
//! offset (its spatial strides, or a strided 1×1's subsampled input). Packing walks j with a
//! running (n, sp) and reads runs where positions are consecutive: no per-element closure,
//! division or type dispatch, which cost more than the products on backward-weights' long
//! reductions (the batch is its K).

use crate::backend::cpu::gemm::{copy_panel_row, Panels};
use std::ops::Range;

#[derive(Clone, Copy)]
pub struct ImageTensor<'a> {
    pub ptr: *const f32,
    /// Element strides of an image and of a channel.
    pub image: usize,
    pub channel: usize,
    /// Offset of each position within a channel plane.
    pub off: &'a [usize],
    /// Whether `off` is 0, 1, 2, …: a run of positions is a run of memory.
    pub dense: bool,
}

// SAFETY: read-only views of caller tensors, shared by the GEMM's tasks.
unsafe impl Send for ImageTensor<'_> {}
unsafe impl Sync for ImageTensor<'_> {}

impl ImageTensor<'_> {
    fn np(&self) -> usize { self.off.len() }

    /// Values of channel `c` for columns `cols` into `dst[i·step]`.
    fn gather(&self, c: usize, cols: Range<usize>, dst: &mut [f32], step: usize) {
        let np = self.np();
        let (mut n, mut sp) = (cols.start / np, cols.start % np);
        let mut i = 0;
        while i < cols.len() {
            let run = (np - sp).min(cols.len() - i);
            // SAFETY: (n, c, sp..sp + run) are elements of the tensor (the GEMM's column and
            // channel ranges lie within its lengths).
            let plane = unsafe { self.ptr.add(n * self.image + c * self.channel) };
            for r in 0..run {
                // SAFETY: as above.
                dst[(i + r) * step] = unsafe { *plane.add(self.off[sp + r]) };
            }
            i += run;
            sp = 0;
            n += 1;
        }
    }
}

/// Outer index = channel, inner = column: the A operand dY of backward-weights (rows are the
/// group's filters), and x as B of a 1×1 backward-weights (outer = input channel).
pub struct ImageRows<'a>(pub ImageTensor<'a>);

/// Widest micro-panel a GEMM kernel asks for.
const MAX_PANEL: usize = 64;

impl Panels for ImageRows<'_> {
    fn pack(&self, outer: Range<usize>, inner: Range<usize>, w: usize, dst: &mut [f32]) {
        assert!(w <= MAX_PANEL, "image_panels: a {w}-wide micro-panel");
        let t = &self.0;
        let np = t.np();
        let kb = inner.len();
        for (panel, o0, live) in micro_panels(dst, &outer, w, kb) {
            if live < w {
                panel.fill(0.0);
            }
            // Column by column, the panel's rows side by side: writes run front to back and
            // each row is read in order (a per-row pass wrote one value per cache line).
            let (mut n, mut sp) = (inner.start / np, inner.start % np);
            let mut i = 0;
            while i < kb {
                let run = (np - sp).min(kb - i);
                let mut planes = [std::ptr::null::<f32>(); MAX_PANEL];
                for (r, plane) in planes[..live].iter_mut().enumerate() {
                    // SAFETY: rows o0..o0 + live of image n are elements of the tensor.
                    *plane = unsafe { t.ptr.add(n * t.image + (o0 + r) * t.channel) };
                }
                for (j, &o) in t.off[sp..sp + run].iter().enumerate() {
                    let out = &mut panel[(i + j) * w..(i + j) * w + live];
                    for (v, &plane) in out.iter_mut().zip(&planes[..live]) {
                        // SAFETY: as above; o is an offset inside a channel plane.
                        *v = unsafe { *plane.add(o) };
                    }
                }
                i += run;
                sp = 0;
                n += 1;
            }
        }
    }
}

/// Outer index = column, inner = channel: dY as B of backward-data (col = Wᵀ · dY).
pub struct ImageCols<'a>(pub ImageTensor<'a>);

impl Panels for ImageCols<'_> {
    fn pack(&self, outer: Range<usize>, inner: Range<usize>, w: usize, dst: &mut [f32]) {
        let t = &self.0;
        let np = t.np();
        let kb = inner.len();
        for (panel, o0, live) in micro_panels(dst, &outer, w, kb) {
            let (n, sp) = (o0 / np, o0 % np);
            if t.dense && live == w && sp + w <= np {
                // One image, consecutive positions: a copy per channel.
                for (pi, c) in inner.clone().enumerate() {
                    // SAFETY: (n, c, sp..sp + w) are elements of the tensor.
                    let src = unsafe { std::slice::from_raw_parts(t.ptr.add(n * t.image + c * t.channel + sp), w) };
                    copy_panel_row(&mut panel[pi * w..(pi + 1) * w], src);
                }
                continue;
            }
            for (pi, c) in inner.clone().enumerate() {
                let row = &mut panel[pi * w..(pi + 1) * w];
                t.gather(c, o0..o0 + live, row, 1);
                row[live..].fill(0.0);
            }
        }
    }
}

/// The micro-panels a pack of `outer` fills: each w·kb values of `dst`, with its first outer
/// index and how many of its w are inside `outer`.
fn micro_panels<'d>(dst: &'d mut [f32], outer: &Range<usize>, w: usize, kb: usize) -> impl Iterator<Item = (&'d mut [f32], usize, usize)> {
    let end = outer.end;
    dst.chunks_mut(w * kb.max(1)).zip(outer.clone().step_by(w)).map(move |(panel, o0)| (panel, o0, w.min(end - o0)))
}

/// Whether offsets are 0, 1, 2, ….
pub fn consecutive(off: &[usize]) -> bool { off.iter().enumerate().all(|(i, &o)| o == i) }
