//! Direct forward convolution, stride 1, as a sum over the filter's taps of 1×1 convolutions
//! (any filter size, dilation and padding, 2-D, f32): each tile of 14 consecutive output
//! positions of one row × 32 filters runs the 1×1 NCHW micro-tile (`conv1x1_kernel`) once
//! per tap (kh, kw) over the input channels, reading the zero-padded input planes in place
//! at that tap's shift and W packed per tap as [channel][32 filters], the partial sums kept in
//! the tile's buffer between taps; the last tap adds the bias, applies ReLU and stores y.
//!
//! No im2col: every input element a tap reads is broadcast straight from the planes. This
//! is for short reductions over many taps (few channels, large filters), where the implicit
//! GEMM spends most of its time gathering its B panels.

use crate::backend::cpu::direct::depthwise::{load_padded, padded};
use crate::backend::cpu::conv1x1::channels_kernel::{Kernels, Out, Transpose, MR, NR};
use crate::backend::cpu::gemm::{with_scratch_aligned, Slot};
use crate::problem::Geom;
use crate::types::DataType;
use rayon::prelude::*;

/// Values of W packed by `pack_w`: per group, per block of 32 filters, per tap, C/G rows of 32.
pub fn packed_len(g: &Geom) -> usize { g.groups * g.kg().div_ceil(NR) * taps(g) * g.cg() * NR }

fn taps(g: &Geom) -> usize { g.filter[1] * g.filter[2] }

/// W (f32 at `w`, the geometry's filter strides) packed for `forward`, zero past each group's
/// filters. KCRS filters go 16 taps-and-channels × 32 filters at a time through `transpose`
/// (each filter's values are one run there); others element by element.
///
/// # Safety
/// `w` addresses the filter tensor `g` describes; `dst` has `packed_len(g)` values.
pub unsafe fn pack_w(g: &Geom, w: *const f32, transpose: Option<Transpose>, dst: &mut [f32]) {
    let (cg, kg, t) = (g.cg(), g.kg(), taps(g));
    let ws = g.w_strides;
    let (block, w) = (t * cg * NR, w as usize);
    let kcrs = ws[4] == 1 && ws[3] == g.filter[2] && ws[1] == t;
    dst.par_chunks_mut(block).enumerate().for_each(|(i, panel)| {
        let (group, fb) = (i / kg.div_ceil(NR), i % kg.div_ceil(NR));
        let live = NR.min(kg - fb * NR);
        let first = (w as *const f32).wrapping_add((group * kg + fb * NR) * ws[0]);
        let kk = cg * t;
        match transpose {
            // Full blocks of 32 filters and 16 values; the rest element by element below.
            Some(tr) if kcrs && live == NR => {
                let mut tmp = [0f32; 16 * NR];
                for k0 in (0..kk - kk % 16).step_by(16) {
                    // SAFETY: 32 filters with 16 values from k0 each (KCRS: one run per filter).
                    unsafe { tr(first.add(k0), ws[0], tmp.as_mut_ptr()) };
                    for (r, row) in tmp.chunks(NR).enumerate() {
                        let (c, tap) = ((k0 + r) / t, (k0 + r) % t);
                        panel[(tap * cg + c) * NR..][..NR].copy_from_slice(row);
                    }
                }
                scalar(panel, kk - kk % 16..kk, live, first, ws, g, cg);
            }
            _ => scalar(panel, 0..kk, live, first, ws, g, cg),
        }
    });
}

/// `pack_w` of taps-and-channels `range` (index c·taps + tap) of one panel, element by element.
fn scalar(panel: &mut [f32], range: std::ops::Range<usize>, live: usize, first: *const f32, ws: [usize; 5], g: &Geom, cg: usize) {
    let t = taps(g);
    for i in range {
        let (c, tap) = (i / t, i % t);
        let (kh, kw) = (tap / g.filter[2], tap % g.filter[2]);
        let row = &mut panel[(tap * cg + c) * NR..][..NR];
        for (j, v) in row.iter_mut().enumerate() {
            // SAFETY: filter j of the block, element (c, kh, kw), for j < live.
            *v = if j < live { unsafe { *first.add(j * ws[0] + c * ws[1] + kh * ws[3] + kw * ws[4]) } } else { 0.0 };
        }
    }
}

