//! Forward f32 convolutions with small groups (ResNeXt: 4–32 input and output channels per
//! group), computed channels-last: for each output pixel and group, every input channel of the
//! group is broadcast against a vector of the group's KG output channels, over every tap. A
//! GEMM per group runs tiles of KG rows over CG·taps products and packs them for each group;
//! here the products go straight from x into registers. Channels-first x is read through a
//! channels-last copy; y is stored through any strides (`depthwise_io`).

use super::depthwise_io::{with_readable, RowOut};
use crate::backend::cpu::gemm::scratch::Slot;
use super::depthwise_nhwc::input_pos;
use crate::backend::cpu::direct::naive::ConvPtrs;
use crate::backend::cpu::pointwise::epilogue::CpuEpilogue;
use crate::problem::Geom;
use rayon::prelude::*;

/// Output channels per group the kernel is built for (one vector of sums per group).
pub const GROUP_OUTPUTS: [usize; 4] = [4, 8, 16, 32];

/// Length of the filter as `filter_by_group` lays it out.
pub fn filter_len(g: &Geom) -> usize { g.k * g.cg() * g.filter_size() }

/// Groups whose outputs share one 16-lane vector: 4 groups of 4 → 4 (ResNeXt's first stage),
/// where one group alone fills a quarter of the lanes (2.4× faster on 128-56-56, g = 32). 1 for
/// every other shape: two groups of 8 → 8 per vector measured 1.7× slower than 8-lane vectors
/// (eight shuffles per load; bench/results/2026-11-28-cpu-small-groups-lanes.md).
pub fn groups_per_vector(g: &Geom) -> usize {
    match (g.cg(), g.kg()) {
        (4, 4) if g.groups % 4 == 0 => 4,
        _ => 1,
    }
}

/// t ← w as [group block][tap][c][lane] with lane = (group mod GB)·KG + k (GB =
/// `groups_per_vector`): a block's outputs for one input channel and tap are one contiguous
/// vector.
pub fn filter_by_group(g: &Geom, w: u64, t: &mut [f32]) {
    let ([_, fr, fw], ws, (cg, kg)) = (g.filter, g.w_strides, (g.cg(), g.kg()));
    let gb = groups_per_vector(g);
    for gi in 0..g.groups {
        let (blk, lane0) = (gi / gb, (gi % gb) * kg);
        for tap in 0..fr * fw {
            for c in 0..cg {
                for k in 0..kg {
                    let src = (gi * kg + k) * ws[0] + c * ws[1] + (tap / fw) * ws[3] + (tap % fw) * ws[4];
                    // SAFETY: (gi·KG + k, c, r, s) is an element of the validated filter.
                    t[((blk * fr * fw + tap) * cg + c) * gb * kg + lane0 + k] = unsafe { *(w as *const f32).add(src) };
                }
            }
        }
    }
}

/// Row (n, oh) as `row` computes it, for GB groups of CG → KG channels per 16-lane vector
/// (GB·KG = 16, GB·CG = 16): a tap's 16 input channels of a block are loaded once and each of
/// the CG channel positions spread to its group's lanes by a fixed shuffle.
#[inline(always)]
fn row_blocks<const CG: usize, const KG: usize, const GB: usize>(x: *const f32, wt: &[f32], g: &Geom, n: usize, oh: usize, acc: &mut [f32]) {
    const W: usize = 16;
    let ([_, fr, fw], xs) = (g.filter, g.x_strides);
    let (sw, dw, pw, width) = (g.stride[2], g.dilation[2], g.pad[2], g.input[2]);
    let inside = |o: usize| o * sw >= pw && o * sw - pw + (fw - 1) * dw < width;
    // One tap of one output into a: the block's 16 input channels at pixel offset px, each of
    // the CG channel positions against its row of the filter vectors.
    #[inline(always)]
    fn tap<const CG: usize, const KG: usize>(x: *const f32, px: usize, wrow: &[f32], a: &mut [f32; 16]) {
        // SAFETY: the caller checked that this pixel lies inside x; its 16 channels of the
        // block are contiguous.
        let v: [f32; 16] = unsafe { (x.add(px) as *const [f32; 16]).read_unaligned() };
        for c in 0..CG {
            let xv: [f32; 16] = std::array::from_fn(|l| v[(l / KG) * CG + c]);
            let wc: &[f32; 16] = wrow[c * 16..(c + 1) * 16].try_into().unwrap();
            for l in 0..16 {
                a[l] = xv[l].mul_add(wc[l], a[l]);
            }
        }
    }
    let blocks = g.groups / GB;
    let mut ow = 0;
    while ow < g.output[2] {
        let four = ow + 4 <= g.output[2] && inside(ow) && inside(ow + 3);
        let outs = if four { 4 } else { 1 };
        for blk in 0..blocks {
            let mut a = [[0f32; W]; 4];
            for r in 0..fr {
                let Some(ih) = input_pos(g, 1, oh, r) else { continue };
                for s in 0..fw {
                    let wrow = &wt[(blk * fr * fw + r * fw + s) * CG * W..][..CG * W];
                    if four {
                        for (j, aj) in a.iter_mut().enumerate() {
                            let px = n * xs[0] + ih * xs[3] + ((ow + j) * sw - pw + s * dw) * xs[4] + blk * GB * CG;
                            tap::<CG, KG>(x, px, wrow, aj);
                        }
                    } else if let Some(iw) = input_pos(g, 2, ow, s) {
                        let px = n * xs[0] + ih * xs[3] + iw * xs[4] + blk * GB * CG;
                        tap::<CG, KG>(x, px, wrow, &mut a[0]);
                    }
                }
            }
            for (j, aj) in a.iter().take(outs).enumerate() {
                acc[(ow + j) * g.k + blk * W..][..W].copy_from_slice(aj);
            }
        }
        ow += outs;
    }
}

