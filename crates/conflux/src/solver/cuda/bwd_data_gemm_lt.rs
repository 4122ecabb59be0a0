//! Backward-data of 1×1 unpadded convolutions as cuBLASLt GEMMs: dx[p] = dy[p] · w for every
//! pixel p of the batch (w is K × C). The forward rewrite the tensor-core solvers run reads w
//! transposed and tiles small channel counts (squeeze layers on 1×1 images, a 21-class head)
//! poorly; cuBLASLt takes any of them, at the alignment their columns have.
//! Stride 1: one GEMM; dy and dx may each be channels-last (any batch) or channels-first with
//! one image. Strided (ResNet's downsampling 1×1 s2): dx is zeroed, then a batch of GEMMs, one
//! per output row, writes the pixels the filter touched (every stride-th column of every
//! stride-th row); dx and dy channels-last, dx without gaps, β = 0 (else the phase solver).
//! w must keep each filter's channels contiguous. 16-bit data, and f32 as TF32 products when
//! the descriptor allows TF32, else as an f32 GEMM.

use super::common::{cuda_of, matrix_view, Fallback};
use super::lt_backward::{self, BackwardLtInvoker, Operands};
use super::bwd_data_strided::CudaConvBwdDataStrided;
use super::direct::CudaConvDirect;
use super::tensor_core::TcPrecision;
use crate::backend::cuda::blas_lt::{self, LtBatch, LtEpilogue, LtGemm, LtShape};
use crate::backend::{DeviceInfo, DeviceKind};
use crate::error::{Error, Result};
use crate::problem::{FusedProblem, Geom};
use crate::solver::{BuildContext, Invoker, Solver};
use crate::types::{ConvAlgorithm, DataType, Direction};
use std::sync::Arc;

pub struct CudaConvBwdDataGemmLt;

/// The multiply, whether cuBLASLt's A operand is dy (else w), and the bytes of dx to zero
/// first (strided problems; 0 for stride 1).
struct Plan {
    shape: LtShape,
    a_is_dy: bool,
    zero_bytes: usize,
}

/// The GEMM of a problem, or why there is none. Column-major as cuBLASLt sees it, with
/// P = N·H·W: channels-contiguous dx (C × P) = w (C × K, a filter per column) · dy (K × P);
/// pixel-contiguous dx (P × C) = dyᵀ (P × K) · wᵀ (K × C).
fn plan(problem: &FusedProblem) -> std::result::Result<Plan, String> {
    let (conv, g, prec) = lt_backward::lt_problem(problem, Direction::BackwardData)?;
    if !(g.filter_size() == 1 && g.pad == [0; 3] && g.pad_end == [0; 3]) {
        return Err("not a 1×1 unpadded convolution".into());
    }
    if g.stride != [1; 3] {
        return strided_plan(conv.dtype(), prec, &g);
    }
    let dx = matrix_view(g.x_strides, g.n, g.input).ok_or("dx's pixels are not evenly spaced (channels-last, or channels-first with one image)")?;
    let dy = matrix_view(g.y_strides, g.n, g.output).ok_or("dy's pixels are not evenly spaced (channels-last, or channels-first with one image)")?;
    if g.w_strides[1] != 1 {
        return Err("w must keep each filter's channels contiguous".into());
    }
    let es = conv.dtype().size() as u64;
    let align = blas_lt::common_alignment(&[dx.ld as u64 * es, dy.ld as u64 * es, g.w_strides[0] as u64 * es]);
    let pixels = (g.n * g.output_size()) as u64;
    let w_ld = g.w_strides[0] as i64;
    let base = LtShape {
        dtype: conv.dtype(),
        tf32: prec == TcPrecision::Tf32,
        f32_out: false,
        align,
        trans_a: false,
        trans_b: false,
        m: 0,
        n: 0,
        k: g.k as u64,
        lda: 0,
        ldb: 0,
        ldd: dx.ld as i64,
        epilogue: LtEpilogue::None,
        batch: LtBatch::ONE,
    };
    Ok(if dx.channels_contiguous {
        // A = w stored C × K; B = dy stored K × P (op N) or P × K (op T).
        let shape = LtShape { m: g.c as u64, n: pixels, lda: w_ld, ldb: dy.ld as i64, trans_b: !dy.channels_contiguous, ..base };
        Plan { shape, a_is_dy: false, zero_bytes: 0 }
    } else {
        // A = dy stored K × P (op T) or P × K (op N); B = w stored C × K (op T).
        let shape = LtShape { m: pixels, n: g.c as u64, lda: dy.ld as i64, ldb: w_ld, trans_a: dy.channels_contiguous, trans_b: true, ..base };
        Plan { shape, a_is_dy: true, zero_bytes: 0 }
    })
}

