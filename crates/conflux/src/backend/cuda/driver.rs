//! The CUDA device: dynamically loaded driver, primary context, stream, memory and events.
//! Everything goes through raw driver handles so caller memory and streams are used as they
//! are, never wrapped in owning types.

use crate::backend::{DeviceAllocator, RunContext};
use crate::error::{Error, Result};
use cudarc::driver::{result as cu, sys};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

pub(crate) fn driver_err(what: &str, e: cu::DriverError) -> Error {
    let name = e.error_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|_| format!("{:?}", e.0));
    Error::internal(format!("CUDA {what} failed: {name}"))
}

/// An opened CUDA device with its primary context.
pub struct CudaDevice {
    ordinal: usize,
    device: sys::CUdevice,
    context: sys::CUcontext,
    name: String,
    cc: (i32, i32),
    sm_count: i32,
    /// The handle's stream as a raw `CUstream` (0 = the legacy default stream).
    stream: AtomicU64,
    /// conflux's own stream-ordered memory pool (a `CUmemoryPool`), made on first use.
    pool: OnceLock<std::result::Result<usize, String>>,
    /// Non-blocking streams pieces of one operation run on beside the handle's (`fork`).
    side: OnceLock<std::result::Result<Vec<u64>, String>>,
    /// Events for fork and join, reused: a wait already queued keeps the record it saw, so an
    /// event may be recorded again as soon as its waits are queued.
    events: std::sync::Mutex<Vec<u64>>,
}

thread_local! {
    /// The stream this thread's launches go to instead of the handle's while a forked piece
    /// runs (`CudaDevice::on_stream`); `NO_OVERRIDE` otherwise.
    static STREAM_OVERRIDE: std::cell::Cell<u64> = const { std::cell::Cell::new(NO_OVERRIDE) };
}
const NO_OVERRIDE: u64 = u64::MAX;

// SAFETY: CUcontext and CUdevice are process-wide handles usable from any thread once the
// context is made current there (`bind`).
unsafe impl Send for CudaDevice {}
unsafe impl Sync for CudaDevice {}

impl std::fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaDevice({} #{}, sm_{}{})", self.name, self.ordinal, self.cc.0, self.cc.1)
    }
}

/// True when the CUDA driver library can be loaded on this machine.
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen the library.
    unsafe { sys::is_culib_present() }
}

