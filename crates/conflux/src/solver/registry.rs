//! The solvers, one ordered list per backend, and the one walk over a list (`walk`).
//!
//! Order matters: immediate mode takes the first applicable solver, so faster specialised
//! solvers come first and each list ends in its always-applicable reference-like solver. Each
//! entry says in one line why it sits where it does (the measurements behind the order are in
//! `bench/results/`). Solution ids are literal and never reused: append new ids, never renumber.
//!
//! `walk` is the only code that iterates a list. `search/` builds every policy on it (immediate
//! choice, Find candidates, find-db preference, restriction by algorithm, solution id or
//! workspace); the adapter solvers use it to pick the kernel that runs their rewritten problem.

use super::cpu::{
    CpuAmx1x1, CpuConv1x1BwdData, CpuConv1x1BwdWeights, CpuDepthwiseBlocks, CpuDepthwiseBwdPhases, CpuDepthwiseBwdData, CpuDepthwiseFlat, CpuDepthwiseNhwc, CpuDepthwisePlanes, CpuDirect, CpuDirectTaps, CpuFft, CpuGemm, CpuGemm1x1, CpuGroupedFlat, CpuImplicitGemm, CpuLiveTaps, CpuNaive, CpuPointwise, CpuPooling, CpuQuantized, CpuSinglePixel, CpuSmallGroups, CpuSoftmax, CpuStem, CpuSubsample1x1, CpuWinograd, CpuWinograd4,
};
use super::cuda::{
    CudaConvBwdDataDepthwise, CudaConvBwdDataFewChannels, CudaConvBwdDataGemmLt, CudaConvBwdDataPadChannels, CudaConvBwdDataPatch, CudaConvBwdDataStrided, CudaConvBwdDataTc, CudaConvDirect, CudaConvFewChannels, CudaConvFewOutputs, CudaConvGemmLt, CudaConvGroupedTc, CudaConvIgemm, CudaConvIgemmTc, CudaConvIgemmTma, CudaConvIgemmWgmma, CudaConvPadChannels, CudaConvQuantDirect, CudaConvStemTc, CudaConvTcNchw,
    CudaConvWgradFewChannels, CudaConvWgradGemmLt, CudaConvWgradIm2colLt, CudaConvWgradPadChannels, CudaConvWgradSimt, CudaConvWgradTma, CudaPointwise, CudaPooling, CudaSoftmax,
};
use super::folded::{CPU_FOLDED_3D, CUDA_FOLDED_3D};
use super::trimmed::CUDA_TRIMMED_TAPS;
use super::Solver;
use crate::backend::{DeviceInfo, DeviceKind};
use crate::problem::FusedProblem;
use std::sync::OnceLock;

/// What other solvers may look an entry up for (the adapters pick their inner kernel by it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// A tensor-core forward kernel reading channels-last operands.
    ChannelsLastTensorCore,
    /// Runs channels-first problems on the channels-last tensor-core kernels (copies).
    ChannelsFirstAdapter,
    /// The tensor-core backward-weights kernel.
    WeightsTensorCore,
    /// Nothing another solver builds on.
    Standalone,
}

/// One place in a backend's list.
pub struct Entry {
    pub solver: &'static dyn Solver,
    pub role: Role,
    /// Why the solver sits here in the order.
    pub why: &'static str,
}

const fn entry(solver: &'static dyn Solver, role: Role, why: &'static str) -> Entry {
    Entry { solver, role, why }
}

