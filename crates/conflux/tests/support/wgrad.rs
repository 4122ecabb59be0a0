//! Backward-weights test cases shared by the CUDA-core and tensor-core suites: the descriptors,
//! the problem, a label naming it, and inputs with the f64 reference dw.

use super::{random, Dev};
use conflux::conv::ConvProblem;
use conflux::fusion::FusedProblem;
use conflux::reference::{self as r, fill::Fill};
use conflux::{ConvDesc, Handle, TensorDesc};

pub struct Case {
    pub conv: ConvDesc,
    pub x: TensorDesc,
    pub dw: TensorDesc,
    pub dy: TensorDesc,
}

pub fn label(c: &Case, how: &str, h: &Handle) -> String {
    format!("bwd-weights x {} dw {} {} via {how} on {}", c.x.key(), c.dw.key(), c.conv.key(), h.device().name())
}

pub fn problem(c: &Case) -> FusedProblem { FusedProblem::conv(ConvProblem::backward_weights(&c.conv, &c.dy, &c.x, &c.dw).unwrap()) }

/// Inputs dy and x (small integers when `exact`, else normal), the initial dw0, and the
/// reference dw = α·bwd_weights(x, dy) + β·dw0.
pub fn reference(h: &Handle, c: &Case, exact: bool, seed: u64, (alpha, beta): (f64, f64)) -> (Dev, Dev, Vec<f64>, Vec<f64>) {
    let fill = if exact { Fill::SmallInt(-2, 2) } else { Fill::Normal };
    let dy = random(h, &c.dy, fill, seed);
    let x = random(h, &c.x, fill, seed + 1);
    let dw0 = conflux::reference::fill::fill_for(&c.dw, Fill::SmallInt(-3, 3), seed + 2);
    let mut want = dw0.clone();
    r::conv_backward_weights_alpha_beta(alpha, beta, &c.conv, &c.dy, &dy.host, &c.x, &x.host, &c.dw, &mut want).unwrap();
    (dy, x, dw0, want)
}