impl CudaDevice {
    /// Open GPU `ordinal`. Without a driver or a GPU this returns an error, never panics.
    pub fn open(ordinal: usize) -> Result<CudaDevice> {
        if !driver_present() {
            return Err(Error::not_implemented("CUDA backend: no CUDA driver library (libcuda.so) found on this machine"));
        }
        cu::init().map_err(|e| driver_err("cuInit", e))?;
        let count = cu::device::get_count().map_err(|e| driver_err("cuDeviceGetCount", e))?;
        if ordinal as i64 >= count as i64 {
            return Err(Error::bad_parm(format!("CUDA backend: device ordinal {ordinal} requested, {count} device(s) present")));
        }
        let device = cu::device::get(ordinal as i32).map_err(|e| driver_err("cuDeviceGet", e))?;
        // SAFETY: device is valid; the primary context is retained for the process lifetime.
        let context = unsafe { cu::primary_ctx::retain(device) }.map_err(|e| driver_err("cuDevicePrimaryCtxRetain", e))?;
        let attr = |a| unsafe { cu::device::get_attribute(device, a) };
        let major = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR).map_err(|e| driver_err("attribute", e))?;
        let minor = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR).map_err(|e| driver_err("attribute", e))?;
        let sm_count = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT).map_err(|e| driver_err("attribute", e))?;
        let name = cu::device::get_name(device).unwrap_or_else(|_| "unknown GPU".into());
        let dev = CudaDevice { ordinal, device, context, name, cc: (major, minor), sm_count, stream: AtomicU64::new(0), pool: OnceLock::new(), side: OnceLock::new(), events: std::sync::Mutex::new(Vec::new()) };
        dev.bind()?;
        Ok(dev)
    }

    /// Make the context current on the calling thread (cheap; needed on every entry point
    /// since callers may come from any thread).
    pub fn bind(&self) -> Result<()> {
        // SAFETY: context is a retained primary context.
        unsafe { cu::ctx::set_current(self.context) }.map_err(|e| driver_err("cuCtxSetCurrent", e))
    }

    pub fn ordinal(&self) -> usize { self.ordinal }
    pub fn name(&self) -> &str { &self.name }
    pub fn compute_capability(&self) -> (i32, i32) { self.cc }
    pub fn sm_count(&self) -> i32 { self.sm_count }
    pub fn raw_device(&self) -> sys::CUdevice { self.device }
    /// NVRTC architecture name, e.g. `sm_90`.
    pub fn arch(&self) -> String { format!("sm_{}{}", self.cc.0, self.cc.1) }

    /// The stream work is queued on: the handle's, or a side stream while this thread runs a
    /// forked piece.
    pub fn stream(&self) -> sys::CUstream { self.stream_raw() as sys::CUstream }
    /// Use the caller's stream (borrowed, never destroyed by conflux).
    pub fn set_stream(&self, stream: u64) { self.stream.store(stream, Ordering::Relaxed) }
    pub fn stream_raw(&self) -> u64 {
        match STREAM_OVERRIDE.with(|o| o.get()) {
            NO_OVERRIDE => self.stream.load(Ordering::Relaxed),
            side => side,
        }
    }

    /// Run `f` with this thread's launches on `stream` (one of `side_streams`).
    pub fn on_stream<R>(&self, stream: u64, f: impl FnOnce() -> R) -> R {
        struct Restore(u64);
        impl Drop for Restore {
            fn drop(&mut self) { STREAM_OVERRIDE.with(|o| o.set(self.0)) }
        }
        let _restore = Restore(STREAM_OVERRIDE.with(|o| o.replace(stream)));
        f()
    }

    /// A timing-free event from the device's reuse list (made when the list is empty).
    pub fn take_event(&self) -> Result<sys::CUevent> {
        if let Some(e) = self.events.lock().unwrap_or_else(|p| p.into_inner()).pop() {
            return Ok(e as sys::CUevent);
        }
        cu::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING).map_err(|e| driver_err("cuEventCreate", e))
    }

    /// Events back to the reuse list once every wait on their last record is queued.
    pub fn give_events(&self, events: impl IntoIterator<Item = sys::CUevent>) {
        self.events.lock().unwrap_or_else(|p| p.into_inner()).extend(events.into_iter().map(|e| e as u64));
    }

    /// The device's side streams (`fork`), made on first use.
    pub fn side_streams(&self) -> Result<&[u64]> {
        let made = self.side.get_or_init(|| {
            (0..super::fork::SIDE_STREAMS)
                .map(|_| cu::stream::create(cu::stream::StreamKind::NonBlocking).map(|s| s as u64).map_err(|e| format!("cuStreamCreate: {:?}", e.0)))
                .collect()
        });
        made.as_ref().map(Vec::as_slice).map_err(|e| Error::internal(e.clone()))
    }

    /// The pool scratch memory comes from. Its release threshold is unlimited, so memory freed
    /// at the end of one execution is reused by the next instead of going back to the driver
    /// at every synchronisation (the default pool's threshold is 0, and mapping 100 MB again
    /// costs more than the kernels that use it). It is conflux's own, so the caller's default
    /// pool settings are left alone.
    fn pool(&self) -> Result<sys::CUmemoryPool> {
        let made = self.pool.get_or_init(|| {
            // SAFETY: zeroed props are the documented defaults; the fields set say "pinned
            // device memory on this GPU"; the pool lives as long as the process.
            unsafe {
                let mut props: sys::CUmemPoolProps = std::mem::zeroed();
                props.allocType = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
                props.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
                props.location.id = self.ordinal as i32;
                let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
                sys::cuMemPoolCreate(&mut pool, &props).result().map_err(|e| format!("cuMemPoolCreate: {:?}", e.0))?;
                let mut keep = u64::MAX;
                let attr = sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD;
                sys::cuMemPoolSetAttribute(pool, attr, (&mut keep as *mut u64).cast()).result().map_err(|e| format!("cuMemPoolSetAttribute: {:?}", e.0))?;
                Ok(pool as usize)
            }
        });
        made.as_ref().map(|&p| p as sys::CUmemoryPool).map_err(|e| Error::alloc(e.clone()))
    }

    pub fn synchronize(&self) -> Result<()> {
        self.bind()?;
        // SAFETY: stream is the handle's stream (or the default stream).
        unsafe { cu::stream::synchronize(self.stream()) }.map_err(|e| driver_err("cuStreamSynchronize", e))
    }

    /// Allocate `bytes` of device memory (at least 1 byte), zeroed.
    pub fn alloc(&self, bytes: usize) -> Result<DeviceMemory> {
        self.bind()?;
        let n = bytes.max(1);
        // SAFETY: context is current.
        let ptr = unsafe { cu::malloc_sync(n) }.map_err(|e| Error::alloc(format!("cuMemAlloc of {bytes} bytes: {:?}", e.0)))?;
        // SAFETY: ptr is a fresh allocation of n bytes.
        unsafe { cu::memset_d8_sync(ptr, 0, n) }.map_err(|e| driver_err("cuMemsetD8", e))?;
        Ok(DeviceMemory { ptr, bytes })
    }

    pub fn copy_to_device(&self, dst: u64, src: &[u8]) -> Result<()> {
        self.bind()?;
        self.synchronize()?;
        // SAFETY: dst is a device allocation of at least src.len() bytes (caller's promise).
        unsafe { cu::memcpy_htod_sync(dst, src) }.map_err(|e| driver_err("cuMemcpyHtoD", e))
    }

    pub fn copy_to_host(&self, dst: &mut [u8], src: u64) -> Result<()> {
        self.bind()?;
        self.synchronize()?;
        // SAFETY: src is a device allocation of at least dst.len() bytes (caller's promise).
        unsafe { cu::memcpy_dtoh_sync(dst, src) }.map_err(|e| driver_err("cuMemcpyDtoH", e))
    }
}

