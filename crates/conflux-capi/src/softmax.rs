//! Softmax forward and backward (MIOpen's Accurate / Channel calls and the `_V2` calls with
//! an algorithm and a mode).

use crate::guard::{dev, enum_arg, guard, scalar, CStatus};
use crate::handle::{handle, MiopenHandle};
use crate::tensor::{desc, MiopenTensor};
use conflux::ops;
use conflux::softmax::{SoftmaxAlgorithm, SoftmaxMode};
use conflux::{DataType, Result};
use std::ffi::c_void;

unsafe fn alpha_beta(alpha: *const c_void, beta: *const c_void, dt: DataType) -> (f64, f64) {
    let double = dt == DataType::Double;
    (scalar(alpha, 1.0, double), scalar(beta, 0.0, double))
}

#[allow(clippy::too_many_arguments)]
unsafe fn forward(h: MiopenHandle, alpha: *const c_void, x_desc: MiopenTensor, x: *const c_void, beta: *const c_void, y_desc: MiopenTensor, y: *mut c_void, algo: i32, mode: i32) -> Result<()> {
    let h = handle(h)?;
    let (algo, mode): (SoftmaxAlgorithm, SoftmaxMode) = (enum_arg(algo)?, enum_arg(mode)?);
    let (xd, yd) = (desc(x_desc, "xDesc")?, desc(y_desc, "yDesc")?);
    ops::softmax_forward(h, algo, mode, alpha_beta(alpha, beta, yd.dtype()), xd, dev(x), yd, dev(y))
}

#[allow(clippy::too_many_arguments)]
unsafe fn backward(
    h: MiopenHandle,
    alpha: *const c_void,
    y_desc: MiopenTensor,
    y: *const c_void,
    dy_desc: MiopenTensor,
    dy: *const c_void,
    beta: *const c_void,
    dx_desc: MiopenTensor,
    dx: *mut c_void,
    algo: i32,
    mode: i32,
) -> Result<()> {
    let h = handle(h)?;
    let (algo, mode): (SoftmaxAlgorithm, SoftmaxMode) = (enum_arg(algo)?, enum_arg(mode)?);
    let (yd, dyd, dxd) = (desc(y_desc, "yDesc")?, desc(dy_desc, "dyDesc")?, desc(dx_desc, "dxDesc")?);
    ops::softmax_backward(h, algo, mode, alpha_beta(alpha, beta, dxd.dtype()), yd, dev(y), dyd, dev(dy), dxd, dev(dx))
}

const ACCURATE: i32 = SoftmaxAlgorithm::Accurate as i32;
const CHANNEL: i32 = SoftmaxMode::Channel as i32;

#[no_mangle]
pub unsafe extern "C" fn miopenSoftmaxForward(h: MiopenHandle, alpha: *const c_void, x_desc: MiopenTensor, x: *const c_void, beta: *const c_void, y_desc: MiopenTensor, y: *mut c_void) -> CStatus {
    guard("miopenSoftmaxForward", || forward(h, alpha, x_desc, x, beta, y_desc, y, ACCURATE, CHANNEL))
}

#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn miopenSoftmaxForward_V2(
    h: MiopenHandle,
    alpha: *const c_void,
    x_desc: MiopenTensor,
    x: *const c_void,
    beta: *const c_void,
    y_desc: MiopenTensor,
    y: *mut c_void,
    algorithm: i32,
    mode: i32,
) -> CStatus {
    guard("miopenSoftmaxForward_V2", || forward(h, alpha, x_desc, x, beta, y_desc, y, algorithm, mode))
}

#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn miopenSoftmaxBackward(
    h: MiopenHandle,
    alpha: *const c_void,
    y_desc: MiopenTensor,
    y: *const c_void,
    dy_desc: MiopenTensor,
    dy: *const c_void,
    beta: *const c_void,
    dx_desc: MiopenTensor,
    dx: *mut c_void,
) -> CStatus {
    guard("miopenSoftmaxBackward", || backward(h, alpha, y_desc, y, dy_desc, dy, beta, dx_desc, dx, ACCURATE, CHANNEL))
}

#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn miopenSoftmaxBackward_V2(
    h: MiopenHandle,
    alpha: *const c_void,
    y_desc: MiopenTensor,
    y: *const c_void,
    dy_desc: MiopenTensor,
    dy: *const c_void,
    beta: *const c_void,
    dx_desc: MiopenTensor,
    dx: *mut c_void,
    algorithm: i32,
    mode: i32,
) -> CStatus {
    guard("miopenSoftmaxBackward_V2", || backward(h, alpha, y_desc, y, dy_desc, dy, beta, dx_desc, dx, algorithm, mode))
}
