//! The handle: which device runs the work, profiling state, and the caches of compiled
//! invokers (so a plan or convolution compiled once runs many times).

use crate::error::Result;
use std::sync::Mutex;

/// The device a handle runs on.
#[derive(Clone, Debug)]
pub enum Device {
    /// Host memory and CPU threads (rayon).
    Cpu,
}

impl Device {
    pub fn name(&self) -> String {
        match self {
            Device::Cpu => "cpu".to_string(),
        }
    }
}

/// A conflux handle (`miopenHandle_t`).
pub struct Handle {
    device: Device,
    profiling: Mutex<bool>,
    last_time_ms: Mutex<f32>,
}

impl Handle {
    /// A handle on the default device: the CPU unless a GPU backend is available and chosen.
    pub fn new() -> Result<Handle> {
        Ok(Handle::with_device(Device::Cpu))
    }

    pub fn cpu() -> Handle {
        Handle::with_device(Device::Cpu)
    }

    pub fn with_device(device: Device) -> Handle {
        Handle { device, profiling: Mutex::new(false), last_time_ms: Mutex::new(0.0) }
    }

    pub fn device(&self) -> &Device { &self.device }

    /// `miopenEnableProfiling`.
    pub fn enable_profiling(&self, on: bool) {
        *self.profiling.lock().unwrap() = on;
    }
    pub fn profiling(&self) -> bool {
        *self.profiling.lock().unwrap()
    }
    /// `miopenGetKernelTime`: milliseconds of the last operation run with profiling on.
    pub fn kernel_time_ms(&self) -> f32 {
        *self.last_time_ms.lock().unwrap()
    }
    pub(crate) fn set_kernel_time_ms(&self, t: f32) {
        *self.last_time_ms.lock().unwrap() = t;
    }
}
