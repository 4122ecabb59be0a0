//! `miopenConvolutionBiasActivationForward` (reference doc §1f, §2.6) in one call:
//! y = act(α1·conv(x, w) + α2·z + bias), built as the plan C (+Z) (+B) +A and run. The plan is
//! lowered per call but its invoker comes from the handle's cache, so repeated calls with the
//! same descriptors build nothing.
//!
//! Differences from MIOpen: every activation mode is accepted (MIOpen: RELU only, else
//! NotImplemented); z or bias NULL drops that op (MIOpen's plan always has both); `algo` must
//! have an applicable fused solver (UnsupportedOp otherwise, naming the solvers' reasons); the
//! workspace is accepted and unused (the fused solvers need none).

use super::{FusionPlan, OpArg, OpArgs};
use crate::activation::ActivationDesc;
use crate::conv::api::{check_workspace, Workspace};
use crate::conv_desc::ConvDesc;
use crate::error::Result;
use crate::handle::Handle;
use crate::memory::DevPtr;
use crate::tensor::TensorDesc;
use crate::types::{ConvAlgorithm, FusionDirection};

const OP: &str = "convolution bias activation forward";

#[allow(clippy::too_many_arguments)]
pub fn conv_bias_activation_forward(
    handle: &Handle,
    alpha1: f64,
    x_desc: &TensorDesc,
    x: DevPtr,
    w_desc: &TensorDesc,
    w: DevPtr,
    conv_desc: &ConvDesc,
    algo: ConvAlgorithm,
    workspace: Workspace,
    alpha2: f64,
    z_desc: &TensorDesc,
    z: DevPtr,
    bias_desc: &TensorDesc,
    bias: DevPtr,
    activ_desc: &ActivationDesc,
    y_desc: &TensorDesc,
    y: DevPtr,
) -> Result<()> {
    check_workspace(OP, workspace)?;
    let ctx = |e: crate::Error| e.context(OP);
    let mut plan = FusionPlan::new(FusionDirection::Vertical, x_desc.clone());
    let mut args = OpArgs::new();
    let at = plan.add_conv_forward(conv_desc, w_desc).map_err(ctx)?;
    args.set(at, OpArg::Conv { w, alpha: alpha1, beta: 0.0 });
    if !z.is_null() {
        let at = plan.add_tensor_add(z_desc).map_err(ctx)?;
        args.set(at, OpArg::AddTensor { z, alpha: alpha2 });
    }
    if !bias.is_null() {
        let at = plan.add_bias(bias_desc).map_err(ctx)?;
        args.set(at, OpArg::Bias { b: bias });
    }
    let at = plan.add_activation(activ_desc.mode).map_err(ctx)?;
    args.set(at, OpArg::Activation { alpha: activ_desc.alpha, beta: activ_desc.beta, gamma: activ_desc.gamma });
    plan.set_algo(algo);
    plan.compile(handle).map_err(ctx)?;
    plan.execute(handle, x_desc, x, y_desc, y, &args).map_err(ctx)
}
