//! Layout conversion on the GPU: a 16-bit or f32 channels-first tensor (NCHW x, KCRS w, or any
//! strides with the same dimension order; or a filter flipped for backward-data) into a packed
//! channels-last buffer (kernels/to_channels_last.cu). One module serves every shape: sizes
//! are run-time arguments.

use super::CudaBackend;
use crate::error::{Error, Result};
use crate::problem::TapMap;
use crate::tensor::TensorDesc;

const SOURCE: &str = include_str!("kernels/to_channels_last.cu");

/// A tensor seen as [outer][C][P] with P = its spatial positions in order (rows of W), copied
/// channels-contiguous. The outer index splits as o = hi·outer_lo + lo (groups × channels or
/// taps of a flipped filter); source strides may be negative (a flipped filter walks its taps
/// backwards from `base`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChannelsFirst {
    pub outer: usize,
    pub outer_lo: usize,
    pub c: usize,
    pub p: usize,
    pub w: usize,
    /// Source element offset of position 0 of channel 0 of outer 0.
    pub base: i64,
    /// Source element strides of outer-hi, outer-lo, channel, row and column.
    pub strides: [i64; 5],
    /// Destination element strides of outer-hi, outer-lo and position (channels: 1).
    pub dst: [i64; 3],
    /// Bytes per element (2 or 4).
    pub elem: usize,
}

/// Rows and columns of a 4-D or 5-D descriptor's spatial positions: (stride of a row, stride
/// of a column), if the dimensions before W collapse into rows of one stride (always for 4-D;
/// for 5-D when D steps over whole H planes).
fn rows_of(t: &TensorDesc) -> Option<(i64, i64)> {
    let (l, s) = (t.lens(), t.strides());
    let r = l.len();
    if !(4..=5).contains(&r) || (r == 5 && s[2] != l[3] * s[3]) {
        return None;
    }
    Some((s[r - 2] as i64, s[r - 1] as i64))
}

impl ChannelsFirst {
    /// The view of a 4-D or 5-D channels-first descriptor, copied to packed N(D)HWC order.
    pub fn of(t: &TensorDesc) -> Option<ChannelsFirst> {
        let (row, col) = rows_of(t)?;
        let (l, s) = (t.lens(), t.strides());
        let (c, p) = (l[1], l[2..].iter().product::<usize>());
        let dst = [(p * c) as i64, 0, c as i64];
        Some(ChannelsFirst { outer: l[0], outer_lo: 1, c, p, w: l[l.len() - 1], base: 0, strides: [s[0] as i64, 0, s[1] as i64, row, col], dst, elem: t.dtype().size() })
    }

    /// The filter of the forward convolution that computes backward-data: w is K × CG × taps
    /// in `groups` groups; the copy is w'[g·CG + c][t][k] = w[g·KG + k][c][T − 1 − t], packed
    /// in C × taps × KG order. The view walks the source's contiguous dimension along the
    /// positions so that reads coalesce: the channels c when they are contiguous (KRSC), else
    /// c and taps flattened (KCRS), else one c per outer index.
    pub fn flipped_filter(w: &TensorDesc, groups: usize) -> Option<ChannelsFirst> {
        let l = w.lens();
        let filter = if l.len() == 4 { [1, l[2], l[3]] } else { [l[2], l[3], l[4]] };
        Self::sub_filter(w, groups, &TapMap::reversed(filter))
    }

