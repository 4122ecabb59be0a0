//! Activation forward and backward over f32 chunks. The mode is matched once per chunk and
//! each arm calls the shared formula with a constant mode, so the formula's own match folds
//! away and the simple modes (ReLU, leaky/clipped ReLU, abs) vectorize; results are
//! bit-identical to `ActivationDesc::{forward, backward}` per element.

use crate::activation::{activation_backward, activation_forward, ActivationDesc};
use crate::types::ActivationMode;

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
    per_mode!(act.mode, M => v.iter_mut().for_each(|x| *x = activation_forward(M, a, b, g, *x)))
}

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
