//! 1×1 convolutions on channels-last tensors as one cuBLASLt GEMM with its bias / ReLU
//! epilogue. Such a convolution is the matrix product y[N·H·W × K] = x[N·H·W × C] · wᵀ (w is
//! K × C), and cuBLASLt's kernels with the RELU_BIAS epilogue ran the ResNet-50 1×1 layers at
//! cuDNN's fused speed on the H200, where conflux's own TMA kernel was slower, most of all on
//! the layers with few k-steps per tile (bench/results/2026-11-21-h200-cublaslt.md). Taken only where cuBLASLt's epilogue is
//! exactly the plan's: none, bias, ReLU, or bias then ReLU, with a bias of the data type.
//! 16-bit data and f32 with TF32 allowed; strict f32 stays on the split-TF32 kernel, which
//! is faster than an f32 GEMM on CUDA cores.

use super::common::cuda_of;
use super::igemm_simt::CudaConvIgemm;
use super::tensor_core::{tensor_core_precision, TcPrecision};
use super::igemm_tma::{plain_gemm, CudaConvIgemmTma};
use crate::solver::{Invoker, RunArgs, Solver};
use crate::backend::cuda::blas_lt::{self, LtBatch, LtEpilogue, LtGemm, LtShape, LT_ALIGN};
use crate::backend::cuda::driver::Scratch;
use crate::backend::cuda::{timed, CudaBackend};
use crate::problem::Geom;
use crate::Direction;
use crate::error::{Error, Result};
use crate::problem::{EpiOp, FusedProblem, OpArg};
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::solver::BuildContext;
use crate::types::{ActivationMode, ConvAlgorithm, DataType};
use std::sync::{Arc, OnceLock};

pub struct CudaConvGemmLt;

/// cuBLASLt's epilogue for the plan's ops, if it has one.
fn lt_epilogue(problem: &FusedProblem) -> std::result::Result<LtEpilogue, String> {
    let dt = problem.dtype();
    let bias_ok = |b: &DataType| *b == dt;
    let relu = |m: &ActivationMode| *m == ActivationMode::Relu;
    match problem.epilogue() {
        [] => Ok(LtEpilogue::None),
        [EpiOp::Bias { dtype }] if bias_ok(dtype) => Ok(LtEpilogue::Bias),
        [EpiOp::Activation { mode }] if relu(mode) => Ok(LtEpilogue::Relu),
        [EpiOp::Bias { dtype }, EpiOp::Activation { mode }] if bias_ok(dtype) && relu(mode) => Ok(LtEpilogue::BiasRelu),
        ops => Err(format!(
            "cuBLASLt's epilogues are bias (of the data type) and ReLU, in that order; this plan has {}",
            ops.iter().map(EpiOp::letter).collect::<String>()
        )),
    }
}

/// The GEMM view of the problem: (shape, geometry), or why there is none.
fn gemm_shape(problem: &FusedProblem) -> std::result::Result<(LtShape, Geom), String> {
    let conv = problem.conv_problem().ok_or("not a convolution")?;
    if conv.direction != Direction::Forward {
        return Err(format!("forward only (this is {:?})", conv.direction));
    }
    let prec = tensor_core_precision(conv)?;
    if prec == TcPrecision::Tf32x3 {
        return Err("strict f32 (TF32 not allowed): the split-TF32 kernel is faster than an f32 GEMM".into());
    }
    let g = Geom::of(conv);
    if g.groups != 1 {
        return Err("one group only".into());
    }
    if !plain_gemm(&g) {
        return Err("not a 1×1, unpadded, stride-1 convolution over dense pixel rows".into());
    }
    let (xs, ws, ys) = (g.x_strides, g.w_strides, g.y_strides);
    let [od, oh, ow] = g.output;
    let y_rows = ys[3] == ow * ys[4] && (od == 1 || ys[2] == oh * ys[3]) && ys[0] == od * oh * ys[3];
    if xs[1] != 1 || ws[1] != 1 || ys[1] != 1 || !y_rows {
        return Err("x, w and y must be channels-last (channels contiguous, pixel rows evenly spaced)".into());
    }
    let es = conv.dtype().size();
    if [xs[4], ws[0], ys[4]].iter().any(|ld| (ld * es) as u64 % LT_ALIGN != 0) {
        return Err(format!("pixel and filter rows must start on {LT_ALIGN}-byte boundaries"));
    }
    let epilogue = lt_epilogue(problem)?;
    // y (K × pixels, column-major) = wᵀ-as-stored (C × K)ᵀ · x (C × pixels).
    let shape = LtShape {
        dtype: conv.dtype(),
        tf32: prec == TcPrecision::Tf32,
        f32_out: false,
        align: LT_ALIGN,
        trans_a: true,
        trans_b: false,
        m: g.k as u64,
        n: (g.n * g.output_size()) as u64,
        k: g.c as u64,
        lda: ws[0] as i64,
        ldb: xs[4] as i64,
        ldd: ys[4] as i64,
        epilogue,
        batch: LtBatch::ONE,
    };
    Ok((shape, g))
}

