//! Depthwise forward convolution on channels-first planes, one input plane at a time (tasks
//! take runs of planes).
//!
//! The zero-padded input plane is split into stride_h × stride_w phases (rows ≡ a, columns ≡ b
//! modulo the stride) that share one row pitch Q. Output (oy, ox), at flat index oy·Q + ox,
//! reads tap (r, s) from phase ((r·dil_h) mod stride_h, (s·dil_w) mod stride_w) at the flat
//! index oy·Q + ox plus a fixed offset. So the whole output plane is one run of vector FMAs per
//! tap, whatever the stride or dilation, with no per-row loop: on the 7- and 14-pixel rows of
//! late network stages a row loop leaves most vector lanes empty. The Q − Wo columns past each
//! output row are computed and dropped; outputs of ≤ `NARROW` columns keep their columns whole
//! (no column phases) and are stored at the stride.

use super::depthwise::padded;
use crate::backend::cpu::clamp::Clamp;
use crate::backend::cpu::direct::naive::ConvPtrs;
use crate::backend::cpu::gemm::{with_scratch, Slot};
use crate::backend::cpu::pointwise::epilogue::CpuEpilogue;
use crate::backend::cpu::tensor_io::access::load;
use crate::backend::cpu::tensor_io::conv_out::{spatial_offsets, OutTensor};
use crate::problem::Geom;
use crate::types::DataType;
use rayon::prelude::*;

/// Output rows at most this wide are computed at every column when strided (`PhaseLayout::step`).
const NARROW: usize = 8;

/// Outputs per inner block: four AVX2 vectors (two AVX-512 ones); `plane_taps` runs several
/// blocks at once.
const BLOCK: usize = 32;

/// Fewest taps for which `plane_taps` runs blocks in groups.
const MIN_GROUPED_TAPS: usize = 16;

/// Most f32 elements of one task's phase buffer (all phases of one padded plane).
pub const MAX_PHASE_FLOATS: usize = 1 << 24;

/// Where each tap of one plane reads, and the buffer sizes that layout needs.
#[derive(Clone, Debug)]
pub struct PhaseLayout {
    /// Phase strides: the row stride, and the column stride or 1 (columns kept whole).
    stride: [usize; 2],
    /// Flat distance between horizontally adjacent outputs: 1 with column phases, else the
    /// column stride (outputs in between are computed and dropped).
    step: usize,
    pitch: usize,
    phase_len: usize,
    /// Flat outputs computed per plane: Ho·Q rounded up to a whole block.
    len: usize,
    /// Flat read offset of every tap, in (r, s) order.
    taps: Vec<usize>,
    /// Where input row ih starts in the phase buffer (its row phase and row).
    rows: Vec<usize>,
    /// Per column phase: (first input column in it, offset of that column in the row, count).
    cols: Vec<(usize, usize, usize)>,
}

impl PhaseLayout {
    /// The layout of a 2-D geometry (`g.input[0] == 1`), None where a size overflows or the
    /// phases would exceed `MAX_PHASE_FLOATS`.
    pub fn of(g: &Geom) -> Option<PhaseLayout> {
        let [_, hp, wp] = padded(g);
        // Narrow outputs keep their columns whole: splitting 14-pixel rows into even and odd
        // halves costs more per row than the stride-fold extra products.
        let step = if g.output[2] <= NARROW { g.stride[2] } else { 1 };
        let stride = [g.stride[1], g.stride[2] / step];
        let rows = hp.div_ceil(stride[0]);
        let pitch = wp.div_ceil(stride[1]);
        let len = g.output[1].checked_mul(pitch)?.checked_next_multiple_of(BLOCK)?;
        let mut taps = Vec::with_capacity(g.filter[1] * g.filter[2]);
        let mut max_shift = 0;
        for r in 0..g.filter[1] {
            let dr = r.checked_mul(g.dilation[1])?;
            for s in 0..g.filter[2] {
                let ds = s.checked_mul(g.dilation[2])?;
                let shift = (dr / stride[0]).checked_mul(pitch)?.checked_add(ds / stride[1])?;
                max_shift = max_shift.max(shift);
                taps.push(((dr % stride[0]) * stride[1] + ds % stride[1], shift));
            }
        }
        let phase_len = rows.checked_mul(pitch)?.max(len.checked_add(max_shift)?);
        let total = phase_len.checked_mul(stride[0])?.checked_mul(stride[1])?;
        if total > MAX_PHASE_FLOATS {
            return None;
        }
        let taps = taps.into_iter().map(|(phase, shift)| phase * phase_len + shift).collect();
        // Row and column placement, computed once: divisions per row cost more than the copy.
        let (pad_h, pad_w, w_n) = (g.pad[1], g.pad[2], g.input[2]);
        let rows = (0..g.input[1]).map(|ih| ((ih + pad_h) % stride[0]) * stride[1] * phase_len + ((ih + pad_h) / stride[0]) * pitch).collect();
        let cols = (0..stride[1])
            .filter_map(|b| {
                let first = (b + stride[1] - pad_w % stride[1]) % stride[1];
                (first < w_n).then(|| (first, b * phase_len + (first + pad_w) / stride[1], (w_n - first).div_ceil(stride[1])))
            })
            .collect();
        Some(PhaseLayout { stride, step, pitch, phase_len, len, taps, rows, cols })
    }

