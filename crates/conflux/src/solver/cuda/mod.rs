//! The CUDA solvers, one per file. Shared helpers: `common` (backend, element types, run
//! parameters), `tensor_core` (precision, layout conditions and defines of the tensor-core
//! kernels), `adapter` (what the solvers that rewrite a problem for other solvers share).
//! Their order is `registry.rs`'s; kernels and launch code are in `backend/cuda/`.

mod adapter;
pub mod bwd_data_depthwise;
pub mod bwd_data_few_channels;
pub mod bwd_data_gemm_lt;
pub mod bwd_data_pad_channels;
pub mod bwd_data_strided;
pub mod bwd_data_tc;
mod common;
pub mod direct;
pub mod few_channels;
pub mod few_outputs;
pub mod gemm_lt;
pub mod grouped_tc;
pub mod igemm_mma;
pub mod igemm_simt;
pub mod igemm_tma;
pub mod igemm_wgmma;
mod lt_backward;
pub mod nchw_tc;
pub mod pad_channels;
mod phased;
pub mod pointwise;
pub mod pooling;
pub mod quant_direct;
pub mod softmax;
pub mod stem_tc;
pub mod tensor_core;
pub mod wgrad_few_channels;
pub mod wgrad_gemm_lt;
pub mod wgrad_im2col_lt;
pub mod wgrad_pad_channels;
pub mod wgrad_simt;
pub mod wgrad_tf32;
pub mod wgrad_tma;

pub use bwd_data_depthwise::CudaConvBwdDataDepthwise;
pub use bwd_data_few_channels::CudaConvBwdDataFewChannels;
pub use bwd_data_gemm_lt::CudaConvBwdDataGemmLt;
pub use bwd_data_pad_channels::CudaConvBwdDataPadChannels;
pub use bwd_data_strided::CudaConvBwdDataStrided;
pub use bwd_data_tc::CudaConvBwdDataTc;
pub use direct::CudaConvDirect;
pub use few_channels::CudaConvFewChannels;
pub use few_outputs::CudaConvFewOutputs;
pub use gemm_lt::CudaConvGemmLt;
pub use grouped_tc::CudaConvGroupedTc;
pub use igemm_mma::CudaConvIgemmTc;
pub use pooling::CudaPooling;
pub use quant_direct::CudaConvQuantDirect;
pub use softmax::CudaSoftmax;
pub use igemm_simt::CudaConvIgemm;
pub use igemm_tma::CudaConvIgemmTma;
pub use igemm_wgmma::CudaConvIgemmWgmma;
pub use nchw_tc::CudaConvTcNchw;
pub use pad_channels::CudaConvPadChannels;
pub use pointwise::CudaPointwise;
pub use stem_tc::CudaConvStemTc;
pub use tensor_core::TcPrecision;
pub use wgrad_few_channels::CudaConvWgradFewChannels;
pub use wgrad_gemm_lt::CudaConvWgradGemmLt;
pub use wgrad_im2col_lt::CudaConvWgradIm2colLt;
pub use wgrad_pad_channels::CudaConvWgradPadChannels;
pub use wgrad_simt::CudaConvWgradSimt;
pub use wgrad_tma::CudaConvWgradTma;
