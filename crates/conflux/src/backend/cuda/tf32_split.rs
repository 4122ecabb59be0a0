//! Strict-f32 filters split into TF32 high and low parts for the three-product ("3xTF32")
//! tensor-core convolution (kernels/tf32_split.cu). One module serves every shape.

use super::CudaBackend;
use crate::error::{Error, Result};

const SOURCE: &str = concat!(include_str!("kernels/tf32_split.cuh"), include_str!("kernels/tf32_split.cu"));

/// Mirrors `SplitArgs`.
#[repr(C)]
struct Args {
    src: u64,
    dst: u64,
    ld: i64,
    rows: i32,
    cols: i32,
}

/// Bytes `split_rows` writes for a rows × cols f32 matrix.
pub fn split_bytes(rows: usize, cols: usize) -> usize { rows * cols * 2 * 4 }

/// dst row r = [hi(src[r][0..cols]) | lo(src[r][0..cols])], src rows `ld` elements apart, on
/// the device's stream; `dst` holds `split_bytes(rows, cols)`.
pub fn split_rows(be: &CudaBackend, src: u64, ld: usize, rows: usize, cols: usize, dst: u64) -> Result<()> {
    if rows > i32::MAX as usize || cols > i32::MAX as usize / 2 || ld > i64::MAX as usize / 4 {
        return Err(Error::not_implemented(format!("tf32_split: a {rows} × {cols} filter exceeds the kernel's indexing")));
    }
    let k = be.module("tf32_split", SOURCE)?.function("tf32_split_rows")?;
    let args = Args { src, dst, ld: ld as i64, rows: rows as i32, cols: cols as i32 };
    let grid = (cols.div_ceil(256).min(64) as u32, rows.min(65535) as u32, 1);
    // SAFETY: Args mirrors the kernel's struct; src spans rows × ld elements (the caller's
    // validated filter) and dst split_bytes(rows, cols); the loops stay within both.
    unsafe { k.launch(&be.dev, grid, (256, 1, 1), 0, &args) }
}
