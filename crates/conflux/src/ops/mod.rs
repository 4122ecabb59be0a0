//! Single operations outside fusion plans: MIOpen's activation and batch-normalization calls
//! (reference doc §1d, §1e), and the tensor helpers of §1b. Each runs as a one-op fused problem through the same solver
//! registry and handle invoker cache as fusion plans, so every backend that fuses an op also
//! runs it alone, and a repeated call never rebuilds.

mod activation;
mod batchnorm;
mod tensor;

pub use activation::{activation_backward, activation_forward};
pub use batchnorm::{bn_backward, bn_forward_inference, bn_forward_training, BnBackwardArgs, BnInferenceArgs, BnTrainingArgs};
pub use tensor::{op_tensor, scale_tensor, set_tensor, transform_tensor};

use crate::error::Result;
use crate::problem::{FusedProblem, OpArg};
use crate::handle::Handle;
use crate::memory::DevPtr;
use crate::search::first_applicable;
use crate::solver::RunArgs;

/// Run `problem` with plan input `x`, plan output `y` and the ops' arguments.
fn run(handle: &Handle, problem: &FusedProblem, x: DevPtr, y: DevPtr, ops: &[OpArg]) -> Result<()> {
    let solver = first_applicable(handle, problem, None)?;
    let invoker = handle.invoker(problem, solver)?;
    let args = RunArgs { x, w: DevPtr::NULL, y, alpha: 1.0, beta: 0.0, workspace: DevPtr::NULL, workspace_bytes: 0, ops };
    crate::solver::invoke(&*invoker, handle, &args)
}
