//! x86-64 instruction-set code shared by the CPU kernels: AMX tiles (`amx`, detected at run
//! time on any x86 CPU), F16C conversions, line-aligned stores, AVX-512 register transposes,
//! and the AVX-512 pieces of the FFT, Winograd and channels-last depthwise drivers.

pub mod amx;
#[cfg(target_arch = "x86_64")]
pub(crate) mod convert;
#[cfg(target_arch = "x86_64")]
pub(crate) mod depthwise_blocks;
#[cfg(target_arch = "x86_64")]
pub(crate) mod depthwise_flat;
#[cfg(target_arch = "x86_64")]
pub(crate) mod grouped_flat;
pub(crate) mod depthwise_rows;
#[cfg(target_arch = "x86_64")]
pub(crate) mod fft;
#[cfg(target_arch = "x86_64")]
pub(crate) mod line_store;
#[cfg(target_arch = "x86_64")]
pub(crate) mod transpose;
#[cfg(target_arch = "x86_64")]
pub(crate) mod winograd;
