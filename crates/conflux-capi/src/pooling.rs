//! Pooling descriptor, workspace queries, pooling forward and backward.

use crate::guard::{create, destroy, dev, enum_arg, guard, obj, obj_mut, scalar, CStatus};
use crate::handle::{handle, MiopenHandle};
use crate::tensor::{desc, MiopenTensor};
use conflux::ops::{self, PoolWorkspace};
use conflux::pooling::{IndexMode, IndexType, PoolingDesc, PoolingMode};
use conflux::{bail, ensure, DataType, Result};
use std::ffi::c_void;

pub type MiopenPooling = *mut PoolingDesc;

unsafe fn pooling<'a>(p: *const PoolingDesc) -> Result<&'a PoolingDesc> {
    obj(p, "pooling descriptor")
}

/// `count` entries of a C int array (NULL → BadParm naming it).
unsafe fn ints(p: *const i32, count: usize, what: &str) -> Result<Vec<i64>> {
    ensure!(!p.is_null(), BadParm, "{what} is NULL");
    Ok(std::slice::from_raw_parts(p, count).iter().map(|&v| v as i64).collect())
}

/// α and β of a call whose output has type `dt` (double scalars for Double, as MIOpen).
unsafe fn alpha_beta(alpha: *const c_void, beta: *const c_void, dt: DataType) -> (f64, f64) {
    let double = dt == DataType::Double;
    (scalar(alpha, 1.0, double), scalar(beta, 0.0, double))
}

#[no_mangle]
pub unsafe extern "C" fn miopenCreatePoolingDescriptor(pool_desc: *mut MiopenPooling) -> CStatus {
    guard("miopenCreatePoolingDescriptor", || create(pool_desc, "pooling descriptor pointer", || Ok(PoolingDesc::default())))
}

