//! Backward-data convolution calls: immediate mode, Find and the algorithm-based call.

use super::*;

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
