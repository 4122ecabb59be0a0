//! LRN descriptor calls (stored and returned) and LRN forward / backward / workspace query,
//! which conflux does not compute: they return NotImplemented with a reason and write nothing.

use crate::guard::{create, destroy, enum_arg, guard, obj, obj_mut, CStatus};
use crate::tensor::MiopenTensor;
use crate::handle::MiopenHandle;
use conflux::lrn::{LrnDesc, LrnMode};
use conflux::{bail, Result};
use std::ffi::c_void;

pub type MiopenLrn = *mut LrnDesc;

fn not_computed(function: &str) -> Result<()> {
    bail!(NotImplemented, "{function}: conflux does not compute local response normalization (LRN) yet; only its descriptor calls work")
}

#[no_mangle]
pub unsafe extern "C" fn miopenCreateLRNDescriptor(lrn_desc: *mut MiopenLrn) -> CStatus {
    guard("miopenCreateLRNDescriptor", || create(lrn_desc, "LRN descriptor pointer", || Ok(LrnDesc::default())))
}

#[no_mangle]
pub unsafe extern "C" fn miopenDestroyLRNDescriptor(lrn_desc: MiopenLrn) -> CStatus {
    guard("miopenDestroyLRNDescriptor", || {
        destroy(lrn_desc);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenSetLRNDescriptor(lrn_desc: MiopenLrn, mode: i32, lrn_n: u32, lrn_alpha: f64, lrn_beta: f64, lrn_k: f64) -> CStatus {
    guard("miopenSetLRNDescriptor", || {
        let d = obj_mut(lrn_desc, "LRN descriptor")?;
        let mode: LrnMode = enum_arg(mode)?;
        *d = LrnDesc::new(mode, lrn_n, lrn_alpha, lrn_beta, lrn_k)?;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenGetLRNDescriptor(lrn_desc: MiopenLrn, mode: *mut i32, lrn_n: *mut u32, lrn_alpha: *mut f64, lrn_beta: *mut f64, lrn_k: *mut f64) -> CStatus {
    guard("miopenGetLRNDescriptor", || {
        let d = obj(lrn_desc, "LRN descriptor")?;
        let (m, n) = (obj_mut(mode, "mode output")?, obj_mut(lrn_n, "lrnN output")?);
        let (a, b, k) = (obj_mut(lrn_alpha, "lrnAlpha output")?, obj_mut(lrn_beta, "lrnBeta output")?, obj_mut(lrn_k, "lrnK output")?);
        (*m, *n, *a, *b, *k) = (d.mode as i32, d.n, d.alpha, d.beta, d.k);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenLRNGetWorkSpaceSize(_y_desc: MiopenTensor, _workspace_size: *mut usize) -> CStatus {
    guard("miopenLRNGetWorkSpaceSize", || not_computed("miopenLRNGetWorkSpaceSize"))
}

#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn miopenLRNForward(
    _h: MiopenHandle,
    _lrn_desc: MiopenLrn,
    _alpha: *const c_void,
    _x_desc: MiopenTensor,
    _x: *const c_void,
    _beta: *const c_void,
    _y_desc: MiopenTensor,
    _y: *mut c_void,
    _do_backward: bool,
    _workspace: *mut c_void,
) -> CStatus {
    guard("miopenLRNForward", || not_computed("miopenLRNForward"))
}

#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn miopenLRNBackward(
    _h: MiopenHandle,
    _lrn_desc: MiopenLrn,
    _alpha: *const c_void,
    _y_desc: MiopenTensor,
    _y: *const c_void,
    _dy_desc: MiopenTensor,
    _dy: *const c_void,
    _x_desc: MiopenTensor,
    _x: *const c_void,
    _beta: *const c_void,
    _dx_desc: MiopenTensor,
    _dx: *mut c_void,
    _workspace: *const c_void,
) -> CStatus {
    guard("miopenLRNBackward", || not_computed("miopenLRNBackward"))
}
