//! Addresses in a device's memory, and owned buffers for tests, examples and the driver.
//! Caller memory (e.g. from the C ABI) is only ever used through `DevPtr`, never owned.

use crate::error::{Error, Result};

/// An address in the handle's memory space: a host address on the CPU backend, a device
/// address on the CUDA backend. Plain data; validity is the caller's promise.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DevPtr(pub u64);

impl DevPtr {
    pub const NULL: DevPtr = DevPtr(0);
    pub fn is_null(self) -> bool { self.0 == 0 }
    pub fn from_ptr<T>(p: *const T) -> DevPtr { DevPtr(p as usize as u64) }
    pub fn from_mut<T>(p: *mut T) -> DevPtr { DevPtr(p as usize as u64) }
    /// Byte offset from this address.
    pub fn add(self, bytes: usize) -> DevPtr { DevPtr(self.0 + bytes as u64) }
}

/// Host memory with 64-byte alignment (a cache line; enough for any vector load).
pub struct HostBuffer {
    ptr: *mut u8,
    bytes: usize,
}

// SAFETY: HostBuffer owns its allocation exclusively; access goes through &/&mut.
unsafe impl Send for HostBuffer {}
unsafe impl Sync for HostBuffer {}

const HOST_ALIGN: usize = 64;

impl HostBuffer {
    pub fn zeroed(bytes: usize) -> Result<HostBuffer> {
        let size = bytes.max(1);
        let layout = std::alloc::Layout::from_size_align(size, HOST_ALIGN)
            .map_err(|_| Error::alloc(format!("host buffer of {bytes} bytes: size too large")))?;
        // SAFETY: layout has non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(Error::alloc(format!("host buffer of {bytes} bytes: out of memory")));
        }
        Ok(HostBuffer { ptr, bytes })
    }
    pub fn len(&self) -> usize { self.bytes }
    pub fn is_empty(&self) -> bool { self.bytes == 0 }
    pub fn ptr(&self) -> DevPtr { DevPtr::from_mut(self.ptr) }
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for `bytes` bytes for the lifetime of self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.bytes) }
    }
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self gives exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.bytes) }
    }
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        let layout = std::alloc::Layout::from_size_align(self.bytes.max(1), HOST_ALIGN).unwrap();
        // SAFETY: allocated in `zeroed` with this layout.
        unsafe { std::alloc::dealloc(self.ptr, layout) }
    }
}
