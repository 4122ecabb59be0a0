//! conflux: MIOpen's convolution and Fusion APIs on NVIDIA GPUs and CPUs.
//!
//! Describe a problem (a convolution or a fusion plan) once, compile it into an invoker once,
//! run it many times with new arguments. See `DESIGN.md` in the repository for the map.

pub mod error;
pub mod types;
pub mod element;
pub mod quant;
pub mod tensor;
pub mod conv_desc;
pub mod problem;
pub mod conv;
pub mod activation;
pub mod batchnorm;
pub mod pooling;
pub mod softmax;
pub mod lrn;
pub mod handle;
pub mod reference;

pub use activation::ActivationDesc;
pub use conv::{ConvDesc, ConvProblem};
pub use error::{Error, Result, Status};
pub use handle::{Device, Handle};
pub use tensor::TensorDesc;
pub use types::*;
pub mod memory;
pub mod cache;
pub mod fusion;
pub mod ops;
pub mod find2;
pub mod search;
pub mod solver;
pub mod backend;
pub mod log_cmd;

pub use fusion::{FusionPlan, OpArg, OpArgs};
pub use handle::Buffer;
pub use memory::DevPtr;
