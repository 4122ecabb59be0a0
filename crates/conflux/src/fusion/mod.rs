//! The Fusion API: plans, operators, lowering to a `FusedProblem`, and the one-call conv +
//! bias + activation. Problem types and op arguments are in `problem`; compile-time Find in
//! `search`.

mod cba;
mod horizontal;
mod log_cmd;
mod lower;
mod plan;
mod staged;

pub use crate::problem::{OpArg, OpArgs};
pub use cba::conv_bias_activation_forward;
pub use log_cmd::plan_command;
pub use crate::search::default_find_mode;
pub use lower::lower;
pub use plan::{FusionOp, FusionOpKind, FusionPlan};
pub use crate::problem::{EpiOp, FusedKind, FusedProblem};
