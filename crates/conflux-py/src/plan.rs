//! `conflux._conflux.FusionPlan`: MIOpen's Fusion API (vertical plans) over raw addresses.
//! Ops are added in order, compiled once on a handle, then executed with per-op arguments.

use conflux::{ActivationMode, BnMode, ConvDesc, ConvMode, DevPtr, FusionDirection, FusionPlan, OpArg, OpArgs, TensorDesc};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::error::{bad_parm, OrRaise};
use crate::handle::PyHandle;
use crate::spec::{desc, spec_of, Spec};

#[pyclass(name = "FusionPlan", module = "conflux._conflux")]
pub struct PyFusionPlan {
    plan: FusionPlan,
    x: TensorDesc,
}

/// A 2-D or 3-D convolution descriptor from per-dimension lists; `tf32`: None follows
/// `CONFLUX_ALLOW_TF32`, else strict (false) or allowed (true); `constant_weights`: the
/// caller promises the filter values behind an address never change (CPU solvers then keep
/// their transformed filters).
pub fn conv_desc(pad: Vec<i64>, stride: Vec<i64>, dilation: Vec<i64>, groups: i64, tf32: Option<bool>, constant_weights: bool) -> PyResult<ConvDesc> {
    let mut c = ConvDesc::new(ConvMode::Convolution, &pad, &stride, &dilation).or_raise()?;
    c.set_groups(groups).or_raise()?;
    if let Some(on) = tf32 {
        c.set_attribute(conflux::ConvAttrib::AllowTf32, on as i64).or_raise()?;
    }
    if constant_weights {
        c.set_attribute(conflux::ConvAttrib::ConstantWeights, 1).or_raise()?;
    }
    Ok(c)
}

fn activation_mode(mode: i32) -> PyResult<ActivationMode> {
    ActivationMode::from_i32(mode).ok_or_else(|| bad_parm(format!("activation mode {mode} is not a miopenActivationMode_t value")))
}

fn ptr(v: &Bound<'_, PyTuple>, i: usize) -> PyResult<DevPtr> {
    Ok(DevPtr(v.get_item(i)?.extract::<u64>()?))
}

fn num(v: &Bound<'_, PyTuple>, i: usize) -> PyResult<f64> {
    v.get_item(i)?.extract::<f64>()
}

/// One op's arguments from `(kind, values...)`, as `conflux.FusionPlan.execute` builds them.
fn op_arg(t: &Bound<'_, PyTuple>) -> PyResult<OpArg> {
    let kind: String = t.get_item(0)?.extract()?;
    let want = |n: usize| -> PyResult<()> {
        if t.len() == n + 1 {
            Ok(())
        } else {
            Err(bad_parm(format!("fusion plan: {kind} arguments take {n} values, got {}", t.len() - 1)))
        }
    };
    Ok(match kind.as_str() {
        "conv" => {
            want(3)?;
            OpArg::Conv { w: ptr(t, 1)?, alpha: num(t, 2)?, beta: num(t, 3)? }
        }
        "bias" => {
            want(1)?;
            OpArg::Bias { b: ptr(t, 1)? }
        }
        "activation" => {
            want(3)?;
            OpArg::Activation { alpha: num(t, 1)?, beta: num(t, 2)?, gamma: num(t, 3)? }
        }
        "activation_backward" => {
            want(5)?;
            OpArg::ActivationBackward { y: ptr(t, 1)?, x: ptr(t, 2)?, alpha: num(t, 3)?, beta: num(t, 4)?, gamma: num(t, 5)? }
        }
        "bn_inference" => {
            want(5)?;
            OpArg::BnInference { scale: ptr(t, 1)?, bias: ptr(t, 2)?, mean: ptr(t, 3)?, var: ptr(t, 4)?, eps: num(t, 5)? }
        }
        "add" => {
            want(2)?;
            OpArg::AddTensor { z: ptr(t, 1)?, alpha: num(t, 2)? }
        }
        other => return Err(bad_parm(format!("fusion plan: unknown op argument kind {other:?}"))),
    })
}

#[pymethods]
impl PyFusionPlan {
    /// A vertical plan over input `x` (a spec).
    #[new]
    fn new(x: Spec) -> PyResult<PyFusionPlan> {
        let x = desc("fusion plan input", &x)?;
        Ok(PyFusionPlan { plan: FusionPlan::new(FusionDirection::Vertical, x.clone()), x })
    }

