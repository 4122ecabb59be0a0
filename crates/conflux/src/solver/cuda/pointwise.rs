//! CUDA solver for the plans without a convolution: pointwise chains (16-byte vector paths
//! for packed NCHW and NHWC), activation backward, BN forward training (+A) and BN backward
//! (+A backward).

use super::common::{check_dtype, cuda_of};
use crate::solver::{Invoker, RunArgs, Solver};
use crate::problem::op_args;
use crate::backend::cuda::driver::Scratch;
use crate::backend::cuda::module::Module;
use crate::backend::cuda::params::Params;
use crate::backend::cuda::preamble::{self, Extra};
use crate::backend::cuda::{grid_for, timed, CudaBackend};
use crate::problem::shape5;
use crate::error::{Error, Result};
use crate::problem::{EpiOp, FusedKind, FusedProblem};
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::solver::BuildContext;
use crate::tensor::TensorDesc;
use crate::types::{ActivationMode, BnMode, ConvAlgorithm};
use std::sync::Arc;

const POINTWISE: &str = include_str!("../../backend/cuda/kernels/pointwise.cu");
const BN: &str = include_str!("../../backend/cuda/kernels/bn.cu");

pub struct CudaPointwise;

/// Which pointwise-chain kernel a tensor pair can use, with its vector width in bytes.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Path {
    /// Vector bytes; `flat`: vectors tile each image, not each plane (see pointwise.cu).
    Nchw { vec: usize, flat: bool },
    Nhwc,
    Generic,
}

fn chain_path(x: &TensorDesc, y: &TensorDesc) -> Path {
    let es = x.dtype().size();
    let (nc, sp, _) = shape5(x);
    let sp_size: usize = sp.iter().product();
    let small = x.element_count() < u32::MAX as usize;
    if x != y || !x.is_packed() || !small || x.rank() < 4 {
        return Path::Generic;
    }
    let nchw = TensorDesc::new(x.dtype(), x.lens()).map(|d| &d == x).unwrap_or(false);
    if nchw {
        // 16-byte vectors over each plane, else over each image when planes hold at least a
        // vector (14×14 and 7×7 planes of 16-bit data), else the widest vector (8, 4 or 2
        // bytes) that tiles every plane exactly.
        if (sp_size * es) % 16 == 0 {
            return Path::Nchw { vec: 16, flat: false };
        }
        if (nc[1] * sp_size * es) % 16 == 0 && sp_size * es >= 16 {
            return Path::Nchw { vec: 16, flat: true };
        }
        if let Some(vec) = [8, 4, 2].into_iter().find(|&v| v >= es && (sp_size * es) % v == 0) {
            return Path::Nchw { vec, flat: false };
        }
    } else if x.is_channels_last() && nc[1] % (16 / es) == 0 {
        return Path::Nhwc;
    }
    Path::Generic
}

/// `CONFLUX_PW_VEC_BYTES` (8 or 4) narrows the NCHW vectors of whole planes, for measuring.
fn narrower_for_measuring(path: Path) -> Path {
    match (path, std::env::var("CONFLUX_PW_VEC_BYTES").ok().and_then(|v| v.parse::<usize>().ok())) {
        (Path::Nchw { vec: 16, flat: false }, Some(v @ (4 | 8))) => Path::Nchw { vec: v, flat: false },
        (p, _) => p,
    }
}

/// Whether a chain reads per-element parameters (as many as one image's elements).
fn per_element(ops: &[EpiOp]) -> bool {
    ops.iter().any(|op| matches!(op, EpiOp::BnInference { mode: BnMode::PerActivation, .. }))
}

/// Images per thread in the NCHW chain kernel: per-element parameters are worth sharing over
/// more images than per-channel ones: H200 sweeps of 2–32 on na.txt put per-channel chains
/// best at 4 and per-element ones, whose parameters are read as vectors, at 8
/// (bench/results/2026-11-21-h200-na-2.md, 2026-11-21-h200-na-3.md).
/// `CONFLUX_PW_NCHUNK` (1–32) overrides it, for measuring.
fn nchunk(ops: &[EpiOp]) -> usize {
    if let Some(n) = std::env::var("CONFLUX_PW_NCHUNK").ok().and_then(|v| v.parse::<usize>().ok()).filter(|n| (1..=32).contains(n)) {
        return n;
    }
    if per_element(ops) { 8 } else { 4 }
}

struct PwInvoker {
    be: Arc<CudaBackend>,
    module: Arc<Module>,
    problem: FusedProblem,
    path: Path,
    /// Images per thread of the NCHW chain kernel, as compiled, and whether its chunks are
    /// the fastest grid dimension.
    nchunk: usize,
    chunk_fast: bool,
}

impl Solver for CudaPointwise {
    fn name(&self) -> &'static str { "CudaPointwise" }
    fn solution_id(&self) -> u64 { 102 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Direct }
    fn device(&self) -> DeviceKind { DeviceKind::Cuda }

