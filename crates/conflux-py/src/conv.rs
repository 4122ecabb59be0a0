//! `conflux._conflux.Convolution`: one convolution problem (descriptor, x, w, y specs) run in
//! any direction over raw addresses. Built once per shape by the Python layer (autograd's
//! backward passes), run many times.

use conflux::conv::{self, Choice, ConvProblem, Workspace};
use conflux::{ConvDesc, DevPtr, TensorDesc};
use pyo3::prelude::*;

use crate::error::{bad_parm, OrRaise};
use crate::handle::PyHandle;
use crate::plan::conv_desc;
use crate::spec::{desc, spec_of, Spec};

#[pyclass(name = "Convolution", module = "conflux._conflux", frozen)]
pub struct PyConvolution {
    conv: ConvDesc,
    x: TensorDesc,
    w: TensorDesc,
    y: TensorDesc,
}

fn workspace(ptr: u64, bytes: usize) -> Workspace {
    Workspace { ptr: DevPtr(ptr), bytes }
}

impl PyConvolution {
    fn problem(&self, direction: &str) -> PyResult<ConvProblem> {
        match direction {
            "forward" => ConvProblem::forward(&self.conv, &self.x, &self.w, &self.y),
            "backward_data" => ConvProblem::backward_data(&self.conv, &self.y, &self.w, &self.x),
            "backward_weights" => ConvProblem::backward_weights(&self.conv, &self.y, &self.x, &self.w),
            other => return Err(bad_parm(format!("convolution: direction {other:?}: expected forward, backward_data or backward_weights"))),
        }
        .or_raise()
    }
}

#[pymethods]
impl PyConvolution {
    /// x and w specs; y (the output, or dy's spec for the backward directions) is derived
    /// with x's layout unless `y` is given.
    #[new]
    #[pyo3(signature = (x, w, pad, stride, dilation, groups = 1, tf32 = None, y = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(x: Spec, w: Spec, pad: Vec<i64>, stride: Vec<i64>, dilation: Vec<i64>, groups: i64, tf32: Option<bool>, y: Option<Spec>) -> PyResult<PyConvolution> {
        let conv = conv_desc(pad, stride, dilation, groups, tf32, false)?;
        let x = desc("convolution input", &x)?;
        let w = desc("convolution weights", &w)?;
        let y = match y {
            Some(y) => desc("convolution output", &y)?,
            None => conv.output_desc(&x, &w).or_raise()?,
        };
        let c = PyConvolution { conv, x, w, y };
        c.problem("forward")?;
        Ok(c)
    }

    fn output_spec(&self) -> Spec {
        spec_of(&self.y)
    }

    /// Workspace bytes the direction may use (the most any applicable solver needs).
    fn workspace_size(&self, handle: &PyHandle, direction: &str) -> PyResult<usize> {
        conv::workspace_size(&handle.inner, &self.problem(direction)?).or_raise()
    }

    /// y = α·conv(x, w) + β·y.
    #[pyo3(signature = (handle, x, w, y, alpha = 1.0, beta = 0.0, ws = 0, ws_bytes = 0))]
    #[allow(clippy::too_many_arguments)]
    fn forward(&self, py: Python<'_>, handle: &PyHandle, x: u64, w: u64, y: u64, alpha: f64, beta: f64, ws: u64, ws_bytes: usize) -> PyResult<()> {
        py.detach(|| {
            conv::forward(&handle.inner, &self.conv, &self.x, DevPtr(x), &self.w, DevPtr(w), &self.y, DevPtr(y), alpha, beta, Choice::Auto, workspace(ws, ws_bytes))
        })
        .or_raise()
    }

    /// dx = α·backward_data(dy, w) + β·dx.
    #[pyo3(signature = (handle, dy, w, dx, alpha = 1.0, beta = 0.0, ws = 0, ws_bytes = 0))]
    #[allow(clippy::too_many_arguments)]
    fn backward_data(&self, py: Python<'_>, handle: &PyHandle, dy: u64, w: u64, dx: u64, alpha: f64, beta: f64, ws: u64, ws_bytes: usize) -> PyResult<()> {
        py.detach(|| {
            conv::backward_data(&handle.inner, &self.conv, &self.y, DevPtr(dy), &self.w, DevPtr(w), &self.x, DevPtr(dx), alpha, beta, Choice::Auto, workspace(ws, ws_bytes))
        })
        .or_raise()
    }

    /// dw = α·backward_weights(x, dy) + β·dw.
    #[pyo3(signature = (handle, dy, x, dw, alpha = 1.0, beta = 0.0, ws = 0, ws_bytes = 0))]
    #[allow(clippy::too_many_arguments)]
    fn backward_weights(&self, py: Python<'_>, handle: &PyHandle, dy: u64, x: u64, dw: u64, alpha: f64, beta: f64, ws: u64, ws_bytes: usize) -> PyResult<()> {
        py.detach(|| {
            conv::backward_weights(&handle.inner, &self.conv, &self.y, DevPtr(dy), &self.x, DevPtr(x), &self.w, DevPtr(dw), alpha, beta, Choice::Auto, workspace(ws, ws_bytes))
        })
        .or_raise()
    }
}
