//! Prologues: per-channel ops placed before the convolution of a vertical plan (BN inference,
//! bias, activation, tensor add, in any order), as a framework computes BN → ReLU → conv
//! (pre-activation ResNet, DenseNet). The padding the convolution reads is zeros of the
//! transformed tensor. MIOpen refuses these plans. conflux runs the prologue as one pointwise
//! pass into a scratch tensor t (packed, in x's layout family), then the convolution and its
//! epilogue read t: two kernels, no solver changes. (Transforming tiles as the convolution
//! kernels load them, one kernel, is not written yet.)

use super::horizontal::renumber;
use super::lower::lower;
use super::plan::{FusionOp, FusionOpKind};
use crate::conv_desc::output_desc_like;
use crate::error::{Error, Result};
use crate::problem::FusedProblem;
use crate::tensor::TensorDesc;
use crate::types::FusionDirection;

/// A vertical plan split at its convolution (op `conv_at` > 0): the pointwise problem x → t
/// and the convolution's problem t → y.
pub struct Prologue {
    pub conv_at: usize,
    pub t: TensorDesc,
    pub pre: FusedProblem,
    pub main: FusedProblem,
}

/// The split of a vertical plan whose convolution follows pointwise ops, None for other plans
/// (no convolution, or the convolution first), UnsupportedOp for ops no prologue takes.
pub fn split(input: &TensorDesc, ops: &[FusionOp]) -> Result<Option<Prologue>> {
    let Some(conv_at) = ops.iter().position(|o| matches!(o.kind, FusionOpKind::ConvForward { .. })) else { return Ok(None) };
    if conv_at == 0 {
        return Ok(None);
    }
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
    let pre = lower(FusionDirection::Vertical, input, &pre_ops)?;
    let mut main_ops = ops[conv_at..].to_vec();
    main_ops[0].input = t.clone();
    let main = lower(FusionDirection::Vertical, &t, &main_ops).map_err(|e| renumber(e, conv_at))?;
    Ok(Some(Prologue { conv_at, t, pre, main }))
}