impl Solver for CudaConvGemmLt {
    fn name(&self) -> &'static str { "CudaConvGemmLt" }
    fn solution_id(&self) -> u64 { 111 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Gemm }
    fn device(&self) -> DeviceKind { DeviceKind::Cuda }

    fn check(&self, problem: &FusedProblem, _device: &DeviceInfo) -> std::result::Result<(), String> {
        gemm_shape(problem)?;
        blas_lt::check_available()
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // Measured at about cuDNN's speed on the 1×1 layers: a little ahead of the TMA kernel's
        // estimate, so immediate mode lists it first where both apply.
        let rate = if problem.dtype().size() == 2 { 550e12 } else { 275e12 };
        problem.conv_problem().map(|c| 2.0 * c.macs() / rate * 1e3 + 0.004).unwrap_or(f64::MAX)
    }

    fn build(&self, problem: &FusedProblem, ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let be = cuda_of(ctx.device())?.clone();
        let (shape, _) = gemm_shape(problem).map_err(|why| Error::not_implemented(format!("{}: {why}", self.name())))?;
        be.dev.bind()?;
        let gemm = LtGemm::plan(&shape).map_err(|e| e.context(self.name()))?;
        Ok(Arc::new(LtInvoker { be, gemm, problem: problem.clone(), fallback: OnceLock::new() }))
    }
}

struct LtInvoker {
    be: Arc<CudaBackend>,
    gemm: LtGemm,
    problem: FusedProblem,
    /// conflux's own kernel, built on first need for pointers the planned algorithm cannot take.
    fallback: OnceLock<Result<Arc<dyn Invoker>>>,
}

impl Invoker for LtInvoker {
    fn run(&self, ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let bias = match (self.gemm.reads_bias(), a.ops.first()) {
            (true, Some(OpArg::Bias { b })) => b.0,
            (true, other) => return Err(Error::bad_parm(format!("CudaConvGemmLt: bias argument expected, got {other:?}"))),
            (false, _) => 0,
        };
        if [a.x.0, a.w.0, a.y.0, bias].iter().any(|p| p % LT_ALIGN != 0) {
            let inv = self
                .fallback
                .get_or_init(|| {
                    if CudaConvIgemmTma.check(&self.problem, ctx.device().info()).is_ok() {
                        CudaConvIgemmTma.build(&self.problem, ctx.device())
                    } else {
                        CudaConvIgemm.build(&self.problem, ctx.device())
                    }
                })
                .as_ref()
                .map_err(Clone::clone)?;
            return inv.run(ctx, a);
        }
        timed(ctx, &self.be, || {
            let ws = if self.gemm.workspace > 0 { Some(Scratch::new(ctx, &self.be.dev, self.gemm.workspace)?) } else { None };
            // SAFETY: x, w, y (and the bias) are the caller's device tensors, validated against
            // the problem whose shapes the plan was made for, and aligned as planned; the
            // workspace lives (stream-ordered) until after the multiply.
            unsafe { self.gemm.run(self.be.dev.stream_raw(), a.alpha as f32, a.beta as f32, a.w.0, a.x.0, a.y.0, bias, ws.as_ref().map_or(0, Scratch::ptr)) }
        })
    }
}
