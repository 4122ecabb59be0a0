//! Pooling and softmax on the CPU: threaded over rayon, generic over the element type (16-bit
//! types widened to f32), with a channels-innermost path where C is the contiguous dimension
//! (NHWC / NDHWC), so the inner loops run over consecutive memory in either layout.

pub mod pooling;
pub mod softmax;

use crate::element::Element;
use crate::pooling::IndexType;

/// Where a run reads and writes, and its scalars.
#[derive(Clone, Copy, Debug)]
pub struct LayerPtrs {
    /// x (forward) or dy (backward).
    pub src: u64,
    /// The forward output y of a softmax backward (0 otherwise).
    pub aux: u64,
    /// y (forward) or dx (backward).
    pub dst: u64,
    /// Max pooling indices (0: none).
    pub index: u64,
    pub alpha: f32,
    pub beta: f32,
}

/// `α·v + β·old`, reading `old` only when β ≠ 0 (an unset output never leaks in).
///
/// # Safety
/// `base + off` must be a valid element of type T.
#[inline(always)]
pub(crate) unsafe fn blend<T: Element>(base: u64, off: usize, v: f32, alpha: f32, beta: f32) -> T {
    let mut r = alpha * v;
    if beta != 0.0 {
        r += beta * (*(base as *const T).add(off)).to_f32();
    }
    T::from_f32(r)
}

/// Read index `k` of a packed index array of type `t`.
///
/// # Safety
/// `base` must hold at least k + 1 indices of type `t`.
#[inline(always)]
pub(crate) unsafe fn load_index(t: IndexType, base: u64, k: usize) -> u64 {
    match t {
        IndexType::U8 => *(base as *const u8).add(k) as u64,
        IndexType::U16 => *(base as *const u16).add(k) as u64,
        IndexType::U32 => *(base as *const u32).add(k) as u64,
        IndexType::U64 => *(base as *const u64).add(k),
    }
}

/// Write index `k` (the caller checked that `v` fits the type).
///
/// # Safety
/// As `load_index`, writable, one writer per k.
#[inline(always)]
pub(crate) unsafe fn store_index(t: IndexType, base: u64, k: usize, v: u64) {
    match t {
        IndexType::U8 => *(base as *mut u8).add(k) = v as u8,
        IndexType::U16 => *(base as *mut u16).add(k) = v as u16,
        IndexType::U32 => *(base as *mut u32).add(k) = v as u32,
        IndexType::U64 => *(base as *mut u64).add(k) = v,
    }
}

/// Run `$f::<T>(args)` for the element type `$dt` (f32, f16, bf16, f64).
macro_rules! by_dtype {
    ($dt:expr, $f:ident($($a:expr),*)) => {
        match $dt {
            $crate::types::DataType::Float => $f::<f32>($($a),*),
            $crate::types::DataType::Half => $f::<half::f16>($($a),*),
            $crate::types::DataType::BFloat16 => $f::<half::bf16>($($a),*),
            $crate::types::DataType::Double => $f::<f64>($($a),*),
            other => return Err($crate::error::Error::not_implemented(format!("CPU layers: element type {other:?}"))),
        }
    };
}
pub(crate) use by_dtype;
