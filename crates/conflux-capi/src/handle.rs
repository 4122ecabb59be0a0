//! Handle functions (reference doc §1a), `miopenGetErrorString`, `miopenGetVersion`, and the
//! conflux extension `confluxGetLastErrorMessage`.

use crate::guard::{create, destroy, guard, last_error_ptr, obj, obj_mut, write_opt, CStatus};
use conflux::handle::DeviceAllocator;
use conflux::{Handle, Status};
use std::ffi::{c_char, c_void, CStr};
use std::sync::Arc;

/// The MIOpen API level this library implements (MIOpen 3.3, ROCm 6.3); clients gate
/// features on it, so it is MIOpen's number, not conflux's crate version.
pub const API_VERSION: (usize, usize, usize) = (3, 3, 0);

type AllocFn = Option<unsafe extern "C" fn(ctx: *mut c_void, bytes: usize) -> *mut c_void>;
type FreeFn = Option<unsafe extern "C" fn(ctx: *mut c_void, mem: *mut c_void)>;

/// A user allocator given to `miopenSetAllocator`: the GPU solvers' per-execution scratch
/// comes from it (`conflux::handle::DeviceAllocator`).
struct CAllocator {
    alloc: unsafe extern "C" fn(ctx: *mut c_void, bytes: usize) -> *mut c_void,
    free: FreeFn,
    /// The caller's context pointer, passed back unchanged.
    ctx: usize,
}

impl DeviceAllocator for CAllocator {
    fn allocate(&self, bytes: usize) -> Option<u64> {
        // SAFETY: the caller registered this function for exactly this use.
        let p = unsafe { (self.alloc)(self.ctx as *mut c_void, bytes) };
        (!p.is_null()).then_some(p as u64)
    }
    fn free(&self, ptr: u64) {
        if let Some(f) = self.free {
            // SAFETY: ptr came from the paired allocator with the same context.
            unsafe { f(self.ctx as *mut c_void, ptr as *mut c_void) }
        }
    }
}

/// `miopenHandle_t` points to this.
pub struct HandleObj {
    pub handle: Handle,
}

impl HandleObj {
    fn new(handle: Handle) -> HandleObj {
        HandleObj { handle }
    }
}

pub type MiopenHandle = *mut HandleObj;

/// The handle behind a C argument (NULL → BadParm).
///
/// # Safety
/// A non-NULL `h` must come from `miopenCreate*` and be alive.
pub unsafe fn handle<'a>(h: MiopenHandle) -> conflux::Result<&'a Handle> {
    Ok(&obj(h, "handle")?.handle)
}

#[no_mangle]
pub extern "C" fn miopenGetErrorString(error: CStatus) -> *const c_char {
    let name: &'static CStr = match Status::from_i32(error) {
        Some(Status::Success) => c"miopenStatusSuccess",
        Some(Status::NotInitialized) => c"miopenStatusNotInitialized",
        Some(Status::InvalidValue) => c"miopenStatusInvalidValue",
        Some(Status::BadParm) => c"miopenStatusBadParm",
        Some(Status::AllocFailed) => c"miopenStatusAllocFailed",
        Some(Status::InternalError) => c"miopenStatusInternalError",
        Some(Status::NotImplemented) => c"miopenStatusNotImplemented",
        Some(Status::UnknownError) => c"miopenStatusUnknownError",
        Some(Status::UnsupportedOp) => c"miopenStatusUnsupportedOp",
        Some(Status::GpuOperationsSkipped) => c"miopenStatusGpuOperationsSkipped",
        Some(Status::VersionMismatch) => c"miopenStatusVersionMismatch",
        None => c"Unknown error status",
    };
    name.as_ptr()
}

/// conflux extension: the reason of the last failing call on this thread ("" if none).
#[no_mangle]
pub extern "C" fn confluxGetLastErrorMessage() -> *const c_char {
    last_error_ptr()
}

#[no_mangle]
pub unsafe extern "C" fn miopenGetVersion(major: *mut usize, minor: *mut usize, patch: *mut usize) -> CStatus {
    guard("miopenGetVersion", || {
        write_opt(major, API_VERSION.0);
        write_opt(minor, API_VERSION.1);
        write_opt(patch, API_VERSION.2);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenCreate(handle: *mut MiopenHandle) -> CStatus {
    guard("miopenCreate", || create(handle, "handle pointer", || Ok(HandleObj::new(Handle::new()?))))
}

/// `stream` is a `CUstream` / `cudaStream_t`, borrowed; NULL = the default stream.
#[no_mangle]
pub unsafe extern "C" fn miopenCreateWithStream(handle: *mut MiopenHandle, stream: *mut c_void) -> CStatus {
    guard("miopenCreateWithStream", || {
        create(handle, "handle pointer", || {
            let h = Handle::new()?;
            if !stream.is_null() {
                h.set_stream(stream as usize as u64)?;
            }
            Ok(HandleObj::new(h))
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenDestroy(handle: MiopenHandle) -> CStatus {
    guard("miopenDestroy", || {
        destroy(handle);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenSetStream(handle: MiopenHandle, stream_id: *mut c_void) -> CStatus {
    guard("miopenSetStream", || self::handle(handle)?.set_stream(stream_id as usize as u64))
}

#[no_mangle]
pub unsafe extern "C" fn miopenGetStream(handle: MiopenHandle, stream_id: *mut *mut c_void) -> CStatus {
    guard("miopenGetStream", || {
        let h = self::handle(handle)?;
        *obj_mut(stream_id, "stream output")? = h.stream() as usize as *mut c_void;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenSetAllocator(handle: MiopenHandle, allocator: AllocFn, deallocator: FreeFn, allocator_context: *mut c_void) -> CStatus {
    guard("miopenSetAllocator", || {
        let h = obj(handle, "handle")?;
        // A NULL allocator restores the default (conflux's own memory pool).
        let a = allocator.map(|alloc| Arc::new(CAllocator { alloc, free: deallocator, ctx: allocator_context as usize }) as Arc<dyn DeviceAllocator>);
        h.handle.set_allocator(a);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenGetKernelTime(handle: MiopenHandle, time: *mut f32) -> CStatus {
    guard("miopenGetKernelTime", || {
        let h = self::handle(handle)?;
        *obj_mut(time, "time output")? = h.kernel_time_ms();
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenEnableProfiling(handle: MiopenHandle, enable: bool) -> CStatus {
    guard("miopenEnableProfiling", || {
        self::handle(handle)?.enable_profiling(enable);
        Ok(())
    })
}
