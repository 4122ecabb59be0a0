//! Activation functions with MIOpen's formulas and quirks (reference doc §2.1), and conflux's
//! extension modes (`modern`), shared by the f64 reference and the CPU kernels (generic over
//! f32/f64).

pub mod modern;

pub use modern::Real;

use crate::types::ActivationMode;
use num_traits::Float;

/// Threshold below which POWER's base counts as zero and TANH's β counts as zero. MIOpen's
/// kernels use 1e-6 for fp32; conflux computes every type in f32 or wider and uses 1e-6
/// everywhere, the reference included, so all implementations agree at the boundary.
pub const ACTIVATION_EPS: f64 = 1e-6;

/// An activation mode with its three parameters (`miopenActivationDescriptor_t`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ActivationDesc {
    pub mode: ActivationMode,
    pub alpha: f64,
    pub beta: f64,
    pub gamma: f64,
}

impl Default for ActivationDesc {
    /// `miopenCreateActivationDescriptor`: PASTHRU; MIOpen leaves the parameters unset,
    /// conflux zeroes them.
    fn default() -> Self {
        ActivationDesc { mode: ActivationMode::PassThru, alpha: 0.0, beta: 0.0, gamma: 0.0 }
    }
}

impl ActivationDesc {
    pub fn new(mode: ActivationMode, alpha: f64, beta: f64, gamma: f64) -> Self {
        ActivationDesc { mode, alpha, beta, gamma }
    }
    pub fn relu() -> Self {
        Self::new(ActivationMode::Relu, 0.0, 0.0, 0.0)
    }
    /// Forward value f(x).
    #[inline]
    pub fn forward<T: Real>(&self, x: T) -> T {
        activation_forward(self.mode, c(self.alpha), c(self.beta), c(self.gamma), x)
    }
    /// Backward value dx from dy, the forward input x and the forward output y.
    #[inline]
    pub fn backward<T: Real>(&self, dy: T, x: T, y: T) -> T {
        activation_backward(self.mode, c(self.alpha), c(self.beta), c(self.gamma), dy, x, y)
    }
    /// (α, β, γ) converted as `forward` and `backward` convert them.
    #[inline]
    pub fn params<T: Float>(&self) -> (T, T, T) {
        (c(self.alpha), c(self.beta), c(self.gamma))
    }
    /// True when the backward formula reads the forward input x (not only y and dy).
    pub fn backward_needs_x(&self) -> bool {
        use ActivationMode::*;
        matches!(
            self.mode,
            Relu | SoftRelu | Abs | Power | ClippedRelu | LeakyRelu | Elu | Silu | HardSwish | HardSigmoid | Gelu | GeluTanh | Mish
        )
    }
}

#[inline(always)]
fn c<T: Float>(v: f64) -> T {
    T::from(v).unwrap_or_else(T::nan)
}

/// f(x) for `mode` with parameters α, β, γ. Always inlined: with a constant `mode` the match
/// folds away and loops over slices vectorize (`backend/cpu/act_chunk.rs`).
#[inline(always)]
pub fn activation_forward<T: Real>(mode: ActivationMode, a: T, b: T, g: T, x: T) -> T {
    use ActivationMode::*;
    let zero = T::zero();
    let one = T::one();
    match mode {
        PassThru => x,
        Logistic => one / (one + (-x).exp()),
        Tanh => b * (a * x).tanh(),
        Relu => {
            if x > zero { x } else { zero }
        }
        SoftRelu => {
            // log(1 + e^x), computed without overflow for large x.
            if x > zero { x + (-x).exp().ln_1p() } else { x.exp().ln_1p() }
        }
        Abs => x.abs(),
        Power => {
            let v = a + b * x;
            if v <= c(ACTIVATION_EPS) { zero } else { v.powf(g) }
        }
        ClippedRelu => a.min(zero.max(x)),
        LeakyRelu => {
            if x > zero { x } else { a * x }
        }
        Elu => {
            if x > zero { x } else { a * x.exp_m1() }
        }
        Silu => modern::silu(x),
        HardSwish => modern::hardswish(x),
        HardSigmoid => modern::hardsigmoid(x),
        Gelu => modern::gelu(x),
        GeluTanh => modern::gelu_tanh(x),
        Mish => modern::mish(x),
    }
}

/// dx for `mode` from dy, forward input x and forward output y. MIOpen's quirks are kept:
/// POWER ignores dy, ABS at 0 gives −dy, CLIPPEDRELU passes dy for 0 < x ≤ α, SOFTRELU clamps
/// x at 50, TANH returns 0 when |β| ≤ ε. The extension modes read x only. Always inlined, as
/// `activation_forward`.
#[inline(always)]
pub fn activation_backward<T: Real>(mode: ActivationMode, a: T, b: T, g: T, dy: T, x: T, y: T) -> T {
    use ActivationMode::*;
    let zero = T::zero();
    let one = T::one();
    match mode {
        PassThru => dy,
        Logistic => dy * y * (one - y),
        Tanh => {
            if b.abs() <= c(ACTIVATION_EPS) { zero } else { dy * a * (b - y * y / b) }
        }
        Relu => {
            if x > zero { dy } else { zero }
        }
        SoftRelu => {
            let m = x.min(c(50.0));
            let e = m.exp();
            dy * e / (e + one)
        }
        Abs => {
            if x > zero { dy } else { -dy }
        }
        Power => {
            let v = a + b * x;
            if v <= c(ACTIVATION_EPS) { zero } else { g * b * y / v }
        }
        ClippedRelu => {
            if x > zero && x <= a { dy } else { zero }
        }
        LeakyRelu => {
            if x > zero { dy } else { dy * a }
        }
        Elu => {
            if x > zero { dy } else { dy * (y + a) }
        }
        Silu => modern::silu_backward(dy, x),
        HardSwish => modern::hardswish_backward(dy, x),
        HardSigmoid => modern::hardsigmoid_backward(dy, x),
        Gelu => modern::gelu_backward(dy, x),
        GeluTanh => modern::gelu_tanh_backward(dy, x),
        Mish => modern::mish_backward(dy, x),
    }
}
