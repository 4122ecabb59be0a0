//! CUDA pooling, forward and backward: one thread per output (forward) or per input element
//! (backward, gathering the outputs that cover it), every size compiled in. Channels-last
//! tensors are walked with C innermost so neighbouring threads read neighbouring memory.

use super::common::{check_dtype, cuda_of};
use crate::backend::cuda::module::Module;
use crate::backend::cuda::params::Params;
use crate::backend::cuda::preamble::{self, Extra};
use crate::backend::cuda::{grid_for, timed, CudaBackend};
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::error::{Error, Result};
use crate::pooling::{IndexMode, IndexType, PoolGeom};
use crate::problem::{shape5, FusedKind, FusedProblem, LayerOp};
use crate::solver::{BuildContext, Invoker, RunArgs, Solver};
use crate::tensor::TensorDesc;
use crate::types::ConvAlgorithm;
use std::sync::Arc;

const POOLING: &str = include_str!("../../backend/cuda/kernels/pooling.cu");

pub struct CudaPooling;

/// The layer of a problem, if it is one.
pub(crate) fn layer(problem: &FusedProblem) -> Option<&LayerOp> {
    match &problem.kind {
        FusedKind::Layer(op) => Some(op),
        _ => None,
    }
}

/// Defines of a strided tensor: `{prefix}_N` … `{prefix}_W`.
pub(crate) fn stride_defines(prefix: &str, s: [usize; 5], out: &mut Vec<(String, String)>) {
    for (axis, v) in ["N", "C", "D", "H", "W"].iter().zip(s) {
        out.push((format!("{prefix}_{axis}"), v.to_string()));
    }
}

/// The kernel source of a pooling problem: `input` is x (or dx), `output` y (or dy).
fn pooling_source(input: &TensorDesc, output: &TensorDesc, g: &PoolGeom, save: bool) -> Result<String> {
    let ((nc, isp, xs), (_, osp, ys)) = (shape5(input), shape5(output));
    let mut defs: Vec<(String, String)> = vec![("PL_N".into(), nc[0].to_string()), ("PL_C".into(), nc[1].to_string())];
    for (i, axis) in ["D", "H", "W"].iter().enumerate() {
        defs.push((format!("PL_I{axis}"), isp[i].to_string()));
        defs.push((format!("PL_O{axis}"), osp[i].to_string()));
        defs.push((format!("PL_K{axis}"), g.window[i].to_string()));
        defs.push((format!("PL_S{axis}"), g.stride[i].to_string()));
        defs.push((format!("PL_P{axis}"), g.pad[i].to_string()));
    }
    stride_defines("PL_XS", xs, &mut defs);
    stride_defines("PL_YS", ys, &mut defs);
    let index_t = match g.index_type {
        IndexType::U8 => "unsigned char",
        IndexType::U16 => "unsigned short",
        IndexType::U32 => "unsigned int",
        IndexType::U64 => "unsigned long long",
    };
    defs.push(("PL_POOL_MODE".into(), (g.mode as i32).to_string()));
    defs.push(("PL_SAVE_INDEX".into(), (save as u8).to_string()));
    defs.push(("PL_INDEX_T".into(), index_t.into()));
    defs.push(("PL_INDEX_IMAGE".into(), ((g.index_mode == IndexMode::Image) as u8).to_string()));
    defs.push(("PL_C_FASTEST".into(), ((nc[1] > 1 && xs[1] == 1 && ys[1] == 1) as u8).to_string()));
    let defs: Vec<(&str, String)> = defs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    preamble::source(input.dtype(), &[], &Extra { act: None, defines: &defs }, POOLING)
}

struct PoolingInvoker {
    be: Arc<CudaBackend>,
    module: Arc<Module>,
    kernel: &'static str,
    total: u64,
}

impl Solver for CudaPooling {
    fn name(&self) -> &'static str { "CudaPooling" }
    fn solution_id(&self) -> u64 { 123 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Direct }
    fn device(&self) -> DeviceKind { DeviceKind::Cuda }

    fn check(&self, problem: &FusedProblem, _device: &DeviceInfo) -> std::result::Result<(), String> {
        match layer(problem) {
            Some(op) if op.is_pooling() => check_dtype(problem),
            _ => Err("not a pooling problem".into()),
        }
    }

    fn estimate_ms(&self, _problem: &FusedProblem) -> f64 { 0.05 }

    fn build(&self, problem: &FusedProblem, ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let be = cuda_of(ctx.device())?.clone();
        let (src, kernel, total) = match layer(problem) {
            Some(LayerOp::PoolForward { x, y, geom, save_index }) => (pooling_source(x, y, geom, *save_index)?, "pool_fwd", y.element_count()),
            Some(LayerOp::PoolBackward { dy, dx, geom }) => (pooling_source(dx, dy, geom, false)?, "pool_bwd", dx.element_count()),
            _ => return Err(Error::internal("CudaPooling: not a pooling problem")),
        };
        let module = be.module("pooling", &src)?;
        Ok(Arc::new(PoolingInvoker { be, module, kernel, total: total as u64 }))
    }
}

impl Invoker for PoolingInvoker {
    fn run(&self, ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let mut p = Params { x: a.x.0, w: a.w.0, y: a.y.0, alpha: a.alpha as f32, beta: a.beta as f32, ..Default::default() };
        p.aux[0] = a.workspace.0;
        let grid = grid_for(&self.be, self.total, 256);
        let k = self.module.function(self.kernel)?;
        // SAFETY: Params mirrors the kernel struct; the op checked pointers and sizes.
        timed(ctx, &self.be, || unsafe { k.launch(&self.be.dev, (grid, 1, 1), (256, 1, 1), 0, &p) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pooling::{PoolingDesc, PoolingMode};
    use crate::types::DataType;

    /// Sources of every mode, both index modes, 2-D and 3-D, planar and channels-last, for
    /// an offline NVRTC compile when `CONFLUX_KERNEL_SOURCES` names a folder.
    #[test]
    fn pooling_sources_are_generated_for_every_variant() {
        let out = std::env::var("CONFLUX_KERNEL_SOURCES").ok();
        let mut i = 0;
        for mode in PoolingMode::ALL.iter().copied() {
            for (dims, lay) in [(2, crate::types::Layout::NCHW), (2, crate::types::Layout::NHWC), (3, crate::types::Layout::NCDHW)] {
                let dt = [DataType::Float, DataType::Half, DataType::BFloat16][i % 3];
                let w = vec![3i64; dims];
                let mut pool = PoolingDesc::new(mode, &w, &vec![1; dims], &vec![2; dims]).unwrap();
                pool.index_type = IndexType::ALL[i % 4];
                let lens: Vec<usize> = [2, 8].into_iter().chain(std::iter::repeat(9).take(dims)).collect();
                let x = TensorDesc::with_layout(dt, lay, &lens).unwrap();
                let y = TensorDesc::with_layout(dt, lay, &pool.output_lens(&x).unwrap()).unwrap();
                for (name, src) in [("fwd", pooling_source(&x, &y, &pool.geom(), true).unwrap()), ("bwd", pooling_source(&x, &y, &pool.geom(), false).unwrap())] {
                    assert!(src.contains("#define PL_KH 3") && src.contains(&format!("#define PL_POOL_MODE {}", mode as i32)), "{src}");
                    if let Some(dir) = &out {
                        std::fs::write(format!("{dir}/pooling_{i}_{name}.cu"), src).unwrap();
                    }
                }
                i += 1;
            }
        }
    }
}
