//! Tensor maps: the descriptors Hopper's copy engine (TMA) reads to move tiles between global
//! and shared memory. They embed the tensor's address, so the kernels that use them get
//! fresh ones on every launch (encoding is a host-side computation, no driver round trip).

use super::driver::driver_err;
use crate::error::Result;
use crate::types::DataType;
use cudarc::driver::{result as cu, sys};

pub type TensorMap = sys::CUtensorMap;

/// im2col view of a channels-last tensor for a 2-D convolution (4-D map: C, W, H, N) or a
/// 3-D one (5-D map: C, W, H, D, N; C contiguous): each copy brings `pixels` output pixels ×
/// `channels` channels. Arrays run innermost first; a 2-D view uses the first entries.
#[derive(Clone, Copy, Debug)]
pub struct Im2col {
    /// Spatial dimensions: 2 or 3.
    pub spatial: usize,
    /// Extents C, W, H, (D,) N.
    pub dims: [u64; 5],
    /// Byte strides of W, H, (D,) N.
    pub strides: [u64; 4],
    /// Filter-window corner of the first and of the last output pixel along W, H (and D), at
    /// tap offset 0: -pad and pad - dilation·(filter - 1).
    pub lower: [i32; 3],
    pub upper: [i32; 3],
    /// Convolution stride along W, H (and D): the traversal stride.
    pub stride: [u32; 3],
    pub channels: u32,
    pub pixels: u32,
}

/// The largest tap offset (dilation · (filter − 1)) an im2col copy of a 5-D map takes: its
/// offsets are 5-bit fields (4-D maps take 8 bits, more than any filter the kernels see).
pub const IM2COL_5D_MAX_OFFSET: usize = 31;

fn data_type(dt: DataType) -> sys::CUtensorMapDataType {
    match dt {
        DataType::BFloat16 => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        DataType::Float => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
        DataType::Int32 => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_INT32,
        // int8 and fp8 codes are moved as bytes (the zero fill is 0 and +0 in every format).
        DataType::Int8 | DataType::Float8 | DataType::BFloat8 => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_UINT8,
        _ => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
    }
}

/// Shared-memory swizzle of boxes whose rows hold `row_bytes`: the 128-byte pattern the
/// kernels' descriptors assume, or the 64-byte one for 64-byte rows (8-bit 64-channel k-steps).
fn swizzle(row_bytes: usize) -> sys::CUtensorMapSwizzle {
    if row_bytes == 64 { sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_64B } else { sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B }
}

fn check(what: &str, r: sys::CUresult) -> Result<()> {
    r.result().map_err(|e: cu::DriverError| driver_err(what, e))
}

/// Encode `m` over the tensor at `addr`, 128-byte swizzled in shared memory (64-byte for
/// 64-byte rows), zeros outside.
pub fn im2col(m: &Im2col, dt: DataType, addr: u64) -> Result<TensorMap> {
    assert!(m.spatial == 2 || m.spatial == 3, "2-D or 3-D im2col views");
    let mut map = TensorMap { opaque: [0; 16] };
    let mut elem_strides = [1u32; 5];
    elem_strides[1..=m.spatial].copy_from_slice(&m.stride[..m.spatial]);
    // SAFETY: every array holds at least the rank (spatial + 2) entries, the corners the
    // spatial rank; the driver reads that many and only writes `map`.
    let r = unsafe {
        sys::cuTensorMapEncodeIm2col(
            &mut map,
            data_type(dt),
            m.spatial as u32 + 2,
            addr as *mut std::ffi::c_void,
            m.dims.as_ptr(),
            m.strides.as_ptr(),
            m.lower.as_ptr(),
            m.upper.as_ptr(),
            m.channels,
            m.pixels,
            elem_strides.as_ptr(),
            sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            swizzle(m.channels as usize * dt.size()),
            sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
            sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    check("cuTensorMapEncodeIm2col", r)?;
    Ok(map)
}

/// Box view of a row-major 2-D tensor: `dims` (inner, outer), `row_bytes` between rows, each
/// copy a `boxes` (inner, outer) block, 128-byte swizzled, zeros outside.
pub fn tiled_2d(dims: [u64; 2], row_bytes: u64, boxes: [u32; 2], dt: DataType, addr: u64) -> Result<TensorMap> {
    tiled(&dims, &[row_bytes], &boxes, dt, addr)
}

/// Box view of a 3-D tensor: `dims` innermost first, `strides` (bytes) of the outer two, each
/// copy a `boxes` block, 128-byte swizzled, zeros outside (a box may overhang any extent).
pub fn tiled_3d(dims: [u64; 3], strides: [u64; 2], boxes: [u32; 3], dt: DataType, addr: u64) -> Result<TensorMap> {
    tiled(&dims, &strides, &boxes, dt, addr)
}

fn tiled(dims: &[u64], strides: &[u64], boxes: &[u32], dt: DataType, addr: u64) -> Result<TensorMap> {
    debug_assert!(dims.len() == boxes.len() && strides.len() + 1 == dims.len() && dims.len() <= 3);
    let mut map = TensorMap { opaque: [0; 16] };
    let elem_strides = [1u32; 3];
    // SAFETY: `dims` and `boxes` have the rank's length, `strides` one less, `elem_strides` at
    // least the rank; the driver only writes `map`.
    let r = unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut map,
            data_type(dt),
            dims.len() as u32,
            addr as *mut std::ffi::c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            boxes.as_ptr(),
            elem_strides.as_ptr(),
            sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            swizzle(boxes[0] as usize * dt.size()),
            sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
            sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    check("cuTensorMapEncodeTiled", r)?;
    Ok(map)
}