    /// The same for the sub-filter `taps` of a strided backward-data phase (taps t of w'
    /// are source taps `taps.source(t)`); 3-D filters only when every tap is taken, reversed.
    pub fn sub_filter(w: &TensorDesc, groups: usize, taps: &TapMap) -> Option<ChannelsFirst> {
        let (row, col) = rows_of(w)?;
        let (l, s) = (w.lens(), w.strides());
        if l.len() == 5 && !taps.is_reversed() {
            return None;
        }
        let (kg, cg) = (l[0] / groups, l[1]);
        let count = taps.count();
        let (k_stride, c_stride) = (s[0] as i64, s[1] as i64);
        let g_src = kg as i64 * k_stride;
        let g_dst = (cg * count * kg) as i64;
        let [_, h, wa] = taps.axes;
        let w_len = l[l.len() - 1];
        // The first tap read, and the source stride between consecutive taps when one walk
        // covers them (a 5-D filter: its D and H collapse into rows, reversed whole).
        let (first, linear) = if l.len() == 5 {
            let last = (count / w_len - 1) as i64 * row + (w_len - 1) as i64 * col;
            (last, (count == w_len || row == w_len as i64 * col).then_some(-col))
        } else {
            let first = h.first as i64 * row + wa.first as i64 * col;
            let (sh, sw) = (h.step as i64 * row, wa.step as i64 * col);
            let linear = if h.count == 1 {
                Some(-sw)
            } else if wa.count == 1 {
                Some(-sh)
            } else {
                (sh == wa.count as i64 * sw).then_some(-sw)
            };
            (first, linear)
        };
        let elem = w.dtype().size();
        let view = match linear {
            // outer = (g, tap), positions = c.
            Some(t) if c_stride == 1 => ChannelsFirst {
                outer: groups * count,
                outer_lo: count,
                c: kg,
                p: cg,
                w: cg,
                base: first,
                strides: [g_src, t, k_stride, 0, c_stride],
                dst: [g_dst, kg as i64, (count * kg) as i64],
                elem,
            },
            // outer = g, positions = (c, tap).
            Some(t) => ChannelsFirst {
                outer: groups,
                outer_lo: 1,
                c: kg,
                p: cg * count,
                w: count,
                base: first,
                strides: [g_src, 0, k_stride, c_stride, t],
                dst: [g_dst, 0, kg as i64],
                elem,
            },
            // outer = (g, c), positions = taps.
            None if l.len() == 5 => ChannelsFirst {
                outer: groups * cg,
                outer_lo: cg,
                c: kg,
                p: count,
                w: w_len,
                base: first,
                strides: [g_src, c_stride, k_stride, -row, -col],
                dst: [g_dst, (count * kg) as i64, kg as i64],
                elem,
            },
            None => ChannelsFirst {
                outer: groups * cg,
                outer_lo: cg,
                c: kg,
                p: count,
                w: wa.count,
                base: first,
                strides: [g_src, c_stride, k_stride, -(h.step as i64) * row, -(wa.step as i64) * col],
                dst: [g_dst, (count * kg) as i64, kg as i64],
                elem,
            },
        };
        Some(view)
    }

    /// Bytes of the packed channels-last copy.
    pub fn packed_bytes(&self) -> usize { self.outer * self.c * self.p * self.elem }

    /// Why the kernel cannot take this view (grid limits, odd channel count), if it cannot.
    pub fn refusal(&self) -> Option<String> {
        if self.elem != 2 && self.elem != 4 {
            return Some(format!("{}-byte elements: the layout kernel moves 2- and 4-byte ones", self.elem));
        }
        if !self.c.is_multiple_of(2) {
            return Some(format!("{} channels: the layout kernel stores channel pairs", self.c));
        }
        if self.outer > 65535 || self.c.div_ceil(64) > 65535 {
            return Some(format!("{} × {} channels exceed the layout kernel's grid", self.outer, self.c));
        }
        if self.outer * self.c * self.p >= i64::MAX as usize / 4 {
            return Some("tensor too large".into());
        }
        None
    }
}

/// Mirrors `ToChannelsLastArgs`.
#[repr(C)]
struct Args {
    src: u64,
    dst: u64,
    base: i64,
    strides: [i64; 5],
    dst_strides: [i64; 3],
    c: i32,
    p: i32,
    w: i32,
    outer_lo: i32,
}

