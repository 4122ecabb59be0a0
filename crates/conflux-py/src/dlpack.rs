//! Reading a DLPack capsule (`__dlpack__()`), legacy or versioned, without taking ownership:
//! the capsule stays with the caller, who keeps it alive while the address is used and whose
//! capsule destructor calls the producer's deleter.

use std::ffi::{c_void, CStr};

use pyo3::ffi;
use pyo3::prelude::*;

use crate::error::bad_parm;

#[repr(C)]
struct DlDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
struct DlDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DlTensor {
    data: *mut c_void,
    device: DlDevice,
    ndim: i32,
    dtype: DlDataType,
    shape: *const i64,
    strides: *const i64,
    byte_offset: u64,
}

/// DLPack ≥ 1.0's managed tensor: the version and flags come before the tensor.
#[repr(C)]
struct DlManagedTensorVersioned {
    major: u32,
    minor: u32,
    manager_ctx: *mut c_void,
    deleter: *mut c_void,
    flags: u64,
    dl_tensor: DlTensor,
}

const LEGACY: &CStr = c"dltensor";
const VERSIONED: &CStr = c"dltensor_versioned";
const FLAG_READ_ONLY: u64 = 1;

/// The view of a DLPack tensor: `(address, (type code, bits, lanes), lengths, strides in
/// elements, (device type, device id), read_only)`.
pub type View = (u64, (u8, u8, u16), Vec<i64>, Vec<i64>, (i32, i32), bool);

/// Describe the tensor a DLPack capsule holds. The capsule is not consumed.
#[pyfunction]
pub fn dlpack_view(capsule: &Bound<'_, PyAny>) -> PyResult<View> {
    let obj = capsule.as_ptr();
    // SAFETY: `obj` is a live object; PyCapsule_IsValid checks type and name before any read.
    unsafe {
        let (tensor, read_only) = if ffi::PyCapsule_IsValid(obj, LEGACY.as_ptr()) == 1 {
            // The legacy managed tensor starts with its DLTensor.
            (ffi::PyCapsule_GetPointer(obj, LEGACY.as_ptr()) as *const DlTensor, false)
        } else if ffi::PyCapsule_IsValid(obj, VERSIONED.as_ptr()) == 1 {
            let m = ffi::PyCapsule_GetPointer(obj, VERSIONED.as_ptr()) as *const DlManagedTensorVersioned;
            if m.is_null() || (*m).major != 1 {
                return Err(bad_parm("dlpack: unsupported DLPack major version (conflux reads 0.x and 1.x)"));
            }
            (&(*m).dl_tensor as *const DlTensor, (*m).flags & FLAG_READ_ONLY != 0)
        } else {
            return Err(bad_parm("dlpack: not an unconsumed DLPack capsule (\"dltensor\" or \"dltensor_versioned\")"));
        };
        if tensor.is_null() {
            return Err(bad_parm("dlpack: the capsule holds no tensor"));
        }
        let t = &*tensor;
        let ndim = usize::try_from(t.ndim).map_err(|_| bad_parm("dlpack: negative rank"))?;
        if ndim > 8 || (ndim > 0 && t.shape.is_null()) {
            return Err(bad_parm(format!("dlpack: rank {ndim} without lengths, or above 8")));
        }
        let shape: Vec<i64> = if ndim == 0 { vec![] } else { std::slice::from_raw_parts(t.shape, ndim).to_vec() };
        let strides = if t.strides.is_null() {
            // NULL strides mean a compact row-major tensor.
            let mut s = vec![1i64; ndim];
            for i in (0..ndim.saturating_sub(1)).rev() {
                s[i] = s[i + 1] * shape[i + 1].max(1);
            }
            s
        } else {
            std::slice::from_raw_parts(t.strides, ndim).to_vec()
        };
        let address = (t.data as u64).wrapping_add(t.byte_offset);
        Ok((address, (t.dtype.code, t.dtype.bits, t.dtype.lanes), shape, strides, (t.device.device_type, t.device.device_id), read_only))
    }
}
