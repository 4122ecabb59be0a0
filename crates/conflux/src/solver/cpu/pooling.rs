//! CPU pooling, forward and backward (max, average exclusive and inclusive; 2-D and 3-D; any
//! strides, channels-last taken channels-innermost).

use crate::backend::cpu::layers::{self, LayerPtrs};
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::error::{Error, Result};
use crate::problem::{FusedKind, FusedProblem, LayerOp};
use crate::solver::{BuildContext, Invoker, RunArgs, Solver};
use crate::types::ConvAlgorithm;
use std::sync::Arc;

pub struct CpuPooling;

struct PoolingInvoker {
    op: LayerOp,
}

/// The layer of a problem, if it is one.
pub(crate) fn layer(problem: &FusedProblem) -> Option<&LayerOp> {
    match &problem.kind {
        FusedKind::Layer(op) => Some(op),
        _ => None,
    }
}

/// The pointers and scalars of a layer run (see `problem/layer.rs` for the roles).
pub(crate) fn layer_ptrs(a: &RunArgs) -> LayerPtrs {
    LayerPtrs { src: a.x.0, aux: a.w.0, dst: a.y.0, index: a.workspace.0, alpha: a.alpha as f32, beta: a.beta as f32 }
}

impl Solver for CpuPooling {
    fn name(&self) -> &'static str { "CpuPooling" }
    fn solution_id(&self) -> u64 { 15 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Direct }
    fn device(&self) -> DeviceKind { DeviceKind::Cpu }

    fn check(&self, problem: &FusedProblem, _device: &DeviceInfo) -> std::result::Result<(), String> {
        match layer(problem) {
            Some(op) if op.is_pooling() => Ok(()),
            _ => Err("not a pooling problem".into()),
        }
    }

    fn estimate_ms(&self, _problem: &FusedProblem) -> f64 { 1.0 }

    fn build(&self, problem: &FusedProblem, _ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let op = layer(problem).filter(|op| op.is_pooling()).ok_or_else(|| Error::internal("CpuPooling: not a pooling problem"))?;
        Ok(Arc::new(PoolingInvoker { op: op.clone() }))
    }
}

impl Invoker for PoolingInvoker {
    fn run(&self, _ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let p = layer_ptrs(a);
        match &self.op {
            LayerOp::PoolForward { x, y, geom, save_index } => layers::pooling::forward(x, y, geom, *save_index, &p),
            LayerOp::PoolBackward { dy, dx, geom } => layers::pooling::backward(dy, dx, geom, &p),
            _ => Err(Error::internal("CpuPooling: not a pooling problem")),
        }
    }
}