/// dst[o_hi·d_hi + o_lo·d_lo + p·d_pos + c] = src[o, c, p] on the device's stream; `dst` holds
/// `packed_bytes()`.
pub fn to_channels_last(be: &CudaBackend, v: &ChannelsFirst, src: u64, dst: u64) -> Result<()> {
    if let Some(why) = v.refusal() {
        return Err(Error::not_implemented(format!("to_channels_last: {why}")));
    }
    let name = if v.elem == 4 { "to_channels_last_32" } else { "to_channels_last" };
    let k = be.module("to_channels_last", SOURCE)?.function(name)?;
    let args = Args { src, dst, base: v.base, strides: v.strides, dst_strides: v.dst, c: v.c as i32, p: v.p as i32, w: v.w as i32, outer_lo: v.outer_lo as i32 };
    let grid = (v.p.div_ceil(64) as u32, v.c.div_ceil(64) as u32, v.outer as u32);
    // SAFETY: Args mirrors the kernel's struct; src spans the view (the caller's validated
    // tensor) and dst the packed copy; the grid covers the view within its limits (refusal).
    unsafe { k.launch(&be.dev, grid, (256, 1, 1), 0, &args) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conv_desc::ConvDesc;
    use crate::problem::{backward_data_phases, ConvProblem};
    use crate::types::{ConvMode, DataType, Layout};

    /// What the layout kernel writes for view `v` of `src`, computed on the host.
    fn copy_on_host(v: &ChannelsFirst, src: &[f64]) -> Vec<f64> {
        let mut dst = vec![f64::NAN; v.outer * v.c * v.p];
        for o in 0..v.outer {
            let (hi, lo) = ((o / v.outer_lo) as i64, (o % v.outer_lo) as i64);
            for p in 0..v.p {
                let at = v.base + hi * v.strides[0] + lo * v.strides[1] + (p / v.w) as i64 * v.strides[3] + (p % v.w) as i64 * v.strides[4];
                for c in 0..v.c {
                    let d = hi * v.dst[0] + lo * v.dst[1] + p as i64 * v.dst[2] + c as i64;
                    dst[d as usize] = src[(at + c as i64 * v.strides[2]) as usize];
                }
            }
        }
        dst
    }

    /// Every phase's sub-filter view, for KCRS, KRSC and 1×1 filters, with groups: the copy
    /// holds w'[g·CG + c][t][k] = w[g·KG + k][c][source tap of t], packed C × taps × KG.
    #[test]
    fn sub_filter_views_copy_the_phase_taps() {
        let shapes: [(usize, usize, usize, [usize; 2], i64, i64); 6] =
            [(1, 4, 6, [2, 2], 2, 0), (1, 4, 6, [3, 3], 2, 1), (2, 2, 4, [3, 3], 2, 1), (1, 2, 2, [1, 1], 2, 0), (1, 2, 2, [7, 7], 2, 3), (1, 2, 2, [4, 3], 3, 1)];
        for (groups, cg, k, [r, s], stride, pad) in shapes {
            for layout in [Layout::NCHW, Layout::NHWC] {
                let mut conv = ConvDesc::new(ConvMode::Convolution, &[pad, pad], &[stride, stride], &[1, 1]).unwrap();
                conv.set_groups(groups as i64).unwrap();
                let dx = TensorDesc::with_layout(DataType::Half, Layout::NHWC, &[1, groups * cg, 11, 12]).unwrap();
                let w = TensorDesc::with_layout(DataType::Half, layout, &[k, cg, r, s]).unwrap();
                let dy = conv.output_desc(&dx, &w).unwrap();
                let p = ConvProblem::backward_data(&conv, &dy, &w, &dx).unwrap();
                let src: Vec<f64> = (0..w.element_space()).map(|i| i as f64).collect();
                for ph in backward_data_phases(&p, &dy, Layout::NHWC).unwrap() {
                    let Some((f, taps)) = ph.forward else { continue };
                    let v = ChannelsFirst::sub_filter(&w, groups, &taps).unwrap();
                    let got = copy_on_host(&v, &src);
                    let kg = k / groups;
                    crate::tensor::for_each_index(f.w.lens(), |i| {
                        let (g, c, kk) = (i[0] / cg, i[0] % cg, i[1]);
                        let t = taps.source([0, i[2], i[3]]);
                        let want = src[w.offset(&[g * kg + kk, c, t / s, t % s])];
                        assert_eq!(got[f.w.offset(i)], want, "{layout:?} {r}x{s} s{stride} groups {groups} phase {:?} at {i:?}", ph.residue);
                    });
                }
            }
        }
    }
}
