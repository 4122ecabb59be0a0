//! Copies into packed channels-last order with the channel count padded by zeros
//! (kernels/pad_channels.cu), so the tensor-core kernels can read few-channel tensors.

use super::preamble::{self, Extra};
use super::{grid_for, CudaBackend};
use crate::error::Result;
use crate::problem::shape5;
use crate::tensor::TensorDesc;

const SOURCE: &str = include_str!("kernels/pad_channels.cu");

#[repr(C)]
struct PadArgs {
    src: u64,
    dst: u64,
    s: [i64; 5],
    c: i32,
    cp: i32,
    d: i32,
    h: i32,
    w: i32,
    groups: i32,
    total: i64,
}

/// Bytes of `t` copied with `cp` channels.
pub fn padded_bytes(t: &TensorDesc, cp: usize) -> usize {
    t.element_count() / t.c() * cp * t.dtype().size()
}

/// dst (packed channels-last, `cp` channels) = src (`t`, any strides) with zeros in channels
/// `t.c()..cp`, on the device's stream.
pub fn pad_channels(be: &CudaBackend, t: &TensorDesc, cp: usize, src: u64, dst: u64) -> Result<()> {
    pad_group_channels(be, t, 1, cp, src, dst)
}

/// dst (packed channels-last, `groups · cpg` channels) = src (`t`, any strides, `groups` groups
/// of `t.c() / groups` channels) with each group's channels followed by zeros up to `cpg`, on
/// the device's stream.
pub fn pad_group_channels(be: &CudaBackend, t: &TensorDesc, groups: usize, cpg: usize, src: u64, dst: u64) -> Result<()> {
    let src_code = preamble::source(t.dtype(), &[], &Extra::default(), SOURCE)?;
    let k = be.module("pad_channels", &src_code)?.function("pad_channels")?;
    let ([outer, c], [d, h, w], s) = shape5(t);
    let total = (outer * d * h * w * groups * cpg) as u64;
    let args = PadArgs {
        src,
        dst,
        s: s.map(|v| v as i64),
        c: (c / groups) as i32,
        cp: cpg as i32,
        d: d as i32,
        h: h as i32,
        w: w as i32,
        groups: groups as i32,
        total: total as i64,
    };
    let grid = grid_for(be, total, 256);
    // SAFETY: PadArgs mirrors the kernel's struct; src spans `t` (the caller's validated
    // tensor), dst holds `padded_bytes(t, groups · cpg)`; the grid-stride loop stays below `total`.
    unsafe { k.launch(&be.dev, (grid, 1, 1), (256, 1, 1), 0, &args) }
}
