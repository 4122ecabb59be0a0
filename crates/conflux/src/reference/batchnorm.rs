//! Reference batch normalization (reference doc §2.2), spatial and per-activation, 4-D and
//! 5-D. Parameters (scale, bias, means, variances) are packed in the derived shape
//! (`derive_bn_desc`) and indexed with `batchnorm::param_index`; data tensors go through
//! their own strides. M = elements per statistic (`reduction_size`).

use super::strided::{check_slice, check_same_lens, offsets};
use crate::batchnorm::{derive_bn_desc, param_index, reduction_size};
use crate::error::Result;
use crate::tensor::{for_each_index, TensorDesc};
use crate::types::BnMode;
use crate::ensure;

/// Parameter index of every element of x, in row-major logical order (the same order as
/// `offsets`).
fn param_indices(x_desc: &TensorDesc, mode: BnMode) -> Vec<usize> {
    let mut out = Vec::with_capacity(x_desc.element_count());
    for_each_index(x_desc.lens(), |idx| out.push(param_index(x_desc.lens(), idx, mode)));
    out
}

/// Number of parameters, after checking x is 4-D/5-D and each parameter buffer is long enough.
fn check_params(op: &str, x_desc: &TensorDesc, mode: BnMode, params: &[(&str, usize)]) -> Result<usize> {
    let np = derive_bn_desc(x_desc, mode).map_err(|e| e.context(op))?.element_count();
    for (name, len) in params {
        ensure!(*len >= np, BadParm, "{op}: {name} has {len} elements, the derived parameter shape needs {np}");
    }
    Ok(np)
}

/// Batch mean and biased (population) variance per parameter. Two passes,
/// Σ(x − μ)²/M rather than E[x²] − μ²: the same value in exact arithmetic, without the
/// cancellation, which is what an oracle should give.
pub fn bn_batch_stats(mode: BnMode, x_desc: &TensorDesc, x: &[f64]) -> Result<(Vec<f64>, Vec<f64>)> {
    let np = check_params("reference batch statistics", x_desc, mode, &[])?;
    check_slice("x", x_desc, x.len())?;
    let m = reduction_size(x_desc, mode) as f64;
    let (pi, xo) = (param_indices(x_desc, mode), offsets(x_desc));
    let mut mean = vec![0.0; np];
    for (&p, &o) in pi.iter().zip(&xo) {
        mean[p] += x[o];
    }
    mean.iter_mut().for_each(|v| *v /= m);
    let mut var = vec![0.0; np];
    for (&p, &o) in pi.iter().zip(&xo) {
        let d = x[o] - mean[p];
        var[p] += d * d;
    }
    var.iter_mut().for_each(|v| *v /= m);
    Ok((mean, var))
}

/// y = γ·(x − μ̂)/√(σ̂² + ε) + β with the estimated mean and variance. (MIOpen's spatial GPU
/// kernel takes √|σ̂² + ε|; that differs only for a negative variance, which is invalid
/// input, and the host references use the plain root.)
#[allow(clippy::too_many_arguments)]
pub fn bn_inference(
    mode: BnMode,
    x_desc: &TensorDesc,
    x: &[f64],
    y_desc: &TensorDesc,
    y: &mut [f64],
    scale: &[f64],
    bias: &[f64],
    est_mean: &[f64],
    est_var: &[f64],
    eps: f64,
) -> Result<()> {
    let op = "reference batch-norm inference";
    check_same_lens(op, "x", x_desc, "y", y_desc)?;
    check_params(op, x_desc, mode, &[("scale", scale.len()), ("bias", bias.len()), ("mean", est_mean.len()), ("variance", est_var.len())])?;
    check_slice("x", x_desc, x.len())?;
    check_slice("y", y_desc, y.len())?;
    let pi = param_indices(x_desc, mode);
    for ((&p, xo), yo) in pi.iter().zip(offsets(x_desc)).zip(offsets(y_desc)) {
        y[yo] = scale[p] * (x[xo] - est_mean[p]) / (est_var[p] + eps).sqrt() + bias[p];
    }
    Ok(())
}

