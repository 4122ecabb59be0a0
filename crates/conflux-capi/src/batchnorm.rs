//! Batch normalization outside fusion (reference doc §1e).

use crate::guard::{dev, enum_arg, guard, scalar, CStatus};
use crate::handle::{handle, MiopenHandle};
use crate::tensor::{desc, MiopenTensor, TensorObj};
use conflux::ops::{self, BnBackwardArgs, BnInferenceArgs, BnTrainingArgs};
use conflux::{batchnorm::derive_bn_desc, bail, BnMode, Result, Status, TensorDesc};
use std::ffi::c_void;

/// Scalars that must be (1, 0) pairs; NULL reads as the default. MIOpen's status for a
/// violation differs per call (UnknownError for training, BadParm for inference/backward).
unsafe fn unit_pairs(pairs: &[(*const c_void, *const c_void)], status: Status, what: &str) -> Result<()> {
    for &(a, b) in pairs {
        let (a, b) = (scalar(a, 1.0, false), scalar(b, 0.0, false));
        if a != 1.0 || b != 0.0 {
            return Err(conflux::Error::new(status, format!("{what}: only alpha = 1 and beta = 0 are supported, got {a} and {b}")));
        }
    }
    Ok(())
}

/// The parameter descriptors of a call, each required.
unsafe fn params<'a>(ds: &[(*const TensorObj, &str)]) -> Result<Vec<&'a TensorDesc>> {
    ds.iter().map(|&(d, what)| desc(d, what)).collect()
}

