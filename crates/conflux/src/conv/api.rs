//! Running convolutions: the solver comes from `search::choose`. Pointers are in the user's roles;
//! transpose problems are mapped onto the normal convolution here (`bind_*`), and Find and
//! immediate mode reuse the same mapping.

use super::{ConvDesc, ConvProblem};
use crate::error::Result;
use crate::problem::FusedProblem;
use crate::handle::Handle;
use crate::memory::DevPtr;
pub use crate::search::Choice;
use crate::search;
use crate::solver::RunArgs;
use crate::tensor::TensorDesc;
use crate::types::{ConvMode, Direction};
use crate::ensure;

/// Workspace handed to a convolution.
#[derive(Clone, Copy, Debug, Default)]
pub struct Workspace {
    pub ptr: DevPtr,
    pub bytes: usize,
}

/// A convolution in normal roles: the problem and its x, w, y pointers (checked non-NULL),
/// with the user-facing name of the operation for messages.
#[derive(Clone, Debug)]
pub struct Bound {
    pub op: &'static str,
    pub problem: ConvProblem,
    pub x: DevPtr,
    pub w: DevPtr,
    pub y: DevPtr,
}

pub(crate) const FORWARD: &str = "convolution forward";
pub(crate) const BACKWARD_DATA: &str = "convolution backward-data";
pub(crate) const BACKWARD_WEIGHTS: &str = "convolution backward-weights";

/// Every tensor pointer must be given (BadParm naming the op and the tensor otherwise).
fn need(op: &str, ptrs: [(&str, DevPtr); 3]) -> Result<()> {
    for (name, p) in ptrs {
        ensure!(!p.is_null(), BadParm, "{op}: {name} pointer is NULL");
    }
    Ok(())
}

/// Forward as the user states it: y = conv(x, w).
pub fn bind_forward(conv: &ConvDesc, x_desc: &TensorDesc, x: DevPtr, w_desc: &TensorDesc, w: DevPtr, y_desc: &TensorDesc, y: DevPtr) -> Result<Bound> {
    let problem = ConvProblem::forward(conv, x_desc, w_desc, y_desc)?;
    need(FORWARD, [("x", x), ("w", w), ("y", y)])?;
    let (x, y) = if conv.mode() == ConvMode::Transpose { (y, x) } else { (x, y) };
    debug_assert_eq!(problem.direction == Direction::BackwardData, conv.mode() == ConvMode::Transpose);
    Ok(Bound { op: FORWARD, problem, x, w, y })
}

/// Backward-data as the user states it: dx = conv_bwd_data(dy, w).
pub fn bind_backward_data(conv: &ConvDesc, dy_desc: &TensorDesc, dy: DevPtr, w_desc: &TensorDesc, w: DevPtr, dx_desc: &TensorDesc, dx: DevPtr) -> Result<Bound> {
    let problem = ConvProblem::backward_data(conv, dy_desc, w_desc, dx_desc)?;
    need(BACKWARD_DATA, [("dy", dy), ("w", w), ("dx", dx)])?;
    // Normal: x = dx, y = dy. Transpose: the problem is a normal forward with x = dy, y = dx.
    let (x, y) = if conv.mode() == ConvMode::Transpose { (dy, dx) } else { (dx, dy) };
    Ok(Bound { op: BACKWARD_DATA, problem, x, w, y })
}

/// Backward-weights as the user states it: dw = conv_bwd_weights(x, dy).
pub fn bind_backward_weights(conv: &ConvDesc, dy_desc: &TensorDesc, dy: DevPtr, x_desc: &TensorDesc, x: DevPtr, dw_desc: &TensorDesc, dw: DevPtr) -> Result<Bound> {
    let problem = ConvProblem::backward_weights(conv, dy_desc, x_desc, dw_desc)?;
    need(BACKWARD_WEIGHTS, [("dy", dy), ("x", x), ("dw", dw)])?;
    // Transpose swaps the roles of x and dy.
    let (x, y) = if conv.mode() == ConvMode::Transpose { (dy, x) } else { (x, dy) };
    Ok(Bound { op: BACKWARD_WEIGHTS, problem, x, w: dw, y })
}

