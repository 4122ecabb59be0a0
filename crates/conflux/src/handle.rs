//! The handle (`miopenHandle_t`): the session on top of a device. It holds which device runs
//! the work, the stream, profiling state, the caller's allocator, and the search state
//! (compiled invokers, find-db memo, progress hook) so a plan or convolution compiled once runs
//! many times. Solvers and backends never see it: they get `RunContext` / `BuildContext`.

use crate::backend::cuda::CudaBackend;
pub use crate::backend::{Buffer, Device, DeviceAllocator, DeviceInfo, DeviceKind, RunContext};
use crate::error::{Error, Result};
use crate::problem::FusedProblem;
use crate::search::{FindProgressFn, SearchState, Session};
use crate::solver::{Invoker, Solver};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A conflux handle (`miopenHandle_t`).
pub struct Handle {
    device: Device,
    /// The stream a CPU handle was given: kept for `miopenGetStream`, otherwise unused (CPU
    /// calls run on conflux's pool and return when done). HIP programs create every handle
    /// with a stream.
    cpu_stream: AtomicU64,
    profiling: Mutex<bool>,
    last_time_ms: Mutex<f32>,
    /// Compiled invokers, find-db memo and progress hook (`search::Session`).
    search: SearchState,
    /// The caller's device allocator (`set_allocator`); None: conflux's pool.
    allocator: Mutex<Option<Arc<dyn DeviceAllocator>>>,
}

impl Handle {
    /// A handle on the default device: GPU 0 when a CUDA driver, NVRTC and a GPU are
    /// present, else the CPU. `CONFLUX_DEVICE=cpu` forces the CPU; `CONFLUX_DEVICE=cuda`
    /// (or `cuda:N`) demands a GPU and fails with the reason when none can be opened.
    pub fn new() -> Result<Handle> {
        let choice = std::env::var("CONFLUX_DEVICE").unwrap_or_default().to_ascii_lowercase();
        match choice.as_str() {
            "cpu" => Ok(Handle::cpu()),
            "" => Ok(Handle::cuda(0).unwrap_or_else(|e| {
                tracing::debug!(reason = %e, "no usable GPU; using the CPU backend");
                Handle::cpu()
            })),
            c if c.starts_with("cuda") => {
                let ordinal = c.strip_prefix("cuda").unwrap().trim_start_matches(':');
                let ordinal = if ordinal.is_empty() { 0 } else {
                    ordinal.parse().map_err(|_| Error::bad_parm(format!("CONFLUX_DEVICE={c}: bad device ordinal")))?
                };
                Handle::cuda(ordinal)
            }
            other => Err(Error::bad_parm(format!("CONFLUX_DEVICE={other}: expected cpu, cuda or cuda:N"))),
        }
    }

    /// A handle on GPU `ordinal` using the default stream.
    pub fn cuda(ordinal: usize) -> Result<Handle> {
        Ok(Handle::with_device(Device::Cuda(Arc::new(CudaBackend::open(ordinal)?))))
    }

    /// A handle on GPU `ordinal` that queues work on the caller's `CUstream` (borrowed).
    pub fn cuda_with_stream(ordinal: usize, stream: u64) -> Result<Handle> {
        let h = Handle::cuda(ordinal)?;
        h.set_stream(stream)?;
        Ok(h)
    }

    /// `miopenSetStream`: the raw `CUstream` work is queued on (0 = default). A CPU handle keeps
    /// the value for `stream()` and runs as before.
    pub fn set_stream(&self, stream: u64) -> Result<()> {
        match &self.device {
            Device::Cuda(b) => b.dev.set_stream(stream),
            Device::Cpu => self.cpu_stream.store(stream, Ordering::Relaxed),
        }
        Ok(())
    }

    /// `miopenGetStream`: the raw stream (0 for the default stream); on a CPU handle, the value
    /// it was given.
    pub fn stream(&self) -> u64 {
        match &self.device {
            Device::Cuda(b) => b.dev.stream_raw(),
            Device::Cpu => self.cpu_stream.load(Ordering::Relaxed),
        }
    }

