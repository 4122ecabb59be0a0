//! conflux extension `confluxSetFindProgressCallback`: a C function called once per timed
//! candidate of Find and exhaustive tuning (the handle's progress hook, `conflux::conv::progress`).

use crate::guard::{guard, CStatus};
use crate::handle::{handle, MiopenHandle};
use conflux::conv::FindProgress;
use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::Arc;

/// `confluxFindProgressCallback` of miopen.h.
pub type ProgressFn = Option<unsafe extern "C" fn(solver: *const c_char, config: *const c_char, step: c_int, total: c_int, ms: f32, user: *mut c_void)>;

/// Milliseconds as C sees them: a failed candidate (skipped by Find) reads as -1.
fn c_ms(p: &FindProgress) -> f32 {
    p.outcome.as_ref().map_or(-1.0, |ms| *ms)
}

/// A C string of `s` (names and configurations never hold NUL; replace one rather than drop).
fn c_string(s: &str) -> CString {
    CString::new(s.replace('\0', " ")).unwrap_or_default()
}

/// Install `callback` with its `user` pointer on the handle, or remove it (NULL). The
/// strings passed to it live for the duration of the call only.
#[no_mangle]
pub unsafe extern "C" fn confluxSetFindProgressCallback(h: MiopenHandle, callback: ProgressFn, user: *mut c_void) -> CStatus {
    guard("confluxSetFindProgressCallback", || {
        let h = handle(h)?;
        // The pointer is the caller's; keep it as an integer so the hook is Send + Sync.
        let user = user as usize;
        h.set_find_progress(callback.map(|f| {
            Arc::new(move |p: &FindProgress| {
                let solver = c_string(p.solver);
                let config = p.config.map(c_string);
                let clamp = |v: usize| c_int::try_from(v).unwrap_or(c_int::MAX);
                // SAFETY: the caller promised a valid function; the strings outlive the call.
                unsafe { f(solver.as_ptr(), config.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()), clamp(p.step), clamp(p.total), c_ms(p), user as *mut c_void) }
            }) as conflux::conv::FindProgressFn
        }));
        Ok(())
    })
}
