//! Progress of Find and exhaustive tuning: a hook on the handle called once per timed
//! candidate (a solver in normal Find, a configuration when tuning), so a driver can draw a
//! progress bar and a C caller can report progress. The same
//! events still go to `tracing` (target `conflux::tuning`).

use crate::error::Error;
use super::session::SearchState;
use std::sync::Arc;

/// One finished candidate of a Find. `step` counts from 1 to `total`; `total` is fixed
/// before the first candidate runs (every solver Find will time, counting each
/// configuration of a tuned solver), so a bar can be sized up front.
#[derive(Clone, Debug, PartialEq)]
pub struct FindProgress<'a> {
    pub solver: &'static str,
    /// The tuning configuration (exhaustive Find of a tunable solver); None otherwise.
    pub config: Option<&'a str>,
    pub step: usize,
    pub total: usize,
    /// Measured milliseconds, or why the candidate could not be built or run (it is skipped).
    pub outcome: std::result::Result<f32, String>,
}

/// The hook `Handle::set_find_progress` installs. It runs on the thread doing the Find,
/// between measurements (never inside a timed region), and may call back into the handle.
pub type FindProgressFn = Arc<dyn Fn(&FindProgress<'_>) + Send + Sync>;

/// Step counter of one Find: numbers the candidates and hands each result to the hook.
pub(crate) struct Steps<'h> {
    state: &'h SearchState,
    step: usize,
    total: usize,
}

impl<'h> Steps<'h> {
    pub(crate) fn new(state: &'h SearchState, total: usize) -> Steps<'h> {
        Steps { state, step: 0, total }
    }

    /// Report the next candidate's result.
    pub(crate) fn done(&mut self, solver: &'static str, config: Option<&str>, result: std::result::Result<f32, &Error>) {
        self.step += 1;
        // No hook: skip formatting the error text.
        let Some(hook) = self.state.find_progress() else { return };
        let outcome = result.map_err(|e| e.to_string());
        hook(&FindProgress { solver, config, step: self.step, total: self.total, outcome });
    }
}
