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

fn ws(p: *mut c_void, bytes: usize) -> Workspace {
    Workspace { ptr: dev(p), bytes }
}

/// α / β of a convolution: float, or double when the output is Double (MIOpen's rule);
/// NULL reads as `default`.
unsafe fn conv_scalar(p: *const c_void, out: &TensorDesc, default: f64) -> f64 {
    scalar(p, default, out.dtype() == DataType::Double)
}

/// The three problems as the immediate-mode calls name their descriptors.
unsafe fn fwd_problem(c: MiopenConv, w: MiopenTensor, x: MiopenTensor, y: MiopenTensor) -> Result<ConvProblem> {
    ConvProblem::forward(conv(c)?, desc(x, "xDesc")?, desc(w, "wDesc")?, desc(y, "yDesc")?)
}
unsafe fn bwd_data_problem(c: MiopenConv, dy: MiopenTensor, w: MiopenTensor, dx: MiopenTensor) -> Result<ConvProblem> {
    ConvProblem::backward_data(conv(c)?, desc(dy, "dyDesc")?, desc(w, "wDesc")?, desc(dx, "dxDesc")?)
}
unsafe fn bwd_weights_problem(c: MiopenConv, dy: MiopenTensor, x: MiopenTensor, dw: MiopenTensor) -> Result<ConvProblem> {
    ConvProblem::backward_weights(conv(c)?, desc(dy, "dyDesc")?, desc(x, "xDesc")?, desc(dw, "dwDesc")?)
}

// --- Solution lists, workspace, compile: one body for the three directions. ---------------

unsafe fn solution_count(h: MiopenHandle, p: Result<ConvProblem>, out: *mut usize) -> Result<()> {
    let h = handle(h)?;
    let p = p?;
    let out = obj_mut(out, "solutionCount output")?;
    *out = cv::solution_count(h, &p)?;
    Ok(())
}

unsafe fn solution_list(h: MiopenHandle, p: Result<ConvProblem>, max: usize, count: *mut usize, out: *mut ConvSolutionC) -> Result<()> {
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

unsafe fn solution_workspace(h: MiopenHandle, p: Result<ConvProblem>, id: u64, out: *mut usize) -> Result<()> {
    let h = handle(h)?;
    let p = p?;
    let out = obj_mut(out, "workSpaceSize output")?;
    *out = cv::solution_workspace(h, &p, id)?;
    Ok(())
}

unsafe fn compile_solution(h: MiopenHandle, p: Result<ConvProblem>, id: u64) -> Result<()> {
    let h = handle(h)?;
    cv::compile_solution(h, &p?, id)
}

unsafe fn workspace_size(h: MiopenHandle, p: Result<ConvProblem>, out: *mut usize) -> Result<()> {
    let h = handle(h)?;
    let p = p?;
    let out = obj_mut(out, "workSpaceSize output")?;
    *out = cv::workspace_size(h, &p)?;
    Ok(())
}

/// Find's outputs: BadParm for NULL outputs or a request below 1 (checked before running).
unsafe fn find_outputs<'a>(request: i32, returned: *mut i32, perf: *mut ConvAlgoPerf) -> Result<(usize, &'a mut i32)> {
    if request < 1 {
        bail!(BadParm, "requestAlgoCount = {request} must be >= 1");
    }
    let r = obj_mut(returned, "returnedAlgoCount output")?;
    obj_mut(perf, "perfResults output")?;
    Ok((request as usize, r))
}

unsafe fn write_perf(list: &[ConvPerf], returned: &mut i32, perf: *mut ConvAlgoPerf) {
    for (i, p) in list.iter().enumerate() {
        *perf.add(i) = ConvAlgoPerf { algo: p.algorithm as i32, time: p.time_ms, memory: p.workspace_bytes };
    }
    *returned = list.len() as i32;
}

// --- Forward ----------------------------------------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn miopenConvolutionForwardGetSolutionCount(
    h: MiopenHandle,
    w_desc: MiopenTensor,
    x_desc: MiopenTensor,
    conv_desc: MiopenConv,
    y_desc: MiopenTensor,
    solution_count: *mut usize,
) -> CStatus {
    guard("miopenConvolutionForwardGetSolutionCount", || self::solution_count(h, fwd_problem(conv_desc, w_desc, x_desc, y_desc), solution_count))
}

