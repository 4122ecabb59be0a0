//! What solvers and backends are asked to compute, as plain data: the convolution problem in
//! normal roles, its geometry, the fused problem (a convolution or pointwise chain with its
//! epilogue), and the per-execute op arguments. Everything above (conv and fusion APIs,
//! search, solvers, backends) imports this module; it imports only the descriptors below it.

mod args;
mod conv;
mod fold;
mod fused;
mod geom;
mod layer;
mod phases;
mod live_taps;
pub(crate) mod op_args;

pub use args::{OpArg, OpArgs};
pub use conv::ConvProblem;
pub use fold::{fold_3d, Fold};
pub use fused::{EpiOp, FusedKind, FusedProblem};
pub use layer::{LayerOp, PoolGeom};
pub use geom::{shape5, spatial3, strides5, Geom};
pub use phases::{backward_data_phases, Phase, TapAxis, TapMap};
pub use live_taps::{live_taps, reach, trim_dead_taps, TapPart};
