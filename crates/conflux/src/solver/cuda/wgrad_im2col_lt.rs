//! Backward-weights of ungrouped layers with fewer than 8 input channels (3-channel stems: 7×7
//! stride 2, 3×3 stride 2, 4×4 patchify) as one cuBLASLt GEMM over an explicit im2col of x:
//! dw (K × taps·C) = dyᵀ · col, where row p of col holds output pixel p's window
//! (`backend/cuda/im2col.rs`). The tensor-core kernels read x in 16-byte channel chunks or
//! 128-byte boxes, which 3 channels do not fill; written out, a window is a dense row of
//! taps·C values (147 for a 7×7), and cuBLASLt splits the long pixel reduction across blocks
//! The pixels are cut into `splits` equal shares, one GEMM each in a strided batch, whose f32
//! products a second pass adds in a fixed order into the caller's dw (any layout) with α/β:
//! cuBLASLt's own choice for a reduction of 400 000 pixels runs a handful of blocks. col is written once and
//! read once; its size is bounded (`MAX_COL_BYTES`).

use super::common::{cuda_of, matrix_view, Fallback};
use super::lt_backward;
use super::tensor_core::TcPrecision;
use super::wgrad_simt::CudaConvWgradSimt;
use crate::backend::cuda::blas_lt::{self, LtBatch, LtEpilogue, LtGemm, LtShape};
use crate::backend::cuda::driver::Scratch;
use crate::backend::cuda::im2col::{Im2colKernels, Im2colRows};
use crate::backend::cuda::{timed, CudaBackend};
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::error::{Error, Result};
use crate::problem::{FusedProblem, Geom};
use crate::solver::{BuildContext, Invoker, RunArgs, Solver};
use crate::types::{ConvAlgorithm, Direction};
use std::sync::Arc;

/// Input channels below which the tensor-core kernels cannot read x (16 bytes per chunk).
const MAX_CHANNELS: usize = 7;
/// Widest window row: beyond it the GEMM's share of the work dwarfs what im2col saves.
const MAX_COLS: usize = 1024;
/// Largest im2col matrix in scratch (a 7×7 stem at batch 256 needs 0.98 GiB in 16 bits).
const MAX_COL_BYTES: usize = 1 << 30;
/// Pixels per GEMM of the batch: at least `MIN_SHARE`, and few enough that the batch holds
/// several blocks per SM (these GEMMs have one or two output tiles each), up to `MAX_SPLITS`.
const MIN_SHARE: usize = 1024;
const MAX_SPLITS: usize = 1024;

/// Equal shares of `pixels`: the largest divisor of it up to `MAX_SPLITS` that leaves each at
/// least `MIN_SHARE` (1 when none does: one GEMM).
pub fn splits_of(pixels: usize) -> usize {
    (1..=MAX_SPLITS.min(pixels / MIN_SHARE)).rev().find(|s| pixels % s == 0).unwrap_or(1)
}

/// The problem's geometry, its im2col matrix, the number of splits and the batch of GEMMs, or
/// why there are none. Column-major as cuBLASLt sees split s: partial[s] (cols × K, f32) =
/// col[s] (cols × P/splits) · dy[s]ᵀ (P/splits × K).
fn plan_shape(problem: &FusedProblem) -> std::result::Result<(Geom, Im2colRows, usize, LtShape), String> {
    let (conv, g, prec) = lt_backward::lt_problem(problem, Direction::BackwardWeights)?;
    if !g.is_2d() {
        return Err("2-D convolutions only".into());
    }
    if g.c > MAX_CHANNELS {
        return Err(format!("{} input channels: the tensor-core kernels read more than {MAX_CHANNELS} directly", g.c));
    }
    let dt = conv.dtype();
    let col = Im2colRows::of(&g, dt);
    if col.cols > MAX_COLS {
        return Err(format!("{} columns per window, more than {MAX_COLS}", col.cols));
    }
    if col.bytes() > MAX_COL_BYTES {
        return Err(format!("the im2col matrix would take {} MiB of scratch (at most {})", col.bytes() >> 20, MAX_COL_BYTES >> 20));
    }
    let dy = matrix_view(g.y_strides, g.n, g.output).ok_or("dy's pixels are not evenly spaced (channels-last, or channels-first with one image)")?;
    let es = dt.size() as u64;
    let align = blas_lt::common_alignment(&[col.ld as u64 * es, dy.ld as u64 * es]);
    let splits = splits_of(col.rows);
    let share = (col.rows / splits) as i64;
    // Consecutive pixels of dy are ld apart when its channels are contiguous, else adjacent.
    let dy_pixel = if dy.channels_contiguous { dy.ld as i64 } else { 1 };
    let shape = LtShape {
        dtype: dt,
        tf32: prec == TcPrecision::Tf32,
        f32_out: true,
        align,
        trans_a: false,
        // dy stored K × P is op(B) = Bᵀ; stored P × K it is B.
        trans_b: dy.channels_contiguous,
        // The window rows' zero columns up to ld are multiplied too: an M that is a whole number
        // of 16-byte chunks lets cuBLASLt take its aligned kernels (with 147 real columns of a
        // 7×7 stem it chose an unaligned Turing-era one;
        // bench/results/2026-11-29-h200-wgrad-splits.md); the partial sums' extra rows are zeros
        // the reduction never reads.
        m: col.ld as u64,
        n: g.k as u64,
        k: share as u64,
        lda: col.ld as i64,
        ldb: dy.ld as i64,
        ldd: col.ld as i64,
        epilogue: LtEpilogue::None,
        batch: LtBatch { count: splits as u32, stride_a: share * col.ld as i64, stride_b: share * dy_pixel, stride_d: (g.k * col.ld) as i64 },
    };
    Ok((g, col, splits, shape))
}

