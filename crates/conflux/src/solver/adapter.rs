//! Shared by the solvers that rewrite a problem for other solvers (the channels-first layout
//! adapter, backward-data as a forward convolution): choosing the solver that takes the
//! rewritten problem, and building with a tuned configuration.

use super::{perf_db, Invoker, Solver};
use crate::error::Result;
use crate::fusion::FusedProblem;
use crate::handle::Handle;
use std::sync::Arc;

/// The first of `inner` that takes `problem`, else every refusal with its solver's name.
pub(crate) fn first_taker(inner: &[&'static dyn Solver], problem: &FusedProblem, handle: &Handle) -> std::result::Result<&'static dyn Solver, String> {
    let mut reasons = Vec::new();
    for &s in inner {
        match s.check(problem, handle) {
            Ok(()) => return Ok(s),
            Err(why) => reasons.push(format!("{}: {why}", s.name())),
        }
    }
    Err(reasons.join("; "))
}

/// Build `outer` for `problem` with its own perf-db entry (stored by an exhaustive Find over
/// its tuning space under its name and the caller's problem) when there is one, else with
/// `default` (the inner solver's own choice).
pub(crate) fn build_tuned(
    outer: &dyn Solver,
    problem: &FusedProblem,
    handle: &Handle,
    default: impl FnOnce() -> Result<Arc<dyn Invoker>>,
) -> Result<Arc<dyn Invoker>> {
    match perf_db::lookup(handle, outer.name(), &problem.key()) {
        Some(label) if outer.tuning_space(problem).contains(&label) => outer.build_config(problem, handle, &label),
        _ => default(),
    }
}
