//! Fusion API (reference doc §1f): plans, ops, operator arguments, compile and execute.
//! `miopenConvolutionBiasActivationForward` is in `conv_run.rs` with the other one-call
//! convolution entry points.

use crate::conv::{conv, MiopenConv};
use crate::guard::{create, destroy, dev, enum_arg, guard, obj, obj_mut, scalar, CStatus};
use crate::handle::{handle, MiopenHandle};
use crate::tensor::{desc, MiopenTensor};
use conflux::fusion::FusionOpKind;
use conflux::solver::registry;
use conflux::{bail, ActivationMode, BnMode, ConvAlgorithm, DevPtr, FusionDirection, FusionPlan, OpArg, OpArgs, Result};
use std::ffi::c_void;

/// `miopenFusionOpDescriptor_t` points to this: the op's position in its plan (arguments
/// are keyed by it) and its kind (to check `miopenSetOpArgs*` calls).
pub struct OpObj {
    index: usize,
    kind: FusionOpKind,
}

/// `miopenFusionPlanDescriptor_t` points to this. The plan owns its op handles (boxed so
/// their addresses stay valid while ops are added); they die with it.
pub struct PlanObj {
    plan: FusionPlan,
    #[allow(clippy::vec_box)] // the boxes keep op handles at fixed addresses as the Vec grows
    ops: Vec<Box<OpObj>>,
}

pub type MiopenPlan = *mut PlanObj;
pub type MiopenOp = *mut OpObj;
pub type MiopenArgs = *mut OpArgs;

/// Shared access for the calls that only read the plan: Execute may run on several threads
/// at once, so it must never form a `&mut`.
unsafe fn plan<'a>(p: MiopenPlan) -> Result<&'a PlanObj> {
    obj(p, "fusion plan")
}

/// Exclusive access for the calls that change the plan (the caller's duty, as in MIOpen).
unsafe fn plan_mut<'a>(p: MiopenPlan) -> Result<&'a mut PlanObj> {
    obj_mut(p, "fusion plan")
}

/// Add an op with `add` and hand its handle out through `out` (checked before adding, so a
/// NULL output never leaves an op the caller cannot address).
unsafe fn add_op(p: MiopenPlan, out: *mut MiopenOp, add: impl FnOnce(&mut FusionPlan) -> Result<usize>) -> Result<()> {
    let po = plan_mut(p)?;
    let slot = obj_mut(out, "op descriptor pointer")?;
    let index = add(&mut po.plan)?;
    po.ops.push(Box::new(OpObj { index, kind: po.plan.ops()[index].kind.clone() }));
    *slot = &**po.ops.last().unwrap() as *const OpObj as *mut OpObj;
    Ok(())
}

