//! Tensor specs from Python: `(dtype, lengths, strides)` with MIOpen's `miopenDataType_t`
//! value and strides in elements, turned into descriptors.

use conflux::{DataType, TensorDesc};
use pyo3::prelude::*;

use crate::error::{bad_parm, OrRaise};

/// What Python passes for a tensor: its `miopenDataType_t` value, lengths and strides.
pub type Spec = (i32, Vec<usize>, Vec<usize>);

pub fn desc(what: &str, spec: &Spec) -> PyResult<TensorDesc> {
    let (dtype, lens, strides) = spec;
    let dtype = DataType::from_i32(*dtype).ok_or_else(|| bad_parm(format!("{what}: data type {dtype} is not a miopenDataType_t value")))?;
    TensorDesc::with_strides(dtype, lens, strides).map_err(|e| e.context(what)).or_raise()
}

pub fn spec_of(d: &TensorDesc) -> Spec {
    (d.dtype() as i32, d.lens().to_vec(), d.strides().to_vec())
}
