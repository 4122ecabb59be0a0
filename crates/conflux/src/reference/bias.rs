//! Reference bias (reference doc §2.3): forward adds b broadcast over y (each b length 1 or
//! equal to y's, typically 1×K×1×1); backward is its adjoint, summing dy over every
//! dimension b broadcasts along.

use super::strided::check_slice;
use crate::error::Result;
use crate::tensor::{for_each_index, TensorDesc};
use crate::ensure;

/// b must have y's rank and each length 1 (broadcast) or equal to y's.
fn check_broadcast(op: &str, y: &TensorDesc, b: &TensorDesc) -> Result<()> {
    ensure!(
        b.rank() == y.rank(),
        BadParm,
        "{op}: bias has {} dims, tensor has {}",
        b.rank(),
        y.rank()
    );
    for (i, (&bl, &yl)) in b.lens().iter().zip(y.lens()).enumerate() {
        ensure!(
            bl == 1 || bl == yl,
            BadParm,
            "{op}: bias length {bl} of dim {i} is neither 1 nor the tensor's {yl}"
        );
    }
    Ok(())
}

/// The index into b for an index of y: broadcast dims read position 0.
fn bias_index(b: &TensorDesc, yi: &[usize], bi: &mut [usize]) {
    for (d, &l) in b.lens().iter().enumerate() {
        bi[d] = if l == 1 { 0 } else { yi[d] };
    }
}

/// y += b (broadcast), the (α, β) = (1, 0) case of `miopenConvolutionForwardBias` and the
/// fusion bias op.
pub fn bias_forward(y_desc: &TensorDesc, y: &mut [f64], b_desc: &TensorDesc, b: &[f64]) -> Result<()> {
    check_broadcast("reference bias forward", y_desc, b_desc)?;
    check_slice("y", y_desc, y.len())?;
    check_slice("b", b_desc, b.len())?;
    let mut bi = vec![0usize; b_desc.rank()];
    for_each_index(y_desc.lens(), |yi| {
        bias_index(b_desc, yi, &mut bi);
        y[y_desc.offset(yi)] += b[b_desc.offset(&bi)];
    });
    Ok(())
}

/// db = Σ dy over the broadcast dims; for db = 1×K×1×1 that is db[k] = Σ_{n,spatial} dy[n,k,…]
/// (`miopenConvolutionBackwardBias`). db is overwritten.
pub fn bias_backward(dy_desc: &TensorDesc, dy: &[f64], db_desc: &TensorDesc, db: &mut [f64]) -> Result<()> {
    check_broadcast("reference bias backward", dy_desc, db_desc)?;
    ensure!(
        db_desc.c() == dy_desc.c(),
        BadParm,
        "reference bias backward: db channels {} != dy channels {}",
        db_desc.c(),
        dy_desc.c()
    );
    check_slice("dy", dy_desc, dy.len())?;
    check_slice("db", db_desc, db.len())?;
    for_each_index(db_desc.lens(), |bi| db[db_desc.offset(bi)] = 0.0);
    let mut bi = vec![0usize; db_desc.rank()];
    for_each_index(dy_desc.lens(), |yi| {
        bias_index(db_desc, yi, &mut bi);
        db[db_desc.offset(&bi)] += dy[dy_desc.offset(yi)];
    });
    Ok(())
}