#[no_mangle]
pub unsafe extern "C" fn miopenConvolutionForwardGetSolution(
    h: MiopenHandle,
    w_desc: MiopenTensor,
    x_desc: MiopenTensor,
    conv_desc: MiopenConv,
    y_desc: MiopenTensor,
    max_solution_count: usize,
    solution_count: *mut usize,
    solutions: *mut ConvSolutionC,
) -> CStatus {
    guard("miopenConvolutionForwardGetSolution", || {
        solution_list(h, fwd_problem(conv_desc, w_desc, x_desc, y_desc), max_solution_count, solution_count, solutions)
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenConvolutionForwardGetSolutionWorkspaceSize(
    h: MiopenHandle,
    w_desc: MiopenTensor,
    x_desc: MiopenTensor,
    conv_desc: MiopenConv,
    y_desc: MiopenTensor,
    solution_id: u64,
    work_space_size: *mut usize,
) -> CStatus {
    guard("miopenConvolutionForwardGetSolutionWorkspaceSize", || {
        solution_workspace(h, fwd_problem(conv_desc, w_desc, x_desc, y_desc), solution_id, work_space_size)
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenConvolutionForwardCompileSolution(
    h: MiopenHandle,
    w_desc: MiopenTensor,
    x_desc: MiopenTensor,
    conv_desc: MiopenConv,
    y_desc: MiopenTensor,
    solution_id: u64,
) -> CStatus {
    guard("miopenConvolutionForwardCompileSolution", || compile_solution(h, fwd_problem(conv_desc, w_desc, x_desc, y_desc), solution_id))
}

#[no_mangle]
pub unsafe extern "C" fn miopenConvolutionForwardImmediate(
    h: MiopenHandle,
    w_desc: MiopenTensor,
    w: *const c_void,
    x_desc: MiopenTensor,
    x: *const c_void,
    conv_desc: MiopenConv,
    y_desc: MiopenTensor,
    y: *mut c_void,
    work_space: *mut c_void,
    work_space_size: usize,
    solution_id: u64,
) -> CStatus {
    guard("miopenConvolutionForwardImmediate", || {
        let h = handle(h)?;
        let (xd, wd, yd) = (desc(x_desc, "xDesc")?, desc(w_desc, "wDesc")?, desc(y_desc, "yDesc")?);
        cv::forward(h, conv(conv_desc)?, xd, dev(x), wd, dev(w), yd, dev(y), 1.0, 0.0, Choice::Solution(solution_id), ws(work_space, work_space_size))
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenConvolutionForwardGetWorkSpaceSize(
    h: MiopenHandle,
    w_desc: MiopenTensor,
    x_desc: MiopenTensor,
    conv_desc: MiopenConv,
    y_desc: MiopenTensor,
    work_space_size: *mut usize,
) -> CStatus {
    guard("miopenConvolutionForwardGetWorkSpaceSize", || workspace_size(h, fwd_problem(conv_desc, w_desc, x_desc, y_desc), work_space_size))
}

#[no_mangle]
pub unsafe extern "C" fn miopenFindConvolutionForwardAlgorithm(
    h: MiopenHandle,
    x_desc: MiopenTensor,
    x: *const c_void,
    w_desc: MiopenTensor,
    w: *const c_void,
    conv_desc: MiopenConv,
    y_desc: MiopenTensor,
    y: *mut c_void,
    request_algo_count: i32,
    returned_algo_count: *mut i32,
    perf_results: *mut ConvAlgoPerf,
    work_space: *mut c_void,
    work_space_size: usize,
    exhaustive_search: bool,
) -> CStatus {
    guard("miopenFindConvolutionForwardAlgorithm", || {
        let h = handle(h)?;
        let (xd, wd, yd) = (desc(x_desc, "xDesc")?, desc(w_desc, "wDesc")?, desc(y_desc, "yDesc")?);
        let (n, returned) = find_outputs(request_algo_count, returned_algo_count, perf_results)?;
        let list = cv::find_forward(h, conv(conv_desc)?, xd, dev(x), wd, dev(w), yd, dev(y), n, exhaustive_search, ws(work_space, work_space_size))?;
        write_perf(&list, returned, perf_results);
        Ok(())
    })
}

/// Runs the best solver of `algo` conflux knows (the find-db's fastest, else the first
/// applicable); unlike MIOpen no prior Find is needed, and any α/β is honored.
#[no_mangle]
pub unsafe extern "C" fn miopenConvolutionForward(
    h: MiopenHandle,
    alpha: *const c_void,
    x_desc: MiopenTensor,
    x: *const c_void,
    w_desc: MiopenTensor,
    w: *const c_void,
    conv_desc: MiopenConv,
    algo: i32,
    beta: *const c_void,
    y_desc: MiopenTensor,
    y: *mut c_void,
    work_space: *mut c_void,
    work_space_size: usize,
) -> CStatus {
    guard("miopenConvolutionForward", || {
        let h = handle(h)?;
        let algo: ConvAlgorithm = enum_arg(algo)?;
        let (xd, wd, yd) = (desc(x_desc, "xDesc")?, desc(w_desc, "wDesc")?, desc(y_desc, "yDesc")?);
        let (a, b) = (conv_scalar(alpha, yd, 1.0), conv_scalar(beta, yd, 0.0));
        cv::forward(h, conv(conv_desc)?, xd, dev(x), wd, dev(w), yd, dev(y), a, b, Choice::Algorithm(algo), ws(work_space, work_space_size))
    })
}

/// y ← α·(y + b) + β·y (MIOpen's formula; (1, 0) is y += b).
#[no_mangle]
pub unsafe extern "C" fn miopenConvolutionForwardBias(
    h: MiopenHandle,
    alpha: *const c_void,
    b_desc: MiopenTensor,
    b: *const c_void,
    beta: *const c_void,
    y_desc: MiopenTensor,
    y: *mut c_void,
) -> CStatus {
    guard("miopenConvolutionForwardBias", || {
        let h = handle(h)?;
        let (bd, yd) = (desc(b_desc, "bDesc")?, desc(y_desc, "yDesc")?);
        cv::bias::forward_bias(h, conv_scalar(alpha, yd, 1.0), bd, dev(b), conv_scalar(beta, yd, 0.0), yd, dev(y))
    })
}

// --- Backward data -------------------------------------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn miopenConvolutionBackwardDataGetSolutionCount(
    h: MiopenHandle,
    dy_desc: MiopenTensor,
    w_desc: MiopenTensor,
    conv_desc: MiopenConv,
    dx_desc: MiopenTensor,
    solution_count: *mut usize,
) -> CStatus {
    guard("miopenConvolutionBackwardDataGetSolutionCount", || {
        self::solution_count(h, bwd_data_problem(conv_desc, dy_desc, w_desc, dx_desc), solution_count)
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenConvolutionBackwardDataGetSolution(
    h: MiopenHandle,
    dy_desc: MiopenTensor,
    w_desc: MiopenTensor,
    conv_desc: MiopenConv,
    dx_desc: MiopenTensor,
    max_solution_count: usize,
    solution_count: *mut usize,
    solutions: *mut ConvSolutionC,
) -> CStatus {
    guard("miopenConvolutionBackwardDataGetSolution", || {
        solution_list(h, bwd_data_problem(conv_desc, dy_desc, w_desc, dx_desc), max_solution_count, solution_count, solutions)
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenConvolutionBackwardDataGetSolutionWorkspaceSize(
    h: MiopenHandle,
    dy_desc: MiopenTensor,
    w_desc: MiopenTensor,
    conv_desc: MiopenConv,
    dx_desc: MiopenTensor,
    solution_id: u64,
    work_space_size: *mut usize,
) -> CStatus {
    guard("miopenConvolutionBackwardDataGetSolutionWorkspaceSize", || {
        solution_workspace(h, bwd_data_problem(conv_desc, dy_desc, w_desc, dx_desc), solution_id, work_space_size)
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenConvolutionBackwardDataCompileSolution(
    h: MiopenHandle,
    dy_desc: MiopenTensor,
    w_desc: MiopenTensor,
    conv_desc: MiopenConv,
    dx_desc: MiopenTensor,
    solution_id: u64,
) -> CStatus {
    guard("miopenConvolutionBackwardDataCompileSolution", || {
        compile_solution(h, bwd_data_problem(conv_desc, dy_desc, w_desc, dx_desc), solution_id)
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenConvolutionBackwardDataImmediate(
    h: MiopenHandle,
    dy_desc: MiopenTensor,
    dy: *const c_void,
    w_desc: MiopenTensor,
    w: *const c_void,
    conv_desc: MiopenConv,
    dx_desc: MiopenTensor,
    dx: *mut c_void,
    work_space: *mut c_void,
    work_space_size: usize,
    solution_id: u64,
) -> CStatus {
    guard("miopenConvolutionBackwardDataImmediate", || {
        let h = handle(h)?;
        let (dyd, wd, dxd) = (desc(dy_desc, "dyDesc")?, desc(w_desc, "wDesc")?, desc(dx_desc, "dxDesc")?);
        cv::backward_data(h, conv(conv_desc)?, dyd, dev(dy), wd, dev(w), dxd, dev(dx), 1.0, 0.0, Choice::Solution(solution_id), ws(work_space, work_space_size))
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenConvolutionBackwardDataGetWorkSpaceSize(
    h: MiopenHandle,
    dy_desc: MiopenTensor,
    w_desc: MiopenTensor,
    conv_desc: MiopenConv,
    dx_desc: MiopenTensor,
    work_space_size: *mut usize,
) -> CStatus {
    guard("miopenConvolutionBackwardDataGetWorkSpaceSize", || {
        workspace_size(h, bwd_data_problem(conv_desc, dy_desc, w_desc, dx_desc), work_space_size)
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenFindConvolutionBackwardDataAlgorithm(
    h: MiopenHandle,
    dy_desc: MiopenTensor,
    dy: *const c_void,
    w_desc: MiopenTensor,
    w: *const c_void,
    conv_desc: MiopenConv,
    dx_desc: MiopenTensor,
    dx: *mut c_void,
    request_algo_count: i32,
    returned_algo_count: *mut i32,
    perf_results: *mut ConvAlgoPerf,
    work_space: *mut c_void,
    work_space_size: usize,
    exhaustive_search: bool,
) -> CStatus {
    guard("miopenFindConvolutionBackwardDataAlgorithm", || {
        let h = handle(h)?;
        let (dyd, wd, dxd) = (desc(dy_desc, "dyDesc")?, desc(w_desc, "wDesc")?, desc(dx_desc, "dxDesc")?);
        let (n, returned) = find_outputs(request_algo_count, returned_algo_count, perf_results)?;
        let list =
            cv::find_backward_data(h, conv(conv_desc)?, dyd, dev(dy), wd, dev(w), dxd, dev(dx), n, exhaustive_search, ws(work_space, work_space_size))?;
        write_perf(&list, returned, perf_results);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenConvolutionBackwardData(
    h: MiopenHandle,
    alpha: *const c_void,
    dy_desc: MiopenTensor,
    dy: *const c_void,
    w_desc: MiopenTensor,
    w: *const c_void,
    conv_desc: MiopenConv,
    algo: i32,
    beta: *const c_void,
    dx_desc: MiopenTensor,
    dx: *mut c_void,
    work_space: *mut c_void,
    work_space_size: usize,
) -> CStatus {
    guard("miopenConvolutionBackwardData", || {
        let h = handle(h)?;
        let algo: ConvAlgorithm = enum_arg(algo)?;
        let (dyd, wd, dxd) = (desc(dy_desc, "dyDesc")?, desc(w_desc, "wDesc")?, desc(dx_desc, "dxDesc")?);
        let (a, b) = (conv_scalar(alpha, dxd, 1.0), conv_scalar(beta, dxd, 0.0));
        cv::backward_data(h, conv(conv_desc)?, dyd, dev(dy), wd, dev(w), dxd, dev(dx), a, b, Choice::Algorithm(algo), ws(work_space, work_space_size))
    })
}

// --- Backward weights ------------------------------------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn miopenConvolutionBackwardWeightsGetSolutionCount(
    h: MiopenHandle,
    dy_desc: MiopenTensor,
    x_desc: MiopenTensor,
    conv_desc: MiopenConv,
    dw_desc: MiopenTensor,
    solution_count: *mut usize,
) -> CStatus {
    guard("miopenConvolutionBackwardWeightsGetSolutionCount", || {
        self::solution_count(h, bwd_weights_problem(conv_desc, dy_desc, x_desc, dw_desc), solution_count)
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenConvolutionBackwardWeightsGetSolution(
    h: MiopenHandle,
    dy_desc: MiopenTensor,
    x_desc: MiopenTensor,
    conv_desc: MiopenConv,
    dw_desc: MiopenTensor,
    max_solution_count: usize,
    solution_count: *mut usize,
    solutions: *mut ConvSolutionC,
) -> CStatus {
    guard("miopenConvolutionBackwardWeightsGetSolution", || {
        solution_list(h, bwd_weights_problem(conv_desc, dy_desc, x_desc, dw_desc), max_solution_count, solution_count, solutions)
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenConvolutionBackwardWeightsGetSolutionWorkspaceSize(
    h: MiopenHandle,
    dy_desc: MiopenTensor,
    x_desc: MiopenTensor,
    conv_desc: MiopenConv,
    dw_desc: MiopenTensor,
    solution_id: u64,
    work_space_size: *mut usize,
) -> CStatus {
    guard("miopenConvolutionBackwardWeightsGetSolutionWorkspaceSize", || {
        solution_workspace(h, bwd_weights_problem(conv_desc, dy_desc, x_desc, dw_desc), solution_id, work_space_size)
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenConvolutionBackwardWeightsCompileSolution(
    h: MiopenHandle,
    dy_desc: MiopenTensor,
    x_desc: MiopenTensor,
    conv_desc: MiopenConv,
    dw_desc: MiopenTensor,
    solution_id: u64,
) -> CStatus {
    guard("miopenConvolutionBackwardWeightsCompileSolution", || {
        compile_solution(h, bwd_weights_problem(conv_desc, dy_desc, x_desc, dw_desc), solution_id)
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenConvolutionBackwardWeightsImmediate(
    h: MiopenHandle,
    dy_desc: MiopenTensor,
    dy: *const c_void,
    x_desc: MiopenTensor,
    x: *const c_void,
    conv_desc: MiopenConv,
    dw_desc: MiopenTensor,
    dw: *mut c_void,
    work_space: *mut c_void,
    work_space_size: usize,
    solution_id: u64,
) -> CStatus {
    guard("miopenConvolutionBackwardWeightsImmediate", || {
        let h = handle(h)?;
        let (dyd, xd, dwd) = (desc(dy_desc, "dyDesc")?, desc(x_desc, "xDesc")?, desc(dw_desc, "dwDesc")?);
        cv::backward_weights(h, conv(conv_desc)?, dyd, dev(dy), xd, dev(x), dwd, dev(dw), 1.0, 0.0, Choice::Solution(solution_id), ws(work_space, work_space_size))
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenConvolutionBackwardWeightsGetWorkSpaceSize(
    h: MiopenHandle,
    dy_desc: MiopenTensor,
    x_desc: MiopenTensor,
    conv_desc: MiopenConv,
    dw_desc: MiopenTensor,
    work_space_size: *mut usize,
) -> CStatus {
    guard("miopenConvolutionBackwardWeightsGetWorkSpaceSize", || {
        workspace_size(h, bwd_weights_problem(conv_desc, dy_desc, x_desc, dw_desc), work_space_size)
    })
}

/// Results go to the shared algorithm slot (MIOpen writes `bwd_data_algo`; same storage).
#[no_mangle]
pub unsafe extern "C" fn miopenFindConvolutionBackwardWeightsAlgorithm(
    h: MiopenHandle,
    dy_desc: MiopenTensor,
    dy: *const c_void,
    x_desc: MiopenTensor,
    x: *const c_void,
    conv_desc: MiopenConv,
    dw_desc: MiopenTensor,
    dw: *mut c_void,
    request_algo_count: i32,
    returned_algo_count: *mut i32,
    perf_results: *mut ConvAlgoPerf,
    work_space: *mut c_void,
    work_space_size: usize,
    exhaustive_search: bool,
) -> CStatus {
    guard("miopenFindConvolutionBackwardWeightsAlgorithm", || {
        let h = handle(h)?;
        let (dyd, xd, dwd) = (desc(dy_desc, "dyDesc")?, desc(x_desc, "xDesc")?, desc(dw_desc, "dwDesc")?);
        let (n, returned) = find_outputs(request_algo_count, returned_algo_count, perf_results)?;
        let list =
            cv::find_backward_weights(h, conv(conv_desc)?, dyd, dev(dy), xd, dev(x), dwd, dev(dw), n, exhaustive_search, ws(work_space, work_space_size))?;
        write_perf(&list, returned, perf_results);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenConvolutionBackwardWeights(
    h: MiopenHandle,
    alpha: *const c_void,
    dy_desc: MiopenTensor,
    dy: *const c_void,
    x_desc: MiopenTensor,
    x: *const c_void,
    conv_desc: MiopenConv,
    algo: i32,
    beta: *const c_void,
    dw_desc: MiopenTensor,
    dw: *mut c_void,
    work_space: *mut c_void,
    work_space_size: usize,
) -> CStatus {
    guard("miopenConvolutionBackwardWeights", || {
        let h = handle(h)?;
        let algo: ConvAlgorithm = enum_arg(algo)?;
        let (dyd, xd, dwd) = (desc(dy_desc, "dyDesc")?, desc(x_desc, "xDesc")?, desc(dw_desc, "dwDesc")?);
        let (a, b) = (conv_scalar(alpha, dwd, 1.0), conv_scalar(beta, dwd, 0.0));
        cv::backward_weights(h, conv(conv_desc)?, dyd, dev(dy), xd, dev(x), dwd, dev(dw), a, b, Choice::Algorithm(algo), ws(work_space, work_space_size))
    })
}

/// db[k] ← α·Σ dy + β·db (conflux honors any α/β; MIOpen demands 1/0).
#[no_mangle]
pub unsafe extern "C" fn miopenConvolutionBackwardBias(
    h: MiopenHandle,
    alpha: *const c_void,
    dy_desc: MiopenTensor,
    dy: *const c_void,
    beta: *const c_void,
    db_desc: MiopenTensor,
    db: *mut c_void,
) -> CStatus {
    guard("miopenConvolutionBackwardBias", || {
        let h = handle(h)?;
        let (dyd, dbd) = (desc(dy_desc, "dyDesc")?, desc(db_desc, "dbDesc")?);
        cv::bias::backward_bias(h, conv_scalar(alpha, dbd, 1.0), dyd, dev(dy), conv_scalar(beta, dbd, 0.0), dbd, dev(db))
    })
}

// --- One-call conv + bias + activation --------------------------------------------------------

/// y = act(α1·conv(x, w) + α2·z + bias). z or bias NULL drops that term (their descriptors
/// may then be NULL too); any activation mode fuses (MIOpen: RELU only).
#[no_mangle]
pub unsafe extern "C" fn miopenConvolutionBiasActivationForward(
    h: MiopenHandle,
    alpha1: *const c_void,
    x_desc: MiopenTensor,
    x: *const c_void,
    w_desc: MiopenTensor,
    w: *const c_void,
    conv_desc: MiopenConv,
    algo: i32,
    workspace: *mut c_void,
    workspace_size_in_bytes: usize,
    alpha2: *const c_void,
    z_desc: MiopenTensor,
    z: *const c_void,
    bias_desc: MiopenTensor,
    bias: *const c_void,
    activation_desc: MiopenActivation,
    y_desc: MiopenTensor,
    y: *mut c_void,
) -> CStatus {
    guard("miopenConvolutionBiasActivationForward", || {
        let h = handle(h)?;
        let algo: ConvAlgorithm = enum_arg(algo)?;
        let (xd, wd, yd) = (desc(x_desc, "xDesc")?, desc(w_desc, "wDesc")?, desc(y_desc, "yDesc")?);
        let act = activation(activation_desc)?;
        // An omitted term needs no descriptor; y's stands in (it is never read).
        let zd = if z.is_null() { desc_opt(z_desc, "zDesc")?.unwrap_or(yd) } else { desc(z_desc, "zDesc")? };
        let bd = if bias.is_null() { desc_opt(bias_desc, "biasDesc")?.unwrap_or(yd) } else { desc(bias_desc, "biasDesc")? };
        let (a1, a2) = (conv_scalar(alpha1, yd, 1.0), conv_scalar(alpha2, yd, 1.0));
        fusion::conv_bias_activation_forward(
            h,
            a1,
            xd,
            dev(x),
            wd,
            dev(w),
            conv(conv_desc)?,
            algo,
            ws(workspace, workspace_size_in_bytes),
            a2,
            zd,
            dev(z),
            bd,
            dev(bias),
            act,
            yd,
            dev(y),
        )
    })
}
