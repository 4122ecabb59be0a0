//! Find at fusion-plan compile time (MIOpen's find modes for fusion, reference doc §5.2):
//! the solvers of a convolution plan are timed on scratch buffers the session allocates, since
//! compile has no user buffers. Measurements go to the find-db under the fused problem's key.

use super::find::time_solvers;
use super::find_db;
use super::select::{first_applicable, recorded};
use super::session::Session;
use crate::backend::Buffer;
use crate::error::{Error, Result};
use crate::problem::{EpiOp, FusedProblem, OpArg};
use crate::solver::{find_by_name, Invoker, RunArgs, Solver};
use crate::tensor::TensorDesc;
use crate::types::{BnMode, ConvAlgorithm, Direction, FindMode};

/// The find mode plans start with: `MIOPEN_FIND_MODE_FUSION` when set and valid, else Fast
/// (MIOpen's default for fusion).
pub fn default_find_mode() -> FindMode {
    let v = std::env::var("MIOPEN_FIND_MODE_FUSION").unwrap_or_default().to_ascii_uppercase();
    match v.as_str() {
        "NORMAL" | "1" => FindMode::Normal,
        "HYBRID" | "3" => FindMode::Hybrid,
        "DYNAMIC_HYBRID" | "5" => FindMode::DynamicHybrid,
        "FAST" | "2" | "" => FindMode::Fast,
        other => {
            tracing::warn!(value = other, "MIOPEN_FIND_MODE_FUSION: unknown value; using FAST");
            FindMode::Fast
        }
    }
}

/// The solver a plan compiled in find mode `mode` runs. Fast: the find-db's best when
/// recorded. Hybrid / DynamicHybrid: the find-db's best, else time the solvers now. Normal:
/// always time them. Plans without a convolution, and Fast without a record, take the first
/// applicable solver (of `algo`, when given).
pub fn pick_for_plan(s: &dyn Session, problem: &FusedProblem, algo: Option<ConvAlgorithm>, mode: FindMode) -> Result<&'static dyn Solver> {
    if problem.conv_problem().is_none() || mode == FindMode::Fast {
        let found = if problem.conv_problem().is_some() { recorded(s, problem, |sv| algo.is_none_or(|a| a == sv.algorithm())) } else { None };
        return found.map_or_else(|| first_applicable(s, problem, algo), Ok);
    }
    if mode != FindMode::Normal {
        if let Some(sv) = recorded(s, problem, |sv| algo.is_none_or(|a| a == sv.algorithm())) {
            return Ok(sv);
        }
    }
    let measured = benchmark(s, problem, algo)?;
    find_db::store(s, problem, &measured);
    find_by_name(measured[0].solver).ok_or_else(|| Error::internal("fusion find: the fastest solver is not in the registry"))
}

fn scratch(s: &dyn Session, desc: &TensorDesc) -> Result<Buffer> {
    s.device().alloc(desc.num_bytes())
}

/// Time the plan's solvers on zeroed scratch tensors and parameters (also Find 2.0's timing
/// of fused problems, which come without buffers).
pub fn benchmark(s: &dyn Session, problem: &FusedProblem, algo: Option<ConvAlgorithm>) -> Result<Vec<find_db::FindEntry>> {
    let conv = problem.conv_problem().ok_or_else(|| Error::internal("fusion find: no convolution"))?;
    let (x, w, y) = (scratch(s, &conv.x)?, scratch(s, &conv.w)?, scratch(s, &conv.y)?);
    // The epilogue follows the tensor the plan writes: y forward, x for a transpose plan.
    let out = if conv.direction == Direction::BackwardData { &conv.x } else { &conv.y };
    let per_act = out.c() * out.spatial().iter().product::<usize>();
    let mut bufs = Vec::new();
    let mut args = Vec::new();
    for op in problem.epilogue() {
        let mut param = |count: usize, dt: crate::DataType| -> Result<crate::DevPtr> {
            let b = s.device().alloc(count * dt.size())?;
            let p = b.ptr();
            bufs.push(b);
            Ok(p)
        };
        args.push(match op {
            EpiOp::Bias { dtype } => OpArg::Bias { b: param(out.c(), *dtype)? },
            EpiOp::BnInference { mode, dtype } => {
                let n = if *mode == BnMode::Spatial { out.c() } else { per_act };
                let (scale, bias, mean, var) = (param(n, *dtype)?, param(n, *dtype)?, param(n, *dtype)?, param(n, *dtype)?);
                OpArg::BnInference { scale, bias, mean, var, eps: 1e-5 }
            }
            EpiOp::Activation { .. } => OpArg::Activation { alpha: 1.0, beta: 1.0, gamma: 1.0 },
            EpiOp::AddTensor { z } => OpArg::AddTensor { z: param(z.element_space(), z.dtype())?, alpha: 1.0 },
        });
    }
    let run = |inv: &dyn Invoker| {
        crate::solver::invoke(&*inv, s, &RunArgs { x: x.ptr(), w: w.ptr(), y: y.ptr(), alpha: 1.0, beta: 0.0, workspace: crate::DevPtr::NULL, workspace_bytes: 0, ops: &args })
    };
    let measured = time_solvers(s, problem, algo, 0, false, &run);
    s.device().synchronize()?;
    drop(bufs);
    measured
}
