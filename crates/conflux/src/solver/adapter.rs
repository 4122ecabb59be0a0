//! Shared by the solvers that rewrite a problem for other solvers (the channels-first layout
//! adapter, backward-data as a forward convolution): choosing the solver that takes the
//! rewritten problem, and building with a tuned configuration.

use super::cuda_igemm_tc::CudaConvIgemmTc;
use super::cuda_igemm_tma::CudaConvIgemmTma;
use super::cuda_igemm_wgmma::CudaConvIgemmWgmma;
use super::cuda_tc_nchw::CudaConvTcNchw;
use super::cuda_wgrad_tma::CudaConvWgradTma;
use super::{perf_db, Invoker, Solver};
use crate::error::Result;
use crate::fusion::FusedProblem;
use crate::handle::Handle;
use crate::types::Direction;
use std::sync::Arc;

/// The tensor-core kernels that read channels-last operands, best first (registry order).
pub(crate) const CHANNELS_LAST_TC: [&dyn Solver; 3] = [&CudaConvIgemmTma, &CudaConvIgemmWgmma, &CudaConvIgemmTc];
/// Every forward tensor-core solver, best first: the same plus the channels-first adapter.
pub(crate) const FORWARD_TC: [&dyn Solver; 4] = [&CudaConvIgemmTma, &CudaConvTcNchw, &CudaConvIgemmWgmma, &CudaConvIgemmTc];

/// The tuning space of an adapter over the tensor-core kernels: the backward-weights kernel's
/// for backward-weights, else (forward, and backward-data run as a forward convolution) every
/// forward kernel's labels, since which one takes a problem depends on the GPU, which is not
/// known here (the labels are distinct; the others' fail to build and tuning skips them).
pub(crate) fn tensor_core_space(problem: &FusedProblem) -> Vec<String> {
    if problem.conv_problem().is_some_and(|c| c.direction == Direction::BackwardWeights) {
        return CudaConvWgradTma.tuning_space(problem);
    }
    CHANNELS_LAST_TC.iter().flat_map(|s| s.tuning_space(problem)).collect()
}

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