#[no_mangle]
pub unsafe extern "C" fn miopenDeriveBNTensorDescriptor(derived_bn_desc: MiopenTensor, x_desc: MiopenTensor, bn_mode: i32) -> CStatus {
    guard("miopenDeriveBNTensorDescriptor", || {
        let x = desc(x_desc, "xDesc")?;
        let mode: BnMode = enum_arg(bn_mode)?;
        let d = derive_bn_desc(x, mode)?;
        crate::tensor::set_desc(derived_bn_desc, d)
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn training(
    h: MiopenHandle,
    bn_mode: i32,
    alpha: *const c_void,
    beta: *const c_void,
    x_desc: MiopenTensor,
    x: *const c_void,
    y_desc: MiopenTensor,
    y: *mut c_void,
    param_descs: &[(*const TensorObj, &str)],
    a: BnTrainingArgs,
) -> Result<()> {
    let h = handle(h)?;
    let mode: BnMode = enum_arg(bn_mode)?;
    unit_pairs(&[(alpha, beta)], Status::UnknownError, "batch-norm forward training")?;
    let p = params(param_descs)?;
    ops::bn_forward_training(h, mode, desc(x_desc, "xDesc")?, dev(x), desc(y_desc, "yDesc")?, dev(y), &p, &a)
}

#[no_mangle]
pub unsafe extern "C" fn miopenBatchNormalizationForwardTraining(
    h: MiopenHandle,
    bn_mode: i32,
    alpha: *mut c_void,
    beta: *mut c_void,
    x_desc: MiopenTensor,
    x: *const c_void,
    y_desc: MiopenTensor,
    y: *mut c_void,
    bn_scale_bias_mean_var_desc: MiopenTensor,
    bn_scale: *mut c_void,
    bn_bias: *mut c_void,
    exp_avg_factor: f64,
    result_running_mean: *mut c_void,
    result_running_variance: *mut c_void,
    epsilon: f64,
    result_save_mean: *mut c_void,
    result_save_inv_variance: *mut c_void,
) -> CStatus {
    guard("miopenBatchNormalizationForwardTraining", || {
        let a = BnTrainingArgs {
            scale: dev(bn_scale),
            bias: dev(bn_bias),
            running_mean: dev(result_running_mean),
            running_var: dev(result_running_variance),
            saved_mean: dev(result_save_mean),
            saved_inv_var: dev(result_save_inv_variance),
            exp_avg_factor,
            eps: epsilon,
        };
        training(h, bn_mode, alpha, beta, x_desc, x, y_desc, y, &[(bn_scale_bias_mean_var_desc, "bnScaleBiasMeanVarDesc")], a)
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenBatchNormalizationForwardTraining_V2(
    h: MiopenHandle,
    bn_mode: i32,
    alpha: *mut c_void,
    beta: *mut c_void,
    x_desc: MiopenTensor,
    x: *const c_void,
    y_desc: MiopenTensor,
    y: *mut c_void,
    scale_desc: MiopenTensor,
    bias_var_desc: MiopenTensor,
    saved_mean_desc: MiopenTensor,
    saved_var_desc: MiopenTensor,
    bn_scale: *mut c_void,
    bn_bias: *mut c_void,
    exp_avg_factor: f64,
    result_running_mean: *mut c_void,
    result_running_variance: *mut c_void,
    epsilon: f64,
    result_save_mean: *mut c_void,
    result_save_inv_variance: *mut c_void,
) -> CStatus {
    guard("miopenBatchNormalizationForwardTraining_V2", || {
        let a = BnTrainingArgs {
            scale: dev(bn_scale),
            bias: dev(bn_bias),
            running_mean: dev(result_running_mean),
            running_var: dev(result_running_variance),
            saved_mean: dev(result_save_mean),
            saved_inv_var: dev(result_save_inv_variance),
            exp_avg_factor,
            eps: epsilon,
        };
        let ds = [(scale_desc as *const _, "scaleDesc"), (bias_var_desc, "biasVarDesc"), (saved_mean_desc, "savedMeanDesc"), (saved_var_desc, "savedVarDesc")];
        training(h, bn_mode, alpha, beta, x_desc, x, y_desc, y, &ds, a)
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn inference(
    h: MiopenHandle,
    bn_mode: i32,
    alpha: *const c_void,
    beta: *const c_void,
    x_desc: MiopenTensor,
    x: *const c_void,
    y_desc: MiopenTensor,
    y: *mut c_void,
    param_descs: &[(*const TensorObj, &str)],
    a: BnInferenceArgs,
) -> Result<()> {
    let h = handle(h)?;
    let mode: BnMode = enum_arg(bn_mode)?;
    unit_pairs(&[(alpha, beta)], Status::BadParm, "batch-norm forward inference")?;
    let p = params(param_descs)?;
    ops::bn_forward_inference(h, mode, desc(x_desc, "xDesc")?, dev(x), desc(y_desc, "yDesc")?, dev(y), &p, &a)
}

#[no_mangle]
pub unsafe extern "C" fn miopenBatchNormalizationForwardInference(
    h: MiopenHandle,
    bn_mode: i32,
    alpha: *mut c_void,
    beta: *mut c_void,
    x_desc: MiopenTensor,
    x: *const c_void,
    y_desc: MiopenTensor,
    y: *mut c_void,
    bn_scale_bias_mean_var_desc: MiopenTensor,
    bn_scale: *mut c_void,
    bn_bias: *mut c_void,
    estimated_mean: *mut c_void,
    estimated_variance: *mut c_void,
    epsilon: f64,
) -> CStatus {
    guard("miopenBatchNormalizationForwardInference", || {
        let a = BnInferenceArgs { scale: dev(bn_scale), bias: dev(bn_bias), mean: dev(estimated_mean), var: dev(estimated_variance), eps: epsilon };
        inference(h, bn_mode, alpha, beta, x_desc, x, y_desc, y, &[(bn_scale_bias_mean_var_desc, "bnScaleBiasMeanVarDesc")], a)
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenBatchNormalizationForwardInference_V2(
    h: MiopenHandle,
    bn_mode: i32,
    alpha: *mut c_void,
    beta: *mut c_void,
    x_desc: MiopenTensor,
    x: *const c_void,
    y_desc: MiopenTensor,
    y: *mut c_void,
    scale_desc: MiopenTensor,
    bias_desc: MiopenTensor,
    est_mean_desc: MiopenTensor,
    est_variance_desc: MiopenTensor,
    bn_scale: *mut c_void,
    bn_bias: *mut c_void,
    estimated_mean: *mut c_void,
    estimated_variance: *mut c_void,
    epsilon: f64,
) -> CStatus {
    guard("miopenBatchNormalizationForwardInference_V2", || {
        let a = BnInferenceArgs { scale: dev(bn_scale), bias: dev(bn_bias), mean: dev(estimated_mean), var: dev(estimated_variance), eps: epsilon };
        let ds = [(scale_desc as *const _, "scaleDesc"), (bias_desc, "biasDesc"), (est_mean_desc, "estMeanDesc"), (est_variance_desc, "estVarianceDesc")];
        inference(h, bn_mode, alpha, beta, x_desc, x, y_desc, y, &ds, a)
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn backward(
    h: MiopenHandle,
    bn_mode: i32,
    scalars: [*const c_void; 4],
    x_desc: MiopenTensor,
    x: *const c_void,
    dy_desc: MiopenTensor,
    dy: *const c_void,
    dx_desc: MiopenTensor,
    dx: *mut c_void,
    param_descs: &[(*const TensorObj, &str)],
    a: BnBackwardArgs,
) -> Result<()> {
    let h = handle(h)?;
    let mode: BnMode = enum_arg(bn_mode)?;
    unit_pairs(&[(scalars[0], scalars[1]), (scalars[2], scalars[3])], Status::BadParm, "batch-norm backward")?;
    let p = params(param_descs)?;
    if p.is_empty() {
        bail!(BadParm, "batch-norm backward: no parameter descriptor");
    }
    ops::bn_backward(h, mode, desc(x_desc, "xDesc")?, dev(x), desc(dy_desc, "dyDesc")?, dev(dy), desc(dx_desc, "dxDesc")?, dev(dx), &p, &a)
}

#[no_mangle]
pub unsafe extern "C" fn miopenBatchNormalizationBackward(
    h: MiopenHandle,
    bn_mode: i32,
    alpha_data_diff: *const c_void,
    beta_data_diff: *const c_void,
    alpha_param_diff: *const c_void,
    beta_param_diff: *const c_void,
    x_desc: MiopenTensor,
    x: *const c_void,
    dy_desc: MiopenTensor,
    dy: *const c_void,
    dx_desc: MiopenTensor,
    dx: *mut c_void,
    bn_scale_bias_diff_desc: MiopenTensor,
    bn_scale: *const c_void,
    result_bn_scale_diff: *mut c_void,
    result_bn_bias_diff: *mut c_void,
    epsilon: f64,
    saved_mean: *const c_void,
    saved_inv_variance: *const c_void,
) -> CStatus {
    guard("miopenBatchNormalizationBackward", || {
        let a = BnBackwardArgs {
            scale: dev(bn_scale),
            dscale: dev(result_bn_scale_diff),
            dbias: dev(result_bn_bias_diff),
            saved_mean: dev(saved_mean),
            saved_inv_var: dev(saved_inv_variance),
            eps: epsilon,
        };
        let scalars = [alpha_data_diff, beta_data_diff, alpha_param_diff, beta_param_diff];
        backward(h, bn_mode, scalars, x_desc, x, dy_desc, dy, dx_desc, dx, &[(bn_scale_bias_diff_desc, "bnScaleBiasDiffDesc")], a)
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenBatchNormalizationBackward_V2(
    h: MiopenHandle,
    bn_mode: i32,
    alpha_data_diff: *const c_void,
    beta_data_diff: *const c_void,
    alpha_param_diff: *const c_void,
    beta_param_diff: *const c_void,
    x_desc: MiopenTensor,
    x: *const c_void,
    dy_desc: MiopenTensor,
    dy: *const c_void,
    dx_desc: MiopenTensor,
    dx: *mut c_void,
    scale_desc: MiopenTensor,
    bias_desc: MiopenTensor,
    saved_mean_desc: MiopenTensor,
    saved_var_desc: MiopenTensor,
    bn_scale: *const c_void,
    result_bn_scale_diff: *mut c_void,
    result_bn_bias_diff: *mut c_void,
    epsilon: f64,
    saved_mean: *const c_void,
    saved_inv_variance: *const c_void,
) -> CStatus {
    guard("miopenBatchNormalizationBackward_V2", || {
        let a = BnBackwardArgs {
            scale: dev(bn_scale),
            dscale: dev(result_bn_scale_diff),
            dbias: dev(result_bn_bias_diff),
            saved_mean: dev(saved_mean),
            saved_inv_var: dev(saved_inv_variance),
            eps: epsilon,
        };
        let scalars = [alpha_data_diff, beta_data_diff, alpha_param_diff, beta_param_diff];
        let ds = [(scale_desc as *const _, "scaleDesc"), (bias_desc, "biasDesc"), (saved_mean_desc, "savedMeanDesc"), (saved_var_desc, "savedVarDesc")];
        backward(h, bn_mode, scalars, x_desc, x, dy_desc, dy, dx_desc, dx, &ds, a)
    })
}