    /// f32 elements of the phase buffer of one plane.
    pub fn buffer_len(&self) -> usize {
        self.phase_len * self.stride[0] * self.stride[1]
    }

    /// Flat multiply-adds per plane: the work of one task.
    pub fn work(&self) -> usize {
        self.len * self.taps.len()
    }
}

// Copy input plane (n, c) into its phases; `row` is scratch for one input row converted to f32.
// Every plane writes the same positions, so the zeros where padding falls are written once per
// task (`forward`), not per plane.
simd!(load_phases(g: &Geom, x: u64, dt: DataType, n: usize, c: usize, lay: &PhaseLayout, buf: &mut [f32], row: &mut Vec<f32>) {
    let xs = g.x_strides;
    let (sw, w_n) = (lay.stride[1], g.input[2]);
    for (ih, &row0) in lay.rows.iter().enumerate() {
        let base = n * xs[0] + c * xs[1] + ih * xs[3];
        let src: &[f32] = if dt == DataType::Float && xs[4] == 1 {
            // SAFETY: the row's W consecutive f32 elements of x.
            unsafe { std::slice::from_raw_parts((x as *const f32).add(base), w_n) }
        } else {
            row.clear();
            // SAFETY: (n, c, ih, iw) are elements of x.
            row.extend((0..w_n).map(|iw| unsafe { load(dt, x, base + iw * xs[4]) }));
            row
        };
        match (sw, &lay.cols[..]) {
            (1, _) => copy_row(src, &mut buf[row0 + lay.cols[0].1..][..w_n]),
            (2, &[(f0, at0, n0), (_, at1, n1)]) => {
                let (lo, hi) = buf[row0..].split_at_mut(at0.max(at1));
                let (even, odd) = if at0 < at1 { (&mut lo[at0..], &mut hi[..n1]) } else { (&mut hi[..n0], &mut lo[at1..]) };
                // Input element f0 + 2j goes to the phase of `first` = f0, the next one to the other.
                if f0 == 0 { deinterleave(src, &mut even[..n0], &mut odd[..n1]) } else { deinterleave(src, &mut odd[..n1], &mut even[..n0]) }
            }
            _ => {
                // Column phase b holds every sw-th input element from its first one, in order.
                for &(first, at, count) in &lay.cols {
                    for (j, d) in buf[row0 + at..][..count].iter_mut().enumerate() {
                        *d = src[first + j * sw];
                    }
                }
            }
        }
    }
});

/// a[j] = src[2j], b[j] = src[2j + 1]: a row split into its even and odd columns; fixed-size
/// for the even widths of network stages (outputs of ≤ `NARROW` columns never split, so rows
/// of 28 and up).
#[inline(always)]
fn deinterleave(src: &[f32], a: &mut [f32], b: &mut [f32]) {
    #[inline(always)]
    fn fixed<const W: usize, const H: usize>(src: &[f32], a: &mut [f32], b: &mut [f32]) {
        let v: &[f32; W] = src.try_into().unwrap();
        let (a, b): (&mut [f32; H], &mut [f32; H]) = (a.try_into().unwrap(), b.try_into().unwrap());
        for l in 0..H {
            a[l] = v[2 * l];
            b[l] = v[2 * l + 1];
        }
    }
    match (src.len(), a.len(), b.len()) {
        (28, 14, 14) => fixed::<28, 14>(src, a, b),
        (56, 28, 28) => fixed::<56, 28>(src, a, b),
        (112, 56, 56) => fixed::<112, 56>(src, a, b),
        _ => {
            for (i, &v) in src.iter().enumerate() {
                if i % 2 == 0 { a[i / 2] = v } else { b[i / 2] = v }
            }
        }
    }
}

