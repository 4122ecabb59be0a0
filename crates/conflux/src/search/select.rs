//! Choosing a solver without timing anything: every caller's policy, on one screening of the
//! device's registry list (`screen`), so a new solver is taught to the registry alone.

use super::find_db;
use super::session::Session;
use crate::backend::DeviceInfo;
use crate::ensure;
use crate::error::{Error, Result};
use crate::problem::FusedProblem;
use crate::solver::registry::{self, SolverInfo};
use crate::solver::{find_by_id, find_by_name, Solver};
use crate::types::ConvAlgorithm;

/// Which solver runs a convolution.
///
/// - `Auto`: the find-db's fastest solver for this problem on this device when Find has
///   recorded one, else the first applicable solver in registry order.
/// - `Algorithm(a)`: the find-db's fastest solver of algorithm `a`, else the first applicable
///   solver of `a`. **MIOpen differs**: `miopenConvolutionForward` with an algorithm fails
///   ("No invoker was registered") unless Find ran for this problem on this handle; conflux
///   runs the best solver of that algorithm it knows.
/// - `Solution(id)`: exactly that solver (immediate mode); BadParm when the id does not exist,
///   is for another device, does not apply or needs more workspace than given.
///
/// `Auto` and `Algorithm` skip solvers that need more workspace than given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Choice {
    Auto,
    Algorithm(ConvAlgorithm),
    Solution(u64),
}

/// The device's solvers sorted by what a caller may run: those that apply and fit, those
/// refused (with "Name: reason"), and those that apply but need more workspace than given.
pub(crate) struct Screen {
    pub accepted: Vec<&'static dyn Solver>,
    pub refused: Vec<String>,
    pub too_big: Vec<(&'static dyn Solver, usize)>,
}

/// Screen the registry list of `device` for `problem`: solvers of `algo` only (when given),
/// needing at most `ws_bytes` of workspace; stop at the first accepted one when `first`.
pub(crate) fn screen(problem: &FusedProblem, device: &DeviceInfo, algo: Option<ConvAlgorithm>, ws_bytes: usize, first: bool) -> Screen {
    let mut out = Screen { accepted: Vec::new(), refused: Vec::new(), too_big: Vec::new() };
    let wanted = |s: &dyn Solver| algo.is_none_or(|a| s.algorithm() == a);
    for e in registry::list(device.kind) {
        let s = e.solver;
        if !wanted(s) {
            out.refused.push(format!("{}: algorithm {:?} not requested", s.name(), s.algorithm()));
            continue;
        }
        if let Err(why) = registry::verdict(s, problem, device) {
            out.refused.push(format!("{}: {why}", s.name()));
            continue;
        }
        let need = s.workspace_bytes(problem);
        if need > ws_bytes {
            out.too_big.push((s, need));
            continue;
        }
        out.accepted.push(s);
        if first {
            break;
        }
    }
    out
}

/// The support matrix: every solver of the device's list with its verdict on `problem`.
pub fn support_matrix(problem: &FusedProblem, device: &DeviceInfo) -> Vec<SolverInfo> {
    registry::walk(problem, device, |_| true).collect()
}

/// The find-db's fastest recorded solver for `problem` that `accept` keeps and that still
/// applies on this device.
pub(crate) fn recorded(s: &dyn Session, problem: &FusedProblem, accept: impl Fn(&dyn Solver) -> bool) -> Option<&'static dyn Solver> {
    let device = s.device().info();
    let rec = find_db::lookup(s, problem)?;
    rec.entries
        .iter()
        .filter_map(|e| find_by_name(e.solver))
        .find(|&sv| sv.device() == device.kind && accept(sv) && registry::verdict(sv, problem, device).is_ok())
}

/// The first applicable solver of `algo` (any when None), ignoring workspace; the refusal
/// lists every solver's reason.
pub fn first_applicable(s: &dyn Session, problem: &FusedProblem, algo: Option<ConvAlgorithm>) -> Result<&'static dyn Solver> {
    let sc = screen(problem, s.device().info(), algo, usize::MAX, true);
    sc.accepted.first().copied().ok_or_else(|| nothing_applies(s, problem, algo, &sc))
}

fn nothing_applies(s: &dyn Session, problem: &FusedProblem, algo: Option<ConvAlgorithm>, sc: &Screen) -> Error {
    Error::unsupported(format!(
        "no {} solver{} applies to {}: {}",
        s.device().name(),
        algo.map(|a| format!(" of algorithm {a:?}")).unwrap_or_default(),
        problem.short_name(),
        sc.refused.join("; ")
    ))
}

/// Every applicable solver, in registry order (immediate mode's list); NotImplemented with
/// every reason when there is none.
pub fn applicable(s: &dyn Session, problem: &FusedProblem) -> Result<Vec<&'static dyn Solver>> {
    let sc = screen(problem, s.device().info(), None, usize::MAX, false);
    ensure!(
        !sc.accepted.is_empty(),
        NotImplemented,
        "requested convolution {} is not supported on {}: {}",
        problem.short_name(),
        s.device().name(),
        sc.refused.join("; ")
    );
    Ok(sc.accepted)
}

/// The solver `choice` names for `problem` given `ws_bytes` of workspace (see `Choice`).
pub fn choose(s: &dyn Session, problem: &FusedProblem, choice: Choice, ws_bytes: usize) -> Result<&'static dyn Solver> {
    let algo = match choice {
        Choice::Solution(id) => return solution(s, problem, id, ws_bytes),
        Choice::Algorithm(a) => Some(a),
        Choice::Auto => None,
    };
    if let Some(sv) = recorded(s, problem, |sv| algo.is_none_or(|a| sv.algorithm() == a) && sv.workspace_bytes(problem) <= ws_bytes) {
        return Ok(sv);
    }
    let sc = screen(problem, s.device().info(), algo, ws_bytes, true);
    if let Some(&sv) = sc.accepted.first() {
        return Ok(sv);
    }
    if !sc.too_big.is_empty() {
        let list: Vec<String> = sc.too_big.iter().map(|(sv, need)| format!("{} needs {need}", sv.name())).collect();
        return Err(Error::bad_parm(format!("no applicable solver fits in {ws_bytes} workspace bytes ({})", list.join(", "))));
    }
    Err(nothing_applies(s, problem, algo, &sc))
}

/// Immediate mode's solver `id`, checked against the device, the problem and the workspace.
pub fn solution(s: &dyn Session, problem: &FusedProblem, id: u64, ws_bytes: usize) -> Result<&'static dyn Solver> {
    let device = s.device().info();
    let sv = find_by_id(id).ok_or_else(|| Error::bad_parm(format!("solution id {id} does not exist")))?;
    ensure!(sv.device() == device.kind, BadParm, "solution {id} ({}) is for another device", sv.name());
    registry::verdict(sv, problem, device).map_err(|why| Error::bad_parm(format!("solution {id} ({}) does not apply: {why}", sv.name())))?;
    let need = sv.workspace_bytes(problem);
    ensure!(need <= ws_bytes, BadParm, "solution {id} ({}) needs {need} workspace bytes, {ws_bytes} given", sv.name());
    Ok(sv)
}
