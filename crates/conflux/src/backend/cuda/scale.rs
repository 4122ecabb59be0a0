//! y = α·src + β·y (or β·y alone) over strided views (kernels/scale_view.cu): the part of an
//! output an operation writes no value to, under MIOpen's y = α·op + β·y, and results computed
//! into scratch written back to the caller's tensor.

use super::preamble::{self, Extra};
use super::{grid_for, CudaBackend};
use crate::error::{Error, Result};
use crate::tensor::TensorDesc;

const SOURCE: &str = include_str!("kernels/scale_view.cu");

#[repr(C)]
struct ScaleArgs {
    y: u64,
    src: u64,
    s: [i64; 5],
    ss: [i64; 5],
    len: [i32; 5],
    alpha: f32,
    beta: f32,
    vec: i32,
    unused: i32,
    total: i64,
}

/// view ← β·view (0 when β = 0, never reading it) for the view `t` at `addr`, on the device's
/// stream.
pub fn scale_view(be: &CudaBackend, t: &TensorDesc, addr: u64, beta: f32) -> Result<()> {
    blend(be, t, addr, None, 0.0, beta)
}

/// view ← α·src + β·view, src (`src_strides`, same lengths as `t`) at `src`.
pub fn blend_view(be: &CudaBackend, t: &TensorDesc, addr: u64, src: u64, src_strides: &[usize], alpha: f32, beta: f32) -> Result<()> {
    blend(be, t, addr, Some((src, src_strides)), alpha, beta)
}

fn blend(be: &CudaBackend, t: &TensorDesc, addr: u64, src: Option<(u64, &[usize])>, alpha: f32, beta: f32) -> Result<()> {
    let rank = t.rank();
    if rank > 5 || t.element_count() >= 1 << 32 {
        return Err(Error::not_implemented(format!("scale_view: {rank}-dim view or 2^32 elements and more")));
    }
    let code = preamble::source(t.dtype(), &[], &Extra::default(), SOURCE)?;
    let k = be.module("scale_view", &code)?.function("scale_view")?;
    // Dimensions in y's memory order (the smallest stride innermost), padded to five in front
    // by dimensions of length 1.
    let src_strides = src.map_or(t.strides(), |(_, s)| s);
    let mut dims: Vec<(usize, usize, usize)> = (0..rank).map(|i| (t.lens()[i], t.strides()[i], src_strides[i])).collect();
    dims.sort_by_key(|&(_, s, _)| std::cmp::Reverse(s));
    let (mut s, mut ss, mut len) = ([0i64; 5], [0i64; 5], [1i32; 5]);
    for (i, &(l, st, sst)) in dims.iter().enumerate() {
        s[5 - rank + i] = st as i64;
        ss[5 - rank + i] = sst as i64;
        len[5 - rank + i] = l as i32;
    }
    // 16-byte vectors where the innermost dimension is contiguous and every vector aligned
    // (the vector path only zero-fills, so only y's layout matters).
    let v = 16 / t.dtype().size();
    let vec = if s[4] == 1 && len[4] as usize % v == 0 && addr % 16 == 0 && s[..4].iter().all(|&x| x as usize % v == 0) { v } else { 1 };
    let total = t.element_count() as u64;
    let args = ScaleArgs { y: addr, src: src.map_or(0, |(p, _)| p), s, ss, len, alpha, beta, vec: vec as i32, unused: 0, total: total as i64 };
    let grid = grid_for(be, total / vec as u64, 256);
    // SAFETY: ScaleArgs mirrors the kernel's struct; `addr` spans the view `t` (a view of the
    // caller's validated tensor), `src` the same lengths with `src_strides`; the grid-stride
    // loop stays below `total`.
    unsafe { k.launch(&be.dev, (grid, 1, 1), (256, 1, 1), 0, &args) }
}
