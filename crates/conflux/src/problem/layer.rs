//! Layers outside fusion plans that read a neighbourhood rather than one element: pooling and
//! softmax, forward and backward. They run through the same registry and invoker cache as every
//! other problem (`FusedKind::Layer`); their tensors travel in `RunArgs` as follows.
//!
//! | problem          | `x`  | `w`            | `y`  | `workspace`          |
//! |------------------|------|----------------|------|----------------------|
//! | PoolForward      | x    | —              | y    | indices (max, saved) |
//! | PoolBackward     | dy   | —              | dx   | indices (max)        |
//! | SoftmaxForward   | x    | —              | y    | —                    |
//! | SoftmaxBackward  | dy   | y (forward)    | dx   | —                    |
//!
//! α scales the result and β the output's old value (β = 0 never reads it).

pub use crate::pooling::PoolGeom;
use crate::softmax::{SoftmaxAlgorithm, SoftmaxMode};
use crate::tensor::TensorDesc;
use crate::types::DataType;

/// A pooling or softmax problem (compile-time data: descriptors and modes).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LayerOp {
    /// y = pool(x); with `save_index` (max pooling only) each maximum's index is written.
    PoolForward { x: TensorDesc, y: TensorDesc, geom: PoolGeom, save_index: bool },
    /// dx from dy: average spreads dy over each window; max sends it to the recorded index.
    PoolBackward { dy: TensorDesc, dx: TensorDesc, geom: PoolGeom },
    SoftmaxForward { x: TensorDesc, y: TensorDesc, algo: SoftmaxAlgorithm, mode: SoftmaxMode },
    /// `y` is the forward output's descriptor.
    SoftmaxBackward { y: TensorDesc, dy: TensorDesc, dx: TensorDesc, algo: SoftmaxAlgorithm, mode: SoftmaxMode },
}

impl LayerOp {
    pub fn dtype(&self) -> DataType {
        match self {
            LayerOp::PoolForward { x, .. } | LayerOp::SoftmaxForward { x, .. } => x.dtype(),
            LayerOp::PoolBackward { dy, .. } | LayerOp::SoftmaxBackward { dy, .. } => dy.dtype(),
        }
    }

    pub fn key(&self) -> String {
        let g = |g: &PoolGeom| format!("{:?}|k{:?}|p{:?}|s{:?}|{:?}|{:?}", g.mode, g.window, g.pad, g.stride, g.index_type, g.index_mode);
        match self {
            LayerOp::PoolForward { x, y, geom, save_index } => format!("poolfwd[x {}|y {}|{}|save{}]", x.key(), y.key(), g(geom), *save_index as u8),
            LayerOp::PoolBackward { dy, dx, geom } => format!("poolbwd[dy {}|dx {}|{}]", dy.key(), dx.key(), g(geom)),
            LayerOp::SoftmaxForward { x, y, algo, mode } => format!("smfwd[x {}|y {}|{algo:?}|{mode:?}]", x.key(), y.key()),
            LayerOp::SoftmaxBackward { y, dy, dx, algo, mode } => format!("smbwd[y {}|dy {}|dx {}|{algo:?}|{mode:?}]", y.key(), dy.key(), dx.key()),
        }
    }

    pub fn short_name(&self) -> &'static str {
        match self {
            LayerOp::PoolForward { .. } => "Pool",
            LayerOp::PoolBackward { .. } => "Pool(bwd)",
            LayerOp::SoftmaxForward { .. } => "Softmax",
            LayerOp::SoftmaxBackward { .. } => "Softmax(bwd)",
        }
    }

    pub fn is_pooling(&self) -> bool { matches!(self, LayerOp::PoolForward { .. } | LayerOp::PoolBackward { .. }) }
    pub fn is_softmax(&self) -> bool { matches!(self, LayerOp::SoftmaxForward { .. } | LayerOp::SoftmaxBackward { .. }) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pooling::{IndexMode, IndexType, PoolingMode};

    fn geom(k: usize, p: usize, s: usize) -> PoolGeom {
        PoolGeom { mode: PoolingMode::Max, window: [1, k, k], pad: [0, p, p], stride: [1, s, s], index_type: IndexType::U8, index_mode: IndexMode::Mask }
    }

    #[test]
    fn covering_outputs_are_exactly_those_whose_window_holds_the_input() {
        for (k, p, s) in [(3, 1, 2), (2, 0, 2), (3, 0, 1), (5, 2, 3), (1, 0, 2)] {
            let g = geom(k, p, s);
            let (input, output) = (11, (11 + 2 * p - k) / s + 1);
            for i in 0..input {
                let (lo, hi) = g.outputs_covering(1, i, output);
                for o in 0..output {
                    let (a, b) = g.window_range(1, o, input);
                    assert_eq!((lo..hi).contains(&o), (a..b).contains(&i), "k{k} p{p} s{s} i{i} o{o}");
                }
            }
        }
    }
}
