//! `FusedProblem`: what a solver is asked to compute, as plain data. A plain convolution is a
//! fused problem with an empty epilogue. Everything here is compile-time data (it goes into
//! the cache key); per-execute values (pointers, scalars, epsilon) travel in `OpArg`s.

use super::{ConvProblem, LayerOp};
use crate::tensor::TensorDesc;
use crate::types::{ActivationMode, BnMode, DataType, Direction};

/// One pointwise step applied to every output element, in plan order.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum EpiOp {
    /// `v + b[c]`; `dtype` is the bias tensor's element type.
    Bias { dtype: DataType },
    /// `γ·(v − μ)/√(σ² + ε) + β` with spatial or per-activation parameters.
    BnInference { mode: BnMode, dtype: DataType },
    /// `f(v)` for one of MIOpen's ten modes (α, β, γ are run-time arguments).
    Activation { mode: ActivationMode },
    /// `v + α2·z[...]` where z has the output's shape (residual add, `TensorScaleAdd`).
    AddTensor { z: TensorDesc },
}

impl EpiOp {
    pub fn letter(&self) -> char {
        match self {
            EpiOp::Bias { .. } => 'B',
            EpiOp::BnInference { .. } => 'N',
            EpiOp::Activation { .. } => 'A',
            EpiOp::AddTensor { .. } => 'Z',
        }
    }
}

/// The kinds of computation the fusion planner produces.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum FusedKind {
    /// A convolution in any direction; forward convolutions may carry an epilogue.
    Conv { conv: ConvProblem, epilogue: Vec<EpiOp> },
    /// A pointwise chain without a convolution: x → y of the same shape.
    Pointwise { x: TensorDesc, y: TensorDesc, ops: Vec<EpiOp> },
    /// Activation backward alone: dy → dx (x and y arrive as arguments).
    ActivationBackward { dy: TensorDesc, dx: TensorDesc, mode: ActivationMode },
    /// Batch-norm forward training, optionally followed by an activation.
    BnTrain { x: TensorDesc, y: TensorDesc, mode: BnMode, act: Option<ActivationMode>, running: bool },
    /// Batch-norm backward, optionally preceded (in math order) by an activation backward.
    BnBackward { dy: TensorDesc, dx: TensorDesc, mode: BnMode, act: Option<ActivationMode> },
    /// A pooling or softmax layer (never part of a fusion plan).
    Layer(LayerOp),
}

/// A problem a solver can be asked to compute.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FusedProblem {
    pub kind: FusedKind,
}

impl FusedProblem {
    pub fn conv(conv: ConvProblem) -> FusedProblem {
        FusedProblem { kind: FusedKind::Conv { conv, epilogue: Vec::new() } }
    }

    /// The convolution, if this problem has one.
    pub fn conv_problem(&self) -> Option<&ConvProblem> {
        match &self.kind {
            FusedKind::Conv { conv, .. } => Some(conv),
            _ => None,
        }
    }

    /// Forward convolution's epilogue (empty for other problems).
    /// The int8 / fp8 kind and geometry of a quantized convolution that the quantized solvers
    /// can compute (the i32 sum stays exact, residual inputs are of a compute type), else why
    /// not: what every such solver checks first.
    pub fn quantized_conv(&self) -> std::result::Result<(crate::quant::Quant, super::Geom), String> {
        let FusedKind::Conv { conv, epilogue } = &self.kind else { return Err("not a convolution problem".into()) };
        let Some(q) = conv.quant() else { return Err(format!("int8 and fp8 only ({:?} given)", conv.dtype())) };
        let g = super::Geom::of(conv);
        let reduction = g.cg() * g.filter_size();
        if q == crate::quant::Quant::Int8 && reduction > crate::quant::INT8_MAX_REDUCTION {
            return Err(format!("a reduction of {reduction} products per output; the i32 sum is exact up to {}", crate::quant::INT8_MAX_REDUCTION));
        }
        for op in epilogue {
            if let EpiOp::AddTensor { z } = op {
                if !z.dtype().is_compute_type() {
                    return Err(format!("a residual z of type {:?}; z must be Float, Half or BFloat16", z.dtype()));
                }
            }
        }
        Ok((q, g))
    }

    pub fn epilogue(&self) -> &[EpiOp] {
        match &self.kind {
            FusedKind::Conv { epilogue, .. } | FusedKind::Pointwise { ops: epilogue, .. } => epilogue,
            _ => &[],
        }
    }

    pub fn direction(&self) -> Option<Direction> {
        self.conv_problem().map(|c| c.direction)
    }

    /// Element type of the main data.
    pub fn dtype(&self) -> DataType {
        match &self.kind {
            FusedKind::Conv { conv, .. } => conv.dtype(),
            FusedKind::Pointwise { x, .. } | FusedKind::BnTrain { x, .. } => x.dtype(),
            FusedKind::ActivationBackward { dy, .. } | FusedKind::BnBackward { dy, .. } => dy.dtype(),
            FusedKind::Layer(op) => op.dtype(),
        }
    }

    /// Text key of the problem (cache and find-db key).
    pub fn key(&self) -> String {
        match &self.kind {
            FusedKind::Conv { conv, epilogue } => format!("conv[{}]{}", conv.key(), epi_key(epilogue)),
            FusedKind::Pointwise { x, y, ops } => format!("pw[x {}|y {}]{}", x.key(), y.key(), epi_key(ops)),
            FusedKind::ActivationBackward { dy, dx, mode } => format!("actbwd[dy {}|dx {}|{:?}]", dy.key(), dx.key(), mode),
            FusedKind::BnTrain { x, y, mode, act, running } => {
                format!("bntrain[x {}|y {}|{:?}|{:?}|run{}]", x.key(), y.key(), mode, act, *running as u8)
            }
            FusedKind::BnBackward { dy, dx, mode, act } => format!("bnbwd[dy {}|dx {}|{:?}|{:?}]", dy.key(), dx.key(), mode, act),
            FusedKind::Layer(op) => op.key(),
        }
    }

    /// A short human name, e.g. "C+B+A" or "N(train)+A".
    pub fn short_name(&self) -> String {
        let epi = |ops: &[EpiOp]| ops.iter().map(|o| format!("+{}", o.letter())).collect::<String>();
        match &self.kind {
            FusedKind::Conv { conv, epilogue } => match conv.direction {
                Direction::Forward => format!("C{}", epi(epilogue)),
                Direction::BackwardData => "C(bwd-data)".into(),
                Direction::BackwardWeights => "C(bwd-weights)".into(),
            },
            FusedKind::Pointwise { ops, .. } => epi(ops).trim_start_matches('+').to_string(),
            FusedKind::ActivationBackward { .. } => "A(bwd)".into(),
            FusedKind::BnTrain { act, .. } => format!("N(train){}", if act.is_some() { "+A" } else { "" }),
            FusedKind::BnBackward { act, .. } => format!("N(bwd){}", if act.is_some() { "+A(bwd)" } else { "" }),
            FusedKind::Layer(op) => op.short_name().into(),
        }
    }
}

fn epi_key(ops: &[EpiOp]) -> String {
    ops.iter()
        .map(|o| match o {
            EpiOp::Bias { dtype } => format!("+B{}", dtype.short()),
            EpiOp::BnInference { mode, dtype } => format!("+N{:?}{}", mode, dtype.short()),
            EpiOp::Activation { mode } => format!("+A{:?}", mode),
            EpiOp::AddTensor { z } => format!("+Z[{}]", z.key()),
        })
        .collect()
}
