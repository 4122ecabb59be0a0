//! What a search remembers between calls on one session: compiled invokers by (problem key,
//! solver), the find-db records it read or wrote, and the progress hook. The Handle holds a
//! `SearchState` and implements `Session`.

use super::find_db::FindRecord;
use super::perf_db;
use super::progress::FindProgressFn;
use crate::backend::{Device, RunContext};
use crate::error::Result;
use crate::problem::FusedProblem;
use crate::solver::{BuildContext, Invoker, Solver};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A session searches on: its device and run context plus its search state.
pub trait Session: RunContext {
    fn search_state(&self) -> &SearchState;
}

type InvokerKey = (String, &'static str);
/// One invoker's place in the cache: filled once; its own lock is held while it is built, so
/// threads building different problems compile in parallel and racing threads build it once.
type InvokerSlot = Arc<Mutex<Option<Arc<dyn Invoker>>>>;
/// Find results read or written by this session, by find-db key (None: no entry on disk).
pub(crate) type FindMemo = HashMap<String, Option<Arc<FindRecord>>>;

/// A convolution call's choice as the caller states it: (problem key, choice, workspace bytes).
pub(crate) type RunKey = (String, super::Choice, usize);
/// What a call resolved to: the solver and its built invoker.
pub(crate) type Resolved = (&'static dyn Solver, Arc<dyn Invoker>);

#[derive(Default)]
pub struct SearchState {
    invokers: Mutex<HashMap<InvokerKey, InvokerSlot>>,
    /// Calls already resolved, so that a repeated call skips the find-db lookup and the
    /// solvers' applicability checks (tens of µs for the adapters, more than many kernels
    /// run). Cleared whenever a Find or a tuning run changes what a call would resolve to.
    resolved: Mutex<HashMap<RunKey, Resolved>>,
    builds: AtomicU64,
    pub(crate) find_memo: Mutex<FindMemo>,
    find_progress: Mutex<Option<FindProgressFn>>,
}

impl SearchState {
    /// Number of invokers built in this session (a cache hit builds none).
    pub fn build_count(&self) -> u64 {
        self.builds.load(Ordering::Relaxed)
    }

    /// Install (Some) or remove (None) the hook Find and exhaustive tuning call after each
    /// timed candidate.
    pub fn set_find_progress(&self, hook: Option<FindProgressFn>) {
        *self.find_progress.lock().unwrap() = hook;
    }

    /// The installed progress hook, cloned so it runs without the lock held (it may call
    /// back into the session, even replace itself).
    pub(crate) fn find_progress(&self) -> Option<FindProgressFn> {
        self.find_progress.lock().unwrap().clone()
    }
}

/// The solver and invoker `key` resolved to on an earlier call, if nothing has changed since.
pub(crate) fn resolved(s: &dyn Session, key: &RunKey) -> Option<Resolved> { s.search_state().resolved.lock().unwrap().get(key).cloned() }

/// Remember what `key` resolved to.
pub(crate) fn remember_resolved(s: &dyn Session, key: RunKey, r: Resolved) { s.search_state().resolved.lock().unwrap().insert(key, r); }

/// Forget every resolved call: a Find wrote new results, or tuning replaced an invoker.
pub(crate) fn forget_resolved(s: &dyn Session) { s.search_state().resolved.lock().unwrap().clear(); }

/// Building for a device with the perf-db's tuned configurations.
pub(crate) struct Tuned<'a>(pub &'a Device);

impl BuildContext for Tuned<'_> {
    fn device(&self) -> &Device { self.0 }
    fn tuned_config(&self, solver: &str, problem_key: &str) -> Option<String> {
        perf_db::lookup(self.0, solver, problem_key)
    }
}

/// The invoker of `solver` for `problem`, built once per session (with its tuned
/// configuration when the perf-db has one). Only the problem's own slot is locked while it
/// is built; a failed build leaves the slot empty, so a later call tries again.
pub fn invoker(s: &dyn Session, problem: &FusedProblem, solver: &'static dyn Solver) -> Result<Arc<dyn Invoker>> {
    let state = s.search_state();
    let slot = slot(state, (problem.key(), solver.name()));
    let mut built = slot.lock().unwrap();
    if let Some(inv) = &*built {
        return Ok(inv.clone());
    }
    let inv = solver.build(problem, &Tuned(s.device()))?;
    state.builds.fetch_add(1, Ordering::Relaxed);
    *built = Some(inv.clone());
    Ok(inv)
}

fn slot(state: &SearchState, key: InvokerKey) -> InvokerSlot {
    state.invokers.lock().unwrap().entry(key).or_default().clone()
}

/// Cache `inv` as the invoker of `solver` for `problem`, replacing any earlier one (after
/// tuning picked a configuration other than the one built first).
pub fn replace_invoker(s: &dyn Session, problem: &FusedProblem, solver: &'static dyn Solver, inv: Arc<dyn Invoker>) {
    *slot(s.search_state(), (problem.key(), solver.name())).lock().unwrap() = Some(inv);
    forget_resolved(s);
}

/// The cached invoker of `solver` for `problem`, if one was built.
pub fn cached_invoker(s: &dyn Session, problem: &FusedProblem, solver: &'static dyn Solver) -> Option<Arc<dyn Invoker>> {
    let slot = s.search_state().invokers.lock().unwrap().get(&(problem.key(), solver.name())).cloned()?;
    let inv = slot.lock().unwrap().clone();
    inv
}