// acc[i] = Σ over taps of w[t] · buf[tap_t + i], for the plane's `len` flat outputs. With
// many taps (5×5, 7×7) blocks go in groups (four with AVX-512, two with AVX2: eight vector
// accumulators) so that each tap's multiply-adds are independent chains: one block alone waits
// on the FMA latency at every tap. Shorter filters (3×3) take two blocks with AVX-512 (10–15%
// faster on the AMD VM: bench/results/2026-11-28-cpu-depthwise-stores.md) and single blocks
// with AVX2.
simd!(plane_taps(buf: &[f32], taps: &[usize], w: &[f32], len: usize, acc: &mut [f32]) {
    let group = match (taps.len() >= MIN_GROUPED_TAPS, crate::backend::cpu::lanes::level() >= 2) {
        (false, true) => 2,
        (false, false) => 1,
        (true, true) => 4,
        (true, false) => 2,
    };
    let blocks = len / BLOCK;
    let mut b = 0;
    while b < blocks {
        let nb = group.min(blocks - b);
        let out = &mut acc[b * BLOCK..(b + nb) * BLOCK];
        match nb {
            4 => taps_group::<4>(buf, taps, w, b * BLOCK, out),
            3 => taps_group::<3>(buf, taps, w, b * BLOCK, out),
            2 => taps_group::<2>(buf, taps, w, b * BLOCK, out),
            _ => taps_group::<1>(buf, taps, w, b * BLOCK, out),
        }
        b += nb;
    }
});

#[inline(always)]
fn taps_group<const NB: usize>(buf: &[f32], taps: &[usize], w: &[f32], i0: usize, out: &mut [f32]) {
    let mut a = [[0f32; BLOCK]; NB];
    for (&off, &wt) in taps.iter().zip(w) {
        let src = &buf[off + i0..off + i0 + NB * BLOCK];
        for (j, aj) in a.iter_mut().enumerate() {
            let s: &[f32; BLOCK] = src[j * BLOCK..(j + 1) * BLOCK].try_into().unwrap();
            for l in 0..BLOCK {
                aj[l] = s[l].mul_add(wt, aj[l]);
            }
        }
    }
    for (j, aj) in a.iter().enumerate() {
        out[j * BLOCK..(j + 1) * BLOCK].copy_from_slice(aj);
    }
}

// y row oy = clamp(acc[oy·Q..][..Wo] + bias) for every output row of a plane: the fused store
// of f32 conv + bias + ReLU / ReLU6 into a spatially packed y plane. The widths of late network
// stages get fixed-size rows (a loop over 7 or 14 elements compiles to scalar code).
simd!(store_rows(acc: &[f32], pitch: usize, step: usize, y: &mut [f32], ow_n: usize, bias: f32, act: Clamp) {
    match (ow_n, step) {
        (7, 1) => store_fixed::<7, 1>(acc, pitch, y, bias, act),
        (14, 1) => store_fixed::<14, 1>(acc, pitch, y, bias, act),
        (28, 1) => store_fixed::<28, 1>(acc, pitch, y, bias, act),
        (56, 1) => store_fixed::<56, 1>(acc, pitch, y, bias, act),
        (112, 1) => store_fixed::<112, 1>(acc, pitch, y, bias, act),
        (7, 2) => store_fixed::<7, 2>(acc, pitch, y, bias, act),
        (_, 1) => {
            // Consecutive outputs: a zip the compiler vectorizes (an indexed loop with a
            // run-time step does not).
            for (oy, dst) in y.chunks_exact_mut(ow_n).enumerate() {
                for (d, &a) in dst.iter_mut().zip(&acc[oy * pitch..][..ow_n]) {
                    *d = act.apply_branch_free(a + bias);
                }
            }
        }
        _ => {
            for (oy, dst) in y.chunks_exact_mut(ow_n).enumerate() {
                for (ox, d) in dst.iter_mut().enumerate() {
                    *d = act.apply_branch_free(acc[oy * pitch + ox * step] + bias);
                }
            }
        }
    }
});

#[inline(always)]
fn store_fixed<const W: usize, const STEP: usize>(acc: &[f32], pitch: usize, y: &mut [f32], bias: f32, act: Clamp) {
    for (oy, dst) in y.chunks_exact_mut(W).enumerate() {
        let dst: &mut [f32; W] = dst.try_into().unwrap();
        let src = &acc[oy * pitch..][..(W - 1) * STEP + 1];
        for l in 0..W {
            dst[l] = act.apply_branch_free(src[l * STEP] + bias);
        }
    }
}

/// dst = src for one input row, fixed-size for the widths of late network stages.
#[inline(always)]
fn copy_row(src: &[f32], dst: &mut [f32]) {
    #[inline(always)]
    fn fixed<const W: usize>(src: &[f32], dst: &mut [f32]) {
        let d: &mut [f32; W] = dst.try_into().unwrap();
        *d = src.try_into().unwrap();
    }
    match src.len() {
        7 => fixed::<7>(src, dst),
        14 => fixed::<14>(src, dst),
        28 => fixed::<28>(src, dst),
        56 => fixed::<56>(src, dst),
        112 => fixed::<112>(src, dst),
        _ => dst.copy_from_slice(src),
    }
}

