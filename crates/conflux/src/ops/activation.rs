//! `miopenActivationForward` / `miopenActivationBackward` as one-op problems.

use super::{elementwise_views, run};
use crate::activation::ActivationDesc;
use crate::error::Result;
use crate::problem::{EpiOp, FusedKind, FusedProblem, OpArg};
use crate::handle::Handle;
use crate::memory::DevPtr;
use crate::tensor::TensorDesc;
use crate::ensure;

/// y = f(x). x and y need equal lengths and types; their strides may differ.
pub fn activation_forward(handle: &Handle, act: &ActivationDesc, x_desc: &TensorDesc, x: DevPtr, y_desc: &TensorDesc, y: DevPtr) -> Result<()> {
    ensure!(!x.is_null(), BadParm, "activation forward: x pointer is NULL");
    ensure!(!y.is_null(), BadParm, "activation forward: y pointer is NULL");
    ensure!(
        x_desc.lens() == y_desc.lens() && x_desc.dtype() == y_desc.dtype(),
        BadParm,
        "activation forward: x ({}) and y ({}) need the same lengths and type",
        x_desc.key(),
        y_desc.key()
    );
    let [x_desc, y_desc] = elementwise_views("activation forward", [x_desc, y_desc])?;
    let problem = FusedProblem { kind: FusedKind::Pointwise { x: x_desc, y: y_desc, ops: vec![EpiOp::Activation { mode: act.mode }] } };
    run(handle, &problem, x, y, &[OpArg::Activation { alpha: act.alpha, beta: act.beta, gamma: act.gamma }])
}

/// dx = f'(dy, x, y). y and x (the forward output and input) are read with dy's
/// descriptor, so they must equal it; dx needs dy's lengths and type.
#[allow(clippy::too_many_arguments)]
pub fn activation_backward(
    handle: &Handle,
    act: &ActivationDesc,
    y_desc: &TensorDesc,
    y: DevPtr,
    dy_desc: &TensorDesc,
    dy: DevPtr,
    x_desc: &TensorDesc,
    x: DevPtr,
    dx_desc: &TensorDesc,
    dx: DevPtr,
) -> Result<()> {
    for (name, p) in [("y", y), ("dy", dy), ("x", x), ("dx", dx)] {
        ensure!(!p.is_null(), BadParm, "activation backward: {name} pointer is NULL");
    }
    for (name, d) in [("y", y_desc), ("x", x_desc)] {
        ensure!(
            d == dy_desc,
            BadParm,
            "activation backward: {name} ({}) must have dy's descriptor ({})",
            d.key(),
            dy_desc.key()
        );
    }
    ensure!(
        dx_desc.lens() == dy_desc.lens() && dx_desc.dtype() == dy_desc.dtype(),
        BadParm,
        "activation backward: dx ({}) and dy ({}) need the same lengths and type",
        dx_desc.key(),
        dy_desc.key()
    );
    let [dy_desc, dx_desc] = elementwise_views("activation backward", [dy_desc, dx_desc])?;
    let problem = FusedProblem { kind: FusedKind::ActivationBackward { dy: dy_desc, dx: dx_desc, mode: act.mode } };
    let arg = OpArg::ActivationBackward { y, x, alpha: act.alpha, beta: act.beta, gamma: act.gamma };
    run(handle, &problem, dy, dx, &[arg])
}
