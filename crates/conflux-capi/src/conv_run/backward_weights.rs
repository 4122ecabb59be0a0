//! Backward-weights convolution calls: immediate mode, Find, the algorithm-based call and
//! the backward bias.

use super::*;

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
