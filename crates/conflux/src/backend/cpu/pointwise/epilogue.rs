//! The epilogue on the CPU: the plan's pointwise chain, resolved at execute time from the
//! ops (compile-time) and their arguments (run-time), applied to each output value while it
//! is still in registers.

mod dense;

pub use dense::DenseEpilogue;

use crate::backend::cpu::tensor_io::access::{load, load_vec};
use crate::activation::ActivationDesc;
use crate::problem::strides5;
use crate::error::{Error, Result};
use crate::problem::{EpiOp, OpArg};
use crate::problem::op_args::need_ptr;
use crate::tensor::TensorDesc;
use crate::types::{BnMode, DataType};

enum Step {
    Bias(Vec<f32>),
    /// `(v − mean)·scale + shift`, scale = γ/√(σ²+ε). Kept unfolded so large means do not
    /// cancel catastrophically in f32.
    Bn { mean: Vec<f32>, scale: Vec<f32>, shift: Vec<f32>, per_activation: bool },
    Act(ActivationDesc),
    Add { z: u64, dtype: DataType, strides: [usize; 5], alpha: f32 },
}

/// A resolved epilogue for one execution.
pub struct CpuEpilogue {
    steps: Vec<Step>,
}

impl CpuEpilogue {
    /// Resolve `ops` with their `args` for outputs shaped like `out`. `first_index` is the plan
    /// position of ops[0], used in error messages.
    pub fn new(ops: &[EpiOp], args: &[OpArg], out: &TensorDesc, first_index: usize) -> Result<CpuEpilogue> {
        if ops.len() != args.len() {
            return Err(Error::internal(format!("epilogue: {} ops but {} argument sets", ops.len(), args.len())));
        }
        let c = out.c();
        let per_act = c * out.spatial().iter().product::<usize>();
        let mut steps = Vec::with_capacity(ops.len());
        for (i, (op, arg)) in ops.iter().zip(args).enumerate() {
            let at = first_index + i;
            let mismatch = || Error::bad_parm(format!("op {at}: arguments of a {} op given for a {:?} op", arg.kind_name(), op));
            // SAFETY (all loads below): the pointers are the caller's parameter tensors, whose
            // shapes were validated when the op was created.
            let step = match (op, arg) {
                (EpiOp::Bias { dtype }, OpArg::Bias { b }) => Step::Bias(unsafe { load_vec(*dtype, need_ptr(*b, "bias", at)?, c) }),
                (EpiOp::BnInference { mode, dtype }, OpArg::BnInference { scale, bias, mean, var, eps }) => {
                    let n = if *mode == BnMode::Spatial { c } else { per_act };
                    let (g, b, m, v) = unsafe {
                        (
                            load_vec(*dtype, need_ptr(*scale, "bn scale", at)?, n),
                            load_vec(*dtype, need_ptr(*bias, "bn bias", at)?, n),
                            load_vec(*dtype, need_ptr(*mean, "bn estimated mean", at)?, n),
                            load_vec(*dtype, need_ptr(*var, "bn estimated variance", at)?, n),
                        )
                    };
                    let scale: Vec<f32> =
                        (0..n).map(|j| (g[j] as f64 / (v[j] as f64 + eps).abs().sqrt()) as f32).collect();
                    Step::Bn { mean: m, scale, shift: b, per_activation: *mode == BnMode::PerActivation }
                }
                (EpiOp::Activation { mode }, OpArg::Activation { alpha, beta, gamma }) => {
                    Step::Act(ActivationDesc::new(*mode, *alpha, *beta, *gamma))
                }
                (EpiOp::AddTensor { z }, OpArg::AddTensor { z: zp, alpha }) => Step::Add {
                    z: need_ptr(*zp, "residual z", at)?,
                    dtype: z.dtype(),
                    strides: strides5(z),
                    alpha: *alpha as f32,
                },
                _ => return Err(mismatch()),
            };
            steps.push(step);
        }
        Ok(CpuEpilogue { steps })
    }

    pub fn is_empty(&self) -> bool { self.steps.is_empty() }

