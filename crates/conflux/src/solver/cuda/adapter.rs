//! Shared by the solvers that rewrite a problem for other solvers (the channels-first layout
//! adapter, backward-data as a forward convolution): which registry roles may run the
//! rewritten problem, and building with the adapter's own tuned configuration.

use super::wgrad_tma::CudaConvWgradTma;
use crate::backend::{DeviceInfo, DeviceKind};
use crate::error::Result;
use crate::problem::FusedProblem;
use crate::solver::registry::{self, Role};
use crate::solver::{BuildContext, Invoker, Solver};
use crate::types::Direction;
use std::sync::Arc;

/// The tensor-core kernels that read channels-last operands (the channels-first adapter's
/// inner kernels).
pub(crate) const CHANNELS_LAST_TC: &[Role] = &[Role::ChannelsLastTensorCore];
/// Every forward tensor-core solver: the same plus the channels-first adapter (backward-data
/// runs as a forward convolution on any of them).
pub(crate) const FORWARD_TC: &[Role] = &[Role::ChannelsLastTensorCore, Role::ChannelsFirstAdapter];
/// The tensor-core backward-weights kernel.
pub(crate) const WEIGHTS_TC: &[Role] = &[Role::WeightsTensorCore];

/// The tuning space of an adapter over the tensor-core kernels: the backward-weights kernel's
/// for backward-weights, else (forward, and backward-data run as a forward convolution) every
/// forward kernel's labels, since which one takes a problem depends on the GPU, which is not
/// known here (the labels are distinct; the others' fail to build and tuning skips them).
pub(crate) fn tensor_core_space(problem: &FusedProblem) -> Vec<String> {
    if problem.conv_problem().is_some_and(|c| c.direction == Direction::BackwardWeights) {
        return CudaConvWgradTma.tuning_space(problem);
    }
    registry::with_role(DeviceKind::Cuda, CHANNELS_LAST_TC).flat_map(|s| s.tuning_space(problem)).collect()
}

/// The first solver of `roles` (in registry order) that takes `problem`, else every refusal
/// with its solver's name.
pub(crate) fn first_taker(roles: &[Role], problem: &FusedProblem, device: &DeviceInfo) -> std::result::Result<&'static dyn Solver, String> {
    registry::first_of(roles, problem, device)
}

/// Build `outer` for `problem` with its own tuned configuration (stored by an exhaustive Find
/// over its tuning space under its name and the caller's problem) when there is one, else with
/// `default` (the inner solver's own choice).
pub(crate) fn build_tuned(
    outer: &dyn Solver,
    problem: &FusedProblem,
    ctx: &dyn BuildContext,
    default: impl FnOnce() -> Result<Arc<dyn Invoker>>,
) -> Result<Arc<dyn Invoker>> {
    match ctx.tuned_config(outer.name(), &problem.key()) {
        Some(label) if outer.tuning_space(problem).contains(&label) => outer.build_config(problem, ctx, &label),
        _ => default(),
    }
}