/// Every filter of a 2-D convolution as f32 taps ([k][channel of its group][r][s]): packed f32
/// filters in place, others converted once per call.
pub fn f32_filters<'a>(g: &Geom, p: ConvPtrs) -> std::borrow::Cow<'a, [f32]> {
    let (ws, taps, cg) = (g.w_strides, g.filter[1] * g.filter[2], g.cg());
    if p.dt == DataType::Float && ws[4] == 1 && ws[3] == g.filter[2] && ws[0] == cg * taps && (cg == 1 || ws[1] == taps) {
        // SAFETY: K packed filters of cg·taps f32 elements, which the caller keeps alive for 'a.
        return std::borrow::Cow::Borrowed(unsafe { std::slice::from_raw_parts(p.w as *const f32, g.k * cg * taps) });
    }
    let mut wts = Vec::with_capacity(g.k * cg * taps);
    for k in 0..g.k {
        for c in 0..cg {
            for r in 0..g.filter[1] {
                for s in 0..g.filter[2] {
                    // SAFETY: a weight element of filter k.
                    wts.push(unsafe { load(p.dt, p.w, k * ws[0] + c * ws[1] + r * ws[3] + s * ws[4]) });
                }
            }
        }
    }
    std::borrow::Cow::Owned(wts)
}

/// y = epilogue(α·conv(x, w) + β·y) for a 2-D convolution with one input channel per group.
pub fn forward(g: &Geom, lay: &PhaseLayout, p: ConvPtrs, alpha: f32, beta: f32, epi: &CpuEpilogue) {
    let kg = g.kg();
    let [_, oh_n, ow_n] = g.output;
    let (ys, taps) = (g.y_strides, g.filter[1] * g.filter[2]);
    let wts = f32_filters(g, p);
    // f32 conv + bias + ReLU / ReLU6 into spatially packed planes: stored straight from acc.
    let packed = ys[4] == 1 && ys[3] == ow_n;
    // (An activation other than ReLU / ReLU6 runs over each stored plane, in cache.)
    let direct = (p.dt == DataType::Float && alpha == 1.0 && beta == 0.0 && packed).then(|| epi.fused_store()).flatten();
    // The generic store's per-pixel offsets: only where the direct store does not apply (a
    // 112 × 112 plane's table is 2–3 % of the layer).
    let sp_off = if direct.is_some() { Vec::new() } else { spatial_offsets(g.output, g.y_strides) };
    let out = OutTensor { ptr: p.y, dt: p.dt, strides: g.y_strides, dims: g.output, sp_off: &sp_off, alpha, beta, epi };
    // Tasks of at least ~64 K multiply-adds: rayon's per-task cost is paid per plane otherwise.
    let planes = g.n * g.c;
    let chunk = (65536 / (lay.work() * kg).max(1)).clamp(1, planes.div_ceil(2 * rayon::current_num_threads()).max(1));
    (0..planes.div_ceil(chunk)).into_par_iter().for_each(|t| {
        let mut row = Vec::new();
        with_scratch(Slot::Task, lay.buffer_len(), |buf| {
            buf.fill(0.0);
            // The flat sums, then (for the generic store) the plane's rows packed densely.
            with_scratch(Slot::Task2, lay.len + oh_n * ow_n, |scratch| {
                let (acc, dense) = scratch.split_at_mut(lay.len);
                for nc in t * chunk..((t + 1) * chunk).min(planes) {
                    let (n, c) = (nc / g.c, nc % g.c);
                    load_phases(g, p.x, p.dt, n, c, lay, buf, &mut row);
                    for k in c * kg..(c + 1) * kg {
                        plane_taps(buf, &lay.taps, &wts[k * taps..][..taps], lay.len, acc);
                        if let Some(fs) = &direct {
                            // SAFETY: this task owns y plane (n, k), Ho·Wo packed f32 elements.
                            let y = unsafe { std::slice::from_raw_parts_mut((p.y as *mut f32).add(n * ys[0] + k * ys[1]), oh_n * ow_n) };
                            store_rows(acc, lay.pitch, lay.step, y, ow_n, fs.bias_of(k), fs.clamp);
                            fs.finish(y);
                            continue;
                        }
                        // Rows of Q flat outputs → dense rows of Wo, in a buffer of their own: packed in
                        // place, the overlapping copy ran element by element (half of a SiLU layer).
                        for (oy, row) in dense.chunks_exact_mut(ow_n).enumerate() {
                            if lay.step == 1 {
                                copy_row(&acc[oy * lay.pitch..][..ow_n], row);
                            } else {
                                for (ox, d) in row.iter_mut().enumerate() {
                                    *d = acc[oy * lay.pitch + ox * lay.step];
                                }
                            }
                        }
                        // SAFETY: this task owns y planes (n, c·kg..(c + 1)·kg).
                        unsafe { out.write_span(dense, n, k, 0) };
                    }
                }
            });
        });
    });
}
