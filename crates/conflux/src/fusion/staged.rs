//! Vertical plans that run as two chains through a scratch tensor t. MIOpen refuses both kinds.
//!
//! Prologues: per-channel ops placed before the convolution (BN inference, bias, activation,
//! tensor add, in any order), as a framework computes BN → ReLU → conv (pre-activation ResNet,
//! DenseNet). The padding the convolution reads is zeros of the transformed tensor. The
//! prologue runs as one pointwise pass x → t (packed, in x's layout family), then the
//! convolution and its epilogue read t. (Transforming tiles as the convolution kernels load
//! them, one kernel, is not written yet.)
//!
//! Convolution → batch-norm training (→ activation): batch statistics need the whole
//! convolution output, so the convolution writes t, then BN training (with its activation)
//! normalises t into y, saving the batch mean and inverse variance and updating the running
//! statistics as a BN-training plan does. (Accumulating the statistics in the convolution's
//! epilogue, which would save a pass over t, is not written yet.)

use super::horizontal::renumber;
use super::lower::lower;
use super::plan::{FusionOp, FusionOpKind};
use crate::conv_desc::output_desc_like;
use crate::error::{Error, Result};
use crate::problem::FusedProblem;
use crate::tensor::TensorDesc;
use crate::types::FusionDirection;

/// A vertical plan split before op `split_at`: ops before it map x → t, the rest t → y.
pub struct Staged {
    pub split_at: usize,
    pub t: TensorDesc,
    pub first: FusedProblem,
    pub second: FusedProblem,
}

/// The two-chain split of a vertical plan (a prologue, or a convolution then BN training),
/// None for plans that run as one chain, UnsupportedOp for ops neither split takes.
pub fn split(input: &TensorDesc, ops: &[FusionOp]) -> Result<Option<Staged>> {
    let Some(conv_at) = ops.iter().position(|o| matches!(o.kind, FusionOpKind::ConvForward { .. })) else { return Ok(None) };
    if conv_at > 0 {
        return prologue(input, ops, conv_at).map(Some);
    }
    if matches!(ops.get(1).map(|o| &o.kind), Some(FusionOpKind::BnForward { .. })) {
        return bn_training(input, ops).map(Some);
    }
    Ok(None)
}

fn prologue(input: &TensorDesc, ops: &[FusionOp], conv_at: usize) -> Result<Staged> {
    for (i, op) in ops[..conv_at].iter().enumerate() {
        let pointwise = matches!(op.kind, FusionOpKind::BiasForward { .. } | FusionOpKind::BnInference { .. } | FusionOpKind::ActivationForward { .. } | FusionOpKind::AddTensor { .. });
        if !pointwise {
            return Err(Error::unsupported(format!(
                "op {i} ({}): only bias, batch-norm inference, activation and tensor add may precede a convolution (a prologue)",
                op.kind.name()
            )));
        }
    }
    let t = output_desc_like(input, input.lens())?;
    let pre_ops: Vec<FusionOp> = ops[..conv_at].iter().enumerate().map(|(i, o)| FusionOp { kind: o.kind.clone(), input: if i == 0 { input.clone() } else { t.clone() }, output: t.clone() }).collect();
    let first = lower(FusionDirection::Vertical, input, &pre_ops)?;
    let mut main_ops = ops[conv_at..].to_vec();
    main_ops[0].input = t.clone();
    let second = lower(FusionDirection::Vertical, &t, &main_ops).map_err(|e| renumber(e, conv_at))?;
    Ok(Staged { split_at: conv_at, t, first, second })
}

fn bn_training(input: &TensorDesc, ops: &[FusionOp]) -> Result<Staged> {
    // t: the convolution's output, packed (as the op derived it).
    let t = ops[0].output.clone();
    let first = lower(FusionDirection::Vertical, input, &ops[..1])?;
    let second = lower(FusionDirection::Vertical, &t, &ops[1..]).map_err(|e| renumber(e, 1))?;
    Ok(Staged { split_at: 1, t, first, second })
}
