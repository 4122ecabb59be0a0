//! Convolution functions that run or search (reference doc §1c, functions 16–41): immediate
//! mode, Find, the algorithm-based calls, the bias calls, and the one-call
//! `miopenConvolutionBiasActivationForward` (§1f).

use crate::activation::{activation, MiopenActivation};
use crate::conv::{conv, MiopenConv};
use crate::guard::{dev, enum_arg, guard, obj_mut, scalar, CStatus};
use crate::handle::{handle, MiopenHandle};
use crate::tensor::{desc, desc_opt, MiopenTensor};
use conflux::conv::{self as cv, Choice, ConvPerf, ConvSolution, Workspace};
use conflux::{bail, fusion, ConvAlgorithm, ConvProblem, DataType, Result, TensorDesc};
use std::ffi::c_void;

pub mod backward_data;
pub mod backward_weights;
pub mod forward;

/// `miopenConvAlgoPerf_t`: the algorithm union (4 bytes), time, workspace bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ConvAlgoPerf {
    pub algo: i32,
    pub time: f32,
    pub memory: usize,
}

/// `miopenConvSolution_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ConvSolutionC {
    pub time: f32,
    pub workspace_size: usize,
    pub solution_id: u64,
    pub algorithm: i32,
}

// The layouts clients compile against (LP64).
const _: () = assert!(std::mem::size_of::<ConvAlgoPerf>() == 16 && std::mem::offset_of!(ConvAlgoPerf, memory) == 8);
const _: () = assert!(std::mem::size_of::<ConvSolutionC>() == 32);
const _: () = assert!(std::mem::offset_of!(ConvSolutionC, workspace_size) == 8);
const _: () = assert!(std::mem::offset_of!(ConvSolutionC, solution_id) == 16);
const _: () = assert!(std::mem::offset_of!(ConvSolutionC, algorithm) == 24);

pub(super) fn ws(p: *mut c_void, bytes: usize) -> Workspace {
    Workspace { ptr: dev(p), bytes }
}

/// α / β of a convolution: float, or double when the output is Double (MIOpen's rule);
/// NULL reads as `default`.
pub(super) unsafe fn conv_scalar(p: *const c_void, out: &TensorDesc, default: f64) -> f64 {
    scalar(p, default, out.dtype() == DataType::Double)
}

/// The three problems as the immediate-mode calls name their descriptors.
pub(super) unsafe fn fwd_problem(c: MiopenConv, w: MiopenTensor, x: MiopenTensor, y: MiopenTensor) -> Result<ConvProblem> {
    ConvProblem::forward(conv(c)?, desc(x, "xDesc")?, desc(w, "wDesc")?, desc(y, "yDesc")?)
}
pub(super) unsafe fn bwd_data_problem(c: MiopenConv, dy: MiopenTensor, w: MiopenTensor, dx: MiopenTensor) -> Result<ConvProblem> {
    ConvProblem::backward_data(conv(c)?, desc(dy, "dyDesc")?, desc(w, "wDesc")?, desc(dx, "dxDesc")?)
}
pub(super) unsafe fn bwd_weights_problem(c: MiopenConv, dy: MiopenTensor, x: MiopenTensor, dw: MiopenTensor) -> Result<ConvProblem> {
    ConvProblem::backward_weights(conv(c)?, desc(dy, "dyDesc")?, desc(x, "xDesc")?, desc(dw, "dwDesc")?)
}

// --- Solution lists, workspace, compile: one body for the three directions. ---------------

pub(super) unsafe fn solution_count(h: MiopenHandle, p: Result<ConvProblem>, out: *mut usize) -> Result<()> {
    let h = handle(h)?;
    let p = p?;
    let out = obj_mut(out, "solutionCount output")?;
    *out = cv::solution_count(h, &p)?;
    Ok(())
}

pub(super) unsafe fn solution_list(h: MiopenHandle, p: Result<ConvProblem>, max: usize, count: *mut usize, out: *mut ConvSolutionC) -> Result<()> {
    let h = handle(h)?;
    let p = p?;
    // Both outputs are optional; without an array nothing is listed.
    let list: Vec<ConvSolution> = if out.is_null() { Vec::new() } else { cv::solutions(h, &p, max)? };
    for (i, s) in list.iter().enumerate() {
        *out.add(i) = ConvSolutionC { time: s.time_ms, workspace_size: s.workspace_bytes, solution_id: s.solution_id, algorithm: s.algorithm as i32 };
    }
    if !count.is_null() {
        *count = if out.is_null() { cv::solution_count(h, &p)?.min(max) } else { list.len() };
    }
    Ok(())
}

pub(super) unsafe fn solution_workspace(h: MiopenHandle, p: Result<ConvProblem>, id: u64, out: *mut usize) -> Result<()> {
    let h = handle(h)?;
    let p = p?;
    let out = obj_mut(out, "workSpaceSize output")?;
    *out = cv::solution_workspace(h, &p, id)?;
    Ok(())
}

pub(super) unsafe fn compile_solution(h: MiopenHandle, p: Result<ConvProblem>, id: u64) -> Result<()> {
    let h = handle(h)?;
    cv::compile_solution(h, &p?, id)
}

pub(super) unsafe fn workspace_size(h: MiopenHandle, p: Result<ConvProblem>, out: *mut usize) -> Result<()> {
    let h = handle(h)?;
    let p = p?;
    let out = obj_mut(out, "workSpaceSize output")?;
    *out = cv::workspace_size(h, &p)?;
    Ok(())
}

/// Find's outputs: BadParm for NULL outputs or a request below 1 (checked before running).
pub(super) unsafe fn find_outputs<'a>(request: i32, returned: *mut i32, perf: *mut ConvAlgoPerf) -> Result<(usize, &'a mut i32)> {
    if request < 1 {
        bail!(BadParm, "requestAlgoCount = {request} must be >= 1");
    }
    let r = obj_mut(returned, "returnedAlgoCount output")?;
    obj_mut(perf, "perfResults output")?;
    Ok((request as usize, r))
}

pub(super) unsafe fn write_perf(list: &[ConvPerf], returned: &mut i32, perf: *mut ConvAlgoPerf) {
    for (i, p) in list.iter().enumerate() {
        *perf.add(i) = ConvAlgoPerf { algo: p.algorithm as i32, time: p.time_ms, memory: p.workspace_bytes };
    }
    *returned = list.len() as i32;
}