    fn check(&self, problem: &FusedProblem, _device: &DeviceInfo) -> std::result::Result<(), String> {
        if problem.conv_problem().is_some() {
            return Err("has a convolution".into());
        }
        if matches!(problem.kind, FusedKind::Layer(_)) {
            return Err("a pooling or softmax layer".into());
        }
        check_dtype(problem)
    }

    fn estimate_ms(&self, _problem: &FusedProblem) -> f64 { 0.05 }

    fn build(&self, problem: &FusedProblem, ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let be = cuda_of(ctx.device())?.clone();
        let dt = problem.dtype();
        let (mut chunk, mut chunk_fast) = (1, false);
        let (src, path) = match &problem.kind {
            FusedKind::Pointwise { x, y, ops } => {
                let path = narrower_for_measuring(chain_path(x, y));
                let (vec, flat) = match path {
                    Path::Nchw { vec, flat } => (vec, flat),
                    _ => (16, false),
                };
                (chunk, chunk_fast) = (nchunk(ops), per_element(ops));
                let defs = [
                    ("CONFLUX_VEC_BYTES", vec.to_string()),
                    ("CONFLUX_NCHUNK", chunk.to_string()),
                    ("CONFLUX_NCHW_FLAT", (flat as u8).to_string()),
                    ("CONFLUX_CHUNK_FAST", (per_element(ops) as u8).to_string()),
                ];
                (preamble::source(dt, ops, &Extra { act: None, defines: &defs }, POINTWISE)?, path)
            }
            FusedKind::ActivationBackward { mode, .. } => {
                (preamble::source(dt, &[], &Extra { act: Some(*mode), defines: &[] }, POINTWISE)?, Path::Generic)
            }
            FusedKind::BnTrain { mode, act, .. } | FusedKind::BnBackward { mode, act, .. } => {
                let defs = [
                    ("CONFLUX_BN_SPATIAL", ((*mode == BnMode::Spatial) as i32).to_string()),
                    ("CONFLUX_BN_ACT", (act.is_some() as i32).to_string()),
                ];
                let act = Some(act.unwrap_or(ActivationMode::PassThru));
                (preamble::source(dt, &[], &Extra { act, defines: &defs }, BN)?, Path::Generic)
            }
            FusedKind::Conv { .. } | FusedKind::Layer(_) => return Err(Error::internal("CudaPointwise: not a pointwise problem")),
        };
        let name = if matches!(problem.kind, FusedKind::BnTrain { .. } | FusedKind::BnBackward { .. }) { "bn" } else { "pointwise" };
        let module = be.module(name, &src)?;
        Ok(Arc::new(PwInvoker { be, module, problem: problem.clone(), path, nchunk: chunk, chunk_fast }))
    }
}

fn shape_params(x: &TensorDesc, y: &TensorDesc) -> Params {
    let (nc, sp, xs) = shape5(x);
    Params::shape(nc, sp, xs, shape5(y).2)
}

/// α, β, γ of an activation as the kernels take them.
fn act_f32(a: &crate::ActivationDesc) -> [f32; 3] {
    [a.alpha as f32, a.beta as f32, a.gamma as f32]
}

impl PwInvoker {
    /// Blocks of 256 threads: one block per item (`per_block`) or enough for `total` threads
    /// (capped; the kernels stride over the rest).
    fn launch(&self, name: &str, total: u64, per_block: bool, p: &Params) -> Result<()> {
        let grid = if per_block { total.clamp(1, 1 << 20) as u32 } else { grid_for(&self.be, total, 256) };
        self.launch_grid(name, (grid, 1, 1), p)
    }

    fn launch_grid(&self, name: &str, grid: (u32, u32, u32), p: &Params) -> Result<()> {
        let k = self.module.function(name)?;
        // SAFETY: Params mirrors the kernel struct; pointers were validated by the caller.
        unsafe { k.launch(&self.be.dev, grid, (256, 1, 1), 0, p) }
    }
}