/// Store `arg` for `op`; an op of another kind → BadParm (MIOpen: UnknownError from a
/// failed cast).
unsafe fn set_arg(args: MiopenArgs, op: MiopenOp, want: &str, accepts: fn(&FusionOpKind) -> bool, arg: OpArg) -> Result<()> {
    let a = obj_mut(args, "operator args")?;
    let o = obj(op, "op descriptor")?;
    if !accepts(&o.kind) {
        bail!(BadParm, "op {} is a {} op; {want} arguments do not apply to it", o.index, o.kind.name());
    }
    a.set(o.index, arg);
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn miopenCreateFusionPlan(fuse_plan_desc: *mut MiopenPlan, fuse_direction: i32, input_desc: MiopenTensor) -> CStatus {
    guard("miopenCreateFusionPlan", || {
        create(fuse_plan_desc, "fusion plan pointer", || {
            let dir: FusionDirection = enum_arg(fuse_direction)?;
            Ok(PlanObj { plan: FusionPlan::new(dir, desc(input_desc, "inputDesc")?.clone()), ops: Vec::new() })
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenDestroyFusionPlan(fuse_plan_desc: MiopenPlan) -> CStatus {
    guard("miopenDestroyFusionPlan", || {
        destroy(fuse_plan_desc);
        Ok(())
    })
}

/// conflux returns the precise status (UnsupportedOp with the reason for plans no solver
/// fuses, BadParm for NULL arguments) where MIOpen reports most failures as UnknownError.
#[no_mangle]
pub unsafe extern "C" fn miopenCompileFusionPlan(h: MiopenHandle, fuse_plan_desc: MiopenPlan) -> CStatus {
    guard("miopenCompileFusionPlan", || {
        let h = handle(h)?;
        plan_mut(fuse_plan_desc)?.plan.compile(h)
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenFusionPlanGetOp(fuse_plan_desc: MiopenPlan, op_idx: i32, op: *mut MiopenOp) -> CStatus {
    guard("miopenFusionPlanGetOp", || {
        let po = plan(fuse_plan_desc)?;
        let slot = obj_mut(op, "op descriptor pointer")?;
        po.plan.op(op_idx as i64)?;
        // Op handles are only ever read through; the *mut is the C type's.
        *slot = &*po.ops[op_idx as usize] as *const OpObj as *mut OpObj;
        Ok(())
    })
}

/// `algo` is ignored (as in MIOpen): the size is that of the solver compile chooses.
#[no_mangle]
pub unsafe extern "C" fn miopenFusionPlanGetWorkSpaceSize(h: MiopenHandle, fuse_plan_desc: MiopenPlan, work_space_size: *mut usize, _algo: i32) -> CStatus {
    guard("miopenFusionPlanGetWorkSpaceSize", || {
        let h = handle(h)?;
        let po = plan(fuse_plan_desc)?;
        let out = obj_mut(work_space_size, "workSpaceSize output")?;
        *out = po.plan.workspace_size(h)?;
        Ok(())
    })
}

/// The algorithms conflux's fused convolution solvers report, best first (MIOpen returns
/// a fixed [Direct, Winograd]; conflux has no Winograd, so it lists what it can compile).
#[no_mangle]
pub unsafe extern "C" fn miopenFusionPlanConvolutionGetAlgo(
    fuse_plan_desc: MiopenPlan,
    request_algo_count: i32,
    returned_algo_count: *mut i32,
    returned_algos: *mut i32,
) -> CStatus {
    guard("miopenFusionPlanConvolutionGetAlgo", || {
        plan(fuse_plan_desc)?;
        let count = obj_mut(returned_algo_count, "returnedAlgoCount output")?;
        let mut algos: Vec<ConvAlgorithm> = Vec::new();
        for s in registry() {
            if !algos.contains(&s.algorithm()) {
                algos.push(s.algorithm());
            }
        }
        algos.truncate(request_algo_count.max(0) as usize);
        if !algos.is_empty() {
            obj_mut(returned_algos, "returnedAlgos output")?;
        }
        for (i, a) in algos.iter().enumerate() {
            *returned_algos.add(i) = *a as i32;
        }
        *count = algos.len() as i32;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenFusionPlanConvolutionSetAlgo(fuse_plan_desc: MiopenPlan, algo: i32) -> CStatus {
    guard("miopenFusionPlanConvolutionSetAlgo", || {
        let po = plan_mut(fuse_plan_desc)?;
        po.plan.set_algo(enum_arg(algo)?);
        Ok(())
    })
}

/// conflux extension: the output type of a plan around an int8 or fp8 convolution.
#[no_mangle]
pub unsafe extern "C" fn confluxFusionPlanSetOutputType(fuse_plan_desc: MiopenPlan, data_type: i32) -> CStatus {
    guard("confluxFusionPlanSetOutputType", || {
        let po = plan_mut(fuse_plan_desc)?;
        po.plan.set_output_type(enum_arg(data_type)?)
    })
}

/// conflux checks shapes when an op is added (BadParm with the reason); MIOpen defers them.
#[no_mangle]
pub unsafe extern "C" fn miopenCreateOpConvForward(fuse_plan_desc: MiopenPlan, conv_op: *mut MiopenOp, conv_desc: MiopenConv, w_desc: MiopenTensor) -> CStatus {
    guard("miopenCreateOpConvForward", || {
        let (c, w) = (conv(conv_desc)?, desc(w_desc, "wDesc")?);
        add_op(fuse_plan_desc, conv_op, |p| p.add_conv_forward(c, w))
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenCreateOpActivationForward(fuse_plan_desc: MiopenPlan, activ_fwd_op: *mut MiopenOp, mode: i32) -> CStatus {
    guard("miopenCreateOpActivationForward", || {
        let mode: ActivationMode = enum_arg(mode)?;
        add_op(fuse_plan_desc, activ_fwd_op, |p| p.add_activation(mode))
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenCreateOpActivationBackward(fuse_plan_desc: MiopenPlan, activ_bwd_op: *mut MiopenOp, mode: i32) -> CStatus {
    guard("miopenCreateOpActivationBackward", || {
        let mode: ActivationMode = enum_arg(mode)?;
        add_op(fuse_plan_desc, activ_bwd_op, |p| p.add_activation_backward(mode))
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenCreateOpBiasForward(fuse_plan_desc: MiopenPlan, bias_op: *mut MiopenOp, b_desc: MiopenTensor) -> CStatus {
    guard("miopenCreateOpBiasForward", || {
        let b = desc(b_desc, "bDesc")?;
        add_op(fuse_plan_desc, bias_op, |p| p.add_bias(b))
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenCreateOpBatchNormInference(
    fuse_plan_desc: MiopenPlan,
    bn_op: *mut MiopenOp,
    bn_mode: i32,
    bn_scale_bias_mean_var_desc: MiopenTensor,
) -> CStatus {
    guard("miopenCreateOpBatchNormInference", || {
        let mode: BnMode = enum_arg(bn_mode)?;
        let d = desc(bn_scale_bias_mean_var_desc, "bnScaleBiasMeanVarDesc")?;
        add_op(fuse_plan_desc, bn_op, |p| p.add_bn_inference(mode, d))
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenCreateOpBatchNormForward(fuse_plan_desc: MiopenPlan, bn_fwd_op: *mut MiopenOp, bn_mode: i32, running_mean_variance: bool) -> CStatus {
    guard("miopenCreateOpBatchNormForward", || {
        let mode: BnMode = enum_arg(bn_mode)?;
        add_op(fuse_plan_desc, bn_fwd_op, |p| p.add_bn_forward(mode, running_mean_variance))
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenCreateOpBatchNormBackward(fuse_plan_desc: MiopenPlan, bn_bwd_op: *mut MiopenOp, bn_mode: i32) -> CStatus {
    guard("miopenCreateOpBatchNormBackward", || {
        let mode: BnMode = enum_arg(bn_mode)?;
        add_op(fuse_plan_desc, bn_bwd_op, |p| p.add_bn_backward(mode))
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenCreateOperatorArgs(args: *mut MiopenArgs) -> CStatus {
    guard("miopenCreateOperatorArgs", || create(args, "operator args pointer", || Ok(OpArgs::new())))
}

#[no_mangle]
pub unsafe extern "C" fn miopenDestroyOperatorArgs(args: MiopenArgs) -> CStatus {
    guard("miopenDestroyOperatorArgs", || {
        destroy(args);
        Ok(())
    })
}

/// α (NULL → 1) scales the convolution and β (NULL → 0) the old output; conflux honors
/// both.
#[no_mangle]
pub unsafe extern "C" fn miopenSetOpArgsConvForward(args: MiopenArgs, conv_op: MiopenOp, alpha: *const c_void, beta: *const c_void, w: *const c_void) -> CStatus {
    guard("miopenSetOpArgsConvForward", || {
        let arg = OpArg::Conv { w: dev(w), alpha: scalar(alpha, 1.0, false), beta: scalar(beta, 0.0, false) };
        set_arg(args, conv_op, "convolution forward", |k| matches!(k, FusionOpKind::ConvForward { .. }), arg)
    })
}

/// `alpha` and `beta` are ignored (as in MIOpen).
#[no_mangle]
pub unsafe extern "C" fn miopenSetOpArgsActivForward(
    args: MiopenArgs,
    activ_fwd_op: MiopenOp,
    _alpha: *const c_void,
    _beta: *const c_void,
    activ_alpha: f64,
    activ_beta: f64,
    activ_gamma: f64,
) -> CStatus {
    guard("miopenSetOpArgsActivForward", || {
        let arg = OpArg::Activation { alpha: activ_alpha, beta: activ_beta, gamma: activ_gamma };
        set_arg(args, activ_fwd_op, "activation forward", |k| matches!(k, FusionOpKind::ActivationForward { .. }), arg)
    })
}

/// `y` is the activation's forward output; `reserved` may carry its forward input x
/// (conflux extension; MIOpen ignores it), needed alone by modes whose derivative reads x.
#[no_mangle]
pub unsafe extern "C" fn miopenSetOpArgsActivBackward(
    args: MiopenArgs,
    activ_bwd_op: MiopenOp,
    _alpha: *const c_void,
    _beta: *const c_void,
    y: *const c_void,
    reserved: *const c_void,
    activ_alpha: f64,
    activ_beta: f64,
    activ_gamma: f64,
) -> CStatus {
    guard("miopenSetOpArgsActivBackward", || {
        let arg = OpArg::ActivationBackward { y: dev(y), x: dev(reserved), alpha: activ_alpha, beta: activ_beta, gamma: activ_gamma };
        set_arg(args, activ_bwd_op, "activation backward", |k| matches!(k, FusionOpKind::ActivationBackward { .. }), arg)
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenSetOpArgsBatchNormInference(
    args: MiopenArgs,
    bn_op: MiopenOp,
    _alpha: *const c_void,
    _beta: *const c_void,
    bn_scale: *const c_void,
    bn_bias: *const c_void,
    estimated_mean: *const c_void,
    estimated_variance: *const c_void,
    epsilon: f64,
) -> CStatus {
    guard("miopenSetOpArgsBatchNormInference", || {
        let arg = OpArg::BnInference { scale: dev(bn_scale), bias: dev(bn_bias), mean: dev(estimated_mean), var: dev(estimated_variance), eps: epsilon };
        set_arg(args, bn_op, "batch-norm inference", |k| matches!(k, FusionOpKind::BnInference { .. }), arg)
    })
}

/// An op created with `runningMeanVariance = true` needs both running pointers (BadParm).
#[no_mangle]
pub unsafe extern "C" fn miopenSetOpArgsBatchNormForward(
    args: MiopenArgs,
    bn_op: MiopenOp,
    _alpha: *const c_void,
    _beta: *const c_void,
    bn_scale: *const c_void,
    bn_bias: *const c_void,
    saved_mean: *mut c_void,
    saved_inv_variance: *mut c_void,
    running_mean: *mut c_void,
    running_variance: *mut c_void,
    exp_avg_factor: f64,
    epsilon: f64,
) -> CStatus {
    guard("miopenSetOpArgsBatchNormForward", || {
        if let Some(OpObj { kind: FusionOpKind::BnForward { running: true, .. }, index }) = (bn_op as *const OpObj).as_ref() {
            if running_mean.is_null() || running_variance.is_null() {
                bail!(BadParm, "op {index} (batch-norm forward training) was created with runningMeanVariance; running mean/variance pointers are NULL");
            }
        }
        let arg = OpArg::BnForward {
            scale: dev(bn_scale),
            bias: dev(bn_bias),
            saved_mean: dev(saved_mean),
            saved_inv_var: dev(saved_inv_variance),
            running_mean: dev(running_mean),
            running_var: dev(running_variance),
            exp_avg_factor,
            eps: epsilon,
        };
        set_arg(args, bn_op, "batch-norm forward training", |k| matches!(k, FusionOpKind::BnForward { .. }), arg)
    })
}

/// `x` is the forward input; the plan's input is dy and its output dx. The saved batch
/// statistics are required (MIOpen's fused backward always reads them).
#[no_mangle]
pub unsafe extern "C" fn miopenSetOpArgsBatchNormBackward(
    args: MiopenArgs,
    bn_op: MiopenOp,
    _alpha: *const c_void,
    _beta: *const c_void,
    x: *const c_void,
    bn_scale: *const c_void,
    bn_bias: *const c_void,
    result_bn_scale_diff: *mut c_void,
    result_bn_bias_diff: *mut c_void,
    saved_mean: *const c_void,
    saved_inv_variance: *const c_void,
) -> CStatus {
    guard("miopenSetOpArgsBatchNormBackward", || {
        if saved_mean.is_null() || saved_inv_variance.is_null() {
            bail!(BadParm, "batch-norm backward op: savedMean and savedInvVariance are required");
        }
        let arg = OpArg::BnBackward {
            x: dev(x),
            scale: dev(bn_scale),
            bias: dev(bn_bias),
            dscale: dev(result_bn_scale_diff),
            dbias: dev(result_bn_bias_diff),
            saved_mean: dev(saved_mean),
            saved_inv_var: dev(saved_inv_variance),
            eps: 0.0,
        };
        set_arg(args, bn_op, "batch-norm backward", |k| matches!(k, FusionOpKind::BnBackward { .. }), arg)
    })
}

/// `alpha` and `beta` are ignored (as in MIOpen).
#[no_mangle]
pub unsafe extern "C" fn miopenSetOpArgsBiasForward(args: MiopenArgs, bias_op: MiopenOp, _alpha: *const c_void, _beta: *const c_void, bias: *const c_void) -> CStatus {
    guard("miopenSetOpArgsBiasForward", || {
        set_arg(args, bias_op, "bias forward", |k| matches!(k, FusionOpKind::BiasForward { .. }), OpArg::Bias { b: dev(bias) })
    })
}

/// Descriptors must equal the plan's input and derived output, and the plan must have
/// compiled (else BadParm); an op without arguments is BadParm too.
#[no_mangle]
pub unsafe extern "C" fn miopenExecuteFusionPlan(
    h: MiopenHandle,
    fuse_plan_desc: MiopenPlan,
    input_desc: MiopenTensor,
    input: *const c_void,
    output_desc: MiopenTensor,
    output: *mut c_void,
    args: MiopenArgs,
) -> CStatus {
    guard("miopenExecuteFusionPlan", || {
        let h = handle(h)?;
        let po = plan(fuse_plan_desc)?;
        let a = obj(args, "operator args")?;
        let (xd, yd) = (desc(input_desc, "inputDesc")?, desc(output_desc, "outputDesc")?);
        po.plan.execute(h, xd, dev(input), yd, DevPtr::from_mut(output), a)
    })
}
