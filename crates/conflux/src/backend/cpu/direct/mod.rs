//! Convolutions without a GEMM: depthwise and few-channel problems (`depthwise`), stride-1 f32
//! as a sum of 1×1 tiles over the taps (`taps`), and the naive loops that apply to every
//! geometry (`naive`).

pub mod depthwise;
pub mod naive;
pub mod taps;
