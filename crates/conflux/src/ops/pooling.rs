//! `miopenPoolingForward` / `miopenPoolingBackward`. Every check happens before anything runs,
//! so a refused call writes nothing.

use super::run_with;
use crate::ensure;
use crate::error::Result;
use crate::handle::Handle;
use crate::memory::DevPtr;
use crate::pooling::{PoolingDesc, PoolingMode};
use crate::problem::{FusedKind, FusedProblem, LayerOp};
use crate::solver::RunArgs;
use crate::tensor::TensorDesc;

/// The index workspace of a forward or backward pooling.
#[derive(Clone, Copy, Debug)]
pub struct PoolWorkspace {
    pub ptr: DevPtr,
    pub bytes: usize,
}

fn check_types(op: &str, descs: &[(&str, &TensorDesc)]) -> Result<()> {
    let dt = descs[0].1.dtype();
    ensure!(dt.is_compute_type(), BadParm, "{op}: element type {dt:?} is not a floating-point type");
    for (name, d) in descs {
        ensure!(d.dtype() == dt, BadParm, "{op}: {name} is {:?}, {} is {dt:?}", d.dtype(), descs[0].0);
    }
    Ok(())
}

fn check_output(op: &str, pool: &PoolingDesc, x: &TensorDesc, name: &str, y: &TensorDesc) -> Result<()> {
    let want = pool.output_lens(x)?;
    ensure!(
        y.lens() == want.as_slice(),
        BadParm,
        "{op}: {name} lengths {:?} are not the pooling output {want:?} of x {:?} (miopenGetPoolingNdForwardOutputDim)",
        y.lens(),
        x.lens()
    );
    Ok(())
}

/// y = α·pool(x) + β·y. With `do_backward`, max pooling writes each maximum's index to the
/// workspace (`PoolingDesc::workspace_bytes(y)` bytes); average pooling needs none.
#[allow(clippy::too_many_arguments)]
pub fn pooling_forward(
    handle: &Handle,
    pool: &PoolingDesc,
    (alpha, beta): (f64, f64),
    x_desc: &TensorDesc,
    x: DevPtr,
    y_desc: &TensorDesc,
    y: DevPtr,
    do_backward: bool,
    ws: PoolWorkspace,
) -> Result<()> {
    const OP: &str = "pooling forward";
    ensure!(!x.is_null(), BadParm, "{OP}: x pointer is NULL");
    ensure!(!y.is_null(), BadParm, "{OP}: y pointer is NULL");
    check_types(OP, &[("x", x_desc), ("y", y_desc)])?;
    check_output(OP, pool, x_desc, "y", y_desc)?;
    let save_index = do_backward && pool.mode == PoolingMode::Max;
    if save_index {
        pool.check_index_range(x_desc)?;
        let need = pool.workspace_bytes(y_desc);
        ensure!(!ws.ptr.is_null(), BadParm, "{OP}: max pooling with do_backward needs the index workspace ({need} bytes); it is NULL");
        ensure!(ws.bytes >= need, BadParm, "{OP}: the index workspace has {} bytes; {need} are needed (miopenPoolingGetWorkSpaceSizeV2)", ws.bytes);
    }
    let op = LayerOp::PoolForward { x: x_desc.clone(), y: y_desc.clone(), geom: pool.geom(), save_index };
    let workspace = if save_index { ws.ptr } else { DevPtr::NULL };
    let args = RunArgs { x, w: DevPtr::NULL, y, alpha, beta, workspace, workspace_bytes: if save_index { ws.bytes } else { 0 }, ops: &[] };
    run_with(handle, &FusedProblem { kind: FusedKind::Layer(op) }, &args)
}

/// dx = α·grad + β·dx. y and x are the forward output and input: their descriptors are
/// checked, their data is not read (max pooling reads the indices its forward saved, average
/// pooling needs nothing but dy).
#[allow(clippy::too_many_arguments)]
pub fn pooling_backward(
    handle: &Handle,
    pool: &PoolingDesc,
    (alpha, beta): (f64, f64),
    y_desc: &TensorDesc,
    dy_desc: &TensorDesc,
    dy: DevPtr,
    x_desc: &TensorDesc,
    dx_desc: &TensorDesc,
    dx: DevPtr,
    workspace: DevPtr,
) -> Result<()> {
    const OP: &str = "pooling backward";
    ensure!(!dy.is_null(), BadParm, "{OP}: dy pointer is NULL");
    ensure!(!dx.is_null(), BadParm, "{OP}: dx pointer is NULL");
    check_types(OP, &[("dy", dy_desc), ("y", y_desc), ("x", x_desc), ("dx", dx_desc)])?;
    ensure!(x_desc.lens() == dx_desc.lens(), BadParm, "{OP}: dx lengths {:?} differ from x lengths {:?}", dx_desc.lens(), x_desc.lens());
    check_output(OP, pool, x_desc, "y", y_desc)?;
    check_output(OP, pool, x_desc, "dy", dy_desc)?;
    let max = pool.mode == PoolingMode::Max;
    if max {
        pool.check_index_range(x_desc)?;
        ensure!(!workspace.is_null(), BadParm, "{OP}: max pooling reads the indices saved by a forward with do_backward; the workspace is NULL");
    }
    let op = LayerOp::PoolBackward { dy: dy_desc.clone(), dx: dx_desc.clone(), geom: pool.geom() };
    let workspace = if max { workspace } else { DevPtr::NULL };
    let args = RunArgs { x: dy, w: DevPtr::NULL, y: dx, alpha, beta, workspace, workspace_bytes: 0, ops: &[] };
    run_with(handle, &FusedProblem { kind: FusedKind::Layer(op) }, &args)
}