static CPU: &[Entry] = &[
    entry(&CpuPointwise, Role::Standalone, "pointwise and batch-norm plans; takes no convolution, so order among convolutions is moot"),
    entry(&CpuPooling, Role::Standalone, "pooling layers only; the one CPU pooling solver"),
    entry(&CpuSoftmax, Role::Standalone, "softmax layers only; the one CPU softmax solver"),
    entry(&CPU_FOLDED_3D, Role::Standalone, "3-D convolutions that are 2-D ones over other strides (1 × R × S over channels-last frames, T × 1 × 1 over planes) on the first solver below that takes the 2-D problem: ahead of every solver, since none of them has a 3-D path faster than its 2-D one"),
    entry(&CpuQuantized, Role::Standalone, "int8 and fp8 forward convolutions, which no other CPU solver computes; refuses every other problem, so its place among them is moot"),
    entry(&CpuLiveTaps, Role::Standalone, "f32 forward convolutions whose taps lie in the padding for 40% of the products or more (atrous layers on small maps), as one 1×1 convolution per tap over the outputs it reaches on the solvers below: ahead of all of them, which would multiply the zeros"),
    entry(&CpuSinglePixel, Role::Standalone, "1×1 filters with one output pixel per image (squeeze-and-excitation, fully connected): a dot product per output, where GEMM panels and tiles cost more than the products"),
    entry(&CpuSubsample1x1, Role::Standalone, "strided 1×1 f32 layers (downsampling shortcuts) and patch layers (stride = filter: ConvNeXt downsampling) on the 1×1 solvers over a packed copy of what they read: after the single-pixel dot products (one output position), ahead of the GEMM solvers, which gather the strided positions or copy x into short rows"),
    entry(&CpuGroupedFlat, Role::Standalone, "f32 grouped layers (≥ 2 input and a multiple of 4 output channels per group) and stems (ungrouped, ≤ 4 input channels) at stride 1 or 2 on channels-first planes, on AVX-512: flat runs of 16 outputs, each masked input load shared by 4 or 8 output channels; ahead of the stem kernel (bands of phase-split rows, 1.4–1.9× slower on the 7×7 and 3×3 s2 stems), the channels-last small-groups kernel (a copy to channels-last and back) and the Winograd and GEMM solvers (a sliver of a GEMM per group)"),
    entry(&CpuStem, Role::Standalone, "f32 stems (≤ 4 input channels, ungrouped): a direct kernel over bands of phase-split input rows, ahead of the GEMM solvers, which gather 27–147 strided im2col rows for a reduction too short to amortise their packing"),
    entry(&CpuDepthwiseBwdData, Role::Standalone, "stride-1 depthwise f32 backward-data as the forward depthwise convolution with reversed taps, on the forward solvers below (flat planes, blocks): ahead of the channels-last and direct solvers' own backward loops, which copy or pad every plane"),
    entry(&CpuDepthwiseBwdPhases, Role::Standalone, "strided depthwise f32 backward-data as one stride-1 forward per phase on the flat-plane kernel into strided views of dx: ahead of the direct solver's backward loops, which pad a copy of every plane and run scalar"),
    entry(&CpuConv1x1BwdData, Role::Standalone, "1×1 stride-1 f32 backward-data with channels-first dx and dy as the forward 1×1 of dy with W transposed by its strides, on the positions-in-lanes tiles that read every operand in place: ahead of the GEMM solvers, which pack dy into panels first"),
    entry(&CpuConv1x1BwdWeights, Role::Standalone, "1×1 stride-1 f32 backward-weights with channels-first x and dy in place — dot products of their rows on maps of ≥ 256 positions with ≤ 128 channels on one side, the positions tiles with x's channels in the lanes on smaller maps of non-contracting layers: ahead of the GEMM solvers, which transpose one of them into panels first"),
    entry(&CpuDepthwiseFlat, Role::Standalone, "f32 depthwise with ≤ 9 taps at stride 1 or 2 on channels-first planes, on AVX-512: flat runs of 16 outputs with masked loads where the input (or its stride phase) lies, ahead of the block solver, which stages and transposes each band, and the plane solver, which pads every plane"),
    entry(&CpuDepthwiseBlocks, Role::Standalone, "f32 depthwise forward on AVX-512 in 16-channel blocks over staged bands, either layout: channels fill the lanes at every plane size with runs of FMAs per tap, ahead of the plane and channels-last solvers"),
    entry(&CpuDepthwisePlanes, Role::Standalone, "depthwise forward on channels-first planes: a whole plane per run of vector FMAs, with no copy to channels-last (which the next solver needs for short rows)"),
    entry(&CpuDepthwiseNhwc, Role::Standalone, "f32 depthwise computed channels-last (channels-first operands copied): channels fill the vector lanes where planar rows of 7–56 pixels leave them half empty"),
    entry(&CpuSmallGroups, Role::Standalone, "groups of 4–32 output channels (ResNeXt): a direct channels-last kernel where a GEMM per group is a sliver of rows"),
    entry(&CpuDirect, Role::Standalone, "short reductions only (depthwise, few channels), where GEMM packing costs more than it saves"),
    entry(&CpuWinograd4, Role::Standalone, "F(4×4,3×3) beats the GEMM solvers on the 3×3 layers it accepts (refuses few tiles with many filters)"),
    entry(&CpuAmx1x1, Role::Standalone, "1×1 on AMX tiles at f32 accuracy beats the AVX-512 1×1 solver where the CPU has AMX"),
    entry(&CpuGemm1x1, Role::Standalone, "1×1 as a plain GEMM over channels beats both general GEMM solvers"),
    entry(&CpuFft, Role::Standalone, "large filters where its cost model expects it to beat the GEMM solvers"),
    entry(&CpuDirectTaps, Role::Standalone, "stride-1 f32 with ≥ 4 taps as a sum of 1×1 products, faster than the implicit GEMM"),
    entry(&CpuImplicitGemm, Role::Standalone, "any convolution with no workspace, so it precedes the im2col GEMM"),
    entry(&CpuGemm, Role::Standalone, "im2col + GEMM: any convolution given workspace"),
    entry(&CpuWinograd, Role::Standalone, "F(2×2,3×3) is slower than the GEMM solvers, kept for Find and immediate mode"),
    entry(&CpuNaive, Role::Standalone, "the reference-like loop: always applies, ends the list"),
];

