//! Activation descriptor and activation forward/backward (reference doc §1d).

use crate::guard::{create, destroy, dev, enum_arg, guard, obj, obj_mut, scalar, CStatus};
use crate::handle::{handle, MiopenHandle};
use crate::tensor::{desc, MiopenTensor};
use conflux::{bail, ops, ActivationDesc, ActivationMode, Result};
use std::ffi::c_void;

pub type MiopenActivation = *mut ActivationDesc;

/// The descriptor behind a C argument (NULL → BadParm).
///
/// # Safety
/// A non-NULL `a` must come from `miopenCreateActivationDescriptor` and be alive.
pub unsafe fn activation<'a>(a: *const ActivationDesc) -> Result<&'a ActivationDesc> {
    obj(a, "activation descriptor")
}

/// The API scalars of activation calls must be exactly α = 1, β = 0 (NULL reads as those);
/// MIOpen refuses others with a message-only throw, i.e. UnknownError.
unsafe fn unit_scalars(alpha: *const c_void, beta: *const c_void, what: &str) -> Result<()> {
    let (a, b) = (scalar(alpha, 1.0, false), scalar(beta, 0.0, false));
    if a != 1.0 || b != 0.0 {
        bail!(UnknownError, "{what}: only alpha = 1 and beta = 0 are supported, got {a} and {b}");
    }
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn miopenCreateActivationDescriptor(activ_desc: *mut MiopenActivation) -> CStatus {
    guard("miopenCreateActivationDescriptor", || create(activ_desc, "activation descriptor pointer", || Ok(ActivationDesc::default())))
}

#[no_mangle]
pub unsafe extern "C" fn miopenDestroyActivationDescriptor(activ_desc: MiopenActivation) -> CStatus {
    guard("miopenDestroyActivationDescriptor", || {
        destroy(activ_desc);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenSetActivationDescriptor(activ_desc: MiopenActivation, mode: i32, activ_alpha: f64, activ_beta: f64, activ_gamma: f64) -> CStatus {
    guard("miopenSetActivationDescriptor", || {
        let d = obj_mut(activ_desc, "activation descriptor")?;
        let mode: ActivationMode = enum_arg(mode)?;
        *d = ActivationDesc::new(mode, activ_alpha, activ_beta, activ_gamma);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenGetActivationDescriptor(
    activ_desc: MiopenActivation,
    mode: *mut i32,
    activ_alpha: *mut f64,
    activ_beta: *mut f64,
    activ_gamma: *mut f64,
) -> CStatus {
    guard("miopenGetActivationDescriptor", || {
        let d = activation(activ_desc)?;
        let m = obj_mut(mode, "mode output")?;
        let (a, b, g) = (obj_mut(activ_alpha, "activAlpha output")?, obj_mut(activ_beta, "activBeta output")?, obj_mut(activ_gamma, "activGamma output")?);
        *m = d.mode as i32;
        (*a, *b, *g) = (d.alpha, d.beta, d.gamma);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenActivationForward(
    h: MiopenHandle,
    activ_desc: MiopenActivation,
    alpha: *const c_void,
    x_desc: MiopenTensor,
    x: *const c_void,
    beta: *const c_void,
    y_desc: MiopenTensor,
    y: *mut c_void,
) -> CStatus {
    guard("miopenActivationForward", || {
        let h = handle(h)?;
        let a = activation(activ_desc)?;
        unit_scalars(alpha, beta, "activation forward")?;
        ops::activation_forward(h, a, desc(x_desc, "xDesc")?, dev(x), desc(y_desc, "yDesc")?, dev(y))
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenActivationBackward(
    h: MiopenHandle,
    activ_desc: MiopenActivation,
    alpha: *const c_void,
    y_desc: MiopenTensor,
    y: *const c_void,
    dy_desc: MiopenTensor,
    dy: *const c_void,
    x_desc: MiopenTensor,
    x: *const c_void,
    beta: *const c_void,
    dx_desc: MiopenTensor,
    dx: *mut c_void,
) -> CStatus {
    guard("miopenActivationBackward", || {
        let h = handle(h)?;
        let a = activation(activ_desc)?;
        unit_scalars(alpha, beta, "activation backward")?;
        ops::activation_backward(
            h,
            a,
            desc(y_desc, "yDesc")?,
            dev(y),
            desc(dy_desc, "dyDesc")?,
            dev(dy),
            desc(x_desc, "xDesc")?,
            dev(x),
            desc(dx_desc, "dxDesc")?,
            dev(dx),
        )
    })
}