/// A strided 2-D problem as a batch over the N·OH rows of dy: dx's row (C × OW, columns
/// sx·C apart, rows sy·W·C apart) = w (C × K, shared) · dy's row (K × OW).
fn strided_plan(dtype: DataType, prec: TcPrecision, g: &Geom) -> std::result::Result<Plan, String> {
    let ([_, h, w], [od, oh, ow], [sd, sy, sx]) = (g.input, g.output, g.stride);
    if !g.is_2d() || od != 1 || sd != 1 {
        return Err("strided: 2-D convolutions only".into());
    }
    let s = g.x_strides;
    if s[1] != 1 || s[4] != g.c || s[3] != w * g.c || (g.n > 1 && s[0] != h * s[3]) {
        return Err("strided: dx must be channels-last without gaps (it is zeroed as a whole first)".into());
    }
    if g.n > 1 && h != sy * oh {
        return Err(format!("strided: {h} rows are not {sy} × {oh} output rows, so images are not evenly spaced rows apart"));
    }
    let dy = matrix_view(g.y_strides, g.n, g.output).filter(|v| v.channels_contiguous).ok_or("strided: dy must be channels-last with evenly spaced pixels")?;
    if g.w_strides[1] != 1 {
        return Err("w must keep each filter's channels contiguous".into());
    }
    let es = dtype.size();
    let batch = LtBatch { count: u32::try_from(g.n * oh).map_err(|_| "strided: too many rows")?, stride_a: 0, stride_b: (ow * dy.ld) as i64, stride_d: (sy * w * g.c) as i64 };
    let lds = [g.w_strides[0], dy.ld, sx * g.c, ow * dy.ld, sy * w * g.c];
    let shape = LtShape {
        dtype,
        tf32: prec == TcPrecision::Tf32,
        f32_out: false,
        align: blas_lt::common_alignment(&lds.map(|v| (v * es) as u64)),
        trans_a: false,
        trans_b: false,
        m: g.c as u64,
        n: ow as u64,
        k: g.k as u64,
        lda: g.w_strides[0] as i64,
        ldb: dy.ld as i64,
        ldd: (sx * g.c) as i64,
        epilogue: LtEpilogue::None,
        batch,
    };
    Ok(Plan { shape, a_is_dy: false, zero_bytes: g.n * h * w * g.c * es })
}

impl Solver for CudaConvBwdDataGemmLt {
    fn name(&self) -> &'static str { "CudaConvBwdDataGemmLt" }
    fn solution_id(&self) -> u64 { 122 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Gemm }
    fn device(&self) -> DeviceKind { DeviceKind::Cuda }

    fn check(&self, problem: &FusedProblem, _device: &DeviceInfo) -> std::result::Result<(), String> {
        plan(problem)?;
        blas_lt::check_available()
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 { lt_backward::estimate_ms(problem, 0.004) }

    fn build(&self, problem: &FusedProblem, ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let be = cuda_of(ctx.device())?.clone();
        let plan = plan(problem).map_err(|why| Error::not_implemented(format!("{}: {why}", self.name())))?;
        be.dev.bind()?;
        let gemm = LtGemm::plan(&plan.shape).map_err(|e| e.context(self.name()))?;
        // β ≠ 0 on a strided problem would scale the pixels no GEMM writes: the phase solver
        // runs those calls where it applies.
        let phases = CudaConvBwdDataStrided.check(problem, ctx.device().info()).is_ok();
        let beta_fallback = Fallback::new(if phases { &CudaConvBwdDataStrided } else { &CudaConvDirect });
        Ok(Arc::new(BackwardLtInvoker {
            be,
            gemm,
            operands: if plan.a_is_dy { Operands::DyWDx } else { Operands::WDyDx },
            zero_bytes: plan.zero_bytes,
            problem: problem.clone(),
            fallback: Fallback::new(&CudaConvDirect),
            beta_fallback: (plan.zero_bytes > 0).then_some(beta_fallback),
        }))
    }
}
