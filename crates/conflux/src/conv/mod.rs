//! Convolution descriptors and problems.

mod desc;
mod problem;

pub use desc::{output_desc_like, ConvDesc};
pub use problem::ConvProblem;