/// y = clamp(conv(x, w) + bias?) (ReLU, ReLU6 or none) for f32 x and y (any layout whose positions or channels are
/// consecutive in y), W from `pack_w`, with the tiles of `kern`.
///
/// # Safety
/// The pointers address the tensors `g` describes (x of type f32 or converted by `load`, y f32
/// with `y_strides[4] == 1` or `y_strides[1] == 1`); `bias` has K values if given.
pub unsafe fn forward(kern: &Kernels, g: &Geom, x: u64, dt: DataType, w: &[f32], y: *mut f32, bias: Option<&[f32]>, relu: crate::backend::cpu::clamp::Clamp) {
    assert_eq!(w.len(), packed_len(g), "conv_taps: packed W of another problem");
    assert!(g.stride[1..] == [1, 1] && g.is_2d(), "conv_taps: 2-D, stride 1");
    let [_, oh, ow] = g.output;
    let [_, hp, wp] = padded(g);
    let (cg, kg, t) = (g.cg(), g.kg(), taps(g));
    let plane = hp * wp;
    with_scratch_aligned(Slot::Conv, g.n * g.c * plane, |planes| {
        // Every (n, c) plane of x as f32, zero-padded.
        planes.par_chunks_mut(plane).enumerate().for_each(|(i, pln)| load_padded(g, x, dt, i / g.c, i % g.c, [1, hp, wp], pln));
        let planes = &*planes;
        let kblocks = kg.div_ceil(NR);
        // Tasks: (group, image, filter block, band of output rows), at least three per thread.
        let base = g.groups * g.n * kblocks;
        let bands = (3 * rayon::current_num_threads()).div_ceil(base).clamp(1, oh.max(1));
        let ys = g.y_strides;
        let yp = y as usize;
        (0..base * bands).into_par_iter().for_each(|i| {
            let (rest, band) = (i / bands, i % bands);
            let (group, n, fb) = (rest / (g.n * kblocks), (rest / kblocks) % g.n, rest % kblocks);
            let panel = &w[((group * kblocks + fb) * t) * cg * NR..];
            let img = &planes[(n * g.c + group * cg) * plane..];
            let k0 = group * kg + fb * NR;
            let toff: Vec<usize> = (0..t).map(|tap| (tap / g.filter[2]) * g.dilation[1] * wp + (tap % g.filter[2]) * g.dilation[2]).collect();
            let taps_tile = kern.tile_taps.expect("conv_taps: a kernel set with the taps tile");
            for r in crate::backend::cpu::even_part(oh, bands, band) {
                for q0 in (0..ow).step_by(MR) {
                    let rows = MR.min(ow - q0);
                    let out = Out {
                        y: (yp as *mut f32).add(n * ys[0] + k0 * ys[1] + r * ys[3] + q0 * ys[4]),
                        ldy: ys[1],
                        yp: ys[4],
                        bias: bias.map_or(std::ptr::null(), |b| b[k0..].as_ptr()),
                        relu,
                        cols: NR.min(kg - fb * NR),
                    };
                    // SAFETY: for every tap, rows ≤ MR positions from column q0 + kw·d of padded
                    // row r + kh·d, for cg planes, lie inside this image's planes; the panel has
                    // taps × cg rows of 32; `out` addresses this task's (n, filters k0.., row r,
                    // columns q0..) of y.
                    taps_tile(rows, cg, img.as_ptr().add(r * wp + q0), plane, &toff, panel.as_ptr(), &out);
                }
            }
        });
    });
}
