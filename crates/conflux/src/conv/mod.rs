//! Convolution descriptors and problems.

pub mod api;
mod desc;
mod geom;
mod problem;

pub use desc::{output_desc_like, ConvDesc};
pub use geom::{shape5, spatial3, strides5, Geom};
pub use problem::ConvProblem;