#[no_mangle]
pub unsafe extern "C" fn miopenDestroyPoolingDescriptor(pool_desc: MiopenPooling) -> CStatus {
    guard("miopenDestroyPoolingDescriptor", || {
        destroy(pool_desc);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenSetPoolingIndexType(pool_desc: MiopenPooling, index_type: i32) -> CStatus {
    guard("miopenSetPoolingIndexType", || {
        let t: IndexType = enum_arg(index_type)?;
        obj_mut(pool_desc, "pooling descriptor")?.index_type = t;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenGetPoolingIndexType(pool_desc: MiopenPooling, index_type: *mut i32) -> CStatus {
    guard("miopenGetPoolingIndexType", || {
        let p = pooling(pool_desc)?;
        *obj_mut(index_type, "index_type output")? = p.index_type as i32;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenSetPoolingWorkSpaceIndexMode(pool_desc: MiopenPooling, workspace_index: i32) -> CStatus {
    guard("miopenSetPoolingWorkSpaceIndexMode", || {
        let m: IndexMode = enum_arg(workspace_index)?;
        obj_mut(pool_desc, "pooling descriptor")?.index_mode = m;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenGetPoolingWorkSpaceIndexMode(pool_desc: MiopenPooling, workspace_index: *mut i32) -> CStatus {
    guard("miopenGetPoolingWorkSpaceIndexMode", || {
        let p = pooling(pool_desc)?;
        *obj_mut(workspace_index, "workspace_index output")? = p.index_mode as i32;
        Ok(())
    })
}

#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn miopenSet2dPoolingDescriptor(pool_desc: MiopenPooling, mode: i32, window_h: i32, window_w: i32, pad_h: i32, pad_w: i32, stride_h: i32, stride_w: i32) -> CStatus {
    guard("miopenSet2dPoolingDescriptor", || {
        let d = obj_mut(pool_desc, "pooling descriptor")?;
        let mode: PoolingMode = enum_arg(mode)?;
        let v = |a: i32, b: i32| [a as i64, b as i64];
        *d = PoolingDesc::new(mode, &v(window_h, window_w), &v(pad_h, pad_w), &v(stride_h, stride_w))?;
        Ok(())
    })
}

#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn miopenGet2dPoolingDescriptor(
    pool_desc: MiopenPooling,
    mode: *mut i32,
    window_h: *mut i32,
    window_w: *mut i32,
    pad_h: *mut i32,
    pad_w: *mut i32,
    stride_h: *mut i32,
    stride_w: *mut i32,
) -> CStatus {
    guard("miopenGet2dPoolingDescriptor", || {
        let p = pooling(pool_desc)?;
        ensure!(p.dims() == 2, BadParm, "the pooling descriptor has {} spatial dimensions, not 2 (miopenGetNdPoolingDescriptor)", p.dims());
        let outs = [(mode, "mode"), (window_h, "windowHeight"), (window_w, "windowWidth"), (pad_h, "pad_h"), (pad_w, "pad_w"), (stride_h, "stride_h"), (stride_w, "stride_w")];
        for (o, name) in outs {
            ensure!(!o.is_null(), BadParm, "{name} output is NULL");
        }
        let vals = [p.mode as i32, p.window[0] as i32, p.window[1] as i32, p.pads[0] as i32, p.pads[1] as i32, p.strides[0] as i32, p.strides[1] as i32];
        for ((o, _), v) in outs.into_iter().zip(vals) {
            *o = v;
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenSetNdPoolingDescriptor(pool_desc: MiopenPooling, mode: i32, nb_dims: i32, window: *const i32, pad: *const i32, strides: *const i32) -> CStatus {
    guard("miopenSetNdPoolingDescriptor", || {
        let d = obj_mut(pool_desc, "pooling descriptor")?;
        let mode: PoolingMode = enum_arg(mode)?;
        ensure!((2..=3).contains(&nb_dims), BadParm, "nbDims {nb_dims}: conflux pools 2 or 3 spatial dimensions");
        let n = nb_dims as usize;
        *d = PoolingDesc::new(mode, &ints(window, n, "windowDimA")?, &ints(pad, n, "padA")?, &ints(strides, n, "stridesA")?)?;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenGetNdPoolingDescriptor(
    pool_desc: MiopenPooling,
    nb_dims_requested: i32,
    mode: *mut i32,
    nb_dims: *mut i32,
    window: *mut i32,
    pad: *mut i32,
    strides: *mut i32,
) -> CStatus {
    guard("miopenGetNdPoolingDescriptor", || {
        let p = pooling(pool_desc)?;
        ensure!(nb_dims_requested >= 0, BadParm, "nbDimsRequested {nb_dims_requested} is negative");
        let n = (nb_dims_requested as usize).min(p.dims());
        if let Some(m) = mode.as_mut() {
            *m = p.mode as i32;
        }
        if let Some(d) = nb_dims.as_mut() {
            *d = p.dims() as i32;
        }
        for (out, src) in [(window, &p.window), (pad, &p.pads), (strides, &p.strides)] {
            if !out.is_null() {
                for (i, &v) in src.iter().take(n).enumerate() {
                    *out.add(i) = v as i32;
                }
            }
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenGetPoolingForwardOutputDim(pool_desc: MiopenPooling, tensor_desc: MiopenTensor, n: *mut i32, c: *mut i32, h: *mut i32, w: *mut i32) -> CStatus {
    guard("miopenGetPoolingForwardOutputDim", || {
        let p = pooling(pool_desc)?;
        let x = desc(tensor_desc, "tensorDesc")?;
        ensure!(x.rank() == 4, BadParm, "miopenGetPoolingForwardOutputDim takes a 4-D tensor; this one is {}-D (miopenGetPoolingNdForwardOutputDim)", x.rank());
        let out = p.output_lens(x)?;
        for (o, name) in [(n, "n"), (c, "c"), (h, "h"), (w, "w")] {
            ensure!(!o.is_null(), BadParm, "{name} output is NULL");
        }
        (*n, *c, *h, *w) = (out[0] as i32, out[1] as i32, out[2] as i32, out[3] as i32);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenGetPoolingNdForwardOutputDim(pool_desc: MiopenPooling, tensor_desc: MiopenTensor, dims: i32, tensor_dims: *mut i32) -> CStatus {
    guard("miopenGetPoolingNdForwardOutputDim", || {
        let p = pooling(pool_desc)?;
        let x = desc(tensor_desc, "tensorDesc")?;
        ensure!(dims as usize == x.rank(), BadParm, "dims {dims} is not the tensor's dimension count {}", x.rank());
        let out = p.output_lens(x)?;
        ensure!(!tensor_dims.is_null(), BadParm, "tensorDimArr output is NULL");
        for (i, v) in out.iter().enumerate() {
            *tensor_dims.add(i) = *v as i32;
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenPoolingGetWorkSpaceSize(y_desc: MiopenTensor, workspace_size: *mut usize) -> CStatus {
    guard("miopenPoolingGetWorkSpaceSize", || {
        let y = desc(y_desc, "yDesc")?;
        *obj_mut(workspace_size, "workSpaceSize output")? = y.element_count();
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenPoolingGetWorkSpaceSizeV2(pool_desc: MiopenPooling, y_desc: MiopenTensor, workspace_size: *mut usize) -> CStatus {
    guard("miopenPoolingGetWorkSpaceSizeV2", || {
        let p = pooling(pool_desc)?;
        let y = desc(y_desc, "yDesc")?;
        *obj_mut(workspace_size, "workSpaceSize output")? = p.workspace_bytes(y);
        Ok(())
    })
}

#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn miopenPoolingForward(
    h: MiopenHandle,
    pool_desc: MiopenPooling,
    alpha: *const c_void,
    x_desc: MiopenTensor,
    x: *const c_void,
    beta: *const c_void,
    y_desc: MiopenTensor,
    y: *mut c_void,
    do_backward: bool,
    workspace: *mut c_void,
    workspace_size: usize,
) -> CStatus {
    guard("miopenPoolingForward", || {
        let h = handle(h)?;
        let p = pooling(pool_desc)?;
        let (xd, yd) = (desc(x_desc, "xDesc")?, desc(y_desc, "yDesc")?);
        let ab = alpha_beta(alpha, beta, yd.dtype());
        ops::pooling_forward(h, p, ab, xd, dev(x), yd, dev(y), do_backward, PoolWorkspace { ptr: dev(workspace), bytes: workspace_size })
    })
}

#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn miopenPoolingBackward(
    h: MiopenHandle,
    pool_desc: MiopenPooling,
    alpha: *const c_void,
    y_desc: MiopenTensor,
    _y: *const c_void,
    dy_desc: MiopenTensor,
    dy: *const c_void,
    x_desc: MiopenTensor,
    _x: *const c_void,
    beta: *const c_void,
    dx_desc: MiopenTensor,
    dx: *mut c_void,
    workspace: *mut c_void,
) -> CStatus {
    guard("miopenPoolingBackward", || {
        let h = handle(h)?;
        let p = pooling(pool_desc)?;
        let (yd, dyd, xd, dxd) = (desc(y_desc, "yDesc")?, desc(dy_desc, "dyDesc")?, desc(x_desc, "xDesc")?, desc(dx_desc, "dxDesc")?);
        let ab = alpha_beta(alpha, beta, dxd.dtype());
        if yd.rank() != xd.rank() {
            bail!(BadParm, "pooling backward: y is {}-D, x is {}-D", yd.rank(), xd.rank());
        }
        ops::pooling_backward(h, p, ab, yd, dyd, dev(dy), xd, dxd, dev(dx), dev(workspace))
    })
}
