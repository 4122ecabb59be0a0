//! Convolution descriptors and problems, and the convolution API: running with a chosen
//! solver (`api`), Find and its find-db, immediate mode, and the bias calls.

pub mod api;
pub mod bias;
mod desc;
pub(crate) mod find;
pub mod find_db;
mod geom;
mod immediate;
mod problem;
pub mod progress;

pub use api::{backward_data, backward_weights, forward, Choice, Workspace};
pub use desc::{output_desc_like, ConvDesc};
pub use find::{find_backward_data, find_backward_weights, find_forward, ConvPerf};
pub use geom::{shape5, spatial3, strides5, Geom};
pub use immediate::{compile_solution, solution_count, solution_workspace, solutions, workspace_size, ConvSolution};
pub use problem::ConvProblem;
pub use progress::{FindProgress, FindProgressFn};
