//! Layout conversion on the GPU: a 16-bit or f32 channels-first tensor (NCHW x, KCRS w, or any
//! strides with the same dimension order; or a filter flipped for backward-data) into a packed
//! channels-last buffer (kernels/to_channels_last.cu). One module serves every shape: sizes
//! are run-time arguments.

use super::CudaBackend;
use crate::error::{Error, Result};
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
        let (row, col) = rows_of(w)?;
        let (l, s) = (w.lens(), w.strides());
        let (kg, cg) = (l[0] / groups, l[1]);
        let taps: usize = l[2..].iter().product();
        let w_len = l[l.len() - 1];
        let (k_stride, c_stride) = (s[0] as i64, s[1] as i64);
        let g_src = kg as i64 * k_stride;
        let g_dst = (cg * taps * kg) as i64;
        // Taps one linear walk of stride `col` (packed KCRS and KRSC both are).
        let linear = taps == w_len || row == w_len as i64 * col;
        let last = (taps / w_len - 1) as i64 * row + (w_len - 1) as i64 * col;
        let view = if linear && c_stride == 1 {
            // outer = (g, tap), positions = c.
            ChannelsFirst {
                outer: groups * taps,
                outer_lo: taps,
                c: kg,
                p: cg,
                w: cg,
                base: last,
                strides: [g_src, -col, k_stride, 0, c_stride],
                dst: [g_dst, kg as i64, (taps * kg) as i64],
                elem: w.dtype().size(),
            }
        } else if linear {
            // outer = g, positions = (c, tap).
            ChannelsFirst {
                outer: groups,
                outer_lo: 1,
                c: kg,
                p: cg * taps,
                w: taps,
                base: last,
                strides: [g_src, 0, k_stride, c_stride, -col],
                dst: [g_dst, 0, kg as i64],
                elem: w.dtype().size(),
            }
        } else {
            // outer = (g, c), positions = taps.
            ChannelsFirst {
                outer: groups * cg,
                outer_lo: cg,
                c: kg,
                p: taps,
                w: w_len,
                base: last,
                strides: [g_src, c_stride, k_stride, -row, -col],
                dst: [g_dst, (taps * kg) as i64, kg as i64],
                elem: w.dtype().size(),
            }
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
