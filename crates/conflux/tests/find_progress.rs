//! The handle's Find progress hook: called once per timed candidate, numbered 1..=total with
//! the total known up front, naming exactly the solvers (and tuning configurations) Find
//! times, in every direction and during a fusion plan's Normal-mode compile; removing the
//! hook stops the calls, and a hook may call back into the handle.

mod support;

use conflux::conv::{self, FindProgress, FindProgressFn, Workspace};
use conflux::fusion::FusedProblem;
use conflux::reference::fill::Fill;
use conflux::{ActivationMode, ConvDesc, ConvMode, ConvProblem, DataType, FindMode, FusionDirection, FusionPlan, Handle, TensorDesc};
use std::sync::{Arc, Mutex};
use support::*;

/// An owned copy of one progress call.
#[derive(Clone, Debug, PartialEq)]
struct Event {
    solver: String,
    config: Option<String>,
    step: usize,
    total: usize,
    ms: Result<f32, String>,
}

type Log = Arc<Mutex<Vec<Event>>>;

fn recorder(log: &Log) -> FindProgressFn {
    let log = log.clone();
    Arc::new(move |p: &FindProgress| {
        log.lock().unwrap().push(Event { solver: p.solver.into(), config: p.config.map(Into::into), step: p.step, total: p.total, ms: p.outcome.clone() })
    })
}

/// (solver, config) of every candidate Find should time, in registry order: applicable
/// solvers that fit in `ws` bytes, one per tuning configuration when `exhaustive`.
fn expected(h: &Handle, fp: &FusedProblem, ws: usize, exhaustive: bool) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    for info in conflux::search::support_matrix(fp, h.device().info()).into_iter().filter(|i| i.verdict.is_ok()) {
        let s = info.solver;
        if s.workspace_bytes(fp) > ws {
            continue;
        }
        let space = if exhaustive { s.tuning_space(fp) } else { Vec::new() };
        if space.is_empty() {
            out.push((s.name().to_string(), None));
        }
        out.extend(space.into_iter().map(|c| (s.name().to_string(), Some(c))));
    }
    out
}

/// One Find's events: numbered 1..=n of n, the expected candidates in order, all timed.
fn check_events(what: &str, events: &[Event], want: &[(String, Option<String>)]) {
    let got: Vec<(String, Option<String>)> = events.iter().map(|e| (e.solver.clone(), e.config.clone())).collect();
    assert_eq!(got, want, "{what}: reported candidates");
    for (i, e) in events.iter().enumerate() {
        assert_eq!((e.step, e.total), (i + 1, want.len()), "{what}: {e:?}");
        let ms = e.ms.as_ref().unwrap_or_else(|err| panic!("{what}: {} failed: {err}", e.solver));
        assert!(ms.is_finite() && *ms >= 0.0, "{what}: {e:?}");
    }
}

fn descs(dt: DataType) -> (ConvDesc, TensorDesc, TensorDesc, TensorDesc) {
    // 4 channels, 3×3: several CPU solvers apply (GEMM with workspace, Winograd, naive).
    let conv = ConvDesc::new(ConvMode::Convolution, &[1, 1], &[1, 1], &[1, 1]).unwrap();
    let x = TensorDesc::new(dt, &[1, 4, 6, 7]).unwrap();
    let w = TensorDesc::new(dt, &[4, 4, 3, 3]).unwrap();
    let y = conv.output_desc(&x, &w).unwrap();
    (conv, x, w, y)
}

