//! Backward-weights of 1×1 stride-1 unpadded convolutions as one cuBLASLt GEMM:
//! dw (K × C) = Σ over every pixel of the batch of dy[p]ᵀ · x[p], a product whose reduction runs
//! over N·H·W (hundreds of thousands of pixels) into a small output (MobileNetV2's 32 × 16).
//! cuBLASLt splits such reductions across blocks itself; conflux's TMA kernel needs channel
//! counts that fill its 64-channel boxes and otherwise pays for padded copies of x.
//! x and dy may each be channels-last (any batch) or channels-first with one image (its pixels
//! are then one evenly spaced run); dw must keep each filter's channels contiguous. 16-bit
//! data, and f32 as TF32 products when the descriptor allows TF32, else as an f32 GEMM.
//! cuBLASLt's split reductions run in a fixed order: reruns give the same bits.

use super::common::{cuda_of, matrix_view, Fallback};
use super::lt_backward::{self, BackwardLtInvoker, Operands};
use super::tensor_core::TcPrecision;
use super::wgrad_simt::CudaConvWgradSimt;
use crate::backend::cuda::blas_lt::{self, LtBatch, LtEpilogue, LtGemm, LtShape};
use crate::backend::{DeviceInfo, DeviceKind};
use crate::error::{Error, Result};
use crate::problem::FusedProblem;
use crate::solver::{BuildContext, Invoker, Solver};
use crate::types::{ConvAlgorithm, Direction};
use std::sync::Arc;

pub struct CudaConvWgradGemmLt;

/// The GEMM of a problem, or why there is none. Column-major as cuBLASLt sees it:
/// dw (C × K, a filter per column) = x (C × P) · dyᵀ (P × K), P = N·H·W.
fn gemm_shape(problem: &FusedProblem) -> std::result::Result<LtShape, String> {
    let (conv, g, prec) = lt_backward::lt_problem(problem, Direction::BackwardWeights)?;
    if !(g.filter_size() == 1 && g.pad == [0; 3] && g.pad_end == [0; 3] && g.stride == [1; 3]) {
        return Err("not a 1×1, unpadded, stride-1 convolution".into());
    }
    let x = matrix_view(g.x_strides, g.n, g.input).ok_or("x's pixels are not evenly spaced (channels-last, or channels-first with one image)")?;
    let dy = matrix_view(g.y_strides, g.n, g.output).ok_or("dy's pixels are not evenly spaced (channels-last, or channels-first with one image)")?;
    if g.w_strides[1] != 1 {
        return Err("dw must keep each filter's channels contiguous".into());
    }
    // Columns that do not start on 16-byte boundaries (MobileNetV3's and EfficientNet's
    // squeeze layers of 10–28 channels, a 21-class head) take cuBLASLt's slower kernels for
    // their alignment, still well ahead of the CUDA-core GEMM.
    let es = conv.dtype().size() as u64;
    let align = blas_lt::common_alignment(&[x.ld as u64 * es, dy.ld as u64 * es, g.w_strides[0] as u64 * es]);
    Ok(LtShape {
        dtype: conv.dtype(),
        tf32: prec == TcPrecision::Tf32,
        f32_out: false,
        align,
        // x stored C × P (channels contiguous) is op(A) = A; stored P × C it is Aᵀ.
        trans_a: !x.channels_contiguous,
        // dy stored K × P is op(B) = Bᵀ; stored P × K it is B.
        trans_b: dy.channels_contiguous,
        m: g.c as u64,
        n: g.k as u64,
        k: (g.n * g.output_size()) as u64,
        lda: x.ld as i64,
        ldb: dy.ld as i64,
        ldd: g.w_strides[0] as i64,
        epilogue: LtEpilogue::None,
        batch: LtBatch::ONE,
    })
}

impl Solver for CudaConvWgradGemmLt {
    fn name(&self) -> &'static str { "CudaConvBwdWeightsGemmLt" }
    fn solution_id(&self) -> u64 { 121 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Gemm }
    fn device(&self) -> DeviceKind { DeviceKind::Cuda }

    fn check(&self, problem: &FusedProblem, _device: &DeviceInfo) -> std::result::Result<(), String> {
        gemm_shape(problem)?;
        blas_lt::check_available()
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 { lt_backward::estimate_ms(problem, 0.006) }

    fn build(&self, problem: &FusedProblem, ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let be = cuda_of(ctx.device())?.clone();
        let shape = gemm_shape(problem).map_err(|why| Error::not_implemented(format!("{}: {why}", self.name())))?;
        be.dev.bind()?;
        let gemm = LtGemm::plan(&shape).map_err(|e| e.context(self.name()))?;
        Ok(Arc::new(BackwardLtInvoker {
            be,
            gemm,
            operands: Operands::XDyDw,
            zero_bytes: 0,
            problem: problem.clone(),
            fallback: Fallback::new(&CudaConvWgradSimt),
            beta_fallback: None,
        }))
    }
}
