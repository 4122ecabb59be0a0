//! CPU solver for the plans without a convolution: pointwise chains (B, A, N-inference, Z in
//! any order), activation backward, BN forward training (+A), BN backward (+A backward).

use super::{Invoker, RunArgs, Solver};
use crate::activation::ActivationDesc;
use crate::backend::cpu::bn::{self, BnBwdPtrs, BnTrainPtrs};
use crate::backend::cpu::epilogue::{need_ptr, CpuEpilogue};
use crate::backend::cpu::pointwise;
use crate::error::{Error, Result};
use crate::fusion::{FusedKind, FusedProblem, OpArg};
use crate::handle::{DeviceKind, Handle};
use crate::types::ConvAlgorithm;
use std::sync::Arc;

pub struct CpuPointwise;

struct PointwiseInvoker {
    problem: FusedProblem,
}

impl Solver for CpuPointwise {
    fn name(&self) -> &'static str { "CpuPointwise" }
    fn solution_id(&self) -> u64 { 2 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Direct }
    fn device(&self) -> DeviceKind { DeviceKind::Cpu }

    fn check(&self, problem: &FusedProblem, _handle: &Handle) -> Result<(), String> {
        match &problem.kind {
            FusedKind::Conv { .. } => Err("has a convolution".into()),
            _ => Ok(()),
        }
    }

    fn estimate_ms(&self, _problem: &FusedProblem) -> f64 { 1.0 }

    fn build(&self, problem: &FusedProblem, _handle: &Handle) -> Result<Arc<dyn Invoker>> {
        Ok(Arc::new(PointwiseInvoker { problem: problem.clone() }))
    }
}

fn act_of(mode: Option<crate::types::ActivationMode>, arg: Option<&OpArg>, at: usize) -> Result<Option<(ActivationDesc, u64)>> {
    let Some(mode) = mode else { return Ok(None) };
    match arg {
        Some(OpArg::Activation { alpha, beta, gamma }) => Ok(Some((ActivationDesc::new(mode, *alpha, *beta, *gamma), 0))),
        Some(OpArg::ActivationBackward { y, alpha, beta, gamma, .. }) => {
            Ok(Some((ActivationDesc::new(mode, *alpha, *beta, *gamma), y.0)))
        }
        Some(other) => Err(Error::bad_parm(format!("op {at}: arguments of a {} op given for an activation op", other.kind_name()))),
        None => Err(Error::bad_parm(format!("op {at}: activation arguments missing"))),
    }
}

impl Invoker for PointwiseInvoker {
    fn run(&self, _handle: &Handle, a: &RunArgs) -> Result<()> {
        match &self.problem.kind {
            FusedKind::Pointwise { x, y, ops } => {
                let epi = CpuEpilogue::new(ops, a.ops, y, 0)?;
                pointwise::chain(x, a.x.0, y, a.y.0, &epi);
            }
            FusedKind::ActivationBackward { dy, dx, mode } => {
                let Some(OpArg::ActivationBackward { y, x, alpha, beta, gamma }) = a.ops.first() else {
                    return Err(Error::bad_parm("op 0: activation backward arguments missing"));
                };
                let act = ActivationDesc::new(*mode, *alpha, *beta, *gamma);
                if act.backward_needs_x() && x.is_null() {
                    return Err(Error::bad_parm(format!(
                        "op 0: activation backward of {mode:?} needs the forward input x (the `reserved` argument)"
                    )));
                }
                if y.is_null() && x.is_null() {
                    return Err(Error::bad_parm("op 0: activation backward needs the forward output y"));
                }
                pointwise::activation_backward(&act, dy, a.x.0, dx, a.y.0, x.0, y.0);
            }
            FusedKind::BnTrain { x, y, mode, act, running } => {
                let Some(OpArg::BnForward { scale, bias, saved_mean, saved_inv_var, running_mean, running_var, exp_avg_factor, eps }) =
                    a.ops.first()
                else {
                    return Err(Error::bad_parm("op 0: batch-norm forward training arguments missing"));
                };
                if *running && (running_mean.is_null() || running_var.is_null()) {
                    return Err(Error::bad_parm("op 0: running mean/variance requested at op creation but NULL"));
                }
                let act = act_of(*act, a.ops.get(1), 1)?;
                let p = BnTrainPtrs {
                    x: a.x.0,
                    y: a.y.0,
                    scale: need_ptr(*scale, "bn scale", 0)?,
                    bias: need_ptr(*bias, "bn bias", 0)?,
                    saved_mean: saved_mean.0,
                    saved_inv_var: saved_inv_var.0,
                    running_mean: if *running { running_mean.0 } else { 0 },
                    running_var: if *running { running_var.0 } else { 0 },
                };
                bn::forward_training(x, y, *mode, &p, *exp_avg_factor, *eps, act.as_ref().map(|(d, _)| d));
            }
            FusedKind::BnBackward { dy, dx, mode, act } => {
                let Some(OpArg::BnBackward { x, scale, bias, dscale, dbias, saved_mean, saved_inv_var, eps }) = a.ops.first() else {
                    return Err(Error::bad_parm("op 0: batch-norm backward arguments missing"));
                };
                let act = act_of(*act, a.ops.get(1), 1)?;
                let p = BnBwdPtrs {
                    dy: a.x.0,
                    dx: a.y.0,
                    x: need_ptr(*x, "bn forward input x", 0)?,
                    scale: need_ptr(*scale, "bn scale", 0)?,
                    bias: bias.0,
                    dscale: dscale.0,
                    dbias: dbias.0,
                    saved_mean: saved_mean.0,
                    saved_inv_var: saved_inv_var.0,
                    act_y: act.as_ref().map(|(_, y)| *y).unwrap_or(0),
                };
                if act.is_some() && p.bias == 0 {
                    return Err(Error::bad_parm("op 0: bn bias needed to recompute the activation input"));
                }
                bn::backward(dy, dx, *mode, &p, *eps, act.as_ref().map(|(d, _)| d));
            }
            FusedKind::Conv { .. } => return Err(Error::internal("CpuPointwise: convolution problem")),
        }
        Ok(())
    }
}
