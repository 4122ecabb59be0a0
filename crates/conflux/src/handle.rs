//! The handle: which device runs the work, profiling state, and the cache of compiled
//! invokers (so a plan or convolution compiled once runs many times).

use crate::backend::cuda::driver::DeviceMemory;
use crate::backend::cuda::CudaBackend;
use crate::conv::FindProgressFn;
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
    Cuda,
}

/// The device a handle runs on.
#[derive(Clone, Debug)]
pub enum Device {
    /// Host memory and CPU threads (rayon).
    Cpu,
    /// An NVIDIA GPU through the dynamically loaded CUDA driver and NVRTC.
    Cuda(Arc<CudaBackend>),
}

impl Device {
    pub fn kind(&self) -> DeviceKind {
        match self {
            Device::Cpu => DeviceKind::Cpu,
            Device::Cuda(_) => DeviceKind::Cuda,
        }
    }
    /// What a find-db entry is valid for: the device model and architecture (never its
    /// ordinal), or the CPU architecture and thread count for CPU handles.
    pub fn identity(&self) -> String {
        match self {
            Device::Cpu => format!("cpu-{}-{}t", std::env::consts::ARCH, rayon::current_num_threads()),
            Device::Cuda(b) => format!("cuda-{}-{}-{}sm", b.dev.name(), b.dev.arch(), b.dev.sm_count()),
        }
    }
    pub fn name(&self) -> String {
        match self {
            Device::Cpu => "cpu".to_string(),
            Device::Cuda(b) => format!("cuda:{} ({}, {})", b.dev.ordinal(), b.dev.name(), b.dev.arch()),
        }
    }
    /// The CUDA backend, if this is a GPU.
    pub fn cuda(&self) -> Option<&Arc<CudaBackend>> {
        match self {
            Device::Cuda(b) => Some(b),
            Device::Cpu => None,
        }
    }
}

/// Memory owned by conflux on the handle's device (tests, examples, the driver). Callers'
/// memory is never wrapped in this type; it is used through `DevPtr` only.
pub enum Buffer {
    Host(HostBuffer),
    Cuda(DeviceMemory),
}

impl Buffer {
    pub fn ptr(&self) -> DevPtr {
        match self {
            Buffer::Host(h) => h.ptr(),
            Buffer::Cuda(d) => DevPtr(d.ptr()),
        }
    }
    pub fn len(&self) -> usize {
        match self {
            Buffer::Host(h) => h.len(),
            Buffer::Cuda(d) => d.len(),
        }
    }
    pub fn is_empty(&self) -> bool { self.len() == 0 }
}

/// Device memory supplied by the caller (MIOpen's `miopenSetAllocator`): the GPU solvers'
/// per-execution scratch comes from it instead of conflux's own memory pool. Memory is used on
/// the handle's stream only and handed back as soon as the work using it is queued, as MIOpen
/// does: stream order keeps it valid for a stream-aware caching allocator (PyTorch's), and a
/// plain `cudaFree` waits for the device anyway.
pub trait DeviceAllocator: Send + Sync {
    /// `bytes` bytes of device memory, or None when the allocator has none.
    fn allocate(&self, bytes: usize) -> Option<u64>;
    /// Give back memory `allocate` returned.
    fn free(&self, ptr: u64);
}

type InvokerKey = (String, &'static str);
/// Find results read or written by this handle, by find-db key (None: no entry on disk).
type FindMemo = HashMap<String, Option<Arc<crate::conv::find_db::FindRecord>>>;

/// A conflux handle (`miopenHandle_t`).
pub struct Handle {
    device: Device,
    profiling: Mutex<bool>,
    last_time_ms: Mutex<f32>,
    invokers: Mutex<HashMap<InvokerKey, Arc<dyn Invoker>>>,
    builds: AtomicU64,
    find_memo: Mutex<FindMemo>,
    /// Called once per timed candidate of Find / tuning (`set_find_progress`).
    find_progress: Mutex<Option<FindProgressFn>>,
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

    /// `miopenSetStream`: the raw `CUstream` work is queued on (GPU handles; 0 = default).
    pub fn set_stream(&self, stream: u64) -> Result<()> {
        match &self.device {
            Device::Cuda(b) => {
                b.dev.set_stream(stream);
                Ok(())
            }
            Device::Cpu if stream == 0 => Ok(()),
            Device::Cpu => Err(Error::bad_parm("set stream: a CPU handle has no streams")),
        }
    }

    /// `miopenGetStream`: the raw stream (0 for the default stream and for CPU handles).
    pub fn stream(&self) -> u64 {
        self.device.cuda().map(|b| b.dev.stream_raw()).unwrap_or(0)
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
            find_memo: Mutex::new(HashMap::new()),
            find_progress: Mutex::new(None),
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

    /// Cache `inv` as the invoker of `solver` for `problem`, replacing any earlier one (after
    /// tuning picked a configuration other than the one built first).
    pub fn replace_invoker(&self, problem: &FusedProblem, solver: &'static dyn Solver, inv: Arc<dyn Invoker>) {
        self.invokers.lock().unwrap().insert((problem.key(), solver.name()), inv);
    }

    /// The cached invoker of `solver` for `problem`, if one was built.
    pub fn cached_invoker(&self, problem: &FusedProblem, solver: &'static dyn Solver) -> Option<Arc<dyn Invoker>> {
        self.invokers.lock().unwrap().get(&(problem.key(), solver.name())).cloned()
    }

    /// The in-memory view of the find-db for this handle (read once per key, updated by Find).
    pub(crate) fn find_memo(&self) -> &Mutex<FindMemo> {
        &self.find_memo
    }

    /// Install (Some) or remove (None) the hook Find and exhaustive tuning call after each
    /// timed candidate, on every direction and on fusion plans compiled with a timing find mode.
    pub fn set_find_progress(&self, hook: Option<FindProgressFn>) {
        *self.find_progress.lock().unwrap() = hook;
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

    /// The installed progress hook, cloned so it runs without the lock held (it may call
    /// back into the handle, even replace itself).
    pub(crate) fn find_progress(&self) -> Option<FindProgressFn> {
        self.find_progress.lock().unwrap().clone()
    }

    /// Milliseconds `work` takes on the device: CUDA events around it on the handle's stream,
    /// wall-clock time on the CPU (whose invokers return when done).
    pub fn measure_ms(&self, work: impl FnOnce() -> Result<()>) -> Result<f32> {
        match &self.device {
            Device::Cpu => {
                let t = std::time::Instant::now();
                work()?;
                Ok((t.elapsed().as_secs_f64() * 1e3) as f32)
            }
            Device::Cuda(b) => {
                b.dev.bind()?;
                let timer = crate::backend::cuda::driver::EventTimer::new()?;
                timer.start(&b.dev)?;
                work()?;
                timer.stop(&b.dev)
            }
        }
    }

    /// Allocate `bytes` of zeroed memory on the handle's device.
    pub fn alloc(&self, bytes: usize) -> Result<Buffer> {
        match &self.device {
            Device::Cpu => Ok(Buffer::Host(HostBuffer::zeroed(bytes)?)),
            Device::Cuda(b) => Ok(Buffer::Cuda(b.dev.alloc(bytes)?)),
        }
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
        match &self.device {
            Device::Cpu => Ok(()),
            Device::Cuda(b) => b.dev.synchronize(),
        }
    }

    fn cuda_backend(&self) -> Result<&Arc<CudaBackend>> {
        self.device.cuda().ok_or_else(|| Error::internal("GPU buffer used with a CPU handle"))
    }
}
