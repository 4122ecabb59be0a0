//! int8 and fp8 forward convolutions (`quant.rs`) on CUDA cores (conv_quant_direct.cu): every
//! geometry and layout, the fused epilogue in f32 and y's conversion. The quantized problems
//! the tensor-core kernel (`igemm_tma`) refuses come here, and so do its runs with pointers
//! the copy engine cannot use.

use super::common::{conv_run_params, cuda_of};
use crate::backend::cuda::module::Kernel;
use crate::backend::cuda::preamble::{self, Extra};
use crate::backend::cuda::{grid_for, timed, CudaBackend};
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::error::{Error, Result};
use crate::problem::{FusedProblem, Geom};
use crate::solver::{BuildContext, Invoker, RunArgs, Solver};
use crate::types::ConvAlgorithm;
use std::sync::Arc;

const TEMPLATE: &str = include_str!("../../backend/cuda/kernels/conv_quant_direct.cu");

pub struct CudaConvQuantDirect;

impl Solver for CudaConvQuantDirect {
    fn name(&self) -> &'static str { "CudaConvQuantizedDirect" }
    fn solution_id(&self) -> u64 { 126 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Direct }
    fn device(&self) -> DeviceKind { DeviceKind::Cuda }
    fn computes_quantized(&self) -> bool { true }

    fn check(&self, problem: &FusedProblem, _device: &DeviceInfo) -> std::result::Result<(), String> { problem.quantized_conv().map(|_| ()) }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // About 2 TMAC/s for the one-thread-per-output loops.
        problem.conv_problem().map(|c| c.macs() / 2e12 * 1e3 + 0.01).unwrap_or(f64::MAX)
    }

    fn build(&self, problem: &FusedProblem, ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let be = cuda_of(ctx.device())?.clone();
        let (_, geom) = problem.quantized_conv().map_err(|why| Error::not_implemented(format!("{}: {why}", self.name())))?;
        let conv = problem.conv_problem().ok_or_else(|| Error::internal("CudaConvQuantizedDirect: not a convolution"))?;
        let src = preamble::conv_source(conv, problem.epilogue(), &Extra::default(), TEMPLATE)?;
        let kernel = be.module("conv_quant_direct", &src)?.function("conv_fwd_quant_direct")?;
        Ok(Arc::new(QuantDirectInvoker { backend: be, kernel, geom, problem: problem.clone() }))
    }
}

struct QuantDirectInvoker {
    backend: Arc<CudaBackend>,
    kernel: Kernel,
    geom: Geom,
    problem: FusedProblem,
}

impl Invoker for QuantDirectInvoker {
    fn run(&self, ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let p = conv_run_params(&self.geom, &self.problem, a)?;
        let g = &self.geom;
        let grid = grid_for(&self.backend, (g.n * g.k * g.output_size()) as u64, 256);
        // SAFETY: Params mirrors the kernel's parameter struct (static_assert on its size);
        // pointers are the caller's tensors, validated against the problem's descriptors, and
        // the kernel reads and writes them through their own element types.
        timed(ctx, &self.backend, || unsafe { self.kernel.launch(&self.backend.dev, (grid, 1, 1), (256, 1, 1), 0, &p) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::{ConvProblem, EpiOp};
    use crate::types::{ActivationMode, ConvAttrib, ConvMode, DataType, Layout};
    use crate::{ConvDesc, TensorDesc};

    /// Sources for every input and output type generate (and with `CONFLUX_KERNEL_SOURCES`
    /// set are written there for an offline NVRTC compile, `scripts/nvrtc_check.py`).
    #[test]
    fn sources_generate_for_every_type_pair() {
        use DataType::*;
        let out = std::env::var("CONFLUX_KERNEL_SOURCES").ok();
        let cases = [(Int8, Int8, Int32), (Int8, Int8, Int8), (Int8, Int8, Half), (Float8, BFloat8, Float8), (BFloat8, BFloat8, BFloat16), (Float8, Float8, BFloat8)];
        for (i, (xt, wt, yt)) in cases.into_iter().enumerate() {
            let mut conv = ConvDesc::new(ConvMode::Convolution, &[1, 1], &[1, 1], &[1, 1]).unwrap();
            conv.set_attribute(ConvAttrib::Fp8RoundingMode, (i % 2) as i64).unwrap();
            let x = TensorDesc::with_layout(xt, Layout::NHWC, &[2, 16, 9, 9]).unwrap();
            let w = TensorDesc::new(wt, &[8, 16, 3, 3]).unwrap();
            let y = TensorDesc::new(yt, conv.output_desc(&x, &w).unwrap().lens()).unwrap();
            let conv = ConvProblem::forward(&conv, &x, &w, &y).unwrap();
            let epilogue = if i % 3 == 0 { vec![] } else { vec![EpiOp::Bias { dtype: Float }, EpiOp::Activation { mode: ActivationMode::Relu }] };
            let src = preamble::conv_source(&conv, &epilogue, &Extra::default(), TEMPLATE).unwrap();
            assert!(src.contains(&format!("#define RAW_I32 {}", (yt == Int32 && epilogue.is_empty()) as u8)));
            if let Some(dir) = &out {
                std::fs::write(format!("{dir}/quant_direct_{i}_{xt:?}_{wt:?}_{yt:?}.cu"), &src).unwrap();
            }
        }
    }
}