device_tests!(find_reports_every_timed_candidate, |h: &Handle| {
    let (conv, x, w, y) = descs(DataType::Float);
    let (xb, wb, yb) = (random(h, &x, Fill::Normal, 1), random(h, &w, Fill::Normal, 2), random(h, &y, Fill::Normal, 3));
    let log: Log = Arc::default();
    h.set_find_progress(Some(recorder(&log)));
    let problems = [
        ConvProblem::forward(&conv, &x, &w, &y).unwrap(),
        ConvProblem::backward_data(&conv, &y, &w, &x).unwrap(),
        ConvProblem::backward_weights(&conv, &y, &x, &w).unwrap(),
    ];
    // Forward twice: with the full workspace and with none (solvers needing some are skipped,
    // so not reported); backward-weights exhaustive (tunable solvers report each config).
    for (i, (p, ws_bytes, exhaustive)) in [(0, usize::MAX, false), (0, 0, false), (1, usize::MAX, false), (2, usize::MAX, true)].into_iter().enumerate() {
        let problem = &problems[p];
        let ws_bytes = if ws_bytes == usize::MAX { conv::workspace_size(h, problem).unwrap() } else { 0 };
        let wsb = h.alloc(ws_bytes.max(1)).unwrap();
        let ws = Workspace { ptr: if ws_bytes > 0 { wsb.ptr() } else { conflux::DevPtr::NULL }, bytes: ws_bytes };
        log.lock().unwrap().clear();
        let perfs = match p {
            0 => conv::find_forward(h, &conv, &x, xb.ptr(), &w, wb.ptr(), &y, yb.ptr(), 8, exhaustive, ws),
            1 => conv::find_backward_data(h, &conv, &y, yb.ptr(), &w, wb.ptr(), &x, xb.ptr(), 8, exhaustive, ws),
            _ => conv::find_backward_weights(h, &conv, &y, yb.ptr(), &x, xb.ptr(), &w, wb.ptr(), 8, exhaustive, ws),
        }
        .unwrap();
        let what = format!("find {i} ({:?}, ws {ws_bytes}, exhaustive {exhaustive})", problem.direction);
        let events = log.lock().unwrap().clone();
        check_events(&what, &events, &expected(h, &FusedProblem::conv(problem.clone()), ws_bytes, exhaustive));
        // Find's results are the reported measurements (tuned solvers report their best).
        for pf in &perfs {
            assert!(events.iter().any(|e| e.solver == pf.solver && e.ms == Ok(pf.time_ms)), "{what}: {pf:?} not among {events:?}");
        }
        if i == 0 {
            assert!(events.len() >= 2, "{what}: a problem meant to have several solvers has {events:?}");
        }
    }

    // Removed: Find runs without calls.
    h.set_find_progress(None);
    log.lock().unwrap().clear();
    conv::find_forward(h, &conv, &x, xb.ptr(), &w, wb.ptr(), &y, yb.ptr(), 8, false, Workspace::default()).unwrap();
    assert!(log.lock().unwrap().is_empty());

    // A hook runs without the handle's lock held: it may remove itself (once only, then).
    let shared = Arc::new(fresh(h));
    let (xb, wb, yb) = (random(&shared, &x, Fill::Normal, 4), random(&shared, &w, Fill::Normal, 5), poisoned(&shared, &y));
    let calls = Arc::new(Mutex::new(0));
    let (c2, weak) = (calls.clone(), Arc::downgrade(&shared));
    shared.set_find_progress(Some(Arc::new(move |_p: &FindProgress| {
        *c2.lock().unwrap() += 1;
        if let Some(handle) = weak.upgrade() {
            handle.set_find_progress(None);
        }
    })));
    conv::find_forward(&shared, &conv, &x, xb.ptr(), &w, wb.ptr(), &y, yb.ptr(), 8, false, Workspace::default()).unwrap();
    assert_eq!(*calls.lock().unwrap(), 1);
});

device_tests!(fusion_normal_find_reports_progress, |h: &Handle| {
    let (conv, x, w, _) = descs(DataType::Float);
    let b = TensorDesc::new(DataType::Float, &[1, 4, 1, 1]).unwrap();
    let mut plan = FusionPlan::new(FusionDirection::Vertical, x);
    plan.add_conv_forward(&conv, &w).unwrap();
    plan.add_bias(&b).unwrap();
    plan.add_activation(ActivationMode::Relu).unwrap();
    plan.set_find_mode(FindMode::Normal);
    let log: Log = Arc::default();
    h.set_find_progress(Some(recorder(&log)));
    plan.compile(h).unwrap();
    let fp = plan.problem().unwrap();
    // Plans have no workspace: Find times the solvers that need none.
    check_events("plan compile, Normal", &log.lock().unwrap(), &expected(h, &fp, 0, false));
    assert_eq!(Some(log.lock().unwrap().iter().min_by(|a, b| a.ms.clone().unwrap().total_cmp(&b.ms.clone().unwrap())).unwrap().solver.as_str()), plan.solver_name());
});
