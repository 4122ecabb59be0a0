//! Find (`miopenFindConvolution*Algorithm`): time every applicable solver of the handle's
//! device on the caller's buffers (`search::time_solvers`), keep the fastest solver per
//! algorithm, sort by time.
//!
//! Like MIOpen, Find runs the convolution with α = 1, β = 0 and so writes the output tensor:
//! afterwards it holds conv(x, w) as computed by the fastest solver (it is run last). Solvers
//! that need more workspace than given are skipped. Every measurement goes to the find-db,
//! which `Choice::Auto` / `Choice::Algorithm` and immediate mode then use.

use super::api::{bind_backward_data, bind_backward_weights, bind_forward, check_workspace, Bound, Workspace};
use super::ConvDesc;
use crate::ensure;
use crate::error::Result;
use crate::handle::Handle;
use crate::memory::DevPtr;
use crate::problem::FusedProblem;
use crate::search::{best_per_algorithm, find_db, time_solvers, ConvPerf, FindEntry};
use crate::solver::{Invoker, RunArgs};
use crate::tensor::TensorDesc;

/// Find on a bound convolution: the fastest solver of each algorithm.
fn find(handle: &Handle, b: &Bound, request_count: usize, exhaustive: bool, ws: Workspace) -> Result<Vec<ConvPerf>> {
    ensure!(request_count >= 1, BadParm, "find {}: request count must be at least 1", b.op);
    Ok(best_per_algorithm(&find_all(handle, b, exhaustive, ws)?, request_count))
}

/// Time every applicable solver of a bound convolution that fits in `ws`, fastest first
/// (Find 2.0 lists solvers, not algorithms). The output holds the fastest solver's result.
pub fn find_all(handle: &Handle, b: &Bound, exhaustive: bool, ws: Workspace) -> Result<Vec<FindEntry>> {
    check_workspace(b.op, ws)?;
    let fp = FusedProblem::conv(b.problem.clone());
    let run = |inv: &dyn Invoker| {
        crate::solver::invoke(&*inv, handle, &RunArgs { x: b.x, w: b.w, y: b.y, alpha: 1.0, beta: 0.0, workspace: ws.ptr, workspace_bytes: ws.bytes, ops: &[] })
    };
    let measured = time_solvers(handle, &fp, None, ws.bytes, exhaustive, &run).map_err(|e| e.context(format!("find {}", b.op)))?;
    handle.synchronize()?;
    find_db::store(handle, &fp, &measured);
    Ok(measured)
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
