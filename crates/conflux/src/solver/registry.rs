//! The one ordered list of solvers. Order matters: immediate mode picks the first applicable
//! solver, so faster specialised solvers come first and the always-applicable naive ones last.
//! Ids are literal and never reused; append new solution ids, never renumber.

use super::cpu_amx1x1::CpuAmx1x1;
use super::cpu_direct::CpuDirect;
use super::cpu_direct_taps::CpuDirectTaps;
use super::cpu_fft::CpuFft;
use super::cpu_gemm::CpuGemm;
use super::cpu_gemm1x1::CpuGemm1x1;
use super::cpu_igemm::CpuImplicitGemm;
use super::cpu_naive::CpuNaive;
use super::cpu_pointwise::CpuPointwise;
use super::cpu_winograd::CpuWinograd;
use super::cpu_winograd4::CpuWinograd4;
use super::cuda_direct::CudaConvDirect;
use super::cuda_gemm_lt::CudaConvGemmLt;
use super::cuda_igemm::CudaConvIgemm;
use super::cuda_igemm_tc::CudaConvIgemmTc;
use super::cuda_igemm_tma::CudaConvIgemmTma;
use super::cuda_igemm_wgmma::CudaConvIgemmWgmma;
use super::cuda_pointwise::CudaPointwise;
use super::cuda_tc_bwd_data::CudaConvBwdDataTc;
use super::cuda_tc_nchw::CudaConvTcNchw;
use super::cuda_wgrad_simt::CudaConvWgradSimt;
use super::cuda_wgrad_tma::CudaConvWgradTma;
use super::Solver;
use crate::fusion::FusedProblem;
use crate::handle::Handle;

static CPU_POINTWISE: CpuPointwise = CpuPointwise;
static CPU_WINOGRAD: CpuWinograd = CpuWinograd;
static CPU_WINOGRAD4: CpuWinograd4 = CpuWinograd4;
static CPU_DIRECT: CpuDirect = CpuDirect;
static CPU_IGEMM: CpuImplicitGemm = CpuImplicitGemm;
static CPU_GEMM: CpuGemm = CpuGemm;
static CPU_GEMM1X1: CpuGemm1x1 = CpuGemm1x1;
static CPU_AMX1X1: CpuAmx1x1 = CpuAmx1x1;
static CPU_FFT: CpuFft = CpuFft;
static CPU_DIRECT_TAPS: CpuDirectTaps = CpuDirectTaps;
static CPU_NAIVE: CpuNaive = CpuNaive;
static CUDA_POINTWISE: CudaPointwise = CudaPointwise;
static CUDA_DIRECT: CudaConvDirect = CudaConvDirect;
static CUDA_GEMM_LT: CudaConvGemmLt = CudaConvGemmLt;
static CUDA_IGEMM: CudaConvIgemm = CudaConvIgemm;
static CUDA_IGEMM_TC: CudaConvIgemmTc = CudaConvIgemmTc;
static CUDA_IGEMM_WGMMA: CudaConvIgemmWgmma = CudaConvIgemmWgmma;
static CUDA_IGEMM_TMA: CudaConvIgemmTma = CudaConvIgemmTma;
static CUDA_TC_NCHW: CudaConvTcNchw = CudaConvTcNchw;
static CUDA_TC_BWD_DATA: CudaConvBwdDataTc = CudaConvBwdDataTc;
static CUDA_WGRAD_TMA: CudaConvWgradTma = CudaConvWgradTma;
static CUDA_WGRAD_SIMT: CudaConvWgradSimt = CudaConvWgradSimt;