static CUDA: &[Entry] = &[
    entry(&CudaPointwise, Role::Standalone, "pointwise and batch-norm plans; takes no convolution"),
    entry(&CudaPooling, Role::Standalone, "pooling layers only; the one CUDA pooling solver"),
    entry(&CudaSoftmax, Role::Standalone, "softmax layers only; the one CUDA softmax solver"),
    entry(&CUDA_FOLDED_3D, Role::Standalone, "3-D convolutions that are 2-D ones over other strides (1 × R × S over channels-last frames, T × 1 × 1 over planes) on the first solver below that takes the 2-D problem: ahead of every convolution solver, whose 2-D paths are faster than their 3-D ones (the TMA kernel and split-K are 2-D only)"),
    entry(&CUDA_TRIMMED_TAPS, Role::Standalone, "forward convolutions whose outer taps reach no output (atrous layers whose dilation exceeds the map) with those taps cut, on the first solver below that takes the smaller problem: ahead of every convolution solver, which would multiply the padding's zeros for the cut taps"),
    entry(&CudaConvGroupedTc, Role::ChannelsLastTensorCore, "groups of 2–32 channels (ResNeXt, RegNet) on tensor cores, several whole groups per block (groups of 2 and 4 merged into block-diagonal groups of 8): ahead of the few-channels kernel, which it beats on ResNeXt's groups of 4, and of the other tensor-core kernels (a tile per group), also as the backward-data adapters' inner kernel"),
    entry(&CudaConvStemTc, Role::Standalone, "ungrouped 16-bit convolutions of < 8 input channels (3-channel stems) on tensor cores, several taps per 16-byte chunk: ahead of the few-channels kernel and the channel-padding adapter, which multiply 3-channel taps on CUDA cores or padded to 8 channels"),
    entry(&CudaConvFewChannels, Role::Standalone, "groups of ≤ 4 input channels (depthwise, ResNeXt) and 3-channel 3×3 stems: memory-bound layers a GEMM tile would run nearly empty"),
    entry(&CudaConvGemmLt, Role::Standalone, "1×1 channels-last with a cuBLASLt epilogue (bias, ReLU): at cuDNN's speed on those layers"),
    entry(&CudaConvIgemmTma, Role::ChannelsLastTensorCore, "TMA + wgmma (sm_90): the fastest kernel for 2-D and 3-D channels-last layers of ≥ 32 channels (groups of 32 or 64)"),
    entry(&CudaConvPadChannels, Role::Standalone, "ungrouped 16-bit convolutions whose channels are not a multiple of 8 (stems, odd widths) on tensor cores through channel-padded copies: after the stem kernel, for filters too large for its shared memory; Find times both"),
    entry(&CudaConvTcNchw, Role::ChannelsFirstAdapter, "channels-first problems on the tensor-core kernels through channels-last copies"),
    entry(&CudaConvBwdDataGemmLt, Role::Standalone, "1×1 backward-data as cuBLASLt GEMMs at any column alignment (strided: dx zeroed, one GEMM per output row): ahead of the forward rewrites and the phases, which read w transposed, tile few channels poorly and write each phase separately"),
    entry(&CudaConvBwdDataPatch, Role::Standalone, "backward-data of patch layers (stride = filter, unpadded: ConvNeXt's stem and downsampling) as one GEMM into non-overlapping patches of dx: ahead of the phase solvers, which read dy once per phase in fy·fx launches"),
    entry(&CudaConvBwdDataDepthwise, Role::Standalone, "backward-data of strided depthwise layers in one launch that gathers each dx tile from the dy columns reaching it: ahead of the phase solver, whose launch and filter gather per phase cost more than these memory-bound layers' bytes"),
    entry(&CudaConvBwdDataFewChannels, Role::Standalone, "backward-data of depthwise, few-channels-per-group and few-channel stem layers by phases on the few-channels and few-outputs kernels, where tensor-core tiles would run nearly empty"),
    entry(&CudaConvBwdDataTc, Role::Standalone, "stride-1 backward-data as a forward convolution with the flipped filter on tensor cores"),
    entry(&CudaConvBwdDataStrided, Role::Standalone, "strided backward-data as one stride-1 forward convolution per phase on tensor cores"),
    entry(&CudaConvBwdDataPadChannels, Role::Standalone, "backward-data of 16-bit layers whose output channels do not fill 16-byte chunks (odd widths) through channel-padded copies of dy and w on the tensor-core solvers above, which refuse them: ahead of the CUDA-core kernels"),
    entry(&CudaConvWgradIm2colLt, Role::Standalone, "backward-weights of ungrouped stems of < 8 input channels as one cuBLASLt GEMM over an explicit im2col: ahead of the few-channels kernel, which reduces them on CUDA cores"),
    entry(&CudaConvWgradFewChannels, Role::Standalone, "backward-weights of depthwise, small-group and few-channel stem layers: a long reduction into a small output that GEMM tiles would run nearly empty"),
    entry(&CudaConvWgradGemmLt, Role::Standalone, "1×1 stride-1 backward-weights as one cuBLASLt GEMM, which splits the long pixel reduction itself: ahead of the TMA kernel and the channel-padding adapter"),
    entry(&CudaConvWgradTma, Role::WeightsTensorCore, "backward-weights on TMA + wgmma"),
    entry(&CudaConvWgradPadChannels, Role::Standalone, "backward-weights whose channels per group do not fill the TMA kernel's boxes, or whose output channels do not fill 16-byte chunks, padded to fill them: tensor cores beat the CUDA-core kernel despite the zero channels"),
    entry(&CudaConvWgradSimt, Role::Standalone, "backward-weights on a tiled CUDA-core GEMM: every type and geometry, ahead of the direct kernel"),
    entry(&CudaConvIgemmWgmma, Role::ChannelsLastTensorCore, "wgmma with cp.async (sm_90) where TMA's box limits refuse"),
    entry(&CudaConvIgemmTc, Role::ChannelsLastTensorCore, "mma.sync tensor cores on any recent GPU"),
    entry(&CudaConvFewOutputs, Role::Standalone, "ungrouped, ≤ 8 output channels (stem backward-data phases, image outputs) on CUDA cores: after the tensor-core kernels, as it is not yet measured against them on forward layers; Find times both"),
    entry(&CudaConvIgemm, Role::Standalone, "implicit GEMM on CUDA cores: any geometry, group count, layout and type"),
    entry(&CudaConvQuantDirect, Role::Standalone, "int8 and fp8 convolutions on CUDA cores: every quantized geometry the tensor-core kernel refuses"),
    entry(&CudaConvDirect, Role::Standalone, "direct loops: always applies, ends the list"),
];

