//! Find at fusion-plan compile time (MIOpen's find modes for fusion, reference doc §5.2):
//! the solvers of a convolution plan are timed on scratch buffers the handle allocates, since
//! compile has no user buffers. Measurements go to the find-db under the fused problem's key.

use super::{EpiOp, FusedProblem, OpArg};
use crate::conv::find::time_solvers;
use crate::conv::find_db;
use crate::error::{Error, Result};
use crate::handle::{Buffer, Handle};
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

/// The solver `mode` picks for a convolution plan, or None to take the first applicable one.
/// Fast: the find-db's best when recorded. Hybrid / DynamicHybrid: the find-db's best, else
/// time the solvers now. Normal: always time them.
pub(crate) fn pick(handle: &Handle, problem: &FusedProblem, algo: Option<ConvAlgorithm>, mode: FindMode) -> Result<Option<&'static dyn Solver>> {
    if problem.conv_problem().is_none() {
        return Ok(None);
    }
    if mode != FindMode::Normal {
        if let Some(rec) = find_db::lookup(handle, problem) {
            for e in &rec.entries {
                let Some(s) = find_by_name(e.solver) else { continue };
                if algo.is_none_or(|a| a == s.algorithm()) && s.device() == handle.device_kind() && s.check(problem, handle).is_ok() {
                    return Ok(Some(s));
                }
            }
        }
        if mode == FindMode::Fast {
            return Ok(None);
        }
    }
    let measured = benchmark(handle, problem, algo)?;
    find_db::store(handle, problem, &measured);
    Ok(find_by_name(measured[0].solver))
}

fn scratch(handle: &Handle, desc: &TensorDesc) -> Result<Buffer> {
    handle.alloc(desc.num_bytes())
}

/// Time the plan's solvers on zeroed scratch tensors and parameters.
fn benchmark(handle: &Handle, problem: &FusedProblem, algo: Option<ConvAlgorithm>) -> Result<Vec<find_db::FindEntry>> {
    let conv = problem.conv_problem().ok_or_else(|| Error::internal("fusion find: no convolution"))?;
    let (x, w, y) = (scratch(handle, &conv.x)?, scratch(handle, &conv.w)?, scratch(handle, &conv.y)?);
    // The epilogue follows the tensor the plan writes: y forward, x for a transpose plan.
    let out = if conv.direction == Direction::BackwardData { &conv.x } else { &conv.y };
    let per_act = out.c() * out.spatial().iter().product::<usize>();
    let mut bufs = Vec::new();
    let mut args = Vec::new();
    for op in problem.epilogue() {
        let mut param = |count: usize, dt: crate::DataType| -> Result<crate::DevPtr> {
            let b = handle.alloc(count * dt.size())?;
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
        crate::solver::invoke(&*inv, handle, &RunArgs { x: x.ptr(), w: w.ptr(), y: y.ptr(), alpha: 1.0, beta: 0.0, workspace: crate::DevPtr::NULL, workspace_bytes: 0, ops: &args })
    };
    let measured = time_solvers(handle, problem, algo, 0, false, &run);
    handle.synchronize()?;
    drop(bufs);
    measured
}
