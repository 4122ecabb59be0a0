//! The convolution API: running in any direction (`api`), Find (`find`), immediate mode and
//! the bias calls. Descriptors and problems are re-exported from `conv_desc` and `problem`;
//! solver choice, the find-db and progress from `search`.

pub mod api;
pub mod bias;
mod find;
mod immediate;

pub use crate::search::{find_db, Choice, ConvPerf, FindProgress, FindProgressFn};
pub use api::{backward_data, backward_weights, forward, Workspace};
pub use crate::conv_desc::{output_desc_like, ConvDesc};
pub use find::{find_all, find_backward_data, find_backward_weights, find_forward};
pub use crate::problem::{shape5, spatial3, strides5, Geom};
pub use immediate::{compile_solution, solution_count, solution_workspace, solutions, workspace_size, ConvSolution};
pub use crate::problem::ConvProblem;
