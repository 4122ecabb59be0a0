//! Tensor helpers (`miopenOpTensor`, `miopenSetTensor`, `miopenScaleTensor`,
//! `miopenTransformTensor`). They are small utility calls, not a hot path, so one host
//! implementation serves every backend: GPU tensors are staged through host memory (the
//! copies synchronize the handle's stream).

use crate::element::{decode, encode};
use crate::error::Result;
use crate::handle::{Device, Handle};
use crate::memory::DevPtr;
use crate::tensor::{for_each_index, TensorDesc};
use crate::types::{DataType, TensorOp};
use crate::ensure;

/// The element space of `desc` at `p`, as f64 values.
fn read(handle: &Handle, desc: &TensorDesc, p: DevPtr) -> Result<Vec<f64>> {
    let mut bytes = vec![0u8; desc.num_bytes()];
    match handle.device() {
        // SAFETY: on the CPU backend p is a host address spanning the descriptor (caller's promise).
        Device::Cpu => unsafe { std::ptr::copy_nonoverlapping(p.0 as usize as *const u8, bytes.as_mut_ptr(), bytes.len()) },
        Device::Cuda(b) => b.dev.copy_to_host(&mut bytes, p.0)?,
    }
    Ok(decode(desc.dtype(), &bytes))
}

fn write(handle: &Handle, desc: &TensorDesc, p: DevPtr, values: &[f64]) -> Result<()> {
    let bytes = encode(desc.dtype(), values);
    match handle.device() {
        // SAFETY: as in `read`, and the range is writable.
        Device::Cpu => unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), p.0 as usize as *mut u8, bytes.len()) },
        Device::Cuda(b) => b.dev.copy_to_device(p.0, &bytes)?,
    }
    Ok(())
}

fn check(op: &str, name: &str, d: &TensorDesc, p: DevPtr) -> Result<()> {
    ensure!(!p.is_null(), BadParm, "{op}: {name} pointer is NULL");
    ensure!(
        matches!(d.dtype(), DataType::Float | DataType::Half | DataType::BFloat16 | DataType::Double),
        NotImplemented,
        "{op}: tensor {name} of type {:?}; floating-point types only",
        d.dtype()
    );
    Ok(())
}

/// Every element of `y` (its element space is read and written back, so gaps between
/// strided elements keep their values).
fn map_in_place(handle: &Handle, op: &str, y_desc: &TensorDesc, y: DevPtr, f: impl Fn(f64) -> f64) -> Result<()> {
    check(op, "y", y_desc, y)?;
    let mut v = read(handle, y_desc, y)?;
    for_each_index(y_desc.lens(), |i| {
        let o = y_desc.offset(i);
        v[o] = f(v[o]);
    });
    write(handle, y_desc, y, &v)
}

/// `miopenSetTensor`: y = value.
pub fn set_tensor(handle: &Handle, y_desc: &TensorDesc, y: DevPtr, value: f64) -> Result<()> {
    map_in_place(handle, "set tensor", y_desc, y, |_| value)
}

/// `miopenScaleTensor`: y = α·y.
pub fn scale_tensor(handle: &Handle, y_desc: &TensorDesc, y: DevPtr, alpha: f64) -> Result<()> {
    map_in_place(handle, "scale tensor", y_desc, y, |v| alpha * v)
}

/// `miopenOpTensor`: C = op(α1·A, α2·B) + β·C. A has C's lengths; each dimension of B is 1
/// or C's (broadcast). C is read only when β ≠ 0.
#[allow(clippy::too_many_arguments)]
pub fn op_tensor(
    handle: &Handle,
    op: TensorOp,
    alpha1: f64,
    a_desc: &TensorDesc,
    a: DevPtr,
    alpha2: f64,
    b_desc: &TensorDesc,
    b: DevPtr,
    beta: f64,
    c_desc: &TensorDesc,
    c: DevPtr,
) -> Result<()> {
    let name = "op tensor";
    for (n, d, p) in [("A", a_desc, a), ("B", b_desc, b), ("C", c_desc, c)] {
        check(name, n, d, p)?;
    }
    ensure!(a_desc.lens() == c_desc.lens(), BadParm, "{name}: A lengths {:?} differ from C lengths {:?}", a_desc.lens(), c_desc.lens());
    ensure!(
        b_desc.rank() == c_desc.rank() && b_desc.lens().iter().zip(c_desc.lens()).all(|(&bl, &cl)| bl == 1 || bl == cl),
        BadParm,
        "{name}: B lengths {:?} do not broadcast to C lengths {:?} (each must be 1 or equal)",
        b_desc.lens(),
        c_desc.lens()
    );
    ensure!(b_desc.dtype() == c_desc.dtype(), BadParm, "{name}: B type {:?} differs from C type {:?}", b_desc.dtype(), c_desc.dtype());
    let av = read(handle, a_desc, a)?;
    let bv = read(handle, b_desc, b)?;
    // C's old values matter for β ≠ 0 and for the gaps of a strided C.
    let mut cv = if beta != 0.0 || !c_desc.is_packed() { read(handle, c_desc, c)? } else { vec![0.0; c_desc.element_space()] };
    let bl = b_desc.lens().to_vec();
    let mut bi = vec![0usize; bl.len()];
    for_each_index(c_desc.lens(), |i| {
        for (d, v) in bi.iter_mut().enumerate() {
            *v = if bl[d] == 1 { 0 } else { i[d] };
        }
        let (x, y) = (alpha1 * av[a_desc.offset(i)], alpha2 * bv[b_desc.offset(&bi)]);
        let r = match op {
            TensorOp::Add => x + y,
            TensorOp::Mul => x * y,
            TensorOp::Min => x.min(y),
            TensorOp::Max => x.max(y),
        };
        let o = c_desc.offset(i);
        cv[o] = if beta != 0.0 { r + beta * cv[o] } else { r };
    });
    write(handle, c_desc, c, &cv)
}

/// `miopenTransformTensor`: y = α·x + β·y between layouts/strides (and floating types) of
/// the same lengths. y is read only when β ≠ 0.
pub fn transform_tensor(handle: &Handle, alpha: f64, x_desc: &TensorDesc, x: DevPtr, beta: f64, y_desc: &TensorDesc, y: DevPtr) -> Result<()> {
    let name = "transform tensor";
    check(name, "x", x_desc, x)?;
    check(name, "y", y_desc, y)?;
    ensure!(x_desc.lens() == y_desc.lens(), BadParm, "{name}: x lengths {:?} differ from y lengths {:?}", x_desc.lens(), y_desc.lens());
    let xv = read(handle, x_desc, x)?;
    let mut yv = if beta != 0.0 || !y_desc.is_packed() { read(handle, y_desc, y)? } else { vec![0.0; y_desc.element_space()] };
    for_each_index(x_desc.lens(), |i| {
        let o = y_desc.offset(i);
        let v = alpha * xv[x_desc.offset(i)];
        yv[o] = if beta != 0.0 { v + beta * yv[o] } else { v };
    });
    write(handle, y_desc, y, &yv)
}
