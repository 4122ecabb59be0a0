//! Convolutions without a GEMM: depthwise and few-channel problems (`depthwise`; channels-last
//! f32 depthwise with channels in the vector lanes, `depthwise_nhwc`; in AVX-512 blocks of 16
//! channels over staged bands, `depthwise_blocks`; as flat runs of 16 outputs of channels-first
//! planes, `depthwise_flat`, which `grouped_flat` extends to a few channels per group and
//! `depthwise_flat_weights` / `depthwise_flat_phases` reuse for backward-weights and stride-2
//! backward-data), stride-1 f32 as a sum of 1×1 tiles over the taps (`taps`), few-channel stems
//! (`stem`), and the naive loops that apply to every geometry (`naive`).

pub mod depthwise;
#[cfg(target_arch = "x86_64")]
pub mod depthwise_blocks;
#[cfg(target_arch = "x86_64")]
pub mod depthwise_flat;
#[cfg(target_arch = "x86_64")]
pub mod depthwise_flat_phases;
#[cfg(target_arch = "x86_64")]
pub mod depthwise_flat_weights;
mod depthwise_io;
pub mod depthwise_nhwc;
pub mod depthwise_planes;
#[cfg(target_arch = "x86_64")]
pub mod grouped_flat;
pub mod single_pixel;
pub mod small_groups;
pub mod stem;
pub mod naive;
pub mod taps;
