//! The device a session runs on, what solvers may know about it (`DeviceInfo`), and the narrow
//! interface invokers and backends get from the session (`RunContext`) instead of the Handle.

use crate::backend::cpu::gemm::scratch::{with_scratch_aligned, Slot};
use super::cuda::driver::{DeviceMemory, EventTimer};
use super::cuda::CudaBackend;
use crate::error::{Error, Result};
use crate::memory::{DevPtr, HostBuffer};
use std::sync::{Arc, OnceLock};

/// The kind of device, for matching solvers to devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceKind {
    Cpu,
    Cuda,
}

/// What a solver's applicability check may read about the device: plain data, so a choice can
/// be tested with a described device that is not present.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    pub kind: DeviceKind,
    /// The GPU's properties (None on the CPU).
    pub cuda: Option<CudaInfo>,
    /// The host CPU's instruction sets (the CPU backend's kernels pick their path from them).
    pub cpu: CpuInfo,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CudaInfo {
    pub name: String,
    pub compute_capability: (i32, i32),
    pub sm_count: i32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuInfo {
    pub avx512: bool,
    /// AMX bf16 tiles usable by this process (see `backend::cpu::x86::amx::available`).
    pub amx: bool,
}

impl CpuInfo {
    /// The instruction sets of the CPU this process runs on.
    pub fn detect() -> CpuInfo {
        #[cfg(target_arch = "x86_64")]
        let avx512 = std::is_x86_feature_detected!("avx512f");
        #[cfg(not(target_arch = "x86_64"))]
        let avx512 = false;
        CpuInfo { avx512, amx: super::cpu::x86::amx::available() }
    }
}

impl DeviceInfo {
    /// This host's CPU.
    pub fn host_cpu() -> &'static DeviceInfo {
        static INFO: OnceLock<DeviceInfo> = OnceLock::new();
        INFO.get_or_init(|| DeviceInfo { kind: DeviceKind::Cpu, cuda: None, cpu: CpuInfo::detect() })
    }

    /// A GPU described by its properties (the host CPU's features alongside).
    pub fn gpu(name: &str, compute_capability: (i32, i32), sm_count: i32) -> DeviceInfo {
        let cuda = Some(CudaInfo { name: name.to_string(), compute_capability, sm_count });
        DeviceInfo { kind: DeviceKind::Cuda, cuda, cpu: DeviceInfo::host_cpu().cpu }
    }

    /// The GPU's compute capability, or the reason there is none.
    pub fn compute_capability(&self) -> std::result::Result<(i32, i32), String> {
        self.cuda.as_ref().map(|c| c.compute_capability).ok_or_else(|| "not a GPU".to_string())
    }
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

    /// What solvers may know about this device.
    pub fn info(&self) -> &DeviceInfo {
        match self {
            Device::Cpu => DeviceInfo::host_cpu(),
            Device::Cuda(b) => &b.info,
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

    /// `f(address)` with `pieces` (device address, bytes) copied back to back into scratch
    /// memory of this device (a piece at address 0 leaves a gap of unspecified bytes): on the
    /// GPU stream-ordered copies into pool scratch that lives until after the work `f` queues;
    /// on the CPU this thread's fusion scratch (64-byte aligned, reused across calls).
    pub fn with_concatenated<R>(&self, ctx: &dyn crate::backend::RunContext, pieces: &[(u64, usize)], f: impl FnOnce(u64) -> Result<R>) -> Result<R> {
        let total: usize = pieces.iter().map(|p| p.1).sum();
        match self {
            Device::Cpu => with_scratch_aligned(Slot::Fusion, total.div_ceil(4).max(1), |buf| {
                let base = buf.as_mut_ptr() as *mut u8;
                let mut at = 0;
                for &(src, bytes) in pieces {
                    if src != 0 {
                        // SAFETY: each piece is caller memory of `bytes` bytes on this (host)
                        // device; the buffer holds `total`.
                        unsafe { std::ptr::copy_nonoverlapping(src as *const u8, base.add(at), bytes) };
                    }
                    at += bytes;
                }
                f(base as u64)
            }),
            Device::Cuda(b) => {
                let scratch = crate::backend::cuda::driver::Scratch::new(ctx, &b.dev, total)?;
                let mut at = 0;
                for &(src, bytes) in pieces {
                    if src != 0 {
                        b.dev.copy_async(scratch.ptr() + at as u64, src, bytes)?;
                    }
                    at += bytes;
                }
                f(scratch.ptr())
            }
        }
    }

    /// Milliseconds `work` takes on the device: CUDA events around it on the device's stream,
    /// wall-clock time on the CPU (whose invokers return when done).
    pub fn measure_ms(&self, work: impl FnOnce() -> Result<()>) -> Result<f32> {
        match self {
            Device::Cpu => {
                let t = std::time::Instant::now();
                work()?;
                Ok((t.elapsed().as_secs_f64() * 1e3) as f32)
            }
            Device::Cuda(b) => {
                b.dev.bind()?;
                let timer = EventTimer::new()?;
                timer.start(&b.dev)?;
                work()?;
                timer.stop(&b.dev)
            }
        }
    }

    /// Wait until all work queued on the device's stream has finished.
    pub fn synchronize(&self) -> Result<()> {
        match self {
            Device::Cpu => Ok(()),
            Device::Cuda(b) => b.dev.synchronize(),
        }
    }

    /// Allocate `bytes` of zeroed memory on the device.
    pub fn alloc(&self, bytes: usize) -> Result<Buffer> {
        match self {
            Device::Cpu => Ok(Buffer::Host(HostBuffer::zeroed(bytes)?)),
            Device::Cuda(b) => Ok(Buffer::Cuda(b.dev.alloc(bytes)?)),
        }
    }
}

/// Memory owned by conflux on a device (tests, examples, the driver, Find's scratch tensors).
/// Callers' memory is never wrapped in this type; it is used through `DevPtr` only.
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

/// What running an invoker needs from the session it runs in (the Handle implements it):
/// the device, whether to time kernels for `miopenGetKernelTime`, and where scratch comes from.
pub trait RunContext: Sync {
    fn device(&self) -> &Device;
    /// Profiling on (`miopenEnableProfiling`): time launches and record them.
    fn profiling(&self) -> bool;
    /// Record the milliseconds of the last timed launch (`miopenGetKernelTime`).
    fn record_kernel_time(&self, ms: f32);
    /// The caller's scratch allocator, if one is installed.
    fn allocator(&self) -> Option<Arc<dyn DeviceAllocator>>;
}

/// The CUDA backend of a run context, or an internal error naming `what` (a CUDA solver or
/// kernel handed a CPU session).
pub fn cuda_of<'a>(dev: &'a Device, what: &str) -> Result<&'a Arc<CudaBackend>> {
    dev.cuda().ok_or_else(|| Error::internal(format!("{what}: CUDA code run on a CPU device")))
}
