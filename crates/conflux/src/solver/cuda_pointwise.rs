//! CUDA solver for the plans without a convolution: pointwise chains (16-byte vector paths
//! for packed NCHW and NHWC), activation backward, BN forward training (+A) and BN backward
//! (+A backward).

use super::cuda_direct::{check_dtype, cuda_of};
use super::{op_args, Invoker, RunArgs, Solver};
use crate::backend::cuda::driver::Scratch;
use crate::backend::cuda::module::Module;
use crate::backend::cuda::params::Params;
use crate::backend::cuda::preamble::{self, Extra};
use crate::backend::cuda::{grid_for, timed, CudaBackend};
use crate::conv::shape5;
use crate::error::{Error, Result};
use crate::fusion::{EpiOp, FusedKind, FusedProblem};
use crate::handle::{DeviceKind, Handle};
use crate::tensor::TensorDesc;
use crate::types::{ActivationMode, BnMode, ConvAlgorithm};
use std::sync::Arc;

const POINTWISE: &str = include_str!("../backend/cuda/kernels/pointwise.cu");
const BN: &str = include_str!("../backend/cuda/kernels/bn.cu");

pub struct CudaPointwise;

/// Which pointwise-chain kernel a tensor pair can use, with its vector width in bytes.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Path {
    Nchw(usize),
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
        // The widest vector (16, 8, 4 or 2 bytes) that tiles every plane exactly.
        if let Some(v) = [16, 8, 4, 2].into_iter().find(|&v| v >= es && (sp_size * es) % v == 0) {
            return Path::Nchw(v);
        }
    } else if x.is_channels_last() && nc[1] % (16 / es) == 0 {
        return Path::Nhwc;
    }
    Path::Generic
}

/// Images per thread in the NCHW chain kernel: per-element BN parameters (as many as one
/// image's elements) are worth sharing over more images than per-channel ones.
fn nchunk(ops: &[EpiOp]) -> usize {
    let per_element = ops.iter().any(|op| matches!(op, EpiOp::BnInference { mode: BnMode::PerActivation, .. }));
    if per_element { 16 } else { 4 }
}

struct PwInvoker {
    be: Arc<CudaBackend>,
    module: Arc<Module>,
    problem: FusedProblem,
    path: Path,
}

impl Solver for CudaPointwise {
    fn name(&self) -> &'static str { "CudaPointwise" }
    fn solution_id(&self) -> u64 { 102 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Direct }
    fn device(&self) -> DeviceKind { DeviceKind::Cuda }

    fn check(&self, problem: &FusedProblem, _handle: &Handle) -> std::result::Result<(), String> {
        if problem.conv_problem().is_some() {
            return Err("has a convolution".into());
        }
        check_dtype(problem)
    }

    fn estimate_ms(&self, _problem: &FusedProblem) -> f64 { 0.05 }

