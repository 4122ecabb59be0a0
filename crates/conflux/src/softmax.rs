//! Softmax's algorithms and modes (`miopenSoftmaxAlgorithm_t`, `miopenSoftmaxMode_t`).

use crate::pooling::c_enum;

c_enum! {
    /// `miopenSoftmaxAlgorithm_t`: Fast exponentiates x as it is, Accurate subtracts the
    /// maximum first (same result, no overflow), Log gives log-softmax.
    SoftmaxAlgorithm { Fast = 0, Accurate = 1, Log = 2 }
}

c_enum! {
    /// `miopenSoftmaxMode_t`: Instance normalizes over C·(D·)H·W of each image, Channel over
    /// C at each pixel of each image.
    SoftmaxMode { Instance = 0, Channel = 1 }
}
