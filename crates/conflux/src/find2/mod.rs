//! Find 2.0, MIOpen's problem / solution API: describe a problem once (a convolution in any
//! direction, or bias, activation and batch-norm operators fused after a forward convolution
//! or alone), find its solutions (one per solver, timed), run one with the caller's tensors,
//! and save it to run later in another process without searching.
//!
//! A single convolution runs through the convolution API with the solution's id; everything
//! else through a fusion plan compiled with the solution's solver.

mod blob;
mod problem;
mod solution;

pub use blob::{load, save};
pub use problem::{arg, Lowered, Operator, Problem, ProblemDirection, Step};
pub use solution::{device_class, find_solutions, run, FindOptions, RunTensors, Solution};
