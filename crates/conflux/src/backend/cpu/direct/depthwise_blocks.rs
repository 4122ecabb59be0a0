//! Depthwise f32 forward in blocks of 16 channels on AVX-512 (kernels in
//! `x86/depthwise_blocks.rs`), either layout in and out. A task is one image, one channel
//! block and a band of output rows: it stages the band's input rows channels-last with the
//! column padding as zeros (a copy of 64-byte pixels, or 16 × 16 transposes of channels-first
//! planes), computes every output row from registers, and stores channels-last outputs
//! directly or channels-first ones back through transposes. Small planes (7 × 7, 14 × 14),
//! where channels-first rows fill few lanes, are one band: each task stays in L1.

use crate::backend::cpu::direct::naive::ConvPtrs;
use crate::backend::cpu::gemm::{with_scratch, Slot};
use crate::backend::cpu::pointwise::epilogue::CpuEpilogue;
use crate::backend::cpu::tensor_io::conv_out::{spatial_offsets, OutTensor};
use crate::backend::cpu::x86::depthwise_blocks::{self as k, RowDst, Staged, Store, Taps, LANES};
use crate::problem::Geom;
use rayon::prelude::*;
use std::arch::x86_64::__mmask16;

/// Staged floats per band at most (48 KB: the band is read once per filter row while hot).
const BAND_FLOATS: usize = 12 * 1024;

/// Padded row floats at most (a wider row is a sign of huge padding: other solvers take it).
pub const MAX_ROW_FLOATS: usize = 1 << 20;

/// Tasks per thread wanted before bands are made shorter than the cache bound asks.
const TASKS_PER_THREAD: usize = 4;

/// Whether this CPU runs the kernels (AVX-512F and FMA).
pub fn available() -> bool { crate::backend::cpu::lanes::level() >= 2 }

/// The split of one problem into tasks, fixed at build time.
#[derive(Clone, Debug)]
pub struct BlocksPlan {
    /// Output rows per task.
    band: usize,
    /// Padded columns per staged row.
    pitch: usize,
    /// Staged rows per band at most (input rows, clamped to the image).
    rows: usize,
}

impl BlocksPlan {
    /// None where a padded row exceeds `MAX_ROW_FLOATS` or a size overflows.
    pub fn of(g: &Geom, threads: usize) -> Option<BlocksPlan> {
        let ([_, ho, wo], [_, fh, fw]) = (g.output, g.filter);
        if ho == 0 || wo == 0 {
            return None;
        }
        let reach = (wo - 1).checked_mul(g.stride[2])?.checked_add((fw - 1).checked_mul(g.dilation[2])?)?.checked_add(1)?;
        let pitch = reach.max(g.pad[2].checked_add(g.input[2])?);
        let row = pitch.checked_mul(LANES)?;
        if row > MAX_ROW_FLOATS {
            return None;
        }
        let span = (fh - 1).checked_mul(g.dilation[1])?.checked_add(1)?;
        let rows_for = |b: usize| ((b - 1).saturating_mul(g.stride[1]).saturating_add(span)).min(g.input[1]).max(1);
        // The most output rows whose staged rows fit the bound: all of them when the whole
        // image fits, else (fit − span) / stride + 1 (closed form: padding may make the output
        // 2³⁰ rows tall, too many to search).
        let fit = BAND_FLOATS / row;
        let mut band = if rows_for(ho) <= fit { ho } else { (fit.saturating_sub(span) / g.stride[1] + 1).clamp(1, ho) };
        let blocks = g.n * g.c.div_ceil(LANES);
        while band > 1 && blocks * ho.div_ceil(band) < TASKS_PER_THREAD * threads {
            band = band.div_ceil(2);
        }
        Some(BlocksPlan { band, pitch, rows: rows_for(band) })
    }
}

