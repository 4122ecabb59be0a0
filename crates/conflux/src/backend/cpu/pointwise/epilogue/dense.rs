//! The epilogue over dense chunks (`tensor_io::dense`): each step runs over a whole chunk
//! of f32 values with its parameters as one value (planar rows: the chunk's channel) or one
//! slice aligned with the chunk (channels-last rows, per-activation BN), so the loops
//! vectorize. Same formulas in the same order as `CpuEpilogue::apply`, so the results are
//! bit-identical to the per-element path.

use super::{CpuEpilogue, Step};
use crate::backend::cpu::pointwise::activation as act_chunk;
use crate::backend::cpu::tensor_io::convert;
use crate::backend::cpu::tensor_io::dense::{Chunk, Dense, Rows, CHUNK};
use crate::activation::ActivationDesc;
use crate::problem::shape5;
use crate::tensor::TensorDesc;
use crate::types::DataType;

/// A parameter vector arranged so that every chunk reads it as one value or one slice.
enum Param {
    /// Planar rows, one value per channel.
    PerChannel(Vec<f32>),
    /// Channels-last rows, per channel: repeated so that `[e0 % C..][..len]` is the chunk's.
    Tiled(Vec<f32>, usize),
    /// Per-activation (c·S + s order): planar rows read `[c·S + e0..]`; channels-last rows
    /// read a transposed copy (s·C + c order) at `[e0..]`.
    Linear(Vec<f32>, usize),
}

/// A parameter for one chunk.
#[derive(Clone, Copy)]
enum Par<'a> {
    One(f32),
    Many(&'a [f32]),
}

impl Param {
    fn new(v: &[f32], per_activation: bool, d: &Dense) -> Param {
        match (per_activation, d.rows) {
            (false, Rows::Planar) => Param::PerChannel(v.to_vec()),
            (false, Rows::ChannelsLast) => Param::Tiled((0..d.c + CHUNK).map(|i| v[i % d.c]).collect(), d.c),
            (true, Rows::Planar) => Param::Linear(v.to_vec(), d.s),
            (true, Rows::ChannelsLast) => {
                let t = (0..d.s * d.c).map(|i| v[(i % d.c) * d.s + i / d.c]).collect();
                Param::Linear(t, 0)
            }
        }
    }

    #[inline]
    fn get(&self, k: &Chunk) -> Par<'_> {
        match self {
            Param::PerChannel(v) => Par::One(v[k.c]),
            Param::Tiled(v, c) => Par::Many(&v[k.e0 % c..][..k.len]),
            Param::Linear(v, s) => Par::Many(&v[k.c * s + k.e0..][..k.len]),
        }
    }
}

enum DStep {
    Bias(Param),
    Bn { mean: Param, scale: Param, shift: Param },
    Act(ActivationDesc),
    Add { z: u64, dtype: DataType, alpha: f32 },
}

/// A `CpuEpilogue` prepared for the chunks of one dense arrangement.
pub struct DenseEpilogue {
    steps: Vec<DStep>,
}

impl DenseEpilogue {
    /// None when a residual tensor is not arranged like `y` (then the per-element path runs).
    pub fn new(epi: &CpuEpilogue, y: &TensorDesc, d: &Dense) -> Option<DenseEpilogue> {
        let steps = epi
            .steps
            .iter()
            .map(|s| {
                Some(match s {
                    Step::Bias(b) => DStep::Bias(Param::new(b, false, d)),
                    Step::Bn { mean, scale, shift, per_activation } => DStep::Bn {
                        mean: Param::new(mean, *per_activation, d),
                        scale: Param::new(scale, *per_activation, d),
                        shift: Param::new(shift, *per_activation, d),
                    },
                    Step::Act(a) => DStep::Act(*a),
                    Step::Add { z, dtype, strides, alpha } => {
                        if !same_strides(y, strides) || !convert::supported(*dtype) {
                            return None;
                        }
                        DStep::Add { z: *z, dtype: *dtype, alpha: *alpha }
                    }
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(DenseEpilogue { steps })
    }

    /// Apply the chain to chunk `k`'s values `v` (`v.len() == k.len`); `zbuf` stages residuals.
    #[inline]
    pub fn apply(&self, v: &mut [f32], k: &Chunk, zbuf: &mut [f32; CHUNK]) {
        for s in &self.steps {
            match s {
                DStep::Bias(b) => match b.get(k) {
                    Par::One(b) => v.iter_mut().for_each(|x| *x += b),
                    Par::Many(b) => v.iter_mut().zip(b).for_each(|(x, b)| *x += b),
                },
                DStep::Bn { mean, scale, shift } => match (mean.get(k), scale.get(k), shift.get(k)) {
                    (Par::One(m), Par::One(sc), Par::One(sh)) => v.iter_mut().for_each(|x| *x = (*x - m) * sc + sh),
                    (Par::Many(m), Par::Many(sc), Par::Many(sh)) => {
                        for (x, ((m, sc), sh)) in v.iter_mut().zip(m.iter().zip(sc).zip(sh)) {
                            *x = (*x - m) * sc + sh;
                        }
                    }
                    _ => unreachable!("BN parameters share one arrangement"),
                },
                DStep::Act(a) => act_chunk::forward(a, v),
                DStep::Add { z, dtype, alpha } => {
                    let zb = &mut zbuf[..v.len()];
                    // SAFETY: z is arranged like the output (checked in `new`), so the chunk's
                    // offsets are inside it.
                    unsafe { convert::load(*dtype, *z, k.off, zb) };
                    v.iter_mut().zip(zb.iter()).for_each(|(x, zv)| *x += alpha * zv);
                }
            }
        }
    }
}

/// Whether strides `zs` (of a tensor with y's lengths) equal y's on every dim longer than 1.
fn same_strides(y: &TensorDesc, zs: &[usize; 5]) -> bool {
    let ([n, c], [d, h, w], ys) = shape5(y);
    [n, c, d, h, w].iter().zip(ys.iter().zip(zs)).all(|(&l, (a, b))| l <= 1 || a == b)
}