/// acc[ow·K + g·KG ..] for every output of row (n, oh): KG sums per group in registers, four
/// outputs at a time where all their taps lie inside the image (each filter vector loaded once
/// for the four).
#[inline(always)]
fn row<const KG: usize>(x: *const f32, wt: &[f32], g: &Geom, n: usize, oh: usize, acc: &mut [f32]) {
    let ([_, fr, fw], xs, cg) = (g.filter, g.x_strides, g.cg());
    let (sw, dw, pw, width) = (g.stride[2], g.dilation[2], g.pad[2], g.input[2]);
    let inside = |o: usize| o * sw >= pw && o * sw - pw + (fw - 1) * dw < width;
    let mut ow = 0;
    while ow < g.output[2] {
        if ow + 4 <= g.output[2] && inside(ow) && inside(ow + 3) {
            for gi in 0..g.groups {
                let mut a = [[0f32; KG]; 4];
                for r in 0..fr {
                    let Some(ih) = input_pos(g, 1, oh, r) else { continue };
                    for s in 0..fw {
                        let px = n * xs[0] + ih * xs[3] + (ow * sw - pw + s * dw) * xs[4] + gi * cg;
                        let wrow = &wt[(gi * fr * fw + r * fw + s) * cg * KG..][..cg * KG];
                        for (c, wc) in wrow.chunks_exact(KG).enumerate() {
                            for (j, aj) in a.iter_mut().enumerate() {
                                // SAFETY: output ow + j's tap (r, s) is inside x (checked above).
                                let xv = unsafe { *x.add(px + j * sw * xs[4] + c) };
                                for k in 0..KG {
                                    aj[k] = xv.mul_add(wc[k], aj[k]);
                                }
                            }
                        }
                    }
                }
                for (j, aj) in a.iter().enumerate() {
                    acc[(ow + j) * g.k + gi * KG..][..KG].copy_from_slice(aj);
                }
            }
            ow += 4;
            continue;
        }
        for gi in 0..g.groups {
            let mut a = [0f32; KG];
            for r in 0..fr {
                let Some(ih) = input_pos(g, 1, oh, r) else { continue };
                for s in 0..fw {
                    let Some(iw) = input_pos(g, 2, ow, s) else { continue };
                    let px = n * xs[0] + ih * xs[3] + iw * xs[4] + gi * cg;
                    let wrow = &wt[(gi * fr * fw + r * fw + s) * cg * KG..][..cg * KG];
                    for (c, wc) in wrow.chunks_exact(KG).enumerate() {
                        // SAFETY: pixel (n, ih, iw) is inside x, channels contiguous.
                        let xv = unsafe { *x.add(px + c) };
                        for k in 0..KG {
                            a[k] = xv.mul_add(wc[k], a[k]);
                        }
                    }
                }
            }
            acc[ow * g.k + gi * KG..][..KG].copy_from_slice(&a);
        }
        ow += 1;
    }
}

simd!(row_dispatch(x: *const f32, wt: &[f32], g: &Geom, n: usize, oh: usize, acc: &mut [f32]) {
    match groups_per_vector(g) {
        4 => return row_blocks::<4, 4, 4>(x, wt, g, n, oh, acc),
        _ => {}
    }
    match g.kg() {
        4 => row::<4>(x, wt, g, n, oh, acc),
        8 => row::<8>(x, wt, g, n, oh, acc),
        16 => row::<16>(x, wt, g, n, oh, acc),
        _ => row::<32>(x, wt, g, n, oh, acc),
    }
});

/// y = epilogue(α·conv(x, w) + β·y); `wt` as `filter_by_group` lays it out, KG one of
/// `GROUP_OUTPUTS`.
pub fn forward(g: &Geom, p: ConvPtrs, wt: &[f32], alpha: f32, beta: f32, epi: &CpuEpilogue) {
    with_readable(Slot::Conv, p.x, g.n, g.c, g.input, g.x_strides, |x, xs| {
        let g = &Geom { x_strides: xs, ..*g };
        let out = RowOut { ptr: p.y, strides: g.y_strides, dims: g.output, alpha, beta, epi };
        (0..g.n * g.output[1]).into_par_iter().for_each_init(
            || vec![0f32; g.output[2] * g.k],
            |acc, rowi| {
                let (n, oh) = (rowi / g.output[1], rowi % g.output[1]);
                row_dispatch(x as *const f32, wt, g, n, oh, acc);
                // SAFETY: this task owns y row (n, oh).
                unsafe { out.write(acc, n, oh) };
            },
        );
    });
}
