//! Batch-normalization descriptor rules (reference doc §1e, §2.2).

use crate::error::Result;
use crate::tensor::TensorDesc;
use crate::types::{BnMode, DataType};
use crate::ensure;

/// `miopenDeriveBNTensorDescriptor`: spatial → 1×C×1×1(×1), per-activation → 1×C×(D×)H×W.
/// The type is always Float, whatever x's type is (MIOpen's rule).
pub fn derive_bn_desc(x: &TensorDesc, mode: BnMode) -> Result<TensorDesc> {
    ensure!(
        x.rank() == 4 || x.rank() == 5,
        BadParm,
        "batch norm: input must be 4-D or 5-D, got {} dims",
        x.rank()
    );
    let mut lens = vec![1, x.c()];
    match mode {
        BnMode::Spatial => lens.extend(std::iter::repeat(1).take(x.rank() - 2)),
        BnMode::PerActivation => lens.extend_from_slice(x.spatial()),
    }
    TensorDesc::new(DataType::Float, &lens)
}

/// Number of elements reduced per statistic: N·(D·)H·W for spatial, N for per-activation.
pub fn reduction_size(x: &TensorDesc, mode: BnMode) -> usize {
    match mode {
        BnMode::Spatial => x.n() * x.spatial().iter().product::<usize>(),
        BnMode::PerActivation => x.n(),
    }
}

/// Index into the parameter tensor (packed, derived shape) for an element of x at `idx`
/// (N,C,(D,)H,W order).
#[inline]
pub fn param_index(x_lens: &[usize], idx: &[usize], mode: BnMode) -> usize {
    match mode {
        BnMode::Spatial => idx[1],
        BnMode::PerActivation => {
            let mut off = idx[1];
            for d in 2..x_lens.len() {
                off = off * x_lens[d] + idx[d];
            }
            off
        }
    }
}