/// The ordered list of `kind`'s solvers.
pub fn list(kind: DeviceKind) -> &'static [Entry] {
    match kind {
        DeviceKind::Cpu => CPU,
        DeviceKind::Cuda => CUDA,
    }
}

/// Every solver of every backend.
pub fn registry() -> impl Iterator<Item = &'static dyn Solver> {
    CPU.iter().chain(CUDA).map(|e| e.solver)
}

pub fn find_by_id(id: u64) -> Option<&'static dyn Solver> {
    registry().find(|s| s.solution_id() == id)
}

pub fn find_by_name(name: &str) -> Option<&'static dyn Solver> {
    registry().find(|s| s.name() == name)
}

/// One row of the support matrix: a solver and whether it applies (else why not).
pub struct SolverInfo {
    pub solver: &'static dyn Solver,
    pub verdict: Result<(), String>,
}

/// The one walk: every entry of the device's list that `wanted` keeps, in order, with its
/// verdict on `problem`.
pub fn walk<'a>(problem: &'a FusedProblem, device: &'a DeviceInfo, wanted: impl Fn(&Entry) -> bool + 'a) -> impl Iterator<Item = SolverInfo> + 'a {
    list(device.kind).iter().filter(move |e| wanted(e)).map(move |e| SolverInfo { solver: e.solver, verdict: verdict(e.solver, problem, device) })
}

