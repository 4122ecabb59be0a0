//! `miopenConvolutionForwardBias` and `miopenConvolutionBackwardBias` (reference doc §1c, §2.3)
//! for f32, f16 and bf16 (MIOpen refuses bf16), NCHW/NHWC or any strides, 2-D and 3-D.
//!
//! Forward: y ← α·(y + b) + β·y, MIOpen's own formula (OpTensor Add of α·y and α·b, then
//! plus β·y), so (α, β) = (1, 0) is the documented y += b. b has y's rank and each length 1
//! (broadcast) or equal to y's, typically 1×K×1×1.
//!
//! Backward: db[c] ← α·Σ_{n,spatial} dy + β·db[c] with db 1×C×1×1(×1). MIOpen demands
//! (α, β) = (1, 0); conflux honours any values (β = 0 never reads db).
//!
//! Both need b/db of the data's element type. Failed checks leave every output untouched.

use crate::backend::{cpu, cuda};
use crate::error::Result;
use crate::handle::{Device, Handle};
use crate::memory::DevPtr;
use crate::tensor::TensorDesc;
use crate::ensure;

fn check_types(op: &str, (an, a): (&str, &TensorDesc), (bn, b): (&str, &TensorDesc)) -> Result<()> {
    ensure!(a.dtype().is_compute_type(), NotImplemented, "{op}: {an} has type {:?}; conflux computes Float, Half and BFloat16", a.dtype());
    ensure!(a.dtype() == b.dtype(), BadParm, "{op}: tensor types differ ({an} {:?}, {bn} {:?})", a.dtype(), b.dtype());
    ensure!(a.rank() >= 3 && a.rank() <= 5, BadParm, "{op}: {an} has {} dims; 3 to 5 supported", a.rank());
    ensure!(b.rank() == a.rank(), BadParm, "{op}: {bn} has {} dims, {an} has {}", b.rank(), a.rank());
    Ok(())
}

/// y ← α·(y + b) + β·y, b broadcast over y.
pub fn forward_bias(handle: &Handle, alpha: f64, b_desc: &TensorDesc, b: DevPtr, beta: f64, y_desc: &TensorDesc, y: DevPtr) -> Result<()> {
    const OP: &str = "convolution forward bias";
    check_types(OP, ("y", y_desc), ("b", b_desc))?;
    for (i, (&bl, &yl)) in b_desc.lens().iter().zip(y_desc.lens()).enumerate() {
        ensure!(bl == 1 || bl == yl, BadParm, "{OP}: b length {bl} of dim {i} is neither 1 nor y's {yl} (b {:?}, y {:?})", b_desc.lens(), y_desc.lens());
    }
    ensure!(!b.is_null(), BadParm, "{OP}: b pointer is NULL");
    ensure!(!y.is_null(), BadParm, "{OP}: y pointer is NULL");
    let (a, bt) = (alpha as f32, beta as f32);
    match handle.device() {
        Device::Cpu => {
            cpu::pointwise::bias::forward(y_desc, y.0, b_desc, b.0, a, bt);
            Ok(())
        }
        Device::Cuda(be) => cuda::bias::forward(handle, be, y_desc, y.0, b_desc, b.0, a, bt),
    }
}

/// db[c] ← α·Σ_{n,spatial} dy[n,c,…] + β·db[c].
pub fn backward_bias(handle: &Handle, alpha: f64, dy_desc: &TensorDesc, dy: DevPtr, beta: f64, db_desc: &TensorDesc, db: DevPtr) -> Result<()> {
    const OP: &str = "convolution backward bias";
    check_types(OP, ("dy", dy_desc), ("db", db_desc))?;
    ensure!(
        db_desc.c() == dy_desc.c() && db_desc.lens().iter().enumerate().all(|(i, &l)| i == 1 || l == 1),
        BadParm,
        "{OP}: db lengths {:?} must be 1×{}×1… for dy lengths {:?}",
        db_desc.lens(),
        dy_desc.c(),
        dy_desc.lens()
    );
    ensure!(!dy.is_null(), BadParm, "{OP}: dy pointer is NULL");
    ensure!(!db.is_null(), BadParm, "{OP}: db pointer is NULL");
    let (a, bt) = (alpha as f32, beta as f32);
    match handle.device() {
        Device::Cpu => {
            cpu::pointwise::bias::backward(dy_desc, dy.0, db_desc, db.0, a, bt);
            Ok(())
        }
        Device::Cuda(be) => cuda::bias::backward(handle, be, dy_desc, dy.0, db_desc, db.0, a, bt),
    }
}
