//! Lowering: the only place where op order is interpreted. Turns a plan's op list into a
//! `FusedProblem`, or refuses with UnsupportedOp and a reason naming the op index and cause.

use super::plan::{FusionOp, FusionOpKind};
use crate::problem::{EpiOp, FusedKind, FusedProblem};
use crate::problem::ConvProblem;
use crate::error::{Error, Result};
use crate::tensor::TensorDesc;
use crate::types::FusionDirection;

/// Longest chain conflux fuses.
pub const MAX_OPS: usize = 8;

fn refuse(index: usize, op: &FusionOp, why: impl std::fmt::Display) -> Error {
    Error::unsupported(format!("op {index} ({}): {why}", op.kind.name()))
}

/// The epilogue step of a pointwise op, or None if the op is not a pointwise forward op.
fn epi_of(op: &FusionOp) -> Option<EpiOp> {
    Some(match &op.kind {
        FusionOpKind::BiasForward { b } => EpiOp::Bias { dtype: b.dtype() },
        FusionOpKind::BnInference { mode, param } => EpiOp::BnInference { mode: *mode, dtype: param.dtype() },
        FusionOpKind::ActivationForward { mode } => EpiOp::Activation { mode: *mode },
        FusionOpKind::AddTensor { z } => EpiOp::AddTensor { z: z.clone() },
        _ => return None,
    })
}

/// Lower the ops of one chain (applied to `input`: a vertical plan, or one branch of a
/// horizontal plan) to one fused problem.
pub fn lower(direction: FusionDirection, input: &TensorDesc, ops: &[FusionOp]) -> Result<FusedProblem> {
    if direction != FusionDirection::Vertical {
        return Err(Error::unsupported("fusion plan: lowering takes one chain; a horizontal plan lowers per branch (FusionPlan::problems)"));
    }
    if ops.is_empty() {
        return Err(Error::unknown("fusion plan: the plan has no operators"));
    }
    // Per-channel ops need a C dimension, and the kernels index at most five dimensions.
    if !(2..=5).contains(&input.rank()) {
        return Err(Error::bad_parm(format!("fusion plan: the input is a {}-dim tensor; fusion plans take 2-D to 5-D tensors", input.rank())));
    }
    if ops.len() > MAX_OPS {
        return Err(Error::unsupported(format!("fusion plan: {} ops; conflux fuses chains of up to {MAX_OPS}", ops.len())));
    }
    let output = ops.last().map(|o| o.output.clone()).unwrap_or_else(|| input.clone());
    let first = &ops[0];
    let kind = match &first.kind {
        FusionOpKind::ConvForward { conv, w } => {
            let conv = ConvProblem::forward(conv, input, w, &first.output)
                .map_err(|e| Error::unsupported(format!("op 0 (convolution forward): {}", e.reason)))?;
            let mut epilogue = Vec::new();
            for (i, op) in ops.iter().enumerate().skip(1) {
                match epi_of(op) {
                    Some(e) => epilogue.push(e),
                    None => return Err(refuse(i, op, after_conv_reason(&op.kind))),
                }
            }
            FusedKind::Conv { conv, epilogue }
        }
        FusionOpKind::BnForward { mode, running } => {
            let act = match ops.get(1).map(|o| &o.kind) {
                None => None,
                Some(FusionOpKind::ActivationForward { mode }) => Some(*mode),
                Some(_) => return Err(refuse(1, &ops[1], "only an activation forward may follow batch-norm forward training")),
            };
            if ops.len() > 2 {
                return Err(refuse(2, &ops[2], "batch-norm forward training fuses with one activation at most"));
            }
            FusedKind::BnTrain { x: input.clone(), y: output, mode: *mode, act, running: *running }
        }
        FusionOpKind::BnBackward { mode } => {
            let act = match ops.get(1).map(|o| &o.kind) {
                None => None,
                Some(FusionOpKind::ActivationBackward { mode }) => Some(*mode),
                Some(_) => return Err(refuse(1, &ops[1], "only an activation backward may follow batch-norm backward")),
            };
            if ops.len() > 2 {
                return Err(refuse(2, &ops[2], "batch-norm backward fuses with one activation backward at most"));
            }
            FusedKind::BnBackward { dy: input.clone(), dx: output, mode: *mode, act }
        }
        FusionOpKind::ActivationBackward { mode } => {
            if ops.len() > 1 {
                return Err(refuse(1, &ops[1], "activation backward fuses only after batch-norm backward"));
            }
            FusedKind::ActivationBackward { dy: input.clone(), dx: output, mode: *mode }
        }
        _ => {
            let mut chain = Vec::new();
            for (i, op) in ops.iter().enumerate() {
                match epi_of(op) {
                    Some(e) => chain.push(e),
                    None => {
                        let why = match op.kind {
                            FusionOpKind::ConvForward { .. } => "a convolution must be the first op of a plan",
                            FusionOpKind::BnForward { .. } | FusionOpKind::BnBackward { .. } => {
                                "batch-norm training ops must be the first op of a plan"
                            }
                            _ => "activation backward cannot follow pointwise forward ops",
                        };
                        return Err(refuse(i, op, why));
                    }
                }
            }
            FusedKind::Pointwise { x: input.clone(), y: output, ops: chain }
        }
    };
    Ok(FusedProblem { kind })
}

fn after_conv_reason(kind: &FusionOpKind) -> &'static str {
    match kind {
        FusionOpKind::ConvForward { .. } => "a plan holds one convolution; a second one cannot be fused",
        FusionOpKind::BnForward { .. } => "batch-norm forward training follows a convolution only directly (convolution → BN training → activation), as its own pass over the whole output",
        FusionOpKind::BnBackward { .. } => "batch-norm backward cannot follow a forward convolution",
        FusionOpKind::ActivationBackward { .. } => "activation backward cannot follow a forward convolution",
        _ => "not fusable after a convolution",
    }
}
