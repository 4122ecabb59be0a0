//! Activation forward and backward over f32 chunks. The mode is matched once per chunk and
//! each arm calls the formula with a constant mode, so the formula's own match folds away and
//! the loop vectorizes: the simple modes (ReLU, leaky / clipped ReLU, abs) as they are, and
//! logistic, SiLU and GELU through the branch-free `fast_math` functions, compiled for the
//! CPU's widest vectors. `forward_one` is the same computation for
//! one element (through the same function for those three): the per-element epilogue uses it,
//! so both paths give identical bits. Backward
//! and the other modes use `ActivationDesc`'s formulas.

use super::fast_math;
use crate::activation::{activation_backward, activation_forward, ActivationDesc};
use crate::types::ActivationMode;

/// f(x) for mode `m` (a constant where it is inlined): the vector-friendly formulas for the
/// modes whose libm calls dominated (logistic, SiLU, GELU), the shared formula otherwise.
#[inline(always)]
fn forward_fast(m: ActivationMode, a: f32, b: f32, g: f32, x: f32) -> f32 {
    use ActivationMode::*;
    match m {
        Logistic => 1.0 / (1.0 + fast_math::exp(-x)),
        Silu => x / (1.0 + fast_math::exp(-x)),
        Gelu => fast_math::gelu(x),
        _ => activation_forward(m, a, b, g, x),
    }
}

/// Modes `forward_fast` computes with `fast_math`: their chunks run in the `simd!` function.
fn has_fast_formula(m: ActivationMode) -> bool {
    matches!(m, ActivationMode::Logistic | ActivationMode::Silu | ActivationMode::Gelu)
}

/// One element, as `forward` computes it: the fast formulas through the same `simd!` function
/// (their fused multiply-adds then round as the vector lanes do), the others directly.
#[inline]
pub fn forward_one(act: &ActivationDesc, x: f32) -> f32 {
    if has_fast_formula(act.mode) {
        let mut v = x;
        forward_chunk(act, std::slice::from_mut(&mut v));
        return v;
    }
    let (a, b, g) = act.params::<f32>();
    forward_fast(act.mode, a, b, g, x)
}

/// Expand `$body` once per activation mode with `$m` bound to that mode as a constant.
macro_rules! per_mode {
    ($mode:expr, $m:ident => $body:expr) => {{
        use ActivationMode::*;
        match $mode {
            PassThru => { const $m: ActivationMode = PassThru; $body }
            Logistic => { const $m: ActivationMode = Logistic; $body }
            Tanh => { const $m: ActivationMode = Tanh; $body }
            Relu => { const $m: ActivationMode = Relu; $body }
            SoftRelu => { const $m: ActivationMode = SoftRelu; $body }
            Abs => { const $m: ActivationMode = Abs; $body }
            Power => { const $m: ActivationMode = Power; $body }
            ClippedRelu => { const $m: ActivationMode = ClippedRelu; $body }
            LeakyRelu => { const $m: ActivationMode = LeakyRelu; $body }
            Elu => { const $m: ActivationMode = Elu; $body }
            Silu => { const $m: ActivationMode = Silu; $body }
            HardSwish => { const $m: ActivationMode = HardSwish; $body }
            HardSigmoid => { const $m: ActivationMode = HardSigmoid; $body }
            Gelu => { const $m: ActivationMode = Gelu; $body }
            GeluTanh => { const $m: ActivationMode = GeluTanh; $body }
            Mish => { const $m: ActivationMode = Mish; $body }
        }
    }};
}

/// v[i] = f(v[i]).
pub fn forward(act: &ActivationDesc, v: &mut [f32]) {
    let (a, b, g) = act.params::<f32>();
    if act.mode == ActivationMode::PassThru {
        return;
    }
    if has_fast_formula(act.mode) {
        forward_chunk(act, v);
    } else {
        // The simple modes are memory-bound and vectorize as they are (measured faster here
        // than through the `simd!` dispatch); the other libm modes stay per element.
        per_mode!(act.mode, M => v.iter_mut().for_each(|x| *x = activation_forward(M, a, b, g, *x)))
    }
}

// A `for` loop, not `for_each`: a closure too large to inline (GELU's) would be compiled outside
// this function, without its vector instructions.
simd!(forward_chunk(act: &ActivationDesc, v: &mut [f32]) {
    let (a, b, g) = act.params::<f32>();
    per_mode!(act.mode, M => {
        for x in v.iter_mut() {
            *x = forward_fast(M, a, b, g, *x);
        }
    })
});

/// dy[i] = f'(dy[i], x[i], y[i]) (dx written over dy).
pub fn backward(act: &ActivationDesc, dy: &mut [f32], x: &[f32], y: &[f32]) {
    let (a, b, g) = act.params::<f32>();
    let (x, y) = (&x[..dy.len()], &y[..dy.len()]);
    per_mode!(act.mode, M => {
        for ((d, &xv), &yv) in dy.iter_mut().zip(x).zip(y) {
            *d = activation_backward(M, a, b, g, *d, xv, yv);
        }
    })
}
