//! What every exported function shares: the panic guard, the thread-local last error, and
//! the conversions from C arguments (NULL checks, enums, scalars, pointers).

use conflux::{DevPtr, Error, Result, Status};
use std::cell::RefCell;
use std::ffi::{c_void, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// `miopenStatus_t` as the C ABI passes it.
pub type CStatus = i32;

thread_local! {
    /// Reason of the last failing call on this thread (`confluxGetLastErrorMessage`).
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn record(function: &str, e: &Error) {
    tracing::warn!(function, status = e.status.name(), "{}", e.reason);
    let text = format!("{function}: {}: {}", e.status.name(), e.reason);
    // An interior NUL cannot come from our messages, but never lose the rest of the text.
    let c = CString::new(text.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|l| *l.borrow_mut() = c);
}

/// The stored reason; valid until the next failing call on this thread.
pub fn last_error_ptr() -> *const std::ffi::c_char {
    LAST_ERROR.with(|l| l.borrow().as_ptr())
}

/// Run `f` as the body of exported function `function`: an error becomes its status (and
/// the last-error reason), a panic becomes InternalError and never unwinds into C.
pub fn guard(function: &'static str, f: impl FnOnce() -> Result<()>) -> CStatus {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => Status::Success as CStatus,
        Ok(Err(e)) => {
            record(function, &e);
            e.status as CStatus
        }
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            record(function, &Error::internal(format!("internal panic: {what}")));
            Status::InternalError as CStatus
        }
    }
}

/// A shared reference to the object behind a C handle; NULL → BadParm naming the argument.
///
/// # Safety
/// A non-NULL `p` must come from this library's create function and not be destroyed.
pub unsafe fn obj<'a, T>(p: *const T, what: &str) -> Result<&'a T> {
    p.as_ref().ok_or_else(|| Error::bad_parm(format!("{what} is NULL")))
}

/// A mutable reference to an object or an output location; NULL → BadParm.
///
/// # Safety
/// As `obj`; for outputs, `p` must be writable.
pub unsafe fn obj_mut<'a, T>(p: *mut T, what: &str) -> Result<&'a mut T> {
    p.as_mut().ok_or_else(|| Error::bad_parm(format!("{what} is NULL")))
}

/// Write `v` through an optional output pointer (NULL = the caller does not want it).
///
/// # Safety
/// A non-NULL `p` must be writable.
pub unsafe fn write_opt<T>(p: *mut T, v: T) {
    if let Some(r) = p.as_mut() {
        *r = v;
    }
}

/// Box `value` and hand it out through `out` (NULL → BadParm, nothing allocated).
///
/// # Safety
/// A non-NULL `out` must be writable.
pub unsafe fn create<T>(out: *mut *mut T, what: &str, value: impl FnOnce() -> Result<T>) -> Result<()> {
    let slot = obj_mut(out, what)?;
    *slot = Box::into_raw(Box::new(value()?));
    Ok(())
}

/// Free an object made by `create`; NULL is a no-op (as `delete nullptr`).
///
/// # Safety
/// A non-NULL `p` must come from `create` and not be freed already.
pub unsafe fn destroy<T>(p: *mut T) {
    if !p.is_null() {
        drop(Box::from_raw(p));
    }
}

/// A C enum argument; a value MIOpen does not define → BadParm.
pub fn enum_arg<E: TryFrom<i32, Error = Error>>(v: i32) -> Result<E> {
    E::try_from(v)
}

/// A caller's pointer in the handle's address space.
pub fn dev(p: *const c_void) -> DevPtr {
    DevPtr(p as usize as u64)
}

/// A host scalar (`alpha`, `beta`): read as float, or as double when `double` (MIOpen reads
/// double for Double outputs); NULL gives `default`.
///
/// # Safety
/// A non-NULL `p` must point to a readable float (double when `double`).
pub unsafe fn scalar(p: *const c_void, default: f64, double: bool) -> f64 {
    if p.is_null() {
        default
    } else if double {
        *(p as *const f64)
    } else {
        *(p as *const f32) as f64
    }
}

/// A length or count from C: negative → `status` with a reason.
pub fn non_negative(v: i32, what: &str, status: Status) -> Result<usize> {
    usize::try_from(v).map_err(|_| Error::new(status, format!("{what} = {v} is negative")))
}

/// A `size_t`-sized C array of `n` elements; NULL → `status`.
///
/// # Safety
/// A non-NULL `p` must point to `n` readable elements.
pub unsafe fn slice<'a, T>(p: *const T, n: usize, what: &str, status: Status) -> Result<&'a [T]> {
    if p.is_null() {
        return Err(Error::new(status, format!("{what} is NULL")));
    }
    Ok(std::slice::from_raw_parts(p, n))
}
