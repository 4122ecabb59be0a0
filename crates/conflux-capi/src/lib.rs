//! The C ABI of conflux: `libMIOpen.so` / `libMIOpen.a` exporting MIOpen's convolution,
//! activation, batch-norm and Fusion API under MIOpen's names, with `include/miopen/miopen.h`.
//!
//! Every exported function only guards (`guard.rs`: a panic becomes InternalError, an error
//! its status plus a thread-local reason), converts (NULL checks → BadParm, enums through
//! `TryFrom<i32>`, unknown → BadParm) and forwards to the Rust API. Opaque C handles point
//! to boxed Rust objects; destroying NULL succeeds.
//!
//! Memory model: on the CPU backend every data pointer is a host pointer; on the CUDA backend
//! a device pointer (`CUdeviceptr`), and `miopenCreateWithStream` takes a `CUstream`.
//!
//! The safety contract of every `unsafe extern "C"` function is the C header's: handles come
//! from the matching create call, and data pointers span their descriptors.
#![allow(clippy::missing_safety_doc)]
// The library is named MIOpen so that the outputs are libMIOpen.so / libMIOpen.a.
#![allow(non_snake_case)]

pub mod guard;
pub mod handle;
pub mod tensor;
pub mod conv;
pub mod conv_run;
pub mod activation;
pub mod batchnorm;
pub mod fusion;
pub mod progress;
pub mod not_implemented;
pub mod find2;
pub mod pooling;
pub mod softmax;
pub mod lrn;
