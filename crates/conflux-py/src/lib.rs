//! `conflux._conflux`: the Python extension module. It exposes handles, fusion plans, the
//! three convolution directions, bias-gradient and activations over memory the caller owns,
//! passed as raw addresses with a tensor spec `(dtype, lengths, strides)`; `python/conflux`
//! turns torch, numpy and DLPack arrays into those and owns every allocation.

use pyo3::prelude::*;

mod allocator;
mod conv;
mod dlpack;
mod error;
mod handle;
mod plan;
mod pointwise;
mod spec;

#[pymodule]
fn _conflux(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("Error", m.py().get_type::<error::Error>())?;
    m.add_class::<handle::PyHandle>()?;
    m.add_class::<plan::PyFusionPlan>()?;
    m.add_class::<conv::PyConvolution>()?;
    m.add_function(wrap_pyfunction!(pointwise::activation_forward, m)?)?;
    m.add_function(wrap_pyfunction!(pointwise::activation_backward, m)?)?;
    m.add_function(wrap_pyfunction!(pointwise::bias_backward, m)?)?;
    m.add_function(wrap_pyfunction!(dlpack::dlpack_view, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
