//! `miopenSoftmaxForward(_V2)` / `miopenSoftmaxBackward(_V2)`. Every check happens before
//! anything runs, so a refused call writes nothing.

use super::run_with;
use crate::ensure;
use crate::error::Result;
use crate::handle::Handle;
use crate::memory::DevPtr;
use crate::problem::{FusedKind, FusedProblem, LayerOp};
use crate::softmax::{SoftmaxAlgorithm, SoftmaxMode};
use crate::solver::RunArgs;
use crate::tensor::TensorDesc;

fn check_same(op: &str, descs: &[(&str, &TensorDesc)]) -> Result<()> {
    let first = descs[0].1;
    ensure!(first.dtype().is_compute_type(), BadParm, "{op}: element type {:?} is not a floating-point type", first.dtype());
    ensure!((2..=5).contains(&first.rank()), BadParm, "{op}: {}-D tensors; softmax takes 2-D to 5-D (N, C, spatial)", first.rank());
    for (name, d) in descs {
        ensure!(
            d.lens() == first.lens() && d.dtype() == first.dtype(),
            BadParm,
            "{op}: {name} ({}) needs {}'s lengths and type ({})",
            d.key(),
            descs[0].0,
            first.key()
        );
    }
    Ok(())
}

/// y = α·softmax(x) + β·y over each image (Instance) or each pixel's channels (Channel).
#[allow(clippy::too_many_arguments)]
pub fn softmax_forward(
    handle: &Handle,
    algo: SoftmaxAlgorithm,
    mode: SoftmaxMode,
    (alpha, beta): (f64, f64),
    x_desc: &TensorDesc,
    x: DevPtr,
    y_desc: &TensorDesc,
    y: DevPtr,
) -> Result<()> {
    const OP: &str = "softmax forward";
    ensure!(!x.is_null(), BadParm, "{OP}: x pointer is NULL");
    ensure!(!y.is_null(), BadParm, "{OP}: y pointer is NULL");
    check_same(OP, &[("x", x_desc), ("y", y_desc)])?;
    let op = LayerOp::SoftmaxForward { x: x_desc.clone(), y: y_desc.clone(), algo, mode };
    let args = RunArgs { x, w: DevPtr::NULL, y, alpha, beta, workspace: DevPtr::NULL, workspace_bytes: 0, ops: &[] };
    run_with(handle, &FusedProblem { kind: FusedKind::Layer(op) }, &args)
}

/// dx = α·grad + β·dx from the forward output y and its gradient dy.
#[allow(clippy::too_many_arguments)]
pub fn softmax_backward(
    handle: &Handle,
    algo: SoftmaxAlgorithm,
    mode: SoftmaxMode,
    (alpha, beta): (f64, f64),
    y_desc: &TensorDesc,
    y: DevPtr,
    dy_desc: &TensorDesc,
    dy: DevPtr,
    dx_desc: &TensorDesc,
    dx: DevPtr,
) -> Result<()> {
    const OP: &str = "softmax backward";
    for (name, p) in [("y", y), ("dy", dy), ("dx", dx)] {
        ensure!(!p.is_null(), BadParm, "{OP}: {name} pointer is NULL");
    }
    check_same(OP, &[("dy", dy_desc), ("y", y_desc), ("dx", dx_desc)])?;
    let op = LayerOp::SoftmaxBackward { y: y_desc.clone(), dy: dy_desc.clone(), dx: dx_desc.clone(), algo, mode };
    let args = RunArgs { x: dy, w: y, y: dx, alpha, beta, workspace: DevPtr::NULL, workspace_bytes: 0, ops: &[] };
    run_with(handle, &FusedProblem { kind: FusedKind::Layer(op) }, &args)
}
