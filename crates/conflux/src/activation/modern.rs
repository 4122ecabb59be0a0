//! The conflux extension activations of modern networks (SiLU, hard-swish, hard-sigmoid, GELU
//! with erf or tanh, Mish), forward and backward, generic over f32 and f64 like the MIOpen
//! modes. They take no parameters.
//!
//! Each formula is arranged so that every finite input gives a finite, accurate f32 result:
//! exponentials are taken of non-positive arguments (σ from e^−|x|), 1 + tanh(u) is written as
//! 2σ(2u) and 1 + erf(z) as erfc(−z) so that neither cancels for negative inputs, and Mish
//! follows PyTorch's softplus threshold (x > 20 gives x). Infinite inputs may give NaN, as the
//! textbook formulas do.

use num_traits::Float;

/// A float with the complementary error function, which neither std nor num-traits has.
/// `libm` (a pure-Rust port of musl's libm) supplies it; its erfc is accurate to about 1 ulp.
pub trait Real: Float {
    fn erfc(self) -> Self;
}

impl Real for f32 {
    #[inline(always)]
    fn erfc(self) -> f32 {
        libm::erfcf(self)
    }
}

impl Real for f64 {
    #[inline(always)]
    fn erfc(self) -> f64 {
        libm::erfc(self)
    }
}

#[inline(always)]
fn k<T: Float>(v: f64) -> T {
    T::from(v).unwrap_or_else(T::nan)
}

/// √(2/π), GELU-tanh's scale of its cubic.
const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;
/// The cubic's coefficient in GELU-tanh.
const GELU_CUBIC: f64 = 0.044_715;
/// 1/√(2π), the normal density at 0.
const INV_SQRT_2PI: f64 = 0.398_942_280_401_432_7;
/// Above this, Mish is x (PyTorch's softplus threshold); tanh(softplus(20)) rounds to 1 in
/// f32 and f64 alike, so the cut changes no result.
const MISH_CUT: f64 = 20.0;

/// (σ(x), 1 − σ(x)), both without cancellation, from e^−|x| ∈ (0, 1] (never overflows).
#[inline(always)]
fn sigmoid_pair<T: Float>(x: T) -> (T, T) {
    let e = (-x.abs()).exp();
    let big = T::one() / (T::one() + e);
    let small = e * big;
    if x >= T::zero() { (big, small) } else { (small, big) }
}

/// min(max(x + 3, 0), 6), the hard ramp shared by hard-swish and hard-sigmoid.
#[inline(always)]
fn ramp<T: Float>(x: T) -> T {
    (x + k(3.0)).max(T::zero()).min(k(6.0))
}

/// SiLU x·σ(x).
#[inline(always)]
pub fn silu<T: Float>(x: T) -> T {
    x * sigmoid_pair(x).0
}

/// dy·σ(x)·(1 + x·(1 − σ(x))).
#[inline(always)]
pub fn silu_backward<T: Float>(dy: T, x: T) -> T {
    let (s, sm) = sigmoid_pair(x);
    dy * (s * (T::one() + x * sm))
}

/// Hard-swish x·min(max(x + 3, 0), 6)/6 (the ramp divided first, so x·6 never overflows).
#[inline(always)]
pub fn hardswish<T: Float>(x: T) -> T {
    x * (ramp(x) / k(6.0))
}

/// PyTorch's derivative: 0 below −3, x/3 + 1/2 on [−3, 3], 1 above.
#[inline(always)]
pub fn hardswish_backward<T: Float>(dy: T, x: T) -> T {
    if x < k(-3.0) {
        T::zero()
    } else if x <= k(3.0) {
        dy * (x / k(3.0) + k(0.5))
    } else {
        dy
    }
}

/// Hard-sigmoid min(max(x + 3, 0), 6)/6.
#[inline(always)]
pub fn hardsigmoid<T: Float>(x: T) -> T {
    ramp(x) / k(6.0)
}

/// PyTorch's derivative: 1/6 strictly inside (−3, 3), 0 elsewhere.
#[inline(always)]
pub fn hardsigmoid_backward<T: Float>(dy: T, x: T) -> T {
    if x > k(-3.0) && x < k(3.0) { dy / k(6.0) } else { T::zero() }
}

/// GELU 0.5·x·(1 + erf(x/√2)), computed as 0.5·x·erfc(−x/√2).
#[inline(always)]
pub fn gelu<T: Real>(x: T) -> T {
    k::<T>(0.5) * x * (-x * k(std::f64::consts::FRAC_1_SQRT_2)).erfc()
}

/// dy·(Φ(x) + x·φ(x)).
#[inline(always)]
pub fn gelu_backward<T: Real>(dy: T, x: T) -> T {
    let cdf = k::<T>(0.5) * (-x * k(std::f64::consts::FRAC_1_SQRT_2)).erfc();
    let pdf = (-(x * x) * k(0.5)).exp() * k(INV_SQRT_2PI);
    dy * (cdf + x * pdf)
}

/// The tanh argument u = √(2/π)·(x + 0.044715·x³).
#[inline(always)]
fn gelu_tanh_arg<T: Float>(x: T) -> T {
    k::<T>(SQRT_2_OVER_PI) * (x + k::<T>(GELU_CUBIC) * x * x * x)
}

/// GELU-tanh 0.5·x·(1 + tanh(u)), computed as x·σ(2u).
#[inline(always)]
pub fn gelu_tanh<T: Float>(x: T) -> T {
    x * sigmoid_pair(gelu_tanh_arg(x) * k(2.0)).0
}

/// dy·(σ(2u) + x·2u′·σ(2u)(1 − σ(2u))), u′ = √(2/π)(1 + 3·0.044715·x²). Where σ(2u)(1 − σ(2u))
/// underflows to 0 the second term is 0 (x·u′ may overflow there).
#[inline(always)]
pub fn gelu_tanh_backward<T: Float>(dy: T, x: T) -> T {
    let (s, sm) = sigmoid_pair(gelu_tanh_arg(x) * k(2.0));
    let q = s * sm;
    let du = k::<T>(2.0 * SQRT_2_OVER_PI) * (T::one() + k::<T>(3.0 * GELU_CUBIC) * x * x);
    let slope = if q > T::zero() { x * du * q } else { T::zero() };
    dy * (s + slope)
}

/// (e, n, t) of Mish at x ≤ 20: e = eˣ, n = e(e + 2) and t = tanh(softplus(x)) = n/(n + 2),
/// which keeps its relative accuracy as x → −∞.
#[inline(always)]
fn mish_parts<T: Float>(x: T) -> (T, T, T) {
    let e = x.min(k(MISH_CUT)).exp();
    let n = e * (e + k(2.0));
    (e, n, n / (n + k(2.0)))
}

/// Mish x·tanh(softplus(x)).
#[inline(always)]
pub fn mish<T: Float>(x: T) -> T {
    x * mish_parts(x).2
}

/// dy·(t + x·(1 − t²)·σ(x)), with 1 − t² = 4(n + 1)/(n + 2)²; dy above the threshold, where
/// the forward is x.
#[inline(always)]
pub fn mish_backward<T: Float>(dy: T, x: T) -> T {
    if x > k(MISH_CUT) {
        return dy;
    }
    let (e, n, t) = mish_parts(x);
    let two_n = n + k(2.0);
    let one_minus_t2 = k::<T>(4.0) * (n + T::one()) / (two_n * two_n);
    let sigma = e / (T::one() + e);
    dy * (t + x * one_minus_t2 * sigma)
}
