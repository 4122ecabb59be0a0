//! The handle: which device runs the work, profiling state, and the cache of compiled
//! invokers (so a plan or convolution compiled once runs many times).

use crate::error::{Error, Result};
use crate::fusion::FusedProblem;
use crate::memory::{DevPtr, HostBuffer};
use crate::solver::{Invoker, Solver};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The kind of device, for matching solvers to handles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceKind {
    Cpu,
}

/// The device a handle runs on.
#[derive(Clone, Debug)]
pub enum Device {
    /// Host memory and CPU threads (rayon).
    Cpu,
}

impl Device {
    pub fn kind(&self) -> DeviceKind {
        match self {
            Device::Cpu => DeviceKind::Cpu,
        }
    }
    pub fn name(&self) -> String {
        match self {
            Device::Cpu => "cpu".to_string(),
        }
    }
}

/// Memory owned by conflux on the handle's device (tests, examples, the driver). Callers'
/// memory is never wrapped in this type; it is used through `DevPtr` only.
pub enum Buffer {
    Host(HostBuffer),
}

impl Buffer {
    pub fn ptr(&self) -> DevPtr {
        match self {
            Buffer::Host(h) => h.ptr(),
        }
    }
    pub fn len(&self) -> usize {
        match self {
            Buffer::Host(h) => h.len(),
        }
    }
    pub fn is_empty(&self) -> bool { self.len() == 0 }
}

type InvokerKey = (String, &'static str);

/// A conflux handle (`miopenHandle_t`).
pub struct Handle {
    device: Device,
    profiling: Mutex<bool>,
    last_time_ms: Mutex<f32>,
    invokers: Mutex<HashMap<InvokerKey, Arc<dyn Invoker>>>,
    builds: AtomicU64,
}

impl Handle {
    /// A handle on the default device. `CONFLUX_DEVICE=cpu` forces the CPU.
    pub fn new() -> Result<Handle> {
        Ok(Handle::with_device(Device::Cpu))
    }

    pub fn cpu() -> Handle {
        Handle::with_device(Device::Cpu)
    }

    pub fn with_device(device: Device) -> Handle {
        Handle {
            device,
            profiling: Mutex::new(false),
            last_time_ms: Mutex::new(0.0),
            invokers: Mutex::new(HashMap::new()),
            builds: AtomicU64::new(0),
        }
    }

    pub fn device(&self) -> &Device { &self.device }
    pub fn device_kind(&self) -> DeviceKind { self.device.kind() }

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

    /// Number of invokers built on this handle (a cache hit builds none).
    pub fn build_count(&self) -> u64 {
        self.builds.load(Ordering::Relaxed)
    }

    /// The invoker of `solver` for `problem`, built once and cached on the handle. The lock
    /// is held while building so racing threads build it once.
    pub fn invoker(&self, problem: &FusedProblem, solver: &'static dyn Solver) -> Result<Arc<dyn Invoker>> {
        let key = (problem.key(), solver.name());
        let mut cache = self.invokers.lock().unwrap();
        if let Some(inv) = cache.get(&key) {
            return Ok(inv.clone());
        }
        let inv = solver.build(problem, self)?;
        self.builds.fetch_add(1, Ordering::Relaxed);
        cache.insert(key, inv.clone());
        Ok(inv)
    }

    /// The cached invoker of `solver` for `problem`, if one was built.
    pub fn cached_invoker(&self, problem: &FusedProblem, solver: &'static dyn Solver) -> Option<Arc<dyn Invoker>> {
        self.invokers.lock().unwrap().get(&(problem.key(), solver.name())).cloned()
    }

    /// Allocate `bytes` of zeroed memory on the handle's device.
    pub fn alloc(&self, bytes: usize) -> Result<Buffer> {
        match &self.device {
            Device::Cpu => Ok(Buffer::Host(HostBuffer::zeroed(bytes)?)),
        }
    }

    /// Copy `data` into the start of `buf`.
    pub fn write(&self, buf: &mut Buffer, data: &[u8]) -> Result<()> {
        if data.len() > buf.len() {
            return Err(Error::bad_parm(format!("write of {} bytes into a buffer of {}", data.len(), buf.len())));
        }
        match buf {
            Buffer::Host(h) => h.as_mut_slice()[..data.len()].copy_from_slice(data),
        }
        Ok(())
    }

    /// Copy the whole of `buf` to the host.
    pub fn read(&self, buf: &Buffer) -> Result<Vec<u8>> {
        match buf {
            Buffer::Host(h) => Ok(h.as_slice().to_vec()),
        }
    }

    /// Wait until all work queued on the handle has finished.
    pub fn synchronize(&self) -> Result<()> {
        Ok(())
    }
}
