//! Run-time arguments of the non-convolution problems, checked and resolved once for every
//! backend: which pointers must be given, which are optional, and what their absence means.

use crate::activation::ActivationDesc;
use crate::error::{Error, Result};
use super::OpArg;
use crate::memory::DevPtr;
use crate::types::ActivationMode;

/// The raw address of a required pointer, or BadParm naming the op and the argument.
pub(crate) fn need_ptr(p: DevPtr, what: &str, op: usize) -> Result<u64> {
    if p.is_null() {
        Err(Error::bad_parm(format!("op {op}: {what} pointer is NULL")))
    } else {
        Ok(p.0)
    }
}

/// An activation fused after BN (forward) or before it in math order (backward), with the
/// forward output pointer of an activation-backward op (0 = recompute it).
pub(crate) fn fused_activation(mode: Option<ActivationMode>, arg: Option<&OpArg>, at: usize) -> Result<Option<(ActivationDesc, u64)>> {
    let Some(mode) = mode else { return Ok(None) };
    match arg {
        Some(OpArg::Activation { alpha, beta, gamma }) => Ok(Some((ActivationDesc::new(mode, *alpha, *beta, *gamma), 0))),
        Some(OpArg::ActivationBackward { y, alpha, beta, gamma, .. }) => Ok(Some((ActivationDesc::new(mode, *alpha, *beta, *gamma), y.0))),
        Some(other) => Err(Error::bad_parm(format!("op {at}: arguments of a {} op given for an activation op", other.kind_name()))),
        None => Err(Error::bad_parm(format!("op {at}: activation arguments missing"))),
    }
}

/// Activation backward alone: the activation and its forward input x / output y (either
/// may be 0 when the mode does not need it; y = 0 means recompute it from x).
pub(crate) struct ActBwd {
    pub act: ActivationDesc,
    pub x: u64,
    pub y: u64,
}

pub(crate) fn activation_backward(mode: ActivationMode, ops: &[OpArg]) -> Result<ActBwd> {
    let Some(OpArg::ActivationBackward { y, x, alpha, beta, gamma }) = ops.first() else {
        return Err(Error::bad_parm("op 0: activation backward arguments missing"));
    };
    let act = ActivationDesc::new(mode, *alpha, *beta, *gamma);
    if act.backward_needs_x() && x.is_null() {
        return Err(Error::bad_parm(format!("op 0: activation backward of {mode:?} needs the forward input x (the `reserved` argument)")));
    }
    if y.is_null() && x.is_null() {
        return Err(Error::bad_parm("op 0: activation backward needs the forward output y"));
    }
    Ok(ActBwd { act, x: x.0, y: y.0 })
}

/// BN forward training: Float parameter pointers (0 = not requested) and scalars. Running
/// statistics are only passed on when the op was created with `running`.
pub(crate) struct BnTrain {
    pub scale: u64,
    pub bias: u64,
    pub saved_mean: u64,
    pub saved_inv_var: u64,
    pub running_mean: u64,
    pub running_var: u64,
    pub exp_avg: f64,
    pub eps: f64,
    pub act: Option<ActivationDesc>,
}

pub(crate) fn bn_train(running: bool, act: Option<ActivationMode>, ops: &[OpArg]) -> Result<BnTrain> {
    let Some(OpArg::BnForward { scale, bias, saved_mean, saved_inv_var, running_mean, running_var, exp_avg_factor, eps }) = ops.first() else {
        return Err(Error::bad_parm("op 0: batch-norm forward training arguments missing"));
    };
    if running && (running_mean.is_null() || running_var.is_null()) {
        return Err(Error::bad_parm("op 0: running mean/variance requested at op creation but NULL"));
    }
    Ok(BnTrain {
        scale: need_ptr(*scale, "bn scale", 0)?,
        bias: need_ptr(*bias, "bn bias", 0)?,
        saved_mean: saved_mean.0,
        saved_inv_var: saved_inv_var.0,
        running_mean: if running { running_mean.0 } else { 0 },
        running_var: if running { running_var.0 } else { 0 },
        exp_avg: *exp_avg_factor,
        eps: *eps,
        act: fused_activation(act, ops.get(1), 1)?.map(|(a, _)| a),
    })
}

/// BN backward (+ activation backward): pointers of the forward input, parameters,
/// gradients (0 = not requested) and saved statistics (0 = recompute with eps).
pub(crate) struct BnBwd {
    pub x: u64,
    pub scale: u64,
    pub bias: u64,
    pub dscale: u64,
    pub dbias: u64,
    pub saved_mean: u64,
    pub saved_inv_var: u64,
    pub eps: f64,
    /// The fused activation and its forward output (0 = recompute it).
    pub act: Option<(ActivationDesc, u64)>,
}

impl BnBwd {
    pub fn has_saved(&self) -> bool {
        self.saved_mean != 0 && self.saved_inv_var != 0
    }
}

pub(crate) fn bn_backward(act: Option<ActivationMode>, ops: &[OpArg]) -> Result<BnBwd> {
    let Some(OpArg::BnBackward { x, scale, bias, dscale, dbias, saved_mean, saved_inv_var, eps }) = ops.first() else {
        return Err(Error::bad_parm("op 0: batch-norm backward arguments missing"));
    };
    let act = fused_activation(act, ops.get(1), 1)?;
    if act.is_some() && bias.is_null() {
        return Err(Error::bad_parm("op 0: bn bias needed to recompute the activation input"));
    }
    Ok(BnBwd {
        x: need_ptr(*x, "bn forward input x", 0)?,
        scale: need_ptr(*scale, "bn scale", 0)?,
        bias: bias.0,
        dscale: dscale.0,
        dbias: dbias.0,
        saved_mean: saved_mean.0,
        saved_inv_var: saved_inv_var.0,
        eps: *eps,
        act,
    })
}
