//! Implicit-GEMM forward convolution on CUDA cores (conv_igemm.cu) with the fused epilogue:
//! any geometry, group count, layout and type; the batch size stays a run-time argument.

use super::cuda_direct::{check_dtype, conv_run_params, cuda_of};
use super::{Invoker, RunArgs, Solver};
use crate::backend::cuda::module::Kernel;
use crate::backend::cuda::preamble::{self, Extra};
use crate::backend::cuda::{timed, CudaBackend};
use crate::conv::Geom;
use crate::error::{Error, Result};
use crate::fusion::FusedProblem;
use crate::handle::{DeviceKind, Handle};
use crate::types::{ConvAlgorithm, Direction};
use std::sync::Arc;

const TEMPLATE: &str = include_str!("../backend/cuda/kernels/conv_igemm.cu");
const BM: usize = 128;
const BK: usize = 8;

pub struct CudaConvIgemm;

struct IgemmInvoker {
    be: Arc<CudaBackend>,
    kernel: Kernel,
    geom: Geom,
    bn: usize,
    problem: FusedProblem,
}

impl Solver for CudaConvIgemm {
    fn name(&self) -> &'static str { "CudaConvImplicitGemmSimt" }
    fn solution_id(&self) -> u64 { 103 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::ImplicitGemm }
    fn device(&self) -> DeviceKind { DeviceKind::Cuda }

    fn check(&self, problem: &FusedProblem, _handle: &Handle) -> std::result::Result<(), String> {
        let Some(conv) = problem.conv_problem() else { return Err("not a convolution problem".into()) };
        check_dtype(problem)?;
        if conv.direction != Direction::Forward {
            return Err(format!("forward only (this is {:?})", conv.direction));
        }
        let g = Geom::of(conv);
        let m = g.n * g.output_size();
        if m >= i32::MAX as usize / 2 || g.cg() * g.filter_size() >= i32::MAX as usize / 2 {
            return Err("GEMM dimensions exceed 32-bit indexing".into());
        }
        Ok(())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // About 15 TFLOP/s on a Hopper-class GPU.
        problem.conv_problem().map(|c| 2.0 * c.macs() / 15e12 * 1e3 + 0.005).unwrap_or(f64::MAX)
    }

    fn build(&self, problem: &FusedProblem, handle: &Handle) -> Result<Arc<dyn Invoker>> {
        let be = cuda_of(handle)?.clone();
        let conv = problem.conv_problem().ok_or_else(|| Error::internal("igemm: not a convolution"))?;
        let g = Geom::of(conv);
        let bn = if g.kg() <= 64 { 64 } else { 128 };
        let d = |name: &str, v: usize| (name.to_string(), v.to_string());
        let defs: Vec<(String, String)> = vec![
            d("OD", g.output[0]), d("OH", g.output[1]), d("OW", g.output[2]),
            d("ID", g.input[0]), d("IH", g.input[1]), d("IW", g.input[2]),
            d("FD", g.filter[0]), d("FH", g.filter[1]), d("FW", g.filter[2]),
            d("SD", g.stride[0]), d("SH", g.stride[1]), d("SW", g.stride[2]),
            d("PD", g.pad[0]), d("PH", g.pad[1]), d("PW", g.pad[2]),
            d("DD", g.dilation[0]), d("DH", g.dilation[1]), d("DW", g.dilation[2]),
            d("CG", g.cg()), d("KG", g.kg()), d("BM", BM), d("BN", bn), d("BK", BK),
            d("CHANNEL_INNER", conv.x.is_channels_last() as usize),
        ];
        let defs: Vec<(&str, String)> = defs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        let src = preamble::source(conv.dtype(), problem.epilogue(), &Extra { act: None, defines: &defs }, TEMPLATE)?;
        let kernel = be.module("conv_igemm", &src)?.function("conv_fwd_igemm")?;
        Ok(Arc::new(IgemmInvoker { be, kernel, geom: g, bn, problem: problem.clone() }))
    }
}

impl Invoker for IgemmInvoker {
    fn run(&self, handle: &Handle, a: &RunArgs) -> Result<()> {
        let g = &self.geom;
        let p = conv_run_params(g, &self.problem, a)?;
        let m = g.n * g.output_size();
        let grid = (m.div_ceil(BM) as u32, g.kg().div_ceil(self.bn) as u32, g.groups as u32);
        if grid.1 > 65535 || grid.2 > 65535 {
            return Err(Error::not_implemented("igemm: too many channel tiles or groups for one launch"));
        }
        // SAFETY: Params mirrors the kernel struct; pointers validated against the problem.
        timed(handle, &self.be, || unsafe { self.kernel.launch(&self.be.dev, grid, (256, 1, 1), 0, &p) })
    }
}
