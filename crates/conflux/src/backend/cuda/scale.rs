//! y = β·y over a strided view (kernels/scale_view.cu): the part of an output an operation
//! writes no value to, under MIOpen's y = α·op + β·y.

use super::preamble::{self, Extra};
use super::{grid_for, CudaBackend};
use crate::error::{Error, Result};
use crate::tensor::TensorDesc;

const SOURCE: &str = include_str!("kernels/scale_view.cu");

#[repr(C)]
struct ScaleArgs {
    y: u64,
    s: [i64; 5],
    len: [i32; 5],
    beta: f32,
    vec: i32,
    total: i64,
}

/// view ← β·view (0 when β = 0, never reading it) for the view `t` at `addr`, on the device's
/// stream.
pub fn scale_view(be: &CudaBackend, t: &TensorDesc, addr: u64, beta: f32) -> Result<()> {
    let rank = t.rank();
    if rank > 5 || t.element_count() >= 1 << 32 {
        return Err(Error::not_implemented(format!("scale_view: {rank}-dim view or 2^32 elements and more")));
    }
    let code = preamble::source(t.dtype(), &[], &Extra::default(), SOURCE)?;
    let k = be.module("scale_view", &code)?.function("scale_view")?;
    // Dimensions in memory order (the smallest stride innermost), padded to five in front by
    // dimensions of length 1.
    let mut dims: Vec<(usize, usize)> = t.lens().iter().copied().zip(t.strides().iter().copied()).collect();
    dims.sort_by_key(|&(_, s)| std::cmp::Reverse(s));
    let (mut s, mut len) = ([0i64; 5], [1i32; 5]);
    for (i, &(l, st)) in dims.iter().enumerate() {
        s[5 - rank + i] = st as i64;
        len[5 - rank + i] = l as i32;
    }
    // 16-byte vectors where the innermost dimension is contiguous and every vector aligned.
    let v = 16 / t.dtype().size();
    let vec = if s[4] == 1 && len[4] as usize % v == 0 && addr % 16 == 0 && s[..4].iter().all(|&x| x as usize % v == 0) { v } else { 1 };
    let total = t.element_count() as u64;
    let args = ScaleArgs { y: addr, s, len, beta, vec: vec as i32, total: total as i64 };
    let grid = grid_for(be, total / vec as u64, 256);
    // SAFETY: ScaleArgs mirrors the kernel's struct; `addr` spans the view `t` (a view of the
    // caller's validated tensor); the grid-stride loop stays below `total`.
    unsafe { k.launch(&be.dev, (grid, 1, 1), (256, 1, 1), 0, &args) }
}
