//! Find (`miopenFindConvolution*Algorithm`): time every applicable solver of the handle's
//! device on the caller's buffers, keep the fastest solver per algorithm, sort by time.
//!
//! Like MIOpen, Find runs the convolution with α = 1, β = 0 and so writes the output tensor:
//! afterwards it holds conv(x, w) as computed by the fastest solver (it is run last). Solvers
//! that need more workspace than given are skipped. Every measurement goes to the find-db,
//! which `Choice::Auto` / `Choice::Algorithm` and immediate mode then use.

use super::api::{bind_backward_data, bind_backward_weights, bind_forward, check_workspace, Bound, Workspace};
use super::find_db::{self, FindEntry};
use super::progress::Steps;
use super::ConvDesc;
use crate::error::Result;
use crate::fusion::FusedProblem;
use crate::handle::Handle;
use crate::memory::DevPtr;
use crate::solver::{applicable, perf_db, Invoker, RunArgs, Solver};
use crate::tensor::TensorDesc;
use crate::types::ConvAlgorithm;
use crate::ensure;

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
/// candidate is reported to the handle's progress hook (`progress.rs`).
pub(crate) fn time_solvers(
    handle: &Handle,
    problem: &FusedProblem,
    algo: Option<ConvAlgorithm>,
    ws_bytes: usize,
    exhaustive: bool,
    run: &dyn Fn(&dyn Invoker) -> Result<()>,
) -> Result<Vec<FindEntry>> {
    // Choose the candidates first so progress knows the total before the first timing.
    let mut candidates = Vec::new();
    let mut reasons = Vec::new();
    for info in applicable(problem, handle) {
        let s = info.solver;
        if let Err(why) = info.verdict {
            reasons.push(format!("{}: {why}", s.name()));
            continue;
        }
        if algo.is_some_and(|a| a != s.algorithm()) {
            continue;
        }
        let need = s.workspace_bytes(problem);
        if need > ws_bytes {
            reasons.push(format!("{}: needs {need} workspace bytes, {ws_bytes} given", s.name()));
            continue;
        }
        let space = if exhaustive { s.tuning_space(problem) } else { Vec::new() };
        candidates.push(Candidate { solver: s, need, space });
    }
    let mut steps = Steps::new(handle, candidates.iter().map(|c| c.space.len().max(1)).sum());
    let time_one = |inv: &dyn Invoker| -> Result<f32> {
        let warm = handle.measure_ms(|| run(inv))?;
        let mut t: Vec<f32> = (0..reps(exhaustive, warm)).map(|_| handle.measure_ms(|| run(inv))).collect::<Result<_>>()?;
        t.sort_by(f32::total_cmp);
        Ok(t[t.len() / 2])
    };
    let mut timed = Vec::new();
    for Candidate { solver: s, need, space } in candidates {
        let measured = if space.is_empty() {
            let r = handle.invoker(problem, s).and_then(|inv| time_one(inv.as_ref()));
            steps.done(s.name(), None, r.as_ref().copied());
            r
        } else {
            tune(handle, problem, s, &space, &time_one, &mut steps)
        };
        match measured {
            Ok(ms) => timed.push((FindEntry { solver: s.name(), solution_id: s.solution_id(), algorithm: s.algorithm(), time_ms: ms, workspace_bytes: need }, s)),
            Err(e) => {
                tracing::warn!(solver = s.name(), error = %e, "solver failed during Find; skipping it");
                reasons.push(format!("{}: failed: {e}", s.name()));
            }
        }
    }
    ensure!(!timed.is_empty(), UnknownError, "no suitable algorithm was found for {}: {}", problem.short_name(), reasons.join("; "));
    timed.sort_by(|a, b| a.0.time_ms.total_cmp(&b.0.time_ms));
    if timed.len() > 1 {
        run(handle.invoker(problem, timed[0].1)?.as_ref())?;
    }
    Ok(timed.into_iter().map(|(e, _)| e).collect())
}

