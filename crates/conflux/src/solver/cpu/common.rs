//! What the fast CPU convolution solvers share: the common refusals and the per-run setup
//! (raw pointers, α/β, the resolved epilogue of the written tensor).

use crate::solver::RunArgs;
use crate::backend::cpu::direct::naive::ConvPtrs;
use crate::backend::cpu::pointwise::epilogue::CpuEpilogue;
use crate::problem::{ConvProblem, Geom};
use crate::error::{Error, Result};
use crate::problem::{EpiOp, FusedKind, FusedProblem};
use crate::types::{DataType, Direction};

/// The convolution of a problem, or why a CPU convolution solver refuses it.
pub fn conv_of(problem: &FusedProblem) -> std::result::Result<(&ConvProblem, &[EpiOp]), String> {
    let FusedKind::Conv { conv, epilogue } = &problem.kind else { return Err("not a convolution problem".into()) };
    if !matches!(conv.dtype(), DataType::Float | DataType::Half | DataType::BFloat16) {
        return Err(format!("type {:?} (computes Float, Half, BFloat16)", conv.dtype()));
    }
    if conv.direction == Direction::BackwardWeights && !epilogue.is_empty() {
        return Err("an epilogue on backward-weights".into());
    }
    Ok((conv, epilogue))
}

/// Pointers, α/β and the epilogue (resolved for the tensor the direction writes) of one run.
/// The geometry of an f32 convolution problem (forward only, when `forward_only`), else why
/// not: the first checks of the f32-only direct solvers.
pub fn f32_geometry(problem: &FusedProblem, forward_only: bool) -> std::result::Result<(&ConvProblem, Geom), String> {
    let (conv, _) = conv_of(problem)?;
    if conv.dtype() != DataType::Float {
        return Err(format!("f32 only ({:?} given)", conv.dtype()));
    }
    if forward_only && conv.direction != Direction::Forward {
        return Err(format!("forward only (this is {:?})", conv.direction));
    }
    Ok((conv, Geom::of(conv)))
}

pub struct RunParts {
    pub ptrs: ConvPtrs,
    pub alpha: f32,
    pub beta: f32,
    pub epi: CpuEpilogue,
}

pub fn run_parts(problem: &FusedProblem, a: &RunArgs, who: &str) -> Result<(Geom, Direction, RunParts)> {
    let (conv, epilogue) = conv_of(problem).map_err(|why| Error::internal(format!("{who}: {why}")))?;
    let ptrs = ConvPtrs { x: a.x.0, w: a.w.0, y: a.y.0, dt: conv.dtype() };
    let written = if conv.direction == Direction::BackwardData { &conv.x } else { &conv.y };
    let epi = CpuEpilogue::new(epilogue, a.ops, written, 1)?;
    Ok((Geom::of(conv), conv.direction, RunParts { ptrs, alpha: a.alpha as f32, beta: a.beta as f32, epi }))
}
