//! Batch normalization outside fusion (`miopenBatchNormalization*`) as one-op problems.
//! Parameter descriptors must have the derived shape (`derive_bn_desc`), packed.

use super::run;
use crate::batchnorm::derive_bn_desc;
use crate::error::Result;
use crate::problem::{EpiOp, FusedKind, FusedProblem, OpArg};
use crate::handle::Handle;
use crate::memory::DevPtr;
use crate::tensor::TensorDesc;
use crate::types::{BnMode, DataType};
use crate::ensure;

/// Forward-training pointers and scalars. Running statistics are updated only when both
/// running pointers are given, saved statistics written only when both saved pointers are.
#[derive(Clone, Copy, Debug, Default)]
pub struct BnTrainingArgs {
    pub scale: DevPtr,
    pub bias: DevPtr,
    pub running_mean: DevPtr,
    pub running_var: DevPtr,
    pub saved_mean: DevPtr,
    pub saved_inv_var: DevPtr,
    pub exp_avg_factor: f64,
    pub eps: f64,
}

/// Inference pointers. With either estimate NULL, batch statistics are used (MIOpen's rule).
#[derive(Clone, Copy, Debug, Default)]
pub struct BnInferenceArgs {
    pub scale: DevPtr,
    pub bias: DevPtr,
    pub mean: DevPtr,
    pub var: DevPtr,
    pub eps: f64,
}

/// Backward pointers. Saved statistics are used when both are given, else recomputed.
#[derive(Clone, Copy, Debug, Default)]
pub struct BnBackwardArgs {
    pub scale: DevPtr,
    pub dscale: DevPtr,
    pub dbias: DevPtr,
    pub saved_mean: DevPtr,
    pub saved_inv_var: DevPtr,
    pub eps: f64,
}

/// Both pointers, or neither when either is NULL.
fn pair(a: DevPtr, b: DevPtr) -> (DevPtr, DevPtr) {
    if a.is_null() || b.is_null() { (DevPtr::NULL, DevPtr::NULL) } else { (a, b) }
}

/// x and y: same lengths and type, 4-D or 5-D; each parameter descriptor of the derived
/// shape, packed, of one type. Returns the parameters' type.
fn check(op: &str, mode: BnMode, x: &TensorDesc, y: &TensorDesc, params: &[&TensorDesc]) -> Result<DataType> {
    ensure!(
        x.lens() == y.lens() && x.dtype() == y.dtype(),
        BadParm,
        "{op}: input ({}) and output ({}) need the same lengths and type",
        x.key(),
        y.key()
    );
    let want = derive_bn_desc(x, mode).map_err(|e| e.context(op))?;
    let dtype = params.first().map(|p| p.dtype()).unwrap_or(DataType::Float);
    for p in params {
        ensure!(
            p.lens() == want.lens() && p.is_packed(),
            BadParm,
            "{op}: parameter descriptor {} must be packed with lengths {:?} for {mode:?} mode",
            p.key(),
            want.lens()
        );
        ensure!(p.dtype() == dtype, BadParm, "{op}: parameter descriptors mix types {:?} and {:?}", dtype, p.dtype());
    }
    Ok(dtype)
}

fn need(p: DevPtr, op: &str, name: &str) -> Result<()> {
    ensure!(!p.is_null(), BadParm, "{op}: {name} pointer is NULL");
    Ok(())
}

