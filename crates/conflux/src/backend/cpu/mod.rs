//! CPU backend: multi-threaded (rayon) kernels over host memory.

pub mod access;
pub mod act_chunk;
pub mod bias;
pub mod bn;
pub mod conv1x1;
pub mod conv1x1_kernel;
pub mod conv_gemm;
pub mod conv_gemm_bwd;
pub mod conv_direct;
pub mod conv_naive;
pub mod conv_out;
pub mod convert;
#[cfg(target_arch = "x86_64")]
mod convert_x86;
pub mod dense;
pub mod epilogue;
pub mod gemm;
pub mod im2col;
pub mod pointwise;
mod pointwise_dense;
pub mod store_fast;
pub mod weight_cache;
pub mod winograd;
pub mod wino4;
mod wino4_math;
#[cfg(target_arch = "x86_64")]
mod wino4_x86;
#[cfg(target_arch = "x86_64")]
mod transpose_x86;

/// Runs `f` on a thread of rayon's pool (directly when already on one). A CPU convolution runs
/// several parallel phases (padding, transforms, GEMM); started from a thread outside the pool,
/// each phase is handed over to the pool while the caller sleeps, and the workers go idle
/// between phases. Handing over the whole call once measured 14% faster on a four-phase
/// Winograd layer (128-28-28-128 N=1, 2 threads: median 536 → 462 µs) and no slower on
/// one-phase 1×1 layers.
pub fn on_pool<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    if rayon::current_thread_index().is_some() {
        return f();
    }
    rayon::scope(|_| f())
}
