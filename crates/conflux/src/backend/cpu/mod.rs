//! CPU backend: multi-threaded (rayon) kernels over host memory.

// First: its `simd!` macro is used by the modules below.
#[macro_use]
mod lanes;
pub mod access;
pub mod act_chunk;
pub mod amx;
pub mod bias;
pub mod bn;
pub mod conv1x1;
pub mod conv1x1_amx;
pub mod conv1x1_kernel;
pub mod conv1x1_pos;
pub mod conv1x1_pos_kernel;
pub mod conv_gemm;
pub mod conv_gemm_bwd;
pub mod conv_direct;
pub mod conv_naive;
pub mod conv_taps;
pub mod conv_out;
pub mod convert;
#[cfg(target_arch = "x86_64")]
mod convert_x86;
pub mod dense;
pub mod epilogue;
pub mod fft_conv;
mod fft_math;
#[cfg(target_arch = "x86_64")]
mod fft_x86;
pub mod gemm;
pub mod im2col;
#[cfg(target_arch = "x86_64")]
mod line_store;
pub mod pointwise;
mod pool;
mod pointwise_dense;
pub mod store_fast;
pub mod weight_cache;
pub mod wino4;
mod wino4_math;
#[cfg(target_arch = "x86_64")]
mod wino4_x86;
#[cfg(target_arch = "x86_64")]
mod transpose_x86;

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
