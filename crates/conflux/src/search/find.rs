//! Find: time every applicable solver of the session's device with a caller-supplied run
//! (the caller's buffers for convolutions, scratch tensors for fusion plans), fastest first;
//! with `exhaustive`, also tune the solvers that have a configuration space (perf-db).

use super::find_db::FindEntry;
use super::perf_db;
use super::progress::Steps;
use super::select::screen;
use super::session::{invoker, replace_invoker, Session, Tuned};
use crate::ensure;
use crate::error::Result;
use crate::problem::FusedProblem;
use crate::solver::{Invoker, Solver};
use crate::types::ConvAlgorithm;

/// One algorithm's result (`miopenConvAlgoPerf_t`, plus the solver behind it).
#[derive(Clone, Debug, PartialEq)]
pub struct ConvPerf {
    pub algorithm: ConvAlgorithm,
    pub solution_id: u64,
    pub solver: &'static str,
    pub time_ms: f32,
    pub workspace_bytes: usize,
}

/// Timed runs per solver after one warm-up run (exhaustive search measures longer and also
/// tunes solvers that have a configuration space).
fn reps(exhaustive: bool, warmup_ms: f32) -> usize {
    if warmup_ms > 250.0 {
        1
    } else if exhaustive {
        10
    } else {
        3
    }
}

/// A solver Find will time: its workspace and, when tuning, its configurations.
struct Candidate {
    solver: &'static dyn Solver,
    need: usize,
    space: Vec<String>,
}

/// Time every applicable solver of `problem` (of `algo` only, when given) that fits in
/// `ws_bytes`. `run` runs one invoker once on the caller's buffers. Returns the measured
/// solvers fastest first, with the invoker of the fastest run last so its output remains;
/// UnknownError naming every solver's reason when none could be timed. Each timed
/// candidate is reported to the session's progress hook (`progress.rs`).
pub fn time_solvers(
    s: &dyn Session,
    problem: &FusedProblem,
    algo: Option<ConvAlgorithm>,
    ws_bytes: usize,
    exhaustive: bool,
    run: &dyn Fn(&dyn Invoker) -> Result<()>,
) -> Result<Vec<FindEntry>> {
    // Choose the candidates first so progress knows the total before the first timing.
    let sc = screen(problem, s.device().info(), algo, ws_bytes, false);
    let mut reasons = sc.refused;
    reasons.extend(sc.too_big.iter().map(|(sv, need)| format!("{}: needs {need} workspace bytes, {ws_bytes} given", sv.name())));
    let candidates: Vec<Candidate> = sc
        .accepted
        .into_iter()
        .map(|sv| Candidate { solver: sv, need: sv.workspace_bytes(problem), space: if exhaustive { sv.tuning_space(problem) } else { Vec::new() } })
        .collect();
    let mut steps = Steps::new(s.search_state(), candidates.iter().map(|c| c.space.len().max(1)).sum());
    let time_one = |inv: &dyn Invoker| -> Result<f32> {
        let warm = s.device().measure_ms(|| run(inv))?;
        let mut t: Vec<f32> = (0..reps(exhaustive, warm)).map(|_| s.device().measure_ms(|| run(inv))).collect::<Result<_>>()?;
        t.sort_by(f32::total_cmp);
        Ok(t[t.len() / 2])
    };
    let mut timed = Vec::new();
    for Candidate { solver: sv, need, space } in candidates {
        let measured = isolated(sv.name(), || {
            if space.is_empty() {
                let r = invoker(s, problem, sv).and_then(|inv| time_one(inv.as_ref()));
                steps.done(sv.name(), None, r.as_ref().copied());
                r
            } else {
                tune(s, problem, sv, &space, &time_one, &mut steps)
            }
        });
        match measured {
            Ok(ms) => timed.push((FindEntry { solver: sv.name(), solution_id: sv.solution_id(), algorithm: sv.algorithm(), time_ms: ms, workspace_bytes: need }, sv)),
            Err(e) => {
                tracing::warn!(solver = sv.name(), error = %e, "solver failed during Find; skipping it");
                reasons.push(format!("{}: failed: {e}", sv.name()));
            }
        }
    }
    ensure!(!timed.is_empty(), UnknownError, "no suitable algorithm was found for {}: {}", problem.short_name(), reasons.join("; "));
    timed.sort_by(|a, b| a.0.time_ms.total_cmp(&b.0.time_ms));
    if timed.len() > 1 {
        run(invoker(s, problem, timed[0].1)?.as_ref())?;
    }
    Ok(timed.into_iter().map(|(e, _)| e).collect())
}