/// Whether `solver` takes `problem` on `device`: its own check, unless the user disabled it.
/// Every selection path asks this rather than `Solver::check`.
pub fn verdict(solver: &dyn Solver, problem: &FusedProblem, device: &DeviceInfo) -> Result<(), String> {
    if disabled(solver) {
        return Err("disabled by CONFLUX_DISABLE_SOLVERS".into());
    }
    if let Some(q) = problem.conv_problem().and_then(|c| c.quant()) {
        if !solver.computes_quantized() {
            return Err(format!("{q:?} convolutions run on the quantized solvers only"));
        }
    }
    solver.check(problem, device)
}

/// Whether `CONFLUX_DISABLE_SOLVERS` (solver names or solution ids, comma-separated; read once)
/// names `s`: such a solver refuses every problem. For A/B measurements and to step around a
/// kernel suspected of a fault, as MIOpen's per-solver debug switches are used.
fn disabled(s: &dyn Solver) -> bool {
    static NAMED: OnceLock<Vec<String>> = OnceLock::new();
    let named = NAMED.get_or_init(|| {
        let v = std::env::var("CONFLUX_DISABLE_SOLVERS").unwrap_or_default();
        v.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect()
    });
    named.iter().any(|d| d == s.name() || d.parse::<u64>().ok() == Some(s.solution_id()))
}

/// The first solver of `role` that takes `problem`, else every refusal with its solver's name.
pub fn first_of(roles: &[Role], problem: &FusedProblem, device: &DeviceInfo) -> Result<&'static dyn Solver, String> {
    let mut reasons = Vec::new();
    for info in walk(problem, device, |e| roles.contains(&e.role)) {
        match info.verdict {
            Ok(()) => return Ok(info.solver),
            Err(why) => reasons.push(format!("{}: {why}", info.solver.name())),
        }
    }
    Err(reasons.join("; "))
}

/// The first solver of the device's list that `wanted` keeps and that takes `problem` without
/// workspace (what adapters that rewrite a problem run it on: they cannot pass workspace
/// through), else every reason.
pub fn first_without_workspace(problem: &FusedProblem, device: &DeviceInfo, wanted: impl Fn(&Entry) -> bool) -> Result<&'static dyn Solver, String> {
    let mut reasons = Vec::new();
    for info in walk(problem, device, wanted) {
        match info.verdict {
            Ok(()) if info.solver.workspace_bytes(problem) == 0 => return Ok(info.solver),
            Ok(()) => reasons.push(format!("{}: needs workspace", info.solver.name())),
            Err(why) => reasons.push(format!("{}: {why}", info.solver.name())),
        }
    }
    Err(reasons.join("; "))
}

/// The solvers of `roles` in list order (the adapters' union of tuning spaces).
pub fn with_role(kind: DeviceKind, roles: &[Role]) -> impl Iterator<Item = &'static dyn Solver> + '_ {
    list(kind).iter().filter(move |e| roles.contains(&e.role)).map(|e| e.solver)
}