/// Device memory owned by conflux (tests, driver, benchmarks). Freed on drop.
pub struct DeviceMemory {
    ptr: sys::CUdeviceptr,
    bytes: usize,
}

impl DeviceMemory {
    pub fn ptr(&self) -> u64 { self.ptr }
    pub fn len(&self) -> usize { self.bytes }
    pub fn is_empty(&self) -> bool { self.bytes == 0 }
}

impl Drop for CudaDevice {
    fn drop(&mut self) {
        let _ = self.bind();
        for &e in self.events.get_mut().unwrap_or_else(|p| p.into_inner()).iter() {
            // SAFETY: made by `take_event`; the driver defers destruction until it completes.
            unsafe {
                let _ = cu::event::destroy(e as sys::CUevent);
            }
        }
        if let Some(Ok(streams)) = self.side.get() {
            // SAFETY: made in `side_streams`, used by nobody else; destruction waits for work
            // already queued on them.
            for &s in streams {
                unsafe {
                    let _ = cu::stream::destroy(s as sys::CUstream);
                }
            }
        }
    }
}

impl Drop for DeviceMemory {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemAlloc in `alloc`; freeing synchronizes with pending work.
        unsafe {
            let _ = cu::free_sync(self.ptr);
        }
    }
}

/// A pair of events timing work on a stream (profiling, benchmarks).
pub struct EventTimer {
    start: sys::CUevent,
    stop: sys::CUevent,
}

// SAFETY: events are plain driver handles.
unsafe impl Send for EventTimer {}

impl EventTimer {
    pub fn new() -> Result<EventTimer> {
        let f = sys::CUevent_flags::CU_EVENT_DEFAULT;
        let start = cu::event::create(f).map_err(|e| driver_err("cuEventCreate", e))?;
        let stop = cu::event::create(f).map_err(|e| driver_err("cuEventCreate", e))?;
        Ok(EventTimer { start, stop })
    }
    /// Record the start event on the device's stream.
    pub fn start(&self, dev: &CudaDevice) -> Result<()> {
        // SAFETY: valid event; the stream is the handle's.
        unsafe { cu::event::record(self.start, dev.stream()) }.map_err(|e| driver_err("cuEventRecord", e))
    }
    /// Record the stop event and wait for it; returns elapsed milliseconds.
    pub fn stop(&self, dev: &CudaDevice) -> Result<f32> {
        // SAFETY: valid events, recorded on the same stream.
        unsafe {
            cu::event::record(self.stop, dev.stream()).map_err(|e| driver_err("cuEventRecord", e))?;
            cu::event::synchronize(self.stop).map_err(|e| driver_err("cuEventSynchronize", e))?;
            cu::event::elapsed(self.start, self.stop).map_err(|e| driver_err("cuEventElapsedTime", e))
        }
    }
}