impl Invoker for PwInvoker {
    fn run(&self, ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        match &self.problem.kind {
            FusedKind::Pointwise { x, y, ops } => {
                let mut p = shape_params(x, y);
                p.x = a.x.0;
                p.y = a.y.0;
                p.epi = preamble::epilogue_args(ops, a.ops, 0)?;
                let count = x.element_count() as u64;
                let (name, grid) = match self.path {
                    // One thread per (c, vector) and chunk of the batch; the chunk's images are
                    // walked inside the kernel. Chunks along x or y (see pointwise.cu), at most
                    // 65535 along y.
                    Path::Nchw { vec, .. } if a.x.0 % vec as u64 == 0 && a.y.0 % vec as u64 == 0 && (self.chunk_fast || x.n().div_ceil(self.nchunk) <= 65535) => {
                        let items = count / x.n() as u64 / (vec / x.dtype().size()) as u64;
                        let chunks = x.n().div_ceil(self.nchunk) as u32;
                        let grid = if self.chunk_fast { (chunks, items.div_ceil(256).clamp(1, 65535) as u32, 1) } else { (grid_for(&self.be, items, 256), chunks, 1) };
                        ("pw_chain_nchw", grid)
                    }
                    // Each thread takes NHWC_UNROLL (4) vectors per pass.
                    Path::Nhwc if a.x.0 % 16 == 0 && a.y.0 % 16 == 0 => {
                        ("pw_chain_nhwc", (grid_for(&self.be, (count / (16 / x.dtype().size()) as u64).div_ceil(4), 256), 1, 1))
                    }
                    _ => ("pw_chain_generic", (grid_for(&self.be, count, 256), 1, 1)),
                };
                timed(ctx, &self.be, || self.launch_grid(name, grid, &p))
            }
            FusedKind::ActivationBackward { dy, dx, mode } => {
                let r = op_args::activation_backward(*mode, a.ops)?;
                let mut p = shape_params(dy, dx);
                p.x = a.x.0;
                p.y = a.y.0;
                p.aux[0] = r.x;
                p.aux[1] = r.y;
                p.f[..3].copy_from_slice(&act_f32(&r.act));
                timed(ctx, &self.be, || self.launch("act_bwd_generic", dy.element_count() as u64, false, &p))
            }
            FusedKind::BnTrain { x, y, mode, act, running } => {
                let r = op_args::bn_train(*running, *act, a.ops)?;
                let af = r.act.as_ref().map(act_f32).unwrap_or([0.0; 3]);
                let count = crate::batchnorm::derive_bn_desc(x, *mode)?.element_count();
                let ws = Scratch::new(ctx, &self.be.dev, count * 8)?;
                let mut p = shape_params(x, y);
                p.x = a.x.0;
                p.y = a.y.0;
                p.aux[..6].copy_from_slice(&[r.scale, r.bias, r.saved_mean, r.saved_inv_var, r.running_mean, r.running_var]);
                p.aux[6] = ws.ptr();
                p.f = [r.eps as f32, r.exp_avg as f32, af[0], af[1], af[2], 0.0];
                timed(ctx, &self.be, || {
                    self.launch("bn_stats", count as u64, true, &p)?;
                    self.launch("bn_apply", count as u64, true, &p)
                })
            }
            FusedKind::BnBackward { dy, dx, mode, act } => {
                let r = op_args::bn_backward(*act, a.ops)?;
                let (af, act_y) = r.act.as_ref().map(|(d, y)| (act_f32(d), *y)).unwrap_or(([0.0; 3], 0));
                let count = crate::batchnorm::derive_bn_desc(dy, *mode)?.element_count();
                let ws = Scratch::new(ctx, &self.be.dev, count * 8)?;
                // Statistics pass (only without saved statistics): x → stats workspace.
                let mut ps = shape_params(dy, dx);
                ps.x = r.x;
                ps.aux[6] = ws.ptr();
                ps.f[0] = r.eps as f32;
                let mut p = shape_params(dy, dx);
                p.x = a.x.0;
                p.y = a.y.0;
                p.aux[..10].copy_from_slice(&[r.scale, r.bias, r.saved_mean, r.saved_inv_var, r.dscale, r.dbias, ws.ptr(), r.x, act_y, 0]);
                p.f = [r.eps as f32, 0.0, af[0], af[1], af[2], 0.0];
                let saved = r.has_saved();
                timed(ctx, &self.be, || {
                    if !saved {
                        self.launch("bn_stats", count as u64, true, &ps)?;
                    }
                    self.launch("bn_bwd", count as u64, true, &p)
                })
            }
            FusedKind::Conv { .. } | FusedKind::Layer(_) => Err(Error::internal("CudaPointwise: not a pointwise problem")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::DataType;

    fn path(dt: DataType, lens: &[usize]) -> Path {
        let x = TensorDesc::new(dt, lens).unwrap();
        chain_path(&x, &x)
    }

    #[test]
    fn nchw_vectors_per_plane_per_image_or_narrower() {
        // 56×56 f16 planes: 16-byte vectors per plane.
        assert_eq!(path(DataType::Half, &[2, 8, 56, 56]), Path::Nchw { vec: 16, flat: false });
        // 14×14 f16 planes (392 bytes): per image (C·392 bytes is a multiple of 16).
        assert_eq!(path(DataType::Half, &[2, 8, 14, 14]), Path::Nchw { vec: 16, flat: true });
        // 15-element f32 planes, 4 channels: per image; 3 channels (180 bytes): 4-byte vectors.
        assert_eq!(path(DataType::Float, &[2, 4, 3, 5]), Path::Nchw { vec: 16, flat: true });
        assert_eq!(path(DataType::Float, &[2, 3, 3, 5]), Path::Nchw { vec: 4, flat: false });
        // Planes shorter than a vector are never crossed by one: 3-element f16 planes take 2 bytes.
        assert_eq!(path(DataType::Half, &[2, 16, 1, 3]), Path::Nchw { vec: 2, flat: false });
    }
}