/// Every solver, best first; the reference-like naive solvers end each device's list.
/// CPU: Direct only takes short reductions (depthwise / few channels); Winograd F(4×4,3×3)
/// beats the GEMM solvers on the ResNet 3×3 layers it accepts (it refuses few tiles with many
/// filters, where the GEMM solvers win; bench/results/2026-11-21-cpu-winograd.md); the 1×1
/// solver on AMX tiles (f32 at f32 accuracy through bf16 parts, where the CPU has AMX) beats
/// the AVX-512 one on the layers it takes (bench/results/2026-11-25-cpu-amx.md), which beats
/// both GEMM solvers on the ResNet 1×1 layers (bench/results/2026-11-22-cpu-gemm1x1.md); the
/// FFT solver takes large filters where its cost model expects it to beat the GEMM solvers
/// (bench/results/2026-11-25-cpu-fft.md: 1.2–4× on 5×5 and 7×7 layers of 32–256 channels); the
/// taps-direct solver (f32, stride 1, ≥ 4 taps) measured 1.1–2.7× faster than the implicit GEMM
/// wherever it applies (bench/results/2026-11-25-cpu-session16.md); implicit
/// GEMM needs no workspace, so it precedes the im2col GEMM; Winograd F(2×2,3×3) measured
/// 2–3× slower than the GEMM solvers (2026-11-21), so it stays after them. CUDA: 1×1
/// channels-last convolutions whose epilogue cuBLASLt has (bias, ReLU) as one cuBLASLt GEMM
/// (at cuDNN's speed on the ResNet 1×1 layers, ahead of conflux's kernels); then TMA + wgmma
/// (sm_90, 2-D, 64-channel groups), then the channels-first adapter (copies NCHW x / KCRS w to
/// channels-last scratch for those kernels), before wgmma with cp.async (sm_90) before
/// mma.sync before CUDA cores. Backward-data with stride 1 runs as a forward convolution of dy
/// with the flipped filter on those kernels (CudaConvBwdDataTensorCore) and backward-weights
/// on its own TMA + wgmma kernel (CudaConvBwdWeightsTma, 16-bit), then the tiled CUDA-core
/// kernel (CudaConvBwdWeightsSimt, every type and geometry) before the direct kernel.
pub fn registry() -> &'static [&'static dyn Solver] {
    static LIST: &[&dyn Solver] = &[
        &CPU_POINTWISE, &CPU_DIRECT, &CPU_WINOGRAD4, &CPU_AMX1X1, &CPU_GEMM1X1, &CPU_FFT, &CPU_DIRECT_TAPS, &CPU_IGEMM, &CPU_GEMM, &CPU_WINOGRAD, &CPU_NAIVE,
        &CUDA_POINTWISE, &CUDA_GEMM_LT, &CUDA_IGEMM_TMA, &CUDA_TC_NCHW, &CUDA_TC_BWD_DATA, &CUDA_WGRAD_TMA, &CUDA_WGRAD_SIMT, &CUDA_IGEMM_WGMMA, &CUDA_IGEMM_TC, &CUDA_IGEMM, &CUDA_DIRECT,
    ];
    LIST
}

pub fn find_by_id(id: u64) -> Option<&'static dyn Solver> {
    registry().iter().copied().find(|s| s.solution_id() == id)
}

pub fn find_by_name(name: &str) -> Option<&'static dyn Solver> {
    registry().iter().copied().find(|s| s.name() == name)
}

/// One row of the support matrix: a solver and whether it applies (else why not).
pub struct SolverInfo {
    pub solver: &'static dyn Solver,
    pub verdict: Result<(), String>,
}

/// Every solver for the handle's device with its verdict on `problem`, in registry order.
pub fn applicable(problem: &FusedProblem, handle: &Handle) -> Vec<SolverInfo> {
    registry()
        .iter()
        .copied()
        .filter(|s| s.device() == handle.device_kind())
        .map(|s| SolverInfo { solver: s, verdict: s.check(problem, handle) })
        .collect()
}

/// Immediate-mode choice: the first applicable solver for the handle's device, optionally
/// restricted to one algorithm. A refusal lists every solver's reason.
pub fn select_first(
    problem: &FusedProblem,
    handle: &Handle,
    algo: Option<crate::types::ConvAlgorithm>,
) -> crate::Result<&'static dyn Solver> {
    let mut reasons = Vec::new();
    for info in applicable(problem, handle) {
        if let Some(a) = algo {
            if info.solver.algorithm() != a {
                reasons.push(format!("{}: algorithm {:?} not requested", info.solver.name(), info.solver.algorithm()));
                continue;
            }
        }
        match info.verdict {
            Ok(()) => return Ok(info.solver),
            Err(why) => reasons.push(format!("{}: {why}", info.solver.name())),
        }
    }
    Err(crate::Error::unsupported(format!(
        "no {} solver{} applies to {}: {}",
        handle.device().name(),
        algo.map(|a| format!(" of algorithm {a:?}")).unwrap_or_default(),
        problem.short_name(),
        reasons.join("; ")
    )))
}