pub struct CudaConvWgradIm2colLt;

impl Solver for CudaConvWgradIm2colLt {
    fn name(&self) -> &'static str { "CudaConvBwdWeightsIm2colLt" }
    fn solution_id(&self) -> u64 { 125 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Gemm }
    fn device(&self) -> DeviceKind { DeviceKind::Cuda }

    fn check(&self, problem: &FusedProblem, _device: &DeviceInfo) -> std::result::Result<(), String> {
        plan_shape(problem)?;
        blas_lt::check_available()
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // The GEMM, plus writing and reading the im2col matrix at about 3 TB/s.
        let col = plan_shape(problem).map_or(0, |(_, col, _, _)| col.bytes());
        lt_backward::estimate_ms(problem, 0.012) + 2.0 * col as f64 / 3e12 * 1e3
    }

    fn build(&self, problem: &FusedProblem, ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let be = cuda_of(ctx.device())?.clone();
        let (geom, _, splits, shape) = plan_shape(problem).map_err(|why| Error::not_implemented(format!("{}: {why}", self.name())))?;
        let conv = problem.conv_problem().ok_or_else(|| Error::internal("wgrad-im2col: not a convolution"))?;
        let kernels = Im2colKernels::build(&be, &geom, conv.dtype())?;
        be.dev.bind()?;
        let gemm = LtGemm::plan(&shape).map_err(|e| e.context(self.name()))?;
        Ok(Arc::new(Im2colLtInvoker { be, gemm, kernels, splits, k: geom.k, problem: problem.clone(), fallback: Fallback::new(&CudaConvWgradSimt) }))
    }
}

struct Im2colLtInvoker {
    be: Arc<CudaBackend>,
    gemm: LtGemm,
    kernels: Im2colKernels,
    splits: usize,
    /// Output channels.
    k: usize,
    problem: FusedProblem,
    /// For a dy the planned GEMM's alignment does not suit.
    fallback: Fallback,
}

impl Invoker for Im2colLtInvoker {
    fn run(&self, ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        // Backward-weights arguments: x read, y = dy read, w = dw written.
        if a.y.0 % self.gemm.align != 0 {
            return self.fallback.run(&self.problem, ctx, a);
        }
        let col: Im2colRows = self.kernels.shape();
        let col_bytes = col.bytes().next_multiple_of(256);
        let partial_bytes = (self.splits * self.k * col.ld * 4).next_multiple_of(256);
        timed(ctx, &self.be, || {
            let scratch = Scratch::new(ctx, &self.be.dev, col_bytes + partial_bytes + self.gemm.workspace)?;
            let (cols, partial) = (scratch.ptr(), scratch.ptr() + col_bytes as u64);
            let ws = if self.gemm.workspace > 0 { partial + partial_bytes as u64 } else { 0 };
            self.kernels.write(&self.be, a.x.0, cols)?;
            // SAFETY: col and the partial products are this call's scratch, sized and aligned as
            // planned; dy is the caller's, validated against the problem and aligned as planned
            // (checked above); the workspace lives (stream-ordered) until after the multiplies.
            unsafe { self.gemm.run(self.be.dev.stream_raw(), 1.0, 0.0, cols, a.y.0, partial, 0, ws)? };
            self.kernels.sum_into(&self.be, partial, self.splits, a.w.0, a.alpha as f32, a.beta as f32)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::splits_of;

    #[test]
    fn equal_shares_of_the_pixels() {
        // ResNet-50's stem at batch 32: 32 · 112² = 2¹³ · 7² pixels, shares of 1024.
        assert_eq!(splits_of(401_408), 392);
        // Inception's stem: 32 · 149² pixels; ConvNeXt's patchify stem: 32 · 56².
        assert_eq!(splits_of(710_432), 596);
        assert_eq!(splits_of(100_352), 98);
        // A prime count, and too few pixels to split: one GEMM.
        assert_eq!(splits_of(100_003), 1);
        assert_eq!(splits_of(1500), 1);
    }
}