    fn build(&self, problem: &FusedProblem, handle: &Handle) -> Result<Arc<dyn Invoker>> {
        let be = cuda_of(handle)?.clone();
        let dt = problem.dtype();
        let (src, path) = match &problem.kind {
            FusedKind::Pointwise { x, y, ops } => {
                let path = chain_path(x, y);
                let vec = match path {
                    Path::Nchw(v) => v,
                    _ => 16,
                };
                let defs = [("CONFLUX_VEC_BYTES", vec.to_string()), ("CONFLUX_NCHUNK", nchunk(ops).to_string())];
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
            FusedKind::Conv { .. } => return Err(Error::internal("CudaPointwise: convolution problem")),
        };
        let name = if matches!(problem.kind, FusedKind::BnTrain { .. } | FusedKind::BnBackward { .. }) { "bn" } else { "pointwise" };
        let module = be.module(name, &src)?;
        Ok(Arc::new(PwInvoker { be, module, problem: problem.clone(), path }))
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
    fn launch(&self, name: &str, total: u64, per_block: bool, p: &Params) -> Result<()> {
        self.launch_y(name, total, per_block, 1, p)
    }

    /// As `launch`, with `grid_y` rows of blocks (the NCHW chain splits the batch over them).
    fn launch_y(&self, name: &str, total: u64, per_block: bool, grid_y: u32, p: &Params) -> Result<()> {
        let k = self.module.function(name)?;
        let grid = if per_block { total.clamp(1, 1 << 20) as u32 } else { grid_for(&self.be, total, 256) };
        // SAFETY: Params mirrors the kernel struct; pointers were validated by the caller.
        unsafe { k.launch(&self.be.dev, (grid, grid_y, 1), (256, 1, 1), 0, p) }
    }
}

impl Invoker for PwInvoker {
    fn run(&self, handle: &Handle, a: &RunArgs) -> Result<()> {
        match &self.problem.kind {
            FusedKind::Pointwise { x, y, ops } => {
                let mut p = shape_params(x, y);
                p.x = a.x.0;
                p.y = a.y.0;
                p.epi = preamble::epilogue_args(ops, a.ops, 0)?;
                let count = x.element_count() as u64;
                let (name, total) = match self.path {
                    // One thread per (c, vector); the batch is walked inside the kernel.
                    Path::Nchw(v) if a.x.0 % v as u64 == 0 && a.y.0 % v as u64 == 0 && x.n().div_ceil(nchunk(ops)) <= 65535 => {
                        ("pw_chain_nchw", count / x.n() as u64 / (v / x.dtype().size()) as u64)
                    }
                    // Each thread takes NHWC_UNROLL (4) vectors per pass.
                    Path::Nhwc if a.x.0 % 16 == 0 && a.y.0 % 16 == 0 => ("pw_chain_nhwc", (count / (16 / x.dtype().size()) as u64).div_ceil(4)),
                    _ => ("pw_chain_generic", count),
                };
                let grid_y = if name == "pw_chain_nchw" { x.n().div_ceil(nchunk(ops)) as u32 } else { 1 };
                timed(handle, &self.be, || self.launch_y(name, total, false, grid_y, &p))
            }
            FusedKind::ActivationBackward { dy, dx, mode } => {
                let r = op_args::activation_backward(*mode, a.ops)?;
                let mut p = shape_params(dy, dx);
                p.x = a.x.0;
                p.y = a.y.0;
                p.aux[0] = r.x;
                p.aux[1] = r.y;
                p.f[..3].copy_from_slice(&act_f32(&r.act));
                timed(handle, &self.be, || self.launch("act_bwd_generic", dy.element_count() as u64, false, &p))
            }
            FusedKind::BnTrain { x, y, mode, act, running } => {
                let r = op_args::bn_train(*running, *act, a.ops)?;
                let af = r.act.as_ref().map(act_f32).unwrap_or([0.0; 3]);
                let count = crate::batchnorm::derive_bn_desc(x, *mode)?.element_count();
                let ws = Scratch::new(handle, &self.be.dev, count * 8)?;
                let mut p = shape_params(x, y);
                p.x = a.x.0;
                p.y = a.y.0;
                p.aux[..6].copy_from_slice(&[r.scale, r.bias, r.saved_mean, r.saved_inv_var, r.running_mean, r.running_var]);
                p.aux[6] = ws.ptr();
                p.f = [r.eps as f32, r.exp_avg as f32, af[0], af[1], af[2], 0.0];
                timed(handle, &self.be, || {
                    self.launch("bn_stats", count as u64, true, &p)?;
                    self.launch("bn_apply", count as u64, true, &p)
                })
            }
            FusedKind::BnBackward { dy, dx, mode, act } => {
                let r = op_args::bn_backward(*act, a.ops)?;
                let (af, act_y) = r.act.as_ref().map(|(d, y)| (act_f32(d), *y)).unwrap_or(([0.0; 3], 0));
                let count = crate::batchnorm::derive_bn_desc(dy, *mode)?.element_count();
                let ws = Scratch::new(handle, &self.be.dev, count * 8)?;
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
                timed(handle, &self.be, || {
                    if !saved {
                        self.launch("bn_stats", count as u64, true, &ps)?;
                    }
                    self.launch("bn_bwd", count as u64, true, &p)
                })
            }
            FusedKind::Conv { .. } => Err(Error::internal("CudaPointwise: convolution problem")),
        }
    }
}
