//! CPU backend: multi-threaded (rayon) kernels over host memory, grouped by algorithm
//! (`gemm`, `im2col`, `conv1x1`, `winograd`, `fft`, `direct`, `pointwise`), with tensor access
//! in `tensor_io` and instruction-set code in `x86` (AVX-512, F16C, AMX). Each kernel picks its
//! path from the CPU it runs on.

// First: its `simd!` macro is used by the modules below.
#[macro_use]
mod lanes;
pub mod clamp;
pub mod conv1x1;
pub mod direct;
pub mod fft;
pub mod gemm;
pub mod im2col;
pub mod layers;
pub mod pointwise;
pub mod quant;
mod pool;
pub mod tensor_io;
pub mod weight_cache;
pub mod winograd;
pub mod x86;

pub use pool::on_pool;

/// A pointer that parallel items write through at disjoint offsets (the Winograd and FFT
/// transforms).
#[derive(Clone, Copy)]
pub(crate) struct Shared(pub(crate) *mut f32);
// SAFETY: every user writes disjoint elements, and reads happen after the writing phase.
unsafe impl Sync for Shared {}
unsafe impl Send for Shared {}

impl Shared {
    /// The pointer `off` elements on (a method, so closures capture the whole `Shared`).
    ///
    /// # Safety
    /// As `pointer::add`.
    pub(crate) unsafe fn at(self, off: usize) -> Shared { Shared(self.0.add(off)) }
}

/// Part `i` of `0..len` cut into `parts` ranges that differ in length by at most one (task
/// blocks of equal work: a short last block leaves a core idle).
pub(crate) fn even_part(len: usize, parts: usize, i: usize) -> std::ops::Range<usize> {
    i * len / parts..(i + 1) * len / parts
}
