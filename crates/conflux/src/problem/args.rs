//! Per-execute arguments of each op: pointers and scalars. Changing them never recompiles.

use crate::memory::DevPtr;

/// Arguments of one op, set per op handle (`miopenSetOpArgs*`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum OpArg {
    /// Convolution forward: weights; α scales the convolution, β the old output (conflux
    /// honors both; MIOpen stores them and mostly ignores them).
    Conv { w: DevPtr, alpha: f64, beta: f64 },
    Bias { b: DevPtr },
    Activation { alpha: f64, beta: f64, gamma: f64 },
    /// `y` is the activation's forward output; `x` its forward input (conflux extension:
    /// MIOpen's `reserved` argument), needed alone for modes whose derivative reads x.
    ActivationBackward { y: DevPtr, x: DevPtr, alpha: f64, beta: f64, gamma: f64 },
    BnInference { scale: DevPtr, bias: DevPtr, mean: DevPtr, var: DevPtr, eps: f64 },
    BnForward {
        scale: DevPtr,
        bias: DevPtr,
        saved_mean: DevPtr,
        saved_inv_var: DevPtr,
        running_mean: DevPtr,
        running_var: DevPtr,
        exp_avg_factor: f64,
        eps: f64,
    },
    BnBackward {
        x: DevPtr,
        scale: DevPtr,
        bias: DevPtr,
        dscale: DevPtr,
        dbias: DevPtr,
        saved_mean: DevPtr,
        saved_inv_var: DevPtr,
        eps: f64,
    },
    /// Residual add `α·z`.
    AddTensor { z: DevPtr, alpha: f64 },
}

impl OpArg {
    pub fn kind_name(&self) -> &'static str {
        match self {
            OpArg::Conv { .. } => "convolution forward",
            OpArg::Bias { .. } => "bias forward",
            OpArg::Activation { .. } => "activation forward",
            OpArg::ActivationBackward { .. } => "activation backward",
            OpArg::BnInference { .. } => "batch-norm inference",
            OpArg::BnForward { .. } => "batch-norm forward training",
            OpArg::BnBackward { .. } => "batch-norm backward",
            OpArg::AddTensor { .. } => "tensor add",
        }
    }
}

/// `miopenOperatorArgs_t`: arguments indexed by op position in the plan.
#[derive(Clone, Debug, Default)]
pub struct OpArgs {
    pub(crate) args: Vec<Option<OpArg>>,
}

impl OpArgs {
    pub fn new() -> OpArgs { OpArgs::default() }
    /// Set the arguments of the op at `index` (the plan checks the kind on execute, and the
    /// C ABI checks it when setting).
    pub fn set(&mut self, index: usize, arg: OpArg) {
        if self.args.len() <= index {
            self.args.resize(index + 1, None);
        }
        self.args[index] = Some(arg);
    }
    pub fn get(&self, index: usize) -> Option<&OpArg> {
        self.args.get(index).and_then(|a| a.as_ref())
    }
}
