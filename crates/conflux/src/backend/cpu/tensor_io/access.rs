//! Typed loads and stores through raw host addresses. Every compute type is widened to f32.

use crate::types::DataType;
use half::{bf16, f16};

/// Load element `off` (in elements) of type `dt` at host address `base`, as f32.
///
/// # Safety
/// `base + off·size(dt)` must be a valid, readable element of type `dt`.
#[inline(always)]
pub unsafe fn load(dt: DataType, base: u64, off: usize) -> f32 {
    match dt {
        DataType::Float => *(base as *const f32).add(off),
        DataType::Half => (*(base as *const f16).add(off)).to_f32(),
        DataType::BFloat16 => (*(base as *const bf16).add(off)).to_f32(),
        DataType::Double => *(base as *const f64).add(off) as f32,
        _ => f32::NAN,
    }
}

/// Store `v` as type `dt` into element `off` at host address `base`.
///
/// # Safety
/// `base + off·size(dt)` must be a valid, writable element of type `dt`, not written
/// concurrently by another thread.
#[inline(always)]
pub unsafe fn store(dt: DataType, base: u64, off: usize, v: f32) {
    match dt {
        DataType::Float => *(base as *mut f32).add(off) = v,
        DataType::Half => *(base as *mut f16).add(off) = f16::from_f32(v),
        DataType::BFloat16 => *(base as *mut bf16).add(off) = bf16::from_f32(v),
        DataType::Double => *(base as *mut f64).add(off) = v as f64,
        _ => {}
    }
}

/// Read `count` packed elements starting at `base` as f32 (small parameter vectors).
///
/// # Safety
/// `base` must point to `count` readable elements of type `dt`.
pub unsafe fn load_vec(dt: DataType, base: u64, count: usize) -> Vec<f32> {
    (0..count).map(|i| load(dt, base, i)).collect()
}

/// `α·v + β·old`, reading the old value only when β ≠ 0 (so an uninitialised or poisoned
/// output never leaks into the result).
///
/// # Safety
/// As `load` for element `off` of `base`.
#[inline(always)]
pub unsafe fn blend(dt: DataType, base: u64, off: usize, v: f32, alpha: f32, beta: f32) -> f32 {
    let mut r = alpha * v;
    if beta != 0.0 {
        r += beta * load(dt, base, off);
    }
    r
}
