//! Tensor descriptors (reference doc §1b) and the tensor helpers (`miopenOpTensor`,
//! `miopenSetTensor`, `miopenScaleTensor`, `miopenTransformTensor`).

use crate::guard::{create, destroy, dev, enum_arg, guard, obj, obj_mut, scalar, slice, write_opt, CStatus};
use crate::handle::{handle, MiopenHandle};
use conflux::{bail, ops, DataType, Error, Layout, Result, Status, TensorDesc, TensorOp};
use std::ffi::c_void;

/// `miopenTensorDescriptor_t` points to this. A fresh descriptor has no dimensions.
#[derive(Default)]
pub struct TensorObj {
    desc: Option<TensorDesc>,
    /// `miopenSetTensorCastType`: never set, since conflux refuses cast types (NotImplemented)
    /// rather than convolve the uncast values.
    #[allow(dead_code)]
    cast: Option<DataType>,
}

pub type MiopenTensor = *mut TensorObj;

/// The descriptor behind a C argument: NULL or never set → BadParm.
///
/// # Safety
/// A non-NULL `t` must come from `miopenCreateTensorDescriptor` and be alive.
pub unsafe fn desc<'a>(t: *const TensorObj, what: &str) -> Result<&'a TensorDesc> {
    obj(t, what)?.desc.as_ref().ok_or_else(|| Error::bad_parm(format!("{what} has not been set")))
}

/// Like `desc`, but NULL gives None (arguments MIOpen lets callers omit).
///
/// # Safety
/// As `desc`.
pub unsafe fn desc_opt<'a>(t: *const TensorObj, what: &str) -> Result<Option<&'a TensorDesc>> {
    if t.is_null() { Ok(None) } else { desc(t, what).map(Some) }
}

/// C `int` lengths or strides to sizes (negative → BadParm, as MIOpen's "> 0" checks).
fn sizes(v: &[i32], what: &str) -> Result<Vec<usize>> {
    v.iter()
        .enumerate()
        .map(|(i, &x)| usize::try_from(x).map_err(|_| Error::bad_parm(format!("{what}[{i}] = {x} must be > 0"))))
        .collect()
}

/// A size back to C `int`.
fn to_int(v: usize, what: &str) -> Result<i32> {
    i32::try_from(v).map_err(|_| Error::bad_parm(format!("{what} = {v} does not fit in an int")))
}

/// Array-setter arguments: NULL array or count ≤ 0 → InvalidValue (MIOpen's status here).
unsafe fn dims<'a, T>(p: *const T, n: i32, what: &str) -> Result<&'a [T]> {
    if n <= 0 {
        bail!(InvalidValue, "{what}: count {n} must be > 0");
    }
    slice(p, n as usize, what, Status::InvalidValue)
}

