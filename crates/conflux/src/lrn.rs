//! `miopenLRNDescriptor_t`: local response normalization's mode and parameters. conflux
//! stores and returns them; it does not compute LRN (the C calls say so with NotImplemented).

use crate::ensure;
use crate::error::Result;
use crate::pooling::c_enum;

c_enum! {
    /// `miopenLRNMode_t`: normalize over a window of neighbouring pixels of one channel, or
    /// over neighbouring channels at one pixel.
    LrnMode { WithinChannel = 0, CrossChannel = 1 }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LrnDesc {
    pub mode: LrnMode,
    /// The window's width (odd).
    pub n: u32,
    pub alpha: f64,
    pub beta: f64,
    pub k: f64,
}

impl Default for LrnDesc {
    /// The usual AlexNet parameters until set.
    fn default() -> LrnDesc {
        LrnDesc { mode: LrnMode::CrossChannel, n: 5, alpha: 1e-4, beta: 0.75, k: 2.0 }
    }
}

impl LrnDesc {
    /// The window must be odd (it is centred) and the parameters finite.
    pub fn new(mode: LrnMode, n: u32, alpha: f64, beta: f64, k: f64) -> Result<LrnDesc> {
        ensure!(n % 2 == 1, BadParm, "LRN descriptor: window width {n} must be odd and ≥ 1");
        ensure!([alpha, beta, k].iter().all(|v| v.is_finite()), BadParm, "LRN descriptor: alpha {alpha}, beta {beta} and K {k} must be finite");
        Ok(LrnDesc { mode, n, alpha, beta, k })
    }
}
