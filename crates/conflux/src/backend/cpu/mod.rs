//! CPU backend: multi-threaded (rayon) kernels over host memory.

pub mod access;
pub mod bn;
pub mod conv_naive;
pub mod epilogue;
pub mod gemm;
pub mod pointwise;
