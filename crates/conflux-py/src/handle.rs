//! `conflux._conflux.Handle`: one per device (`"cpu"`, `"cuda:N"`), holding compiled kernels,
//! the search state, the stream work is queued on and the scratch allocator.

use std::sync::Arc;

use conflux::Handle;
use pyo3::prelude::*;

use crate::allocator::PyAllocator;
use crate::error::{bad_parm, OrRaise};

#[pyclass(name = "Handle", module = "conflux._conflux", frozen)]
pub struct PyHandle {
    pub inner: Handle,
    device: String,
}

/// `"cpu"`, `"cuda"` or `"cuda:N"` → the GPU ordinal (None for the CPU).
fn parse_device(device: &str) -> PyResult<Option<usize>> {
    let d = device.trim().to_ascii_lowercase();
    if d == "cpu" {
        return Ok(None);
    }
    let Some(rest) = d.strip_prefix("cuda") else {
        return Err(bad_parm(format!("handle: device {device:?}: expected \"cpu\", \"cuda\" or \"cuda:N\"")));
    };
    let ordinal = rest.trim_start_matches(':');
    if ordinal.is_empty() {
        return Ok(Some(0));
    }
    ordinal.parse().map(Some).map_err(|_| bad_parm(format!("handle: device {device:?}: bad GPU ordinal")))
}

#[pymethods]
impl PyHandle {
    #[new]
    #[pyo3(signature = (device = "cpu"))]
    fn new(device: &str) -> PyResult<PyHandle> {
        let inner = match parse_device(device)? {
            None => Handle::cpu(),
            Some(ordinal) => Handle::cuda(ordinal).or_raise()?,
        };
        let device = match parse_device(device)? {
            None => "cpu".to_string(),
            Some(n) => format!("cuda:{n}"),
        };
        Ok(PyHandle { inner, device })
    }

    /// `"cpu"` or `"cuda:N"`.
    #[getter]
    fn device(&self) -> String {
        self.device.clone()
    }

    /// Queue later work on this raw `CUstream` (0: the default stream). CPU handles take 0 only.
    fn set_stream(&self, stream: u64) -> PyResult<()> {
        self.inner.set_stream(stream).or_raise()
    }

    fn stream(&self) -> u64 {
        self.inner.stream()
    }

    /// Wait for every queued kernel (tests and timing only: calls never wait themselves).
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.inner.synchronize()).or_raise()
    }

    /// Take scratch from `alloc(bytes) -> address` / `free(address)`; `None` restores the
    /// library's own stream-ordered pool.
    #[pyo3(signature = (alloc, free))]
    fn set_allocator(&self, alloc: Option<Py<PyAny>>, free: Option<Py<PyAny>>) -> PyResult<()> {
        match (alloc, free) {
            (Some(alloc), Some(free)) => self.inner.set_allocator(Some(Arc::new(PyAllocator { alloc, free }))),
            (None, None) => self.inner.set_allocator(None),
            _ => return Err(bad_parm("set_allocator: give both alloc and free, or neither")),
        }
        Ok(())
    }

    fn has_allocator(&self) -> bool {
        self.inner.allocator().is_some()
    }

    fn enable_profiling(&self, on: bool) {
        self.inner.enable_profiling(on)
    }

    /// Milliseconds of the last kernel when profiling is on (`miopenGetKernelTime`).
    fn kernel_time_ms(&self) -> f32 {
        self.inner.kernel_time_ms()
    }

    /// How many kernels or CPU plans this handle has built (tests: no recompilation).
    fn build_count(&self) -> u64 {
        self.inner.build_count()
    }

    fn __repr__(&self) -> String {
        format!("Handle(device={:?})", self.device)
    }
}
