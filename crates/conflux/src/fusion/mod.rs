//! The Fusion API: plans, operators, arguments, lowering to a `FusedProblem`.

mod args;
mod lower;
mod plan;
mod problem;

pub use args::{OpArg, OpArgs};
pub use lower::lower;
pub use plan::{FusionOp, FusionOpKind, FusionPlan};
pub use problem::{EpiOp, FusedKind, FusedProblem};
