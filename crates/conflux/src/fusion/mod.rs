//! The Fusion API: plans, operators, arguments, lowering to a `FusedProblem`, Find at compile
//! time, and the one-call conv + bias + activation.

mod args;
mod cba;
mod find;
mod lower;
mod plan;
mod problem;

pub use args::{OpArg, OpArgs};
pub use cba::conv_bias_activation_forward;
pub use find::default_find_mode;
pub use lower::lower;
pub use plan::{FusionOp, FusionOpKind, FusionPlan};
pub use problem::{EpiOp, FusedKind, FusedProblem};
