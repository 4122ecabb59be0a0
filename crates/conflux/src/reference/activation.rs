//! Reference activations (reference doc §2.1): the elementwise formulas of
//! `crate::activation` (one definition shared with the kernels, quirks included) applied
//! over strided tensors. Tensors are matched by their logical row-major index, so x and y
//! may have different strides (or even different lengths with the same element count, as
//! MIOpen only checks counts).

use super::strided::{check_slice, offsets};
use crate::activation::ActivationDesc;
use crate::error::Result;
use crate::tensor::TensorDesc;
use crate::ensure;

fn check_counts(op: &str, descs: &[(&str, &TensorDesc)]) -> Result<()> {
    let n = descs[0].1.element_count();
    for (name, d) in descs {
        ensure!(
            d.element_count() == n,
            BadParm,
            "{op}: {name} has {} elements, {} has {n}",
            d.element_count(),
            descs[0].0
        );
    }
    Ok(())
}

/// y = f(x) elementwise.
pub fn activation_forward(desc: &ActivationDesc, x_desc: &TensorDesc, x: &[f64], y_desc: &TensorDesc, y: &mut [f64]) -> Result<()> {
    check_counts("reference activation forward", &[("x", x_desc), ("y", y_desc)])?;
    check_slice("x", x_desc, x.len())?;
    check_slice("y", y_desc, y.len())?;
    for (xo, yo) in offsets(x_desc).into_iter().zip(offsets(y_desc)) {
        y[yo] = desc.forward(x[xo]);
    }
    Ok(())
}

/// dx = g(dy, x, y) elementwise, with x the forward input and y the forward output.
#[allow(clippy::too_many_arguments)]
pub fn activation_backward(
    desc: &ActivationDesc,
    y_desc: &TensorDesc,
    y: &[f64],
    dy_desc: &TensorDesc,
    dy: &[f64],
    x_desc: &TensorDesc,
    x: &[f64],
    dx_desc: &TensorDesc,
    dx: &mut [f64],
) -> Result<()> {
    check_counts(
        "reference activation backward",
        &[("y", y_desc), ("dy", dy_desc), ("x", x_desc), ("dx", dx_desc)],
    )?;
    check_slice("y", y_desc, y.len())?;
    check_slice("dy", dy_desc, dy.len())?;
    check_slice("x", x_desc, x.len())?;
    check_slice("dx", dx_desc, dx.len())?;
    let (yo, dyo, xo, dxo) = (offsets(y_desc), offsets(dy_desc), offsets(x_desc), offsets(dx_desc));
    for i in 0..yo.len() {
        dx[dxo[i]] = desc.backward(dy[dyo[i]], x[xo[i]], y[yo[i]]);
    }
    Ok(())
}