/// Exhaustive search over a tunable solver's configurations: time each, keep the fastest as
/// the handle's invoker and in the perf-db. Progress goes to `tracing` (target
/// `conflux::tuning`) and to the progress hook; a configuration that fails to build or run
/// is skipped.
fn tune(
    handle: &Handle,
    problem: &FusedProblem,
    s: &'static dyn Solver,
    space: &[String],
    time_one: &dyn Fn(&dyn Invoker) -> Result<f32>,
    steps: &mut Steps,
) -> Result<f32> {
    let mut best: Option<(f32, &str, std::sync::Arc<dyn Invoker>)> = None;
    for (i, config) in space.iter().enumerate() {
        let result = s.build_config(problem, handle, config).and_then(|inv| Ok((time_one(inv.as_ref())?, inv)));
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
    handle.replace_invoker(problem, s, inv);
    perf_db::store(handle, s.name(), &problem.key(), config);
    Ok(ms)
}

/// Find on a bound convolution.
fn find(handle: &Handle, b: &Bound, request_count: usize, exhaustive: bool, ws: Workspace) -> Result<Vec<ConvPerf>> {
    ensure!(request_count >= 1, BadParm, "find {}: request count must be at least 1", b.op);
    check_workspace(b.op, ws)?;
    let fp = FusedProblem::conv(b.problem.clone());
    let run = |inv: &dyn Invoker| {
        crate::solver::invoke(&*inv, handle, &RunArgs { x: b.x, w: b.w, y: b.y, alpha: 1.0, beta: 0.0, workspace: ws.ptr, workspace_bytes: ws.bytes, ops: &[] })
    };
    let measured = time_solvers(handle, &fp, None, ws.bytes, exhaustive, &run).map_err(|e| e.context(format!("find {}", b.op)))?;
    handle.synchronize()?;
    find_db::store(handle, &fp, &measured);
    Ok(best_per_algorithm(&measured, request_count))
}

/// The fastest entry of each algorithm, fastest first, at most `count`.
pub(crate) fn best_per_algorithm(measured: &[FindEntry], count: usize) -> Vec<ConvPerf> {
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

/// `miopenFindConvolutionForwardAlgorithm`: y is written with conv(x, w).
#[allow(clippy::too_many_arguments)]
pub fn find_forward(
    handle: &Handle,
    conv: &ConvDesc,
    x_desc: &TensorDesc,
    x: DevPtr,
    w_desc: &TensorDesc,
    w: DevPtr,
    y_desc: &TensorDesc,
    y: DevPtr,
    request_count: usize,
    exhaustive: bool,
    ws: Workspace,
) -> Result<Vec<ConvPerf>> {
    crate::log_cmd::conv("FindConvolutionForwardAlgorithm", conv, x_desc, w_desc, y_desc, 1);
    find(handle, &bind_forward(conv, x_desc, x, w_desc, w, y_desc, y)?, request_count, exhaustive, ws)
}

/// `miopenFindConvolutionBackwardDataAlgorithm`: dx is written with conv_bwd_data(dy, w).
#[allow(clippy::too_many_arguments)]
pub fn find_backward_data(
    handle: &Handle,
    conv: &ConvDesc,
    dy_desc: &TensorDesc,
    dy: DevPtr,
    w_desc: &TensorDesc,
    w: DevPtr,
    dx_desc: &TensorDesc,
    dx: DevPtr,
    request_count: usize,
    exhaustive: bool,
    ws: Workspace,
) -> Result<Vec<ConvPerf>> {
    crate::log_cmd::conv("FindConvolutionBackwardDataAlgorithm", conv, dx_desc, w_desc, dy_desc, 2);
    find(handle, &bind_backward_data(conv, dy_desc, dy, w_desc, w, dx_desc, dx)?, request_count, exhaustive, ws)
}

/// `miopenFindConvolutionBackwardWeightsAlgorithm`: dw is written with conv_bwd_weights(x, dy).
#[allow(clippy::too_many_arguments)]
pub fn find_backward_weights(
    handle: &Handle,
    conv: &ConvDesc,
    dy_desc: &TensorDesc,
    dy: DevPtr,
    x_desc: &TensorDesc,
    x: DevPtr,
    dw_desc: &TensorDesc,
    dw: DevPtr,
    request_count: usize,
    exhaustive: bool,
    ws: Workspace,
) -> Result<Vec<ConvPerf>> {
    crate::log_cmd::conv("FindConvolutionBackwardWeightsAlgorithm", conv, x_desc, dw_desc, dy_desc, 4);
    find(handle, &bind_backward_weights(conv, dy_desc, dy, x_desc, x, dw_desc, dw)?, request_count, exhaustive, ws)
}
