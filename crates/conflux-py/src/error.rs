//! `conflux.Error`: every failed call raises it with MIOpen's status code and the reason.

use pyo3::create_exception;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

create_exception!(
    _conflux,
    Error,
    PyRuntimeError,
    "A conflux call failed. `status` is MIOpen's miopenStatus_t value, `status_name` its name \
     and `reason` says which op failed and why. Nothing the caller owns was written."
);

/// The Python exception for a library error, with its status and reason as attributes.
pub fn to_py(e: conflux::Error) -> PyErr {
    Python::attach(|py| {
        let err = Error::new_err(format!("{}: {}", e.status.name(), e.reason));
        let v = err.value(py);
        // Setting plain attributes on a fresh exception object cannot fail in practice; if it
        // did, the message still carries the status and the reason.
        let _ = v.setattr("status", e.status as i32);
        let _ = v.setattr("status_name", e.status.name());
        let _ = v.setattr("reason", e.reason.clone());
        err
    })
}

/// A caller mistake found in the bindings themselves (BadParm), as `conflux.Error`.
pub fn bad_parm(reason: impl Into<String>) -> PyErr {
    to_py(conflux::Error::bad_parm(reason))
}

/// `conflux::Result` → `PyResult`.
pub trait OrRaise<T> {
    fn or_raise(self) -> PyResult<T>;
}

impl<T> OrRaise<T> for conflux::Result<T> {
    fn or_raise(self) -> PyResult<T> {
        self.map_err(to_py)
    }
}
