//! Strided-tensor plumbing shared by the reference operators: every element is reached
//! through its descriptor's strides, never by assuming a packed layout.

use crate::error::Result;
use crate::tensor::{for_each_index, TensorDesc};
use crate::{bail, ensure};

/// Memory offsets of every element of `desc`, in row-major order of the logical
/// N,C,(D,)H,W index. Two tensors with equal element counts but different strides are
/// matched element by element by zipping their offset lists.
pub fn offsets(desc: &TensorDesc) -> Vec<usize> {
    let mut out = Vec::with_capacity(desc.element_count());
    for_each_index(desc.lens(), |idx| out.push(desc.offset(idx)));
    out
}

/// The slice must cover the descriptor's element space; a short buffer is a caller error
/// the reference reports rather than panicking on.
pub fn check_slice(name: &str, desc: &TensorDesc, len: usize) -> Result<()> {
    ensure!(
        len >= desc.element_space(),
        BadParm,
        "reference: buffer {name} has {len} elements; its descriptor spans {}",
        desc.element_space()
    );
    Ok(())
}

/// Two descriptors must have identical lengths (strides may differ).
pub fn check_same_lens(op: &str, an: &str, a: &TensorDesc, bn: &str, b: &TensorDesc) -> Result<()> {
    if a.lens() != b.lens() {
        bail!(BadParm, "{op}: {an} lengths {:?} differ from {bn} lengths {:?}", a.lens(), b.lens());
    }
    Ok(())
}

/// Logical (row-major, packed) values of a strided tensor.
pub fn gather(desc: &TensorDesc, data: &[f64]) -> Vec<f64> {
    offsets(desc).into_iter().map(|o| data[o]).collect()
}

/// A buffer of `desc`'s element space holding `values` (row-major logical order) at the
/// strided positions and NaN in every gap, so a kernel that reads a gap is caught.
pub fn scatter(desc: &TensorDesc, values: &[f64]) -> Vec<f64> {
    assert_eq!(values.len(), desc.element_count(), "scatter: value count does not match the descriptor");
    let mut out = vec![f64::NAN; desc.element_space()];
    for (o, &v) in offsets(desc).into_iter().zip(values) {
        out[o] = v;
    }
    out
}

/// Σ a·b over the logical elements of two tensors with the same lengths (used by the
/// adjoint identities).
pub fn dot(a_desc: &TensorDesc, a: &[f64], b_desc: &TensorDesc, b: &[f64]) -> f64 {
    assert_eq!(a_desc.lens(), b_desc.lens(), "dot: lengths differ");
    offsets(a_desc).into_iter().zip(offsets(b_desc)).map(|(i, j)| a[i] * b[j]).sum()
}
