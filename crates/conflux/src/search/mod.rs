//! Which solver runs: every policy over the registry lives here. Immediate choice (the first
//! applicable solver, restricted by algorithm, solution id or workspace), the find-db's
//! preference, Find (timing candidates on the caller's buffers or on scratch for fusion
//! plans), exhaustive tuning and the perf-db, and progress reports. The convolution API,
//! immediate mode, fusion compile and the single-op calls all choose through `select`.
//!
//! The session state this needs (compiled invokers, the find-db memo, the progress hook) is
//! `SearchState`, which the Handle holds and exposes through the `Session` trait, so this
//! module sits below the Handle and the APIs.

mod find;
pub mod find_db;
mod fusion_find;
pub mod perf_db;
mod progress;
mod select;
mod session;

pub use find::{best_per_algorithm, time_solvers, ConvPerf};
pub use find_db::{FindEntry, FindRecord};
pub use fusion_find::{benchmark as time_plan_on_scratch, default_find_mode, pick_for_plan};
pub use progress::{FindProgress, FindProgressFn};
pub use select::{applicable, choose, first_applicable, solution, support_matrix, Choice};
pub use session::{cached_invoker, invoker, replace_invoker, SearchState, Session};
pub(crate) use session::{remember_resolved, resolved};
