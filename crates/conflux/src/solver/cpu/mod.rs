//! The CPU solvers, one per file; `common` holds what the convolution solvers share. Their
//! order is `registry.rs`'s; the kernels they run are in `backend/cpu/`.

pub mod amx1x1;
mod common;
pub mod depthwise_blocks;
pub mod depthwise_nhwc;
pub mod depthwise_planes;
pub mod direct;
pub mod direct_taps;
pub mod fft;
pub mod gemm;
pub mod gemm1x1;
pub mod implicit_gemm;
pub mod live_taps;
pub mod naive;
pub mod pointwise;
pub mod pooling;
pub mod quantized;
pub mod single_pixel;
pub mod small_groups;
pub mod softmax;
pub mod stem;
pub mod subsample1x1;
pub mod winograd_f2;
pub mod winograd_f4;

pub use amx1x1::CpuAmx1x1;
pub use depthwise_blocks::CpuDepthwiseBlocks;
pub use depthwise_nhwc::CpuDepthwiseNhwc;
pub use depthwise_planes::CpuDepthwisePlanes;
pub use direct::CpuDirect;
pub use direct_taps::CpuDirectTaps;
pub use fft::CpuFft;
pub use gemm::CpuGemm;
pub use gemm1x1::CpuGemm1x1;
pub use implicit_gemm::CpuImplicitGemm;
pub use live_taps::CpuLiveTaps;
pub use naive::CpuNaive;
pub use pointwise::CpuPointwise;
pub use pooling::CpuPooling;
pub use quantized::CpuQuantized;
pub use single_pixel::CpuSinglePixel;
pub use small_groups::CpuSmallGroups;
pub use softmax::CpuSoftmax;
pub use stem::CpuStem;
pub use subsample1x1::CpuSubsample1x1;
pub use winograd_f2::CpuWinograd;
pub use winograd_f4::CpuWinograd4;