/// `f`, with a panic turned into an InternalError naming `solver`: one solver that panics while
/// it is built or timed costs Find that candidate, not the whole search.
fn isolated<T>(solver: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        let msg = payload.downcast_ref::<&str>().map(|m| m.to_string()).or_else(|| payload.downcast_ref::<String>().cloned()).unwrap_or_default();
        Err(crate::Error::internal(format!("{solver} panicked: {msg}")))
    })
}

/// Exhaustive search over a tunable solver's configurations: time each, keep the fastest as
/// the session's invoker and in the perf-db. Progress goes to `tracing` (target
/// `conflux::tuning`) and to the progress hook; a configuration that fails to build or run
/// is skipped.
fn tune(
    session: &dyn Session,
    problem: &FusedProblem,
    s: &'static dyn Solver,
    space: &[String],
    time_one: &dyn Fn(&dyn Invoker) -> Result<f32>,
    steps: &mut Steps,
) -> Result<f32> {
    let mut best: Option<(f32, &str, std::sync::Arc<dyn Invoker>)> = None;
    for (i, config) in space.iter().enumerate() {
        let result = s.build_config(problem, &Tuned(session.device()), config).and_then(|inv| Ok((time_one(inv.as_ref())?, inv)));
        steps.done(s.name(), Some(config), result.as_ref().map(|r| r.0));
        match result {
            Ok((ms, inv)) => {
                tracing::info!(target: "conflux::tuning", solver = s.name(), config, ms, step = i + 1, of = space.len(), "tuned");
                if best.as_ref().is_none_or(|b| ms < b.0) {
                    best = Some((ms, config, inv));
                }
            }
            Err(e) => tracing::warn!(target: "conflux::tuning", solver = s.name(), config, error = %e, "configuration skipped"),
        }
    }
    let (ms, config, inv) = best.ok_or_else(|| crate::Error::unknown(format!("{}: no configuration could run", s.name())))?;
    replace_invoker(session, problem, s, inv);
    perf_db::store(session.device(), s.name(), &problem.key(), config);
    Ok(ms)
}

/// The fastest entry of each algorithm, fastest first, at most `count`.
pub fn best_per_algorithm(measured: &[FindEntry], count: usize) -> Vec<ConvPerf> {
    let mut out: Vec<ConvPerf> = Vec::new();
    for e in measured {
        // `measured` is sorted, so the first entry of an algorithm is its best.
        if out.iter().all(|p| p.algorithm != e.algorithm) {
            out.push(ConvPerf { algorithm: e.algorithm, solution_id: e.solution_id, solver: e.solver, time_ms: e.time_ms, workspace_bytes: e.workspace_bytes });
        }
    }
    out.truncate(count);
    out
}

#[cfg(test)]
mod tests {
    use super::isolated;

    #[test]
    fn a_panicking_candidate_becomes_an_error_naming_it() {
        let r: crate::error::Result<()> = isolated("SomeSolver", || panic!("index out of bounds"));
        let e = r.unwrap_err();
        assert!(e.reason.contains("SomeSolver panicked: index out of bounds"), "{}", e.reason);
        assert_eq!(isolated("SomeSolver", || Ok(3)).unwrap(), 3);
    }
}