/// y = epilogue(α·conv(x, w) + β·y) for an f32 depthwise convolution (one input and one output
/// channel per group), 2-D.
///
/// # Safety
/// The CPU has AVX-512F; the pointers hold the tensors `g` describes; `lay` is `g`'s plan.
pub unsafe fn forward(g: &Geom, lay: &BlocksPlan, p: ConvPtrs, alpha: f32, beta: f32, epi: &CpuEpilogue) {
    let [_, ho, wo] = g.output;
    let (ws, ys) = (g.w_strides, g.y_strides);
    let taps = g.filter[1] * g.filter[2];
    let t = Taps { filter: [g.filter[1], g.filter[2]], stride: [g.stride[1], g.stride[2]], dilation: [g.dilation[1], g.dilation[2]], pad_top: g.pad[1], in_rows: g.input[1], out_cols: wo, chunks: 0, wider: 0 }.chunked();
    let y_last = ys[1] == 1;
    let y_planes = ys[4] == 1 && ys[3] == wo;
    // An activation other than ReLU / ReLU6 runs over the block's channels-last scratch before
    // its planes store, so only into channels-first planes.
    let fast = (alpha == 1.0 && beta == 0.0).then(|| epi.fused_store()).flatten().filter(|fs| !fs.needs_finish() || (y_planes && !y_last));
    // Offsets of every output position, for the general store only (a 112 × 112 plane's are
    // 50 KB built per call).
    let general = fast.is_none() || !(y_last || y_planes);
    let sp_off = if general { spatial_offsets(g.output, ys) } else { Vec::new() };
    let out = OutTensor { ptr: p.y, dt: p.dt, strides: ys, dims: g.output, sp_off: &sp_off, alpha, beta, epi };
    let cblocks = g.c.div_ceil(LANES);
    let bands = ho.div_ceil(lay.band);
    let staged_len = lay.rows * lay.pitch * LANES;
    let (xp, wp, yp) = (p.x as usize, p.w as usize, p.y as usize);
    (0..g.n * cblocks * bands).into_par_iter().for_each(|task| {
        let (n, cbi, bi) = (task / (cblocks * bands), task / bands % cblocks, task % bands);
        let (c0, oy0) = (cbi * LANES, bi * lay.band);
        let (cb, oy1) = ((g.c - c0).min(LANES), (oy0 + lay.band).min(ho));
        let mask: __mmask16 = if cb == LANES { 0xffff } else { (1u16 << cb) - 1 };
        let first = (oy0 * g.stride[1]).saturating_sub(g.pad[1]);
        let last = ((oy1 - 1) * g.stride[1] + (g.filter[1] - 1) * g.dilation[1] + 1).saturating_sub(g.pad[1]).min(g.input[1]);
        let rows = last.saturating_sub(first);
        let pixels = (oy1 - oy0) * wo;
        with_scratch(Slot::Task, taps * LANES + staged_len + LANES, |buf| {
            // 64-byte aligned, so no vector load splits across cache lines (wt is a whole
            // number of vectors, the staged rows follow it aligned).
            let skip = buf.as_ptr().align_offset(64).min(LANES);
            let buf = &mut buf[skip..];
            let (wt, staged) = buf.split_at_mut(taps * LANES);
            // The block's filter as [tap][16], channels past the block zero: packed filters
            // (each channel's taps consecutive) through the same transposes as input planes.
            let w = wp as *const f32;
            if ws[4] == 1 && ws[3] == g.filter[2] {
                k::stage_planes(w.add(c0 * ws[0]), ws[0], cb, 0, taps, taps, wt.as_mut_ptr(), taps, 0);
            } else {
                for r in 0..g.filter[1] {
                    for s in 0..g.filter[2] {
                        let at = (r * g.filter[2] + s) * LANES;
                        for c in 0..LANES {
                            wt[at + c] = if c < cb { *w.add((c0 + c) * ws[0] + r * ws[3] + s * ws[4]) } else { 0.0 };
                        }
                    }
                }
            }
            stage(g, xp as *const f32, n, c0, cb, mask, first..first + rows, staged.as_mut_ptr(), lay.pitch);
            let st = Staged { buf: staged.as_ptr(), first, rows, pitch: lay.pitch };
            let store = match &fast {
                Some(fs) => Store { bias: fs.bias.map_or(std::ptr::null(), |b| b.as_ptr().add(c0)), mask, on: fs.clamp.on, hi: fs.clamp.hi },
                None => Store { bias: std::ptr::null(), mask, on: false, hi: 0.0 },
            };
            if fast.is_some() && y_last {
                let y = (yp as *mut f32).add(n * ys[0] + oy0 * ys[3] + c0);
                k::output_rows(&t, &st, oy0..oy1, wt.as_ptr(), store, RowDst { ptr: y, step: ys[4], row_step: ys[3], mask });
                return;
            }
            with_scratch(Slot::Task2, pixels * (LANES + 1) + LANES, |tmp| {
                let skip = tmp.as_ptr().align_offset(64).min(LANES);
                let tmp = &mut tmp[skip..];
                let (blk, rest) = tmp.split_at_mut(pixels * LANES);
                let span = &mut rest[..pixels];
                k::output_rows(&t, &st, oy0..oy1, wt.as_ptr(), store, RowDst { ptr: blk.as_mut_ptr(), step: LANES, row_step: wo * LANES, mask: 0xffff });
                if let Some(fs) = &fast {
                    // Lanes past the block's channels are finished too, and not stored.
                    fs.finish(blk);
                }
                if fast.is_some() && !y_last && y_planes {
                    k::store_planes(blk.as_ptr(), pixels, cb, (yp as *mut f32).add(n * ys[0] + c0 * ys[1] + oy0 * wo), ys[1]);
                    return;
                }
                // Raw sums through α, β and the whole epilogue, one channel's span at a time.
                for c in 0..cb {
                    for (i, v) in span.iter_mut().enumerate() {
                        *v = blk[i * LANES + c];
                    }
                    // SAFETY: this task owns outputs (n, c0 + c, rows oy0..oy1).
                    out.write_span(span, n, c0 + c, oy0 * wo);
                }
            });
        });
    });
}

/// Input rows `rows` of image n, channels c0..c0 + cb, into `buf` channels-last at `pitch`
/// padded columns (the padding columns zeroed).
#[allow(clippy::too_many_arguments)]
unsafe fn stage(g: &Geom, x: *const f32, n: usize, c0: usize, cb: usize, mask: __mmask16, rows: std::ops::Range<usize>, buf: *mut f32, pitch: usize) {
    let (xs, width, pad_l) = (g.x_strides, g.input[2], g.pad[2]);
    k::zero_padding(buf, rows.len(), pitch, pad_l, width);
    if rows.is_empty() {
        return;
    }
    let img = x.add(n * xs[0]);
    if xs[1] == 1 {
        k::stage_channels_last(img.add(c0), xs[4], xs[3], rows, width, mask, buf, pitch, pad_l);
    } else if xs[4] == 1 && xs[3] == width {
        k::stage_planes(img.add(c0 * xs[1]), xs[1], cb, rows.start * width, rows.end * width, width, buf, pitch, pad_l);
    } else {
        for (i, iy) in rows.enumerate() {
            for ix in 0..width {
                let dst = buf.add((i * pitch + pad_l + ix) * LANES);
                for c in 0..LANES {
                    *dst.add(c) = if c < cb { *img.add((c0 + c) * xs[1] + iy * xs[3] + ix * xs[4]) } else { 0.0 };
                }
            }
        }
    }
}