    pub fn cpu() -> Handle {
        Handle::with_device(Device::Cpu)
    }

    pub fn with_device(device: Device) -> Handle {
        Handle {
            device,
            cpu_stream: AtomicU64::new(0),
            profiling: Mutex::new(false),
            last_time_ms: Mutex::new(0.0),
            search: SearchState::default(),
            allocator: Mutex::new(None),
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
    fn set_kernel_time_ms(&self, t: f32) {
        *self.last_time_ms.lock().unwrap() = t;
    }

    /// Number of invokers built on this handle (a cache hit builds none).
    pub fn build_count(&self) -> u64 {
        self.search.build_count()
    }

    /// The invoker of `solver` for `problem`, built once and cached on the handle.
    pub fn invoker(&self, problem: &FusedProblem, solver: &'static dyn Solver) -> Result<Arc<dyn Invoker>> {
        crate::search::invoker(self, problem, solver)
    }

    /// Install (Some) or remove (None) the hook Find and exhaustive tuning call after each
    /// timed candidate, on every direction and on fusion plans compiled with a timing find mode.
    pub fn set_find_progress(&self, hook: Option<FindProgressFn>) {
        self.search.set_find_progress(hook);
    }

    /// Take GPU scratch from the caller's allocator (Some) or from conflux's pool again (None).
    /// The CPU backend allocates no device memory and never calls it.
    pub fn set_allocator(&self, allocator: Option<Arc<dyn DeviceAllocator>>) {
        *self.allocator.lock().unwrap() = allocator;
    }

    /// The caller's allocator, if one is installed.
    pub fn allocator(&self) -> Option<Arc<dyn DeviceAllocator>> {
        self.allocator.lock().unwrap().clone()
    }

    /// Milliseconds `work` takes on the device (`Device::measure_ms`).
    pub fn measure_ms(&self, work: impl FnOnce() -> Result<()>) -> Result<f32> {
        self.device.measure_ms(work)
    }

    /// Allocate `bytes` of zeroed memory on the handle's device.
    pub fn alloc(&self, bytes: usize) -> Result<Buffer> {
        self.device.alloc(bytes)
    }

    /// Copy `data` into the start of `buf`.
    pub fn write(&self, buf: &mut Buffer, data: &[u8]) -> Result<()> {
        if data.len() > buf.len() {
            return Err(Error::bad_parm(format!("write of {} bytes into a buffer of {}", data.len(), buf.len())));
        }
        match buf {
            Buffer::Host(h) => h.as_mut_slice()[..data.len()].copy_from_slice(data),
            Buffer::Cuda(d) => self.cuda_backend()?.dev.copy_to_device(d.ptr(), data)?,
        }
        Ok(())
    }

    /// Copy the whole of `buf` to the host.
    pub fn read(&self, buf: &Buffer) -> Result<Vec<u8>> {
        match buf {
            Buffer::Host(h) => Ok(h.as_slice().to_vec()),
            Buffer::Cuda(d) => {
                let mut out = vec![0u8; d.len()];
                self.cuda_backend()?.dev.copy_to_host(&mut out, d.ptr())?;
                Ok(out)
            }
        }
    }

    /// Wait until all work queued on the handle has finished.
    pub fn synchronize(&self) -> Result<()> {
        self.device.synchronize()
    }

    fn cuda_backend(&self) -> Result<&Arc<CudaBackend>> {
        self.device.cuda().ok_or_else(|| Error::internal("GPU buffer used with a CPU handle"))
    }
}

impl RunContext for Handle {
    fn device(&self) -> &Device { &self.device }
    fn profiling(&self) -> bool { self.profiling() }
    fn record_kernel_time(&self, ms: f32) { self.set_kernel_time_ms(ms) }
    fn allocator(&self) -> Option<Arc<dyn DeviceAllocator>> { self.allocator() }
}

impl Session for Handle {
    fn search_state(&self) -> &SearchState { &self.search }
}