    #[pyo3(signature = (w, pad, stride, dilation, groups = 1, tf32 = None, constant_weights = false))]
    #[allow(clippy::too_many_arguments)]
    fn add_conv(&mut self, w: Spec, pad: Vec<i64>, stride: Vec<i64>, dilation: Vec<i64>, groups: i64, tf32: Option<bool>, constant_weights: bool) -> PyResult<usize> {
        let conv = conv_desc(pad, stride, dilation, groups, tf32, constant_weights)?;
        self.plan.add_conv_forward(&conv, &desc("convolution weights", &w)?).or_raise()
    }

    fn add_bias(&mut self, b: Spec) -> PyResult<usize> {
        self.plan.add_bias(&desc("bias", &b)?).or_raise()
    }

    fn add_activation(&mut self, mode: i32) -> PyResult<usize> {
        self.plan.add_activation(activation_mode(mode)?).or_raise()
    }

    fn add_activation_backward(&mut self, mode: i32) -> PyResult<usize> {
        self.plan.add_activation_backward(activation_mode(mode)?).or_raise()
    }

    /// `spatial`: one scale / bias / mean / variance per channel; else one per activation.
    fn add_bn_inference(&mut self, spatial: bool, param: Spec) -> PyResult<usize> {
        let mode = if spatial { BnMode::Spatial } else { BnMode::PerActivation };
        self.plan.add_bn_inference(mode, &desc("batch-norm parameters", &param)?).or_raise()
    }

    /// Residual add α·z (z has the output's spec).
    fn add_tensor_add(&mut self, z: Spec) -> PyResult<usize> {
        self.plan.add_tensor_add(&desc("residual", &z)?).or_raise()
    }

    /// Choose and build the kernel (may time candidates and synchronize: once per plan).
    fn compile(&mut self, py: Python<'_>, handle: &PyHandle) -> PyResult<()> {
        let plan = &mut self.plan;
        py.detach(|| plan.compile(&handle.inner)).or_raise()
    }

    fn is_compiled(&self) -> bool {
        self.plan.is_compiled()
    }

    /// The solver the compiled plan runs (None before compile).
    fn solver_name(&self) -> Option<&'static str> {
        self.plan.solver_name()
    }

    /// The output spec the plan derives (lengths and the input's layout).
    fn output_spec(&self) -> Spec {
        spec_of(self.plan.output_desc())
    }

    fn input_spec(&self) -> Spec {
        spec_of(&self.x)
    }

    fn op_count(&self) -> usize {
        self.plan.ops().len()
    }

    /// `execute` for callers that have checked x and y against the plan's own specs (the
    /// Python layer's bound plans, once per shape): no descriptors are built per call, and
    /// the handle's stream is set in the same call.
    #[allow(clippy::too_many_arguments)]
    fn run(&self, py: Python<'_>, handle: &PyHandle, stream: u64, x: u64, y: u64, args: Vec<Bound<'_, PyTuple>>) -> PyResult<()> {
        let mut op_args = OpArgs::new();
        for (i, t) in args.iter().enumerate() {
            op_args.set(i, op_arg(t)?);
        }
        handle.inner.set_stream(stream).or_raise()?;
        let (plan, xd) = (&self.plan, &self.x);
        py.detach(|| plan.execute(&handle.inner, xd, DevPtr(x), plan.output_desc(), DevPtr(y), &op_args)).or_raise()
    }

    /// Run on `x` into `y` (specs and addresses; the specs must equal the plan's), with one
    /// argument tuple per op in op order. Queues work on the handle's stream and returns.
    #[allow(clippy::too_many_arguments)]
    fn execute(&self, py: Python<'_>, handle: &PyHandle, x_spec: Spec, x: u64, y_spec: Spec, y: u64, args: Vec<Bound<'_, PyTuple>>) -> PyResult<()> {
        let mut op_args = OpArgs::new();
        for (i, t) in args.iter().enumerate() {
            op_args.set(i, op_arg(t)?);
        }
        let xd = desc("fusion plan input", &x_spec)?;
        let yd = desc("fusion plan output", &y_spec)?;
        let plan = &self.plan;
        py.detach(|| plan.execute(&handle.inner, &xd, DevPtr(x), &yd, DevPtr(y), &op_args)).or_raise()
    }
}
