//! Reference chains for the fused plans of reference doc §2.6, built only from the unfused
//! reference operators, so a fused kernel is checked against the plain composition.
//! Intermediates are packed N,C,(D,)H,W f64 tensors; only the plan's input and output go
//! through the user's strides.

use super::activation::{activation_backward, activation_forward};
use super::batchnorm::{bn_backward, bn_forward_training, bn_inference};
use super::bias::bias_forward;
use super::conv::conv_forward;
use super::strided::{check_slice, check_same_lens, gather, offsets};
use crate::activation::ActivationDesc;
use crate::batchnorm::param_index;
use crate::conv_desc::ConvDesc;
use crate::error::Result;
use crate::tensor::{for_each_index, TensorDesc};
use crate::types::BnMode;
use crate::{bail, ensure};

/// One forward op of a vertical fusion plan, with its arguments.
pub enum ChainOp<'a> {
    /// y = conv(x, w) (any mode the descriptor has).
    Conv { conv: &'a ConvDesc, w_desc: &'a TensorDesc, w: &'a [f64] },
    /// y = x + b (b broadcast, typically 1×K×1×1).
    Bias { b_desc: &'a TensorDesc, b: &'a [f64] },
    /// Batch-norm inference with estimated statistics.
    BnInference { mode: BnMode, scale: &'a [f64], bias: &'a [f64], mean: &'a [f64], var: &'a [f64], eps: f64 },
    /// Batch-norm training forward; statistics outputs written when given.
    BnTraining {
        mode: BnMode,
        scale: &'a [f64],
        bias: &'a [f64],
        exp_avg_factor: f64,
        eps: f64,
        running_mean: Option<&'a mut [f64]>,
        running_var: Option<&'a mut [f64]>,
        saved_mean: Option<&'a mut [f64]>,
        saved_inv_std: Option<&'a mut [f64]>,
    },
    /// y = f(x).
    Activation(ActivationDesc),
    /// y = x + α·z (residual add; z has the current lengths, read through its strides).
    AddTensor { z_desc: &'a TensorDesc, z: &'a [f64], alpha: f64 },
}

/// Packed descriptor with `like`'s type and the given lengths.
fn packed(like: &TensorDesc, lens: &[usize]) -> Result<TensorDesc> {
    TensorDesc::new(like.dtype(), lens)
}

/// Runs `ops` in plan order on x and writes the last result into y through y's strides
/// ("C(+B)(+N)(+A)", "N+A", "N(train)+A" of §2.6 are all such chains). y must have the
/// chain's output lengths.
pub fn forward_chain(x_desc: &TensorDesc, x: &[f64], ops: &mut [ChainOp], y_desc: &TensorDesc, y: &mut [f64]) -> Result<()> {
    check_slice("x", x_desc, x.len())?;
    check_slice("y", y_desc, y.len())?;
    let mut desc = packed(x_desc, x_desc.lens())?;
    let mut cur = gather(x_desc, x);
    for op in ops.iter_mut() {
        match op {
            ChainOp::Conv { conv, w_desc, w } => {
                let out = packed(&desc, &conv.output_lens(&desc, w_desc)?)?;
                let mut next = vec![0.0; out.element_space()];
                conv_forward(conv, &desc, &cur, w_desc, w, &out, &mut next)?;
                desc = out;
                cur = next;
            }
            ChainOp::Bias { b_desc, b } => bias_forward(&desc, &mut cur, b_desc, b)?,
            ChainOp::BnInference { mode, scale, bias, mean, var, eps } => {
                let inp = cur.clone();
                bn_inference(*mode, &desc, &inp, &desc, &mut cur, scale, bias, mean, var, *eps)?;
            }
            ChainOp::BnTraining { mode, scale, bias, exp_avg_factor, eps, running_mean, running_var, saved_mean, saved_inv_std } => {
                let inp = cur.clone();
                bn_forward_training(
                    *mode,
                    &desc,
                    &inp,
                    &desc,
                    &mut cur,
                    scale,
                    bias,
                    *exp_avg_factor,
                    *eps,
                    running_mean.as_deref_mut(),
                    running_var.as_deref_mut(),
                    saved_mean.as_deref_mut(),
                    saved_inv_std.as_deref_mut(),
                )?;
            }
            ChainOp::Activation(act) => {
                let inp = cur.clone();
                activation_forward(act, &desc, &inp, &desc, &mut cur)?;
            }
            ChainOp::AddTensor { z_desc, z, alpha } => {
                check_same_lens("reference residual add", "z", z_desc, "input", &desc)?;
                check_slice("z", z_desc, z.len())?;
                for (c, zv) in cur.iter_mut().zip(gather(z_desc, z)) {
                    *c += *alpha * zv;
                }
            }
        }
    }
    if y_desc.lens() != desc.lens() {
        bail!(BadParm, "reference fusion chain: y lengths {:?} differ from the chain output {:?}", y_desc.lens(), desc.lens());
    }
    for (yo, v) in offsets(y_desc).into_iter().zip(cur) {
        y[yo] = v;
    }
    Ok(())
}