/// `miopenBatchNormalizationForwardTraining(_V2)`: y = γ·(x − μ)·invStd + β with batch
/// statistics. Parameters are Float.
#[allow(clippy::too_many_arguments)]
pub fn bn_forward_training(
    handle: &Handle,
    mode: BnMode,
    x_desc: &TensorDesc,
    x: DevPtr,
    y_desc: &TensorDesc,
    y: DevPtr,
    params: &[&TensorDesc],
    a: &BnTrainingArgs,
) -> Result<()> {
    let op = "batch-norm forward training";
    for (name, p) in [("x", x), ("y", y), ("scale", a.scale), ("bias", a.bias)] {
        need(p, op, name)?;
    }
    let dtype = check(op, mode, x_desc, y_desc, params)?;
    ensure!(dtype == DataType::Float, BadParm, "{op}: parameters must be Float, got {dtype:?}");
    let (running_mean, running_var) = pair(a.running_mean, a.running_var);
    let (saved_mean, saved_inv_var) = pair(a.saved_mean, a.saved_inv_var);
    let running = !running_mean.is_null();
    let problem = FusedProblem { kind: FusedKind::BnTrain { x: x_desc.clone(), y: y_desc.clone(), mode, act: None, running } };
    let arg = OpArg::BnForward {
        scale: a.scale,
        bias: a.bias,
        saved_mean,
        saved_inv_var,
        running_mean,
        running_var,
        exp_avg_factor: a.exp_avg_factor,
        eps: a.eps,
    };
    run(handle, &problem, x, y, &[arg])
}

/// `miopenBatchNormalizationForwardInference(_V2)`: y = γ·(x − μ̂)/√(σ̂² + ε) + β; with
/// either estimate NULL, the batch statistics replace them (nothing else is written).
#[allow(clippy::too_many_arguments)]
pub fn bn_forward_inference(
    handle: &Handle,
    mode: BnMode,
    x_desc: &TensorDesc,
    x: DevPtr,
    y_desc: &TensorDesc,
    y: DevPtr,
    params: &[&TensorDesc],
    a: &BnInferenceArgs,
) -> Result<()> {
    let op = "batch-norm forward inference";
    for (name, p) in [("x", x), ("y", y), ("scale", a.scale), ("bias", a.bias)] {
        need(p, op, name)?;
    }
    if a.mean.is_null() || a.var.is_null() {
        let t = BnTrainingArgs { scale: a.scale, bias: a.bias, eps: a.eps, ..Default::default() };
        return bn_forward_training(handle, mode, x_desc, x, y_desc, y, params, &t);
    }
    let dtype = check(op, mode, x_desc, y_desc, params)?;
    ensure!(dtype.is_compute_type(), BadParm, "{op}: parameter type {dtype:?} not supported");
    let problem = FusedProblem {
        kind: FusedKind::Pointwise { x: x_desc.clone(), y: y_desc.clone(), ops: vec![EpiOp::BnInference { mode, dtype }] },
    };
    let arg = OpArg::BnInference { scale: a.scale, bias: a.bias, mean: a.mean, var: a.var, eps: a.eps };
    run(handle, &problem, x, y, &[arg])
}

/// `miopenBatchNormalizationBackward(_V2)`: dx, dγ, dβ from dy and the forward input x (read
/// with dy's descriptor, so it must equal it). Parameters are Float.
#[allow(clippy::too_many_arguments)]
pub fn bn_backward(
    handle: &Handle,
    mode: BnMode,
    x_desc: &TensorDesc,
    x: DevPtr,
    dy_desc: &TensorDesc,
    dy: DevPtr,
    dx_desc: &TensorDesc,
    dx: DevPtr,
    params: &[&TensorDesc],
    a: &BnBackwardArgs,
) -> Result<()> {
    let op = "batch-norm backward";
    for (name, p) in [("x", x), ("dy", dy), ("dx", dx), ("scale", a.scale)] {
        need(p, op, name)?;
    }
    ensure!(x_desc == dy_desc, BadParm, "{op}: x ({}) must have dy's descriptor ({})", x_desc.key(), dy_desc.key());
    let dtype = check(op, mode, dy_desc, dx_desc, params)?;
    ensure!(dtype == DataType::Float, BadParm, "{op}: parameters must be Float, got {dtype:?}");
    let (saved_mean, saved_inv_var) = pair(a.saved_mean, a.saved_inv_var);
    let problem = FusedProblem { kind: FusedKind::BnBackward { dy: dy_desc.clone(), dx: dx_desc.clone(), mode, act: None } };
    let arg = OpArg::BnBackward {
        x,
        scale: a.scale,
        bias: DevPtr::NULL,
        dscale: a.dscale,
        dbias: a.dbias,
        saved_mean,
        saved_inv_var,
        eps: a.eps,
    };
    run(handle, &problem, dy, dx, &[arg])
}
