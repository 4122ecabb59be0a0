//! Forward convolution calls: immediate mode, Find, the algorithm-based call, the forward
//! bias, and the one-call conv + bias + activation.

use super::*;

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