/// A workspace whose pointer is NULL while bytes are promised is a caller error.
pub(crate) fn check_workspace(op: &str, ws: Workspace) -> Result<()> {
    ensure!(!(ws.ptr.is_null() && ws.bytes > 0), BadParm, "{op}: workspace pointer is NULL but {} bytes are given", ws.bytes);
    Ok(())
}

/// Run a bound convolution: out = α·result + β·out. Nothing is written when a check fails.
pub fn run_bound(handle: &Handle, b: &Bound, choice: Choice, alpha: f64, beta: f64, ws: Workspace) -> Result<()> {
    check_workspace(b.op, ws)?;
    let fp = FusedProblem::conv(b.problem.clone());
    let key = (fp.key(), choice, ws.bytes);
    let inv = match search::resolved(handle, &key) {
        Some((_, inv)) => inv,
        None => {
            let solver = search::choose(handle, &fp, choice, ws.bytes).map_err(|e| e.context(b.op))?;
            let inv = handle.invoker(&fp, solver).map_err(|e| e.context(b.op))?;
            search::remember_resolved(handle, key, (solver, inv.clone()));
            inv
        }
    };
    crate::solver::invoke(&*inv, handle, &RunArgs { x: b.x, w: b.w, y: b.y, alpha, beta, workspace: ws.ptr, workspace_bytes: ws.bytes, ops: &[] })
}

/// y = α·conv(x, w) + β·y as the user states it (transpose mode included).
#[allow(clippy::too_many_arguments)]
pub fn forward(
    handle: &Handle,
    conv: &ConvDesc,
    x_desc: &TensorDesc,
    x: DevPtr,
    w_desc: &TensorDesc,
    w: DevPtr,
    y_desc: &TensorDesc,
    y: DevPtr,
    alpha: f64,
    beta: f64,
    choice: Choice,
    ws: Workspace,
) -> Result<()> {
    crate::log_cmd::conv("ConvolutionForward", conv, x_desc, w_desc, y_desc, 1);
    run_bound(handle, &bind_forward(conv, x_desc, x, w_desc, w, y_desc, y)?, choice, alpha, beta, ws)
}

/// dx = α·conv_bwd_data(dy, w) + β·dx as the user states it.
#[allow(clippy::too_many_arguments)]
pub fn backward_data(
    handle: &Handle,
    conv: &ConvDesc,
    dy_desc: &TensorDesc,
    dy: DevPtr,
    w_desc: &TensorDesc,
    w: DevPtr,
    dx_desc: &TensorDesc,
    dx: DevPtr,
    alpha: f64,
    beta: f64,
    choice: Choice,
    ws: Workspace,
) -> Result<()> {
    crate::log_cmd::conv("ConvolutionBackwardData", conv, dx_desc, w_desc, dy_desc, 2);
    run_bound(handle, &bind_backward_data(conv, dy_desc, dy, w_desc, w, dx_desc, dx)?, choice, alpha, beta, ws)
}

/// dw = α·conv_bwd_weights(x, dy) + β·dw as the user states it.
#[allow(clippy::too_many_arguments)]
pub fn backward_weights(
    handle: &Handle,
    conv: &ConvDesc,
    dy_desc: &TensorDesc,
    dy: DevPtr,
    x_desc: &TensorDesc,
    x: DevPtr,
    dw_desc: &TensorDesc,
    dw: DevPtr,
    alpha: f64,
    beta: f64,
    choice: Choice,
    ws: Workspace,
) -> Result<()> {
    crate::log_cmd::conv("ConvolutionBackwardWeights", conv, x_desc, dw_desc, dy_desc, 4);
    run_bound(handle, &bind_backward_weights(conv, dy_desc, dy, x_desc, x, dw_desc, dw)?, choice, alpha, beta, ws)
}
