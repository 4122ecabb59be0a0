//! Running convolutions through the solver machinery (the core of MIOpen's immediate mode;
//! Find and the find-db build on this). Pointers are in the user's roles; transpose problems
//! are mapped onto the normal convolution here.

use super::{ConvDesc, ConvProblem};
use crate::error::{Error, Result};
use crate::fusion::FusedProblem;
use crate::handle::Handle;
use crate::memory::DevPtr;
use crate::solver::{find_by_id, select_first, RunArgs, Solver};
use crate::tensor::TensorDesc;
use crate::types::{ConvMode, Direction};
use crate::ensure;

/// Workspace handed to a convolution.
#[derive(Clone, Copy, Debug, Default)]
pub struct Workspace {
    pub ptr: DevPtr,
    pub bytes: usize,
}

/// The solver for `problem`: the given solution id, else the first applicable one.
pub fn choose_solver(handle: &Handle, problem: &FusedProblem, solution: Option<u64>) -> Result<&'static dyn Solver> {
    match solution {
        None => select_first(problem, handle, None),
        Some(id) => {
            let s = find_by_id(id).ok_or_else(|| Error::bad_parm(format!("solution id {id} does not exist")))?;
            ensure!(s.device() == handle.device_kind(), BadParm, "solution {id} ({}) is for another device", s.name());
            s.check(problem, handle).map_err(|why| Error::bad_parm(format!("solution {id} ({}) does not apply: {why}", s.name())))?;
            Ok(s)
        }
    }
}

/// Run the normal-convolution problem with tensors in normal roles (x, w, y).
#[allow(clippy::too_many_arguments)]
pub fn run_problem(
    handle: &Handle,
    problem: &ConvProblem,
    solution: Option<u64>,
    x: DevPtr,
    w: DevPtr,
    y: DevPtr,
    alpha: f64,
    beta: f64,
    ws: Workspace,
) -> Result<()> {
    for (name, p) in [("x", x), ("w", w), ("y", y)] {
        ensure!(!p.is_null(), BadParm, "convolution: {name} pointer is NULL");
    }
    let fp = FusedProblem::conv(problem.clone());
    let solver = choose_solver(handle, &fp, solution)?;
    let need = solver.workspace_bytes(&fp);
    ensure!(
        ws.bytes >= need && (need == 0 || !ws.ptr.is_null()),
        BadParm,
        "convolution: solver {} needs {need} workspace bytes, {} given",
        solver.name(),
        ws.bytes
    );
    let inv = handle.invoker(&fp, solver)?;
    inv.run(handle, &RunArgs { x, w, y, alpha, beta, workspace: ws.ptr, workspace_bytes: ws.bytes, ops: &[] })
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
    solution: Option<u64>,
    ws: Workspace,
) -> Result<()> {
    let p = ConvProblem::forward(conv, x_desc, w_desc, y_desc)?;
    let (nx, ny) = if conv.mode() == ConvMode::Transpose { (y, x) } else { (x, y) };
    debug_assert_eq!(p.direction == Direction::BackwardData, conv.mode() == ConvMode::Transpose);
    run_problem(handle, &p, solution, nx, w, ny, alpha, beta, ws)
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
    solution: Option<u64>,
    ws: Workspace,
) -> Result<()> {
    let p = ConvProblem::backward_data(conv, dy_desc, w_desc, dx_desc)?;
    // Normal: x = dx, y = dy. Transpose: the problem is a normal forward with x = dy, y = dx.
    let (nx, ny) = if conv.mode() == ConvMode::Transpose { (dy, dx) } else { (dx, dy) };
    run_problem(handle, &p, solution, nx, w, ny, alpha, beta, ws)
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
    solution: Option<u64>,
    ws: Workspace,
) -> Result<()> {
    let p = ConvProblem::backward_weights(conv, dy_desc, x_desc, dw_desc)?;
    // Transpose swaps the roles of x and dy.
    let (nx, ny) = if conv.mode() == ConvMode::Transpose { (dy, x) } else { (x, dy) };
    run_problem(handle, &p, solution, nx, dw, ny, alpha, beta, ws)
}
