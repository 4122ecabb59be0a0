//! Immediate mode (`miopenConvolution*GetSolution*`, `*CompileSolution`, `*GetWorkSpaceSize`):
//! list the solutions of a problem best first without running anything, then run one by id
//! with `api::forward(.., Choice::Solution(id), ..)` (and the backward calls).
//!
//! Problems are taken in normal roles, as `ConvProblem::forward` / `backward_data` /
//! `backward_weights` build them from the user's descriptors.

use super::ConvProblem;
use crate::error::Result;
use crate::handle::Handle;
use crate::problem::FusedProblem;
use crate::search::{self, applicable, find_db};
use crate::types::ConvAlgorithm;

/// `miopenConvSolution_t`. `time_ms` is a Find measurement from the find-db when positive,
/// else minus the solver's coarse estimate (MIOpen's convention).
#[derive(Clone, Debug, PartialEq)]
pub struct ConvSolution {
    pub solution_id: u64,
    pub algorithm: ConvAlgorithm,
    pub time_ms: f32,
    pub workspace_bytes: usize,
}

/// `*GetSolutionCount`: the number of applicable solutions.
pub fn solution_count(handle: &Handle, problem: &ConvProblem) -> Result<usize> {
    Ok(applicable(handle, &FusedProblem::conv(problem.clone()))?.len())
}

/// `*GetSolution`: at most `max` solutions, best first: solvers Find measured (find-db times,
/// ascending), then the others by their estimates (negative times, ascending magnitude).
pub fn solutions(handle: &Handle, problem: &ConvProblem, max: usize) -> Result<Vec<ConvSolution>> {
    let fp = FusedProblem::conv(problem.clone());
    let mut rest = applicable(handle, &fp)?;
    let mut out = Vec::new();
    if let Some(rec) = find_db::lookup(handle, &fp) {
        for e in &rec.entries {
            if let Some(i) = rest.iter().position(|s| s.name() == e.solver) {
                let s = rest.remove(i);
                // A measured time is positive by convention, however fast the run was.
                let time_ms = e.time_ms.max(f32::MIN_POSITIVE);
                out.push(ConvSolution { solution_id: s.solution_id(), algorithm: s.algorithm(), time_ms, workspace_bytes: s.workspace_bytes(&fp) });
            }
        }
    }
    rest.sort_by(|a, b| a.estimate_ms(&fp).total_cmp(&b.estimate_ms(&fp)));
    for s in rest {
        let est = (s.estimate_ms(&fp) as f32).max(f32::MIN_POSITIVE);
        out.push(ConvSolution { solution_id: s.solution_id(), algorithm: s.algorithm(), time_ms: -est, workspace_bytes: s.workspace_bytes(&fp) });
    }
    out.truncate(max);
    Ok(out)
}

/// `*GetSolutionWorkspaceSize`: BadParm for an unknown, foreign or inapplicable id.
pub fn solution_workspace(handle: &Handle, problem: &ConvProblem, id: u64) -> Result<usize> {
    let fp = FusedProblem::conv(problem.clone());
    Ok(search::solution(handle, &fp, id, usize::MAX)?.workspace_bytes(&fp))
}

/// `*CompileSolution`: build the solver's invoker now and cache it on the handle.
pub fn compile_solution(handle: &Handle, problem: &ConvProblem, id: u64) -> Result<()> {
    let fp = FusedProblem::conv(problem.clone());
    let s = search::solution(handle, &fp, id, usize::MAX)?;
    handle.invoker(&fp, s).map(|_| ())
}

/// `*GetWorkSpaceSize`: enough workspace for any applicable solver (the maximum; MIOpen's
/// Fast/Hybrid find modes may return the find-db best's size instead, never more than this).
pub fn workspace_size(handle: &Handle, problem: &ConvProblem) -> Result<usize> {
    let fp = FusedProblem::conv(problem.clone());
    Ok(applicable(handle, &fp)?.iter().map(|s| s.workspace_bytes(&fp)).max().unwrap_or(0))
}
