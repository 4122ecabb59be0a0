//! CUDA softmax, forward and backward: a warp per group (reductions by shuffles), or a thread
//! per group where neighbouring groups are neighbouring elements (planar channel mode, where a
//! warp's threads then read consecutive memory). Every size is compiled in.

use super::common::{check_dtype, cuda_of};
use super::pooling::{layer, stride_defines};
use crate::backend::cuda::module::Module;
use crate::backend::cuda::params::Params;
use crate::backend::cuda::preamble::{self, Extra};
use crate::backend::cuda::{timed, CudaBackend};
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::error::{Error, Result};
use crate::problem::{shape5, FusedProblem, LayerOp};
use crate::softmax::{SoftmaxAlgorithm, SoftmaxMode};
use crate::solver::{BuildContext, Invoker, RunArgs, Solver};
use crate::tensor::TensorDesc;
use crate::types::ConvAlgorithm;
use std::sync::Arc;

const SOFTMAX: &str = include_str!("../../backend/cuda/kernels/softmax.cu");

pub struct CudaSoftmax;

/// Threads per group: one where planar channel-mode groups sit side by side in memory.
fn lanes(mode: SoftmaxMode, t: [&TensorDesc; 3]) -> usize {
    let side_by_side = mode == SoftmaxMode::Channel && t.iter().all(|d| shape5(d).2[4] == 1 && shape5(d).1[2] > 1) && shape5(t[0]).2[1] > 1;
    if side_by_side { 1 } else { 32 }
}

/// Source and group count for tensors [src, aux, dst].
fn softmax_source(algo: SoftmaxAlgorithm, mode: SoftmaxMode, t: [&TensorDesc; 3]) -> Result<(String, usize, usize)> {
    let (nc, sp, _) = shape5(t[0]);
    let mut defs: Vec<(String, String)> = vec![("SM_N".into(), nc[0].to_string()), ("SM_C".into(), nc[1].to_string())];
    for (axis, v) in ["D", "H", "W"].iter().zip(sp) {
        defs.push((format!("SM_{axis}"), v.to_string()));
    }
    for (k, d) in t.iter().enumerate() {
        stride_defines(&format!("SM_S{k}"), shape5(d).2, &mut defs);
    }
    let lanes = lanes(mode, t);
    defs.push(("SM_INSTANCE".into(), ((mode == SoftmaxMode::Instance) as u8).to_string()));
    defs.push(("SM_ALGO".into(), (algo as i32).to_string()));
    defs.push(("SM_LANES".into(), lanes.to_string()));
    let groups = if mode == SoftmaxMode::Instance { nc[0] } else { nc[0] * sp.iter().product::<usize>() };
    let defs: Vec<(&str, String)> = defs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    Ok((preamble::source(t[0].dtype(), &[], &Extra { act: None, defines: &defs }, SOFTMAX)?, groups, lanes))
}

struct SoftmaxInvoker {
    be: Arc<CudaBackend>,
    module: Arc<Module>,
    kernel: &'static str,
    grid: u32,
}

impl Solver for CudaSoftmax {
    fn name(&self) -> &'static str { "CudaSoftmax" }
    fn solution_id(&self) -> u64 { 124 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Direct }
    fn device(&self) -> DeviceKind { DeviceKind::Cuda }

    fn check(&self, problem: &FusedProblem, _device: &DeviceInfo) -> std::result::Result<(), String> {
        match layer(problem) {
            Some(op) if op.is_softmax() => check_dtype(problem),
            _ => Err("not a softmax problem".into()),
        }
    }

    fn estimate_ms(&self, _problem: &FusedProblem) -> f64 { 0.05 }

    fn build(&self, problem: &FusedProblem, ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let be = cuda_of(ctx.device())?.clone();
        let ((src, groups, lanes), kernel) = match layer(problem) {
            Some(LayerOp::SoftmaxForward { x, y, algo, mode }) => (softmax_source(*algo, *mode, [x, y, y])?, "softmax_fwd"),
            Some(LayerOp::SoftmaxBackward { y, dy, dx, algo, mode }) => (softmax_source(*algo, *mode, [dy, y, dx])?, "softmax_bwd"),
            _ => return Err(Error::internal("CudaSoftmax: not a softmax problem")),
        };
        let module = be.module("softmax", &src)?;
        // 256 threads a block; the kernel strides over the groups beyond the grid.
        let grid = (groups * lanes).div_ceil(256).clamp(1, 1 << 16) as u32;
        Ok(Arc::new(SoftmaxInvoker { be, module, kernel, grid }))
    }
}

impl Invoker for SoftmaxInvoker {
    fn run(&self, ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let p = Params { x: a.x.0, w: a.w.0, y: a.y.0, alpha: a.alpha as f32, beta: a.beta as f32, ..Default::default() };
        let k = self.module.function(self.kernel)?;
        // SAFETY: Params mirrors the kernel struct; the op checked pointers and descriptors.
        timed(ctx, &self.be, || unsafe { k.launch(&self.be.dev, (self.grid, 1, 1), (256, 1, 1), 0, &p) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{DataType, Layout};

    /// Sources of every algorithm and mode, warp and thread groups, forward and backward, for
    /// an offline NVRTC compile when `CONFLUX_KERNEL_SOURCES` names a folder.
    #[test]
    fn softmax_sources_are_generated_for_every_variant() {
        let out = std::env::var("CONFLUX_KERNEL_SOURCES").ok();
        let mut i = 0;
        for algo in SoftmaxAlgorithm::ALL.iter().copied() {
            for mode in SoftmaxMode::ALL.iter().copied() {
                for lay in [Layout::NCHW, Layout::NHWC] {
                    let dt = [DataType::Float, DataType::Half, DataType::BFloat16][i % 3];
                    let x = TensorDesc::with_layout(dt, lay, &[2, 10, 3, 5]).unwrap();
                    let (src, groups, lanes) = softmax_source(algo, mode, [&x, &x, &x]).unwrap();
                    assert_eq!(groups, if mode == SoftmaxMode::Instance { 2 } else { 30 });
                    assert_eq!(lanes, if mode == SoftmaxMode::Channel && lay == Layout::NCHW { 1 } else { 32 });
                    if let Some(dir) = &out {
                        std::fs::write(format!("{dir}/softmax_{i}.cu"), src).unwrap();
                    }
                    i += 1;
                }
            }
        }
    }
}