/// `miopenConvolutionBiasActivationForward` and the C+Z+B+A plan:
/// y = act(α1·conv(x, w) + α2·z + b), each of z and b optional (z has y's lengths).
#[allow(clippy::too_many_arguments)]
pub fn conv_bias_act_forward(
    alpha1: f64,
    conv: &ConvDesc,
    x_desc: &TensorDesc,
    x: &[f64],
    w_desc: &TensorDesc,
    w: &[f64],
    alpha2: f64,
    z: Option<(&TensorDesc, &[f64])>,
    bias: Option<(&TensorDesc, &[f64])>,
    act: &ActivationDesc,
    y_desc: &TensorDesc,
    y: &mut [f64],
) -> Result<()> {
    let op = "reference conv+bias+activation";
    let out = packed(x_desc, &conv.output_lens(x_desc, w_desc).map_err(|e| e.context(op))?)?;
    check_same_lens(op, "y", y_desc, "conv output", &out)?;
    let mut t = vec![0.0; out.element_space()];
    conv_forward(conv, x_desc, x, w_desc, w, &out, &mut t)?;
    t.iter_mut().for_each(|v| *v *= alpha1);
    if let Some((zd, zv)) = z {
        check_same_lens(op, "z", zd, "y", y_desc)?;
        check_slice("z", zd, zv.len())?;
        for (v, zo) in t.iter_mut().zip(offsets(zd)) {
            *v += alpha2 * zv[zo];
        }
    }
    if let Some((bd, bv)) = bias {
        bias_forward(&out, &mut t, bd, bv)?;
    }
    activation_forward(act, &out, &t, y_desc, y)
}

/// The N(bwd)+A(bwd) plan (plan input dy, output dx): ŷ = γ·(x − savedMean)·savedInvStd + β
/// is recomputed, dy' = act_backward(dy, x := ŷ, y := act_y) with act_y the user-supplied
/// activation output, then batch-norm backward with dy' and the saved statistics
/// (dx, dscale, dbias written).
#[allow(clippy::too_many_arguments)]
pub fn bn_bwd_act_backward(
    mode: BnMode,
    act: &ActivationDesc,
    x_desc: &TensorDesc,
    x: &[f64],
    act_y_desc: &TensorDesc,
    act_y: &[f64],
    dy_desc: &TensorDesc,
    dy: &[f64],
    dx_desc: &TensorDesc,
    dx: &mut [f64],
    scale: &[f64],
    bias: &[f64],
    dscale: &mut [f64],
    dbias: &mut [f64],
    saved_mean: &[f64],
    saved_inv_std: &[f64],
) -> Result<()> {
    let op = "reference batch-norm+activation backward";
    check_same_lens(op, "x", x_desc, "dy", dy_desc)?;
    check_same_lens(op, "x", x_desc, "activation output", act_y_desc)?;
    check_slice("x", x_desc, x.len())?;
    check_slice("activation output", act_y_desc, act_y.len())?;
    check_slice("dy", dy_desc, dy.len())?;
    let np = crate::batchnorm::derive_bn_desc(x_desc, mode)?.element_count();
    for (name, len) in [("scale", scale.len()), ("bias", bias.len()), ("saved mean", saved_mean.len()), ("saved inverse std", saved_inv_std.len())] {
        ensure!(len >= np, BadParm, "{op}: {name} has {len} elements, the derived parameter shape needs {np}");
    }
    // ŷ, the BN output the activation saw, in packed logical order.
    let mut yhat = Vec::with_capacity(x_desc.element_count());
    for_each_index(x_desc.lens(), |idx| {
        let p = param_index(x_desc.lens(), idx, mode);
        yhat.push(scale[p] * (x[x_desc.offset(idx)] - saved_mean[p]) * saved_inv_std[p] + bias[p]);
    });
    let pd = packed(x_desc, x_desc.lens())?;
    let mut dy2 = vec![0.0; pd.element_space()];
    activation_backward(act, act_y_desc, act_y, dy_desc, dy, &pd, &yhat, &pd, &mut dy2)?;
    bn_backward(mode, x_desc, x, &pd, &dy2, dx_desc, dx, scale, dscale, dbias, 0.0, Some((saved_mean, saved_inv_std)))
}