    /// When the chain is at most a bias then at most a ReLU (the CBA case): channel c's bias
    /// (0 without one) and whether ReLU follows, so callers can fuse it into the store.
    pub fn bias_relu(&self, c: usize) -> Option<(f32, bool)> {
        let relu = |s: &Step| matches!(s, Step::Act(a) if a.mode == crate::types::ActivationMode::Relu);
        match self.steps.as_slice() {
            [] => Some((0.0, false)),
            [Step::Bias(b)] => Some((b[c], false)),
            [s] if relu(s) => Some((0.0, true)),
            [Step::Bias(b), s] if relu(s) => Some((b[c], true)),
            _ => None,
        }
    }

    /// `bias_relu` for every channel at once: the whole bias (None without one) and whether
    /// ReLU follows.
    pub fn bias_relu_all(&self) -> Option<(Option<&[f32]>, bool)> {
        let relu = |s: &Step| matches!(s, Step::Act(a) if a.mode == crate::types::ActivationMode::Relu);
        match self.steps.as_slice() {
            [] => Some((None, false)),
            [Step::Bias(b)] => Some((Some(b), false)),
            [s] if relu(s) => Some((None, true)),
            [Step::Bias(b), s] if relu(s) => Some((Some(b), true)),
            _ => None,
        }
    }

    /// Apply the chain to a run of values of one (n, c) at consecutive linear spatial indices
    /// `sp0..sp0 + v.len()` of an output with spatial lengths `dims` (D, H, W). Steps run one
    /// after another over the whole run, so bias, BN and the activation vectorize.
    pub fn apply_span(&self, v: &mut [f32], n: usize, c: usize, sp0: usize, dims: [usize; 3]) {
        let sp_size = dims[0] * dims[1] * dims[2];
        for s in &self.steps {
            match s {
                Step::Bias(b) => {
                    let b = b[c];
                    v.iter_mut().for_each(|x| *x += b);
                }
                Step::Bn { mean, scale, shift, per_activation: false } => {
                    let (m, sc, sh) = (mean[c], scale[c], shift[c]);
                    v.iter_mut().for_each(|x| *x = (*x - m) * sc + sh);
                }
                Step::Bn { mean, scale, shift, per_activation: true } => {
                    let j0 = c * sp_size + sp0;
                    let r = j0..j0 + v.len();
                    for (x, ((m, sc), sh)) in v.iter_mut().zip(mean[r.clone()].iter().zip(&scale[r.clone()]).zip(&shift[r])) {
                        *x = (*x - m) * sc + sh;
                    }
                }
                // ReLU as a plain loop (same NaN rule as the formula: only x > 0 passes), so
                // it vectorizes; the other modes go through the shared formula.
                Step::Act(a) if a.mode == crate::types::ActivationMode::Relu => {
                    v.iter_mut().for_each(|x| *x = if *x > 0.0 { *x } else { 0.0 })
                }
                Step::Act(a) => v.iter_mut().for_each(|x| *x = a.forward(*x)),
                Step::Add { z, dtype, strides, alpha } => {
                    for (i, x) in v.iter_mut().enumerate() {
                        let sp = sp0 + i;
                        let (d, h, w) = (sp / (dims[1] * dims[2]), (sp / dims[2]) % dims[1], sp % dims[2]);
                        let off = n * strides[0] + c * strides[1] + d * strides[2] + h * strides[3] + w * strides[4];
                        // SAFETY: z has the output's shape (checked at op creation).
                        *x += alpha * unsafe { load(*dtype, *z, off) };
                    }
                }
            }
        }
    }

    /// Apply the chain to value `v` at (n, c, d, h, w); `sp` is the linear spatial index
    /// d·H·W + h·W + w.
    #[inline]
    pub fn apply(&self, mut v: f32, n: usize, c: usize, pos: [usize; 3], sp: usize, sp_size: usize) -> f32 {
        for s in &self.steps {
            v = match s {
                Step::Bias(b) => v + b[c],
                Step::Bn { mean, scale, shift, per_activation } => {
                    let j = if *per_activation { c * sp_size + sp } else { c };
                    (v - mean[j]) * scale[j] + shift[j]
                }
                Step::Act(a) => a.forward(v),
                Step::Add { z, dtype, strides, alpha } => {
                    let off = n * strides[0] + c * strides[1] + pos[0] * strides[2] + pos[1] * strides[3] + pos[2] * strides[4];
                    // SAFETY: z has the output's shape (checked at op creation).
                    v + alpha * unsafe { load(*dtype, *z, off) }
                }
            };
        }
        v
    }
}
