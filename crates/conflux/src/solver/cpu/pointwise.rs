//! CPU solver for the plans without a convolution: pointwise chains (B, A, N-inference, Z in
//! any order), activation backward, BN forward training (+A), BN backward (+A backward).

use crate::solver::{Invoker, RunArgs, Solver};
use crate::problem::op_args;
use crate::backend::cpu::pointwise::bn::{self, BnBwdPtrs, BnTrainPtrs};
use crate::backend::cpu::pointwise::epilogue::CpuEpilogue;
use crate::backend::cpu::pointwise;
use crate::error::{Error, Result};
use crate::problem::{FusedKind, FusedProblem};
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::solver::BuildContext;
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

    fn check(&self, problem: &FusedProblem, _device: &DeviceInfo) -> Result<(), String> {
        match &problem.kind {
            FusedKind::Conv { .. } => Err("has a convolution".into()),
            FusedKind::Layer(_) => Err("a pooling or softmax layer".into()),
            _ => Ok(()),
        }
    }

    fn estimate_ms(&self, _problem: &FusedProblem) -> f64 { 1.0 }

    fn build(&self, problem: &FusedProblem, _ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        Ok(Arc::new(PointwiseInvoker { problem: problem.clone() }))
    }
}

impl Invoker for PointwiseInvoker {
    fn run(&self, _ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        match &self.problem.kind {
            FusedKind::Pointwise { x, y, ops } => {
                let epi = CpuEpilogue::new(ops, a.ops, y, 0)?;
                pointwise::chain(x, a.x.0, y, a.y.0, &epi);
            }
            FusedKind::ActivationBackward { dy, dx, mode } => {
                let r = op_args::activation_backward(*mode, a.ops)?;
                pointwise::activation_backward(&r.act, dy, a.x.0, dx, a.y.0, r.x, r.y);
            }
            FusedKind::BnTrain { x, y, mode, act, running } => {
                let r = op_args::bn_train(*running, *act, a.ops)?;
                let p = BnTrainPtrs {
                    x: a.x.0,
                    y: a.y.0,
                    scale: r.scale,
                    bias: r.bias,
                    saved_mean: r.saved_mean,
                    saved_inv_var: r.saved_inv_var,
                    running_mean: r.running_mean,
                    running_var: r.running_var,
                };
                bn::forward_training(x, y, *mode, &p, r.exp_avg, r.eps, r.act.as_ref());
            }
            FusedKind::BnBackward { dy, dx, mode, act } => {
                let r = op_args::bn_backward(*act, a.ops)?;
                let p = BnBwdPtrs {
                    dy: a.x.0,
                    dx: a.y.0,
                    x: r.x,
                    scale: r.scale,
                    bias: r.bias,
                    dscale: r.dscale,
                    dbias: r.dbias,
                    saved_mean: r.saved_mean,
                    saved_inv_var: r.saved_inv_var,
                    act_y: r.act.as_ref().map(|(_, y)| *y).unwrap_or(0),
                };
                bn::backward(dy, dx, *mode, &p, r.eps, r.act.as_ref().map(|(d, _)| d));
            }
            FusedKind::Conv { .. } | FusedKind::Layer(_) => return Err(Error::internal("CpuPointwise: not a pointwise problem")),
        }
        Ok(())
    }
}
