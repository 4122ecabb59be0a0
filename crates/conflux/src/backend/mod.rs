//! Device backends: kernels and launch logic. Solvers (in `solver/`) decide what runs; the
//! backends hold how it runs.

pub mod cpu;
pub mod cuda;
mod device;

pub use device::{cuda_of, Buffer, CpuInfo, CudaInfo, Device, DeviceAllocator, DeviceInfo, DeviceKind, RunContext};