/// Training forward: normalize with the batch statistics (biased variance), then
/// savedMean ← μ, savedInvStd ← 1/√(σ² + ε), runningMean ← (1 − f)·runningMean + f·μ,
/// runningVar ← (1 − f)·runningVar + f·σ²·M/(M − 1) (σ² when M = 1). Each optional output
/// is written when given (MIOpen writes a pair only when both of its pointers are given;
/// that pairing is the API layer's job).
#[allow(clippy::too_many_arguments)]
pub fn bn_forward_training(
    mode: BnMode,
    x_desc: &TensorDesc,
    x: &[f64],
    y_desc: &TensorDesc,
    y: &mut [f64],
    scale: &[f64],
    bias: &[f64],
    exp_avg_factor: f64,
    eps: f64,
    running_mean: Option<&mut [f64]>,
    running_var: Option<&mut [f64]>,
    saved_mean: Option<&mut [f64]>,
    saved_inv_std: Option<&mut [f64]>,
) -> Result<()> {
    let op = "reference batch-norm forward training";
    check_same_lens(op, "x", x_desc, "y", y_desc)?;
    let lens_of = |o: &Option<&mut [f64]>| o.as_ref().map_or(usize::MAX, |s| s.len());
    let np = check_params(
        op,
        x_desc,
        mode,
        &[
            ("scale", scale.len()),
            ("bias", bias.len()),
            ("running mean", lens_of(&running_mean)),
            ("running variance", lens_of(&running_var)),
            ("saved mean", lens_of(&saved_mean)),
            ("saved inverse std", lens_of(&saved_inv_std)),
        ],
    )?;
    check_slice("y", y_desc, y.len())?;
    let (mean, var) = bn_batch_stats(mode, x_desc, x)?;
    let inv_std: Vec<f64> = var.iter().map(|v| 1.0 / (v + eps).sqrt()).collect();
    let pi = param_indices(x_desc, mode);
    for ((&p, xo), yo) in pi.iter().zip(offsets(x_desc)).zip(offsets(y_desc)) {
        y[yo] = scale[p] * (x[xo] - mean[p]) * inv_std[p] + bias[p];
    }
    let m = reduction_size(x_desc, mode) as f64;
    // Unbiased variance for the running estimate; with one sample there is nothing to
    // correct and MIOpen keeps σ² (= 0).
    let unbiased = |v: f64| if m > 1.0 { v * m / (m - 1.0) } else { v };
    let f = exp_avg_factor;
    if let Some(rm) = running_mean {
        (0..np).for_each(|p| rm[p] = (1.0 - f) * rm[p] + f * mean[p]);
    }
    if let Some(rv) = running_var {
        (0..np).for_each(|p| rv[p] = (1.0 - f) * rv[p] + f * unbiased(var[p]));
    }
    if let Some(sm) = saved_mean {
        sm[..np].copy_from_slice(&mean);
    }
    if let Some(si) = saved_inv_std {
        si[..np].copy_from_slice(&inv_std);
    }
    Ok(())
}

/// Backward: x̂ = (x − μ)·invStd; dβ = Σ dy; dγ = Σ dy·x̂;
/// dx = (γ·invStd/M)·(M·dy − dβ − x̂·dγ). μ and invStd come from `saved` = (savedMean,
/// savedInvStd) when given, else are recomputed from x with ε. dx, dscale, dbias are
/// overwritten.
#[allow(clippy::too_many_arguments)]
pub fn bn_backward(
    mode: BnMode,
    x_desc: &TensorDesc,
    x: &[f64],
    dy_desc: &TensorDesc,
    dy: &[f64],
    dx_desc: &TensorDesc,
    dx: &mut [f64],
    scale: &[f64],
    dscale: &mut [f64],
    dbias: &mut [f64],
    eps: f64,
    saved: Option<(&[f64], &[f64])>,
) -> Result<()> {
    let op = "reference batch-norm backward";
    check_same_lens(op, "x", x_desc, "dy", dy_desc)?;
    check_same_lens(op, "x", x_desc, "dx", dx_desc)?;
    let (sm_len, si_len) = saved.map_or((usize::MAX, usize::MAX), |(a, b)| (a.len(), b.len()));
    let np = check_params(
        op,
        x_desc,
        mode,
        &[
            ("scale", scale.len()),
            ("dscale", dscale.len()),
            ("dbias", dbias.len()),
            ("saved mean", sm_len),
            ("saved inverse std", si_len),
        ],
    )?;
    check_slice("x", x_desc, x.len())?;
    check_slice("dy", dy_desc, dy.len())?;
    check_slice("dx", dx_desc, dx.len())?;
    let (mean, inv_std) = match saved {
        Some((sm, si)) => (sm[..np].to_vec(), si[..np].to_vec()),
        None => {
            let (mean, var) = bn_batch_stats(mode, x_desc, x)?;
            (mean, var.iter().map(|v| 1.0 / (v + eps).sqrt()).collect())
        }
    };
    let m = reduction_size(x_desc, mode) as f64;
    let pi = param_indices(x_desc, mode);
    let (xo, dyo, dxo) = (offsets(x_desc), offsets(dy_desc), offsets(dx_desc));
    let xhat = |i: usize| (x[xo[i]] - mean[pi[i]]) * inv_std[pi[i]];
    let (mut db, mut ds) = (vec![0.0; np], vec![0.0; np]);
    for i in 0..pi.len() {
        db[pi[i]] += dy[dyo[i]];
        ds[pi[i]] += dy[dyo[i]] * xhat(i);
    }
    for i in 0..pi.len() {
        let p = pi[i];
        dx[dxo[i]] = scale[p] * inv_std[p] / m * (m * dy[dyo[i]] - db[p] - xhat(i) * ds[p]);
    }
    dscale[..np].copy_from_slice(&ds);
    dbias[..np].copy_from_slice(&db);
    Ok(())
}