unsafe fn set(t: MiopenTensor, d: Result<TensorDesc>) -> Result<()> {
    let o = obj_mut(t, "tensor descriptor")?;
    o.desc = Some(d?);
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn miopenCreateTensorDescriptor(tensor_desc: *mut MiopenTensor) -> CStatus {
    guard("miopenCreateTensorDescriptor", || create(tensor_desc, "tensor descriptor pointer", || Ok(TensorObj::default())))
}

#[no_mangle]
pub unsafe extern "C" fn miopenDestroyTensorDescriptor(tensor_desc: MiopenTensor) -> CStatus {
    guard("miopenDestroyTensorDescriptor", || {
        destroy(tensor_desc);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenSet4dTensorDescriptor(t: MiopenTensor, data_type: i32, n: i32, c: i32, h: i32, w: i32) -> CStatus {
    guard("miopenSet4dTensorDescriptor", || {
        obj(t, "tensor descriptor")?;
        let dt: DataType = enum_arg(data_type)?;
        set(t, sizes(&[n, c, h, w], "length").and_then(|l| TensorDesc::new(dt, &l)))
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenSet4dTensorDescriptorEx(
    t: MiopenTensor,
    data_type: i32,
    n: i32,
    c: i32,
    h: i32,
    w: i32,
    n_stride: i32,
    c_stride: i32,
    h_stride: i32,
    w_stride: i32,
) -> CStatus {
    guard("miopenSet4dTensorDescriptorEx", || {
        obj(t, "tensor descriptor")?;
        let dt: DataType = enum_arg(data_type)?;
        let lens = sizes(&[n, c, h, w], "length")?;
        let strides = sizes(&[n_stride, c_stride, h_stride, w_stride], "stride")?;
        set(t, TensorDesc::with_strides(dt, &lens, &strides))
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenSetNdTensorDescriptorWithLayout(t: MiopenTensor, data_type: i32, tensor_layout: i32, lens: *const i32, num_lens: i32) -> CStatus {
    guard("miopenSetNdTensorDescriptorWithLayout", || {
        obj(t, "tensor descriptor")?;
        let dt: DataType = enum_arg(data_type)?;
        let layout: Layout = enum_arg(tensor_layout)?;
        let lens = sizes(dims(lens, num_lens, "lens")?, "length")?;
        set(t, TensorDesc::with_layout(dt, layout, &lens))
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenSetTensorDescriptor(t: MiopenTensor, data_type: i32, nb_dims: i32, dims_a: *const i32, strides_a: *const i32) -> CStatus {
    guard("miopenSetTensorDescriptor", || {
        obj(t, "tensor descriptor")?;
        let dt: DataType = enum_arg(data_type)?;
        let lens = sizes(dims(dims_a, nb_dims, "dimsA")?, "length")?;
        // NULL strides = packed default.
        let d = if strides_a.is_null() {
            TensorDesc::new(dt, &lens)
        } else {
            let strides = sizes(dims(strides_a, nb_dims, "stridesA")?, "stride")?;
            TensorDesc::with_strides(dt, &lens, &strides)
        };
        set(t, d)
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenSetTensorDescriptorV2(t: MiopenTensor, data_type: i32, nb_dims: i32, dims_a: *const usize, strides_a: *const usize) -> CStatus {
    guard("miopenSetTensorDescriptorV2", || {
        obj(t, "tensor descriptor")?;
        let dt: DataType = enum_arg(data_type)?;
        let lens = dims(dims_a, nb_dims, "dimsA")?;
        let d = if strides_a.is_null() {
            TensorDesc::new(dt, lens)
        } else {
            TensorDesc::with_strides(dt, lens, dims(strides_a, nb_dims, "stridesA")?)
        };
        set(t, d)
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenSetTensorCastType(t: MiopenTensor, cast_type: i32) -> CStatus {
    guard("miopenSetTensorCastType", || {
        let _ = obj_mut(t, "tensor descriptor")?;
        let cast: DataType = enum_arg(cast_type)?;
        // Accepting the call would convolve unconverted values; fp8 tensors give the same math.
        Err(conflux::Error::new(
            conflux::Status::NotImplemented,
            format!("cast type {cast:?}: conflux does not convert tensors on load yet; describe the tensors as miopenFloat8 / miopenBFloat8 instead"),
        ))
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenGet4dTensorDescriptor(
    t: MiopenTensor,
    data_type: *mut i32,
    n: *mut i32,
    c: *mut i32,
    h: *mut i32,
    w: *mut i32,
    n_stride: *mut i32,
    c_stride: *mut i32,
    h_stride: *mut i32,
    w_stride: *mut i32,
) -> CStatus {
    guard("miopenGet4dTensorDescriptor", || {
        let d = desc(t, "tensor descriptor")?;
        if d.rank() != 4 {
            bail!(BadParm, "tensor descriptor has {} dimensions; the 4-d getter needs 4", d.rank());
        }
        // Every output is required; check them all before writing any.
        let outs = [n, c, h, w, n_stride, c_stride, h_stride, w_stride];
        obj_mut(data_type, "dataType output")?;
        for (i, p) in outs.iter().enumerate() {
            obj_mut(*p, &format!("output {}", i + 2))?;
        }
        *data_type = d.dtype() as i32;
        for (i, p) in outs.iter().enumerate() {
            let v = if i < 4 { d.lens()[i] } else { d.strides()[i - 4] };
            **p = to_int(v, "length or stride")?;
        }
        Ok(())
    })
}

/// Returns the number of dimensions (MIOpen's behaviour; its header comment says elements).
#[no_mangle]
pub unsafe extern "C" fn miopenGetTensorDescriptorSize(t: MiopenTensor, size: *mut i32) -> CStatus {
    guard("miopenGetTensorDescriptorSize", || {
        let o = obj(t, "tensor descriptor")?;
        *obj_mut(size, "size output")? = o.desc.as_ref().map(|d| d.rank() as i32).unwrap_or(0);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenGetTensorDescriptor(t: MiopenTensor, data_type: *mut i32, dims_a: *mut i32, strides_a: *mut i32) -> CStatus {
    guard("miopenGetTensorDescriptor", || {
        let o = obj(t, "tensor descriptor")?;
        let Some(d) = o.desc.as_ref() else {
            write_opt(data_type, DataType::Float as i32);
            return Ok(());
        };
        // Convert everything first: a stride past INT_MAX fails before anything is written.
        let lens = d.lens().iter().map(|l| to_int(*l, "length")).collect::<Result<Vec<i32>>>()?;
        let strides = d.strides().iter().map(|s| to_int(*s, "stride")).collect::<Result<Vec<i32>>>()?;
        write_opt(data_type, d.dtype() as i32);
        for i in 0..d.rank() {
            if !dims_a.is_null() {
                *dims_a.add(i) = lens[i];
            }
            if !strides_a.is_null() {
                *strides_a.add(i) = strides[i];
            }
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenGetTensorNumBytes(t: MiopenTensor, num_bytes: *mut usize) -> CStatus {
    guard("miopenGetTensorNumBytes", || {
        let o = obj(t, "tensor descriptor")?;
        *obj_mut(num_bytes, "numBytes output")? = o.desc.as_ref().map(|d| d.num_bytes()).unwrap_or(0);
        Ok(())
    })
}

/// α, β of a helper: float, or double for Double tensors; NULL → `default`.
unsafe fn helper_scalar(p: *const c_void, d: &TensorDesc, default: f64) -> f64 {
    scalar(p, default, d.dtype() == DataType::Double)
}

#[no_mangle]
pub unsafe extern "C" fn miopenOpTensor(
    h: MiopenHandle,
    tensor_op: i32,
    alpha1: *const c_void,
    a_desc: MiopenTensor,
    a: *const c_void,
    alpha2: *const c_void,
    b_desc: MiopenTensor,
    b: *const c_void,
    beta: *const c_void,
    c_desc: MiopenTensor,
    c: *mut c_void,
) -> CStatus {
    guard("miopenOpTensor", || {
        let h = handle(h)?;
        let op: TensorOp = enum_arg(tensor_op)?;
        let (ad, bd, cd) = (desc(a_desc, "aDesc")?, desc(b_desc, "bDesc")?, desc(c_desc, "cDesc")?);
        let (a1, a2, be) = (helper_scalar(alpha1, cd, 1.0), helper_scalar(alpha2, cd, 1.0), helper_scalar(beta, cd, 0.0));
        ops::op_tensor(h, op, a1, ad, dev(a), a2, bd, dev(b), be, cd, dev(c))
    })
}

/// `alpha` points to the fill value.
#[no_mangle]
pub unsafe extern "C" fn miopenSetTensor(h: MiopenHandle, y_desc: MiopenTensor, y: *mut c_void, alpha: *const c_void) -> CStatus {
    guard("miopenSetTensor", || {
        let h = handle(h)?;
        let d = desc(y_desc, "yDesc")?;
        obj(alpha, "alpha")?;
        ops::set_tensor(h, d, dev(y), helper_scalar(alpha, d, 0.0))
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenScaleTensor(h: MiopenHandle, y_desc: MiopenTensor, y: *mut c_void, alpha: *const c_void) -> CStatus {
    guard("miopenScaleTensor", || {
        let h = handle(h)?;
        let d = desc(y_desc, "yDesc")?;
        obj(alpha, "alpha")?;
        ops::scale_tensor(h, d, dev(y), helper_scalar(alpha, d, 1.0))
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenTransformTensor(
    h: MiopenHandle,
    alpha: *const c_void,
    x_desc: MiopenTensor,
    x: *const c_void,
    beta: *const c_void,
    y_desc: MiopenTensor,
    y: *mut c_void,
) -> CStatus {
    guard("miopenTransformTensor", || {
        let h = handle(h)?;
        let (xd, yd) = (desc(x_desc, "xDesc")?, desc(y_desc, "yDesc")?);
        ops::transform_tensor(h, helper_scalar(alpha, yd, 1.0), xd, dev(x), helper_scalar(beta, yd, 0.0), yd, dev(y))
    })
}

/// Store a descriptor computed on the Rust side (e.g. the derived BN descriptor).
///
/// # Safety
/// As `desc`.
pub unsafe fn set_desc(t: MiopenTensor, d: TensorDesc) -> Result<()> {
    set(t, Ok(d))
}
