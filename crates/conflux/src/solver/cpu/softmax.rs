//! CPU softmax, forward and backward (Fast, Accurate, Log; Instance and Channel modes).

use super::pooling::{layer, layer_ptrs};
use crate::backend::cpu::layers;
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::error::{Error, Result};
use crate::problem::{FusedProblem, LayerOp};
use crate::solver::{BuildContext, Invoker, RunArgs, Solver};
use crate::types::ConvAlgorithm;
use std::sync::Arc;

pub struct CpuSoftmax;

struct SoftmaxInvoker {
    op: LayerOp,
}

impl Solver for CpuSoftmax {
    fn name(&self) -> &'static str { "CpuSoftmax" }
    fn solution_id(&self) -> u64 { 16 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Direct }
    fn device(&self) -> DeviceKind { DeviceKind::Cpu }

    fn check(&self, problem: &FusedProblem, _device: &DeviceInfo) -> std::result::Result<(), String> {
        match layer(problem) {
            Some(op) if op.is_softmax() => Ok(()),
            _ => Err("not a softmax problem".into()),
        }
    }

    fn estimate_ms(&self, _problem: &FusedProblem) -> f64 { 1.0 }

    fn build(&self, problem: &FusedProblem, _ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let op = layer(problem).filter(|op| op.is_softmax()).ok_or_else(|| Error::internal("CpuSoftmax: not a softmax problem"))?;
        Ok(Arc::new(SoftmaxInvoker { op: op.clone() }))
    }
}

impl Invoker for SoftmaxInvoker {
    fn run(&self, _ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let p = layer_ptrs(a);
        match &self.op {
            LayerOp::SoftmaxForward { x, y, algo, mode } => layers::softmax::forward(*algo, *mode, x, y, &p),
            LayerOp::SoftmaxBackward { y, dy, dx, algo, mode } => layers::softmax::backward(*algo, *mode, y, dy, dx, &p),
            _ => Err(Error::internal("CpuSoftmax: not a softmax problem")),
        }
    }
}
