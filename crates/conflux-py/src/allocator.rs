//! A device allocator backed by two Python callables (torch's caching allocator by default):
//! `alloc(bytes) -> address` and `free(address)`. Scratch then comes from the framework's
//! pool, on the stream the framework tracks, instead of a second pool beside it.

use conflux::backend::DeviceAllocator;
use pyo3::prelude::*;

pub struct PyAllocator {
    pub alloc: Py<PyAny>,
    pub free: Py<PyAny>,
}

impl DeviceAllocator for PyAllocator {
    fn allocate(&self, bytes: usize) -> Option<u64> {
        Python::attach(|py| match self.alloc.call1(py, (bytes,)).and_then(|r| r.extract::<u64>(py)) {
            Ok(ptr) if ptr != 0 => Some(ptr),
            Ok(_) => None,
            Err(e) => {
                // The library reports AllocFailed; the Python error is shown, not lost.
                e.write_unraisable(py, None);
                None
            }
        })
    }

    fn free(&self, ptr: u64) {
        Python::attach(|py| {
            if let Err(e) = self.free.call1(py, (ptr,)) {
                e.write_unraisable(py, None);
            }
        })
    }
}
