//! Activation forward / backward and the bias gradient, over raw addresses.

use conflux::{ActivationDesc, ActivationMode, DevPtr};
use pyo3::prelude::*;

use crate::error::{bad_parm, OrRaise};
use crate::handle::PyHandle;
use crate::spec::{desc, Spec};

fn activation(mode: i32, alpha: f64, beta: f64, gamma: f64) -> PyResult<ActivationDesc> {
    let mode = ActivationMode::from_i32(mode).ok_or_else(|| bad_parm(format!("activation mode {mode} is not a miopenActivationMode_t value")))?;
    Ok(ActivationDesc::new(mode, alpha, beta, gamma))
}

/// y = f(x) (x and y may be the same address).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn activation_forward(py: Python<'_>, handle: &PyHandle, mode: i32, alpha: f64, beta: f64, gamma: f64, spec: Spec, x: u64, y: u64) -> PyResult<()> {
    let act = activation(mode, alpha, beta, gamma)?;
    let d = desc("activation", &spec)?;
    py.detach(|| conflux::ops::activation_forward(&handle.inner, &act, &d, DevPtr(x), &d, DevPtr(y))).or_raise()
}

/// dx = f'(x, y)·dy; every tensor has `spec`.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn activation_backward(py: Python<'_>, handle: &PyHandle, mode: i32, alpha: f64, beta: f64, gamma: f64, spec: Spec, y: u64, dy: u64, x: u64, dx: u64) -> PyResult<()> {
    let act = activation(mode, alpha, beta, gamma)?;
    let d = desc("activation backward", &spec)?;
    py.detach(|| conflux::ops::activation_backward(&handle.inner, &act, &d, DevPtr(y), &d, DevPtr(dy), &d, DevPtr(x), &d, DevPtr(dx))).or_raise()
}

/// db = α·Σ_{n, spatial} dy + β·db (db: 1×C×1×1).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn bias_backward(py: Python<'_>, handle: &PyHandle, dy_spec: Spec, dy: u64, db_spec: Spec, db: u64, alpha: f64, beta: f64) -> PyResult<()> {
    let dyd = desc("bias gradient dy", &dy_spec)?;
    let dbd = desc("bias gradient db", &db_spec)?;
    py.detach(|| conflux::conv::bias::backward_bias(&handle.inner, alpha, &dyd, DevPtr(dy), beta, &dbd, DevPtr(db))).or_raise()
}