impl Drop for EventTimer {
    fn drop(&mut self) {
        // SAFETY: created in `new`.
        unsafe {
            let _ = cu::event::destroy(self.start);
            let _ = cu::event::destroy(self.stop);
        }
    }
}

/// Scratch memory for one execution, so a compiled invoker can run from many threads without
/// sharing a workspace: from the caller's allocator when the handle has one
/// (`RunContext::allocator`, MIOpen's `miopenSetAllocator`), else stream-ordered from
/// conflux's pool. Given back on drop, after the work using it has been queued.
pub struct Scratch {
    ptr: sys::CUdeviceptr,
    owner: Owner,
}

enum Owner {
    Pool(sys::CUstream),
    /// The caller's allocator and the address it returned (`ptr` is that, aligned up).
    Caller(Arc<dyn DeviceAllocator>, u64),
}

/// Alignment of every scratch block: what the pool gives, and more than the copy engine's
/// 16 bytes and the kernels' vector accesses need.
const SCRATCH_ALIGN: u64 = 256;

impl Scratch {
    pub fn new(ctx: &dyn RunContext, dev: &CudaDevice, bytes: usize) -> Result<Scratch> {
        if let Some(a) = ctx.allocator() {
            // A caller's allocator promises no alignment: ask for room to align the block up.
            let want = bytes.max(1) + SCRATCH_ALIGN as usize - 1;
            let raw = a.allocate(want).filter(|&p| p != 0).ok_or_else(|| Error::alloc(format!("the caller's allocator (miopenSetAllocator) gave no memory for {bytes} bytes of scratch")))?;
            return Ok(Scratch { ptr: raw.next_multiple_of(SCRATCH_ALIGN), owner: Owner::Caller(a, raw) });
        }
        dev.bind()?;
        let stream = dev.stream();
        let pool = dev.pool()?;
        let mut ptr: sys::CUdeviceptr = 0;
        // SAFETY: context current; the pool is this device's; memory used only on this stream.
        unsafe { sys::cuMemAllocFromPoolAsync(&mut ptr, bytes.max(1), pool, stream) }
            .result()
            .map_err(|e| Error::alloc(format!("cuMemAllocFromPoolAsync of {bytes} bytes: {:?}", e.0)))?;
        Ok(Scratch { ptr, owner: Owner::Pool(stream) })
    }
    pub fn ptr(&self) -> u64 { self.ptr }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        match &self.owner {
            // SAFETY: allocated on this stream in `new`.
            Owner::Pool(stream) => unsafe {
                let _ = cu::free_async(self.ptr, *stream);
            },
            Owner::Caller(a, raw) => a.free(*raw),
        }
    }
}

impl CudaDevice {
    /// Copy `bytes` from device address `src` to `dst` asynchronously on the handle's stream.
    pub fn copy_async(&self, dst: u64, src: u64, bytes: usize) -> Result<()> {
        self.bind()?;
        // SAFETY: both are device allocations of at least `bytes` (caller's promise).
        unsafe { cu::memcpy_dtod_async(dst, src, bytes, self.stream()) }.map_err(|e| driver_err("cuMemcpyDtoDAsync", e))
    }

    /// Zero `bytes` at `ptr` asynchronously on the handle's stream.
    pub fn memset_async(&self, ptr: u64, bytes: usize) -> Result<()> {
        self.bind()?;
        // SAFETY: ptr is a device allocation of at least `bytes` (caller's promise).
        unsafe { cu::memset_d8_async(ptr, 0, bytes, self.stream()) }.map_err(|e| driver_err("cuMemsetD8Async", e))
    }
}
