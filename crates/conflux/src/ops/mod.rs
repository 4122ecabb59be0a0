//! Single operations outside fusion plans: MIOpen's activation and batch-normalization calls
//! (reference doc §1d, §1e), and the tensor helpers of §1b. Each runs as a one-op fused problem through the same solver
//! registry and handle invoker cache as fusion plans, so every backend that fuses an op also
//! runs it alone, and a repeated call never rebuilds.

mod activation;
mod batchnorm;
mod pooling;
mod softmax;
mod tensor;

pub use activation::{activation_backward, activation_forward};
pub use batchnorm::{bn_backward, bn_forward_inference, bn_forward_training, BnBackwardArgs, BnInferenceArgs, BnTrainingArgs};
pub use pooling::{pooling_backward, pooling_forward, PoolWorkspace};
pub use softmax::{softmax_backward, softmax_forward};
pub use tensor::{op_tensor, scale_tensor, set_tensor, transform_tensor};

use crate::ensure;
use crate::error::Result;
use crate::problem::{FusedProblem, OpArg};
use crate::handle::Handle;
use crate::memory::DevPtr;
use crate::search::first_applicable;
use crate::solver::RunArgs;
use crate::tensor::TensorDesc;

/// Run `problem` with plan input `x`, plan output `y` and the ops' arguments.
fn run(handle: &Handle, problem: &FusedProblem, x: DevPtr, y: DevPtr, ops: &[OpArg]) -> Result<()> {
    let solver = first_applicable(handle, problem, None)?;
    let invoker = handle.invoker(problem, solver)?;
    let args = RunArgs { x, w: DevPtr::NULL, y, alpha: 1.0, beta: 0.0, workspace: DevPtr::NULL, workspace_bytes: 0, ops };
    crate::solver::invoke(&*invoker, handle, &args)
}

/// Run `problem` with arguments laid out by the caller (the layers' roles: `problem/layer.rs`).
fn run_with(handle: &Handle, problem: &FusedProblem, args: &RunArgs) -> Result<()> {
    let solver = first_applicable(handle, problem, None)?;
    let invoker = handle.invoker(problem, solver)?;
    crate::solver::invoke(&*invoker, handle, args)
}

/// Element-wise operands (equal lengths) as the 4-D or 5-D tensors the pointwise paths index:
/// lower ranks gain trailing dimensions of length 1; higher ranks merge adjacent spatial
/// dimensions that are contiguous in every operand. A layout that cannot be merged is refused
/// rather than computed over a subset of the elements.
fn elementwise_views<const K: usize>(op: &str, descs: [&TensorDesc; K]) -> Result<[TensorDesc; K]> {
    let mut lens = descs[0].lens().to_vec();
    let mut strides: Vec<Vec<usize>> = descs.iter().map(|d| d.strides().to_vec()).collect();
    while lens.len() < 4 {
        lens.push(1);
        strides.iter_mut().for_each(|s| s.push(1));
    }
    // Merge dimension i + 1 into i (i ≥ 2: N and C keep their meaning) where every operand
    // steps over whole rows of it.
    let mut i = 2;
    while lens.len() > 5 && i + 1 < lens.len() {
        // A dimension of length 1 merges with anything (its stride never moves an offset).
        let (outer_one, inner_one) = (lens[i] == 1, lens[i + 1] == 1);
        if outer_one || inner_one || strides.iter().all(|s| s[i] == lens[i + 1] * s[i + 1]) {
            lens[i] *= lens[i + 1];
            lens.remove(i + 1);
            strides.iter_mut().for_each(|s| {
                if !inner_one {
                    s[i] = s[i + 1];
                }
                s.remove(i + 1);
            });
        } else {
            i += 1;
        }
    }
    ensure!(
        lens.len() <= 5,
        BadParm,
        "{op}: a {}-dim tensor whose dimensions past the second do not merge into three contiguous ones ({})",
        descs[0].rank(),
        descs[0].key()
    );
    let mut out = Vec::with_capacity(K);
    for (d, s) in descs.iter().zip(&strides) {
        out.push(TensorDesc::with_strides(d.dtype(), &lens, s)?);
    }
    Ok(out.try_into().unwrap_or_else(|_| unreachable!("one view per operand")))
}
