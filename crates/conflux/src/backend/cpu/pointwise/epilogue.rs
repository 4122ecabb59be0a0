//! The epilogue on the CPU: the plan's pointwise chain, resolved at execute time from the
//! ops (compile-time) and their arguments (run-time), applied to each output value while it
//! is still in registers.

mod dense;

pub use dense::DenseEpilogue;

use crate::backend::cpu::clamp::Clamp;
use crate::backend::cpu::pointwise::activation as act_chunk;
use crate::backend::cpu::tensor_io::access::{load, load_vec};
use crate::activation::ActivationDesc;
use crate::problem::strides5;
use crate::error::{Error, Result};
use crate::problem::{EpiOp, OpArg};
use crate::problem::op_args::need_ptr;
use crate::tensor::TensorDesc;
use crate::types::{ActivationMode, BnMode, DataType};

enum Step {
    Bias(Vec<f32>),
    /// `(v − mean)·scale + shift`, scale = γ/√(σ²+ε). Kept unfolded so large means do not
    /// cancel catastrophically in f32.
    Bn { mean: Vec<f32>, scale: Vec<f32>, shift: Vec<f32>, per_activation: bool },
    Act(ActivationDesc),
    Add { z: u64, dtype: DataType, strides: [usize; 5], alpha: f32 },
}

/// An epilogue of at most a bias then one activation, as a store applies it: conv + bias
/// through `clamp` (ReLU, ReLU6 / CLIPPEDRELU, or none), then `finish` for any other activation
/// (SiLU, GELU, ...), run over the stored values while they are in cache.
pub struct FusedStore<'a> {
    pub bias: Option<&'a [f32]>,
    pub clamp: Clamp,
    then: Option<&'a ActivationDesc>,
}

impl FusedStore<'_> {
    /// Channel c's bias (0 without one).
    pub fn bias_of(&self, c: usize) -> f32 { self.bias.map_or(0.0, |b| b[c]) }

    /// Whether an activation is left for `finish` after the store.
    pub fn needs_finish(&self) -> bool { self.then.is_some() }

    /// The activation the clamp could not apply, over values that hold conv + bias (nothing
    /// when the clamp was the whole activation).
    pub fn finish(&self, v: &mut [f32]) {
        if let Some(a) = self.then {
            act_chunk::forward(a, v);
        }
    }
}

/// The clamp a fused store applies for activation `a`, when it is one (ReLU, CLIPPEDRELU with
/// a non-NaN α; its α is converted to f32 as the formula's is).
fn store_clamp(a: &ActivationDesc) -> Option<Clamp> {
    match a.mode {
        ActivationMode::Relu => Some(Clamp::RELU),
        ActivationMode::ClippedRelu => Clamp::clipped(a.params::<f32>().0),
        _ => None,
    }
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

    /// When the chain is at most a bias then at most one activation: what a store applies
    /// itself (`FusedStore`), so callers can fuse the epilogue into it.
    pub fn fused_store(&self) -> Option<FusedStore<'_>> {
        let (bias, act) = match self.steps.as_slice() {
            [] => (None, None),
            [Step::Bias(b)] => (Some(b.as_slice()), None),
            [Step::Act(a)] => (None, Some(a)),
            [Step::Bias(b), Step::Act(a)] => (Some(b.as_slice()), Some(a)),
            _ => return None,
        };
        let clamp = act.map_or(Some(Clamp::NONE), store_clamp);
        Some(FusedStore { bias, clamp: clamp.unwrap_or(Clamp::NONE), then: if clamp.is_some() { None } else { act } })
    }

    /// `fused_store` where the store's clamp is the whole activation (none, ReLU, ReLU6 /
    /// CLIPPEDRELU: the CBA case): the whole bias (None without one) and the clamp.
    pub fn bias_relu_all(&self) -> Option<(Option<&[f32]>, Clamp)> {
        self.fused_store().filter(|s| !s.needs_finish()).map(|s| (s.bias, s.clamp))
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
                // The mode is matched once per run, so ReLU, ReLU6 (CLIPPEDRELU) and the other
                // simple modes vectorize; bit-identical to `apply`.
                Step::Act(a) => act_chunk::forward(a, v),
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

    /// Apply the chain to every channel of one pixel: `v[c]` is channel c at (n, pos), spatial
    /// index `sp`. Step by step over the channels, so the activation runs vectorized across them
    /// (channels-last rows); the same values as `apply` per element.
    pub fn apply_pixel(&self, v: &mut [f32], n: usize, pos: [usize; 3], sp: usize, sp_size: usize) {
        for s in &self.steps {
            match s {
                Step::Bias(b) => v.iter_mut().zip(b.iter()).for_each(|(x, b)| *x += b),
                Step::Bn { mean, scale, shift, per_activation: false } => {
                    for (c, x) in v.iter_mut().enumerate() {
                        *x = (*x - mean[c]) * scale[c] + shift[c];
                    }
                }
                Step::Bn { mean, scale, shift, per_activation: true } => {
                    for (c, x) in v.iter_mut().enumerate() {
                        let j = c * sp_size + sp;
                        *x = (*x - mean[j]) * scale[j] + shift[j];
                    }
                }
                Step::Act(a) => act_chunk::forward(a, v),
                Step::Add { z, dtype, strides, alpha } => {
                    let base = n * strides[0] + pos[0] * strides[2] + pos[1] * strides[3] + pos[2] * strides[4];
                    for (c, x) in v.iter_mut().enumerate() {
                        // SAFETY: z has the output's shape (checked at op creation).
                        *x += alpha * unsafe { load(*dtype, *z, base + c * strides[1]) };
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
                Step::Act(a) => act_chunk::forward_one(a, v),
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
