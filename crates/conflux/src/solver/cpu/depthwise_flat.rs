//! f32 depthwise forward at stride 1 or 2 on channels-first planes with AVX-512, each output
//! plane one flat run of 16-output vectors whose taps are masked loads from the input plane
//! where it lies, or from its stride phases (`backend/cpu/direct/depthwise_flat.rs`): no staged
//! band, padding or transpose. Backward-weights runs over the same planes and masks
//! (`depthwise_flat_weights.rs`). What it shares with `CpuConvGroupedFlat` (the same planes with a
//! few channels per group) is here: the check's common part, the plan and the invoker.

use super::common::{f32_geometry, run_parts};
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::error::{Error, Result};
use crate::problem::{FusedProblem, Geom};
use crate::solver::{BuildContext, Invoker, RunArgs, Solver};
use crate::types::{ConvAlgorithm, Direction};
use std::sync::Arc;

#[cfg(target_arch = "x86_64")]
use crate::backend::cpu::direct::{
    depthwise_flat::{self as kernels, FlatPlan},
    depthwise_planes::MAX_PHASE_FLOATS,
    naive::ConvPtrs,
};
#[cfg(target_arch = "x86_64")]
use crate::backend::cpu::direct::depthwise_flat_weights as weights_kernel;
#[cfg(target_arch = "x86_64")]
use crate::backend::cpu::pointwise::epilogue::CpuEpilogue;

pub struct CpuDepthwiseFlat;

/// The check of a flat-plane solver: f32 forward (and backward-weights when `weights`, over
/// dense dy planes), AVX-512, 2-D channels-first tensors, then the solver's own geometry rule
/// `unsuitable`, then a plan that fits.
pub(super) fn check_flat(problem: &FusedProblem, device: &DeviceInfo, unsuitable: fn(&Geom) -> Option<String>, weights: bool) -> std::result::Result<(), String> {
    let (conv, g) = f32_geometry(problem, !weights)?;
    if conv.direction == Direction::BackwardData {
        return Err("forward and backward-weights only (backward-data: CpuConvDepthwiseBwdData)".into());
    }
    #[cfg(target_arch = "x86_64")]
    {
        if !(device.cpu.avx512 && kernels::available()) {
            return Err("needs AVX-512 (masked loads of 16 outputs)".into());
        }
        if !g.is_2d() {
            return Err("2-D convolutions only".into());
        }
        if g.x_strides[1] == 1 || g.y_strides[1] == 1 {
            return Err("channels-first tensors only (channels-last ones fill the lanes with channels: CpuConvDepthwiseNhwc, CpuConvSmallGroups)".into());
        }
        if let Some(why) = unsuitable(&g) {
            return Err(why);
        }
        if conv.direction == Direction::BackwardWeights && !weights_kernel::dy_planes_dense(&g) {
            return Err("backward-weights reads dense dy planes only".into());
        }
        if FlatPlan::of(&g).is_none() {
            return Err(format!("a plane of {}×{} outputs with {} taps needs more than {} masks, or its stride phases more than {MAX_PHASE_FLOATS} floats", g.output[1], g.output[2], g.filter_size(), kernels::MAX_MASKS));
        }
        Ok(())
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (device, g, unsuitable, conv);
        Err("needs AVX-512 (masked loads of 16 outputs)".into())
    }
}

/// Moving x and y once and the vector FMAs at about the machine's FMA rate.
pub(super) fn estimate_flat(problem: &FusedProblem) -> f64 {
    problem.conv_problem().map_or(f64::MAX, |c| (c.x.num_bytes() + c.y.num_bytes()) as f64 / 10e9 * 1e3 + 2.0 * c.macs() / 100e9 * 1e3)
}

/// A flat-plane kernel driver: y = epilogue(α·conv(x, w) + β·y).
#[cfg(target_arch = "x86_64")]
type Forward = unsafe fn(&Geom, &FlatPlan, ConvPtrs, f32, f32, &CpuEpilogue);
/// A flat-plane backward-weights driver: dw = α·conv_bwd_weights(x, dy) + β·dw.
#[cfg(target_arch = "x86_64")]
type Weights = unsafe fn(&Geom, &FlatPlan, ConvPtrs, f32, f32);

/// The invoker of a flat-plane solver `name`, running `forward` (or `weights`, for a
/// backward-weights problem) over the plan built here.
pub(super) fn build_flat(problem: &FusedProblem, name: &'static str, #[cfg(target_arch = "x86_64")] forward: Forward, #[cfg(target_arch = "x86_64")] weights: Option<Weights>) -> Result<Arc<dyn Invoker>> {
    #[cfg(target_arch = "x86_64")]
    {
        let conv = problem.conv_problem().ok_or_else(|| Error::internal(format!("{name}: not a convolution")))?;
        let plan = FlatPlan::of(&Geom::of(conv)).ok_or_else(|| Error::internal(format!("{name}: the plan its check accepted overflows")))?;
        Ok(Arc::new(FlatInvoker { problem: problem.clone(), plan, name, forward, weights }))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = problem;
        Err(Error::internal(format!("{name}: built without x86-64")))
    }
}

#[cfg(target_arch = "x86_64")]
struct FlatInvoker {
    problem: FusedProblem,
    plan: FlatPlan,
    name: &'static str,
    forward: Forward,
    weights: Option<Weights>,
}

#[cfg(target_arch = "x86_64")]
impl Invoker for FlatInvoker {
    fn run(&self, _ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let (g, dir, r) = run_parts(&self.problem, a, self.name)?;
        // SAFETY: the check found AVX-512 and this geometry, whose plan this is; run_parts
        // validated the pointers against the problem.
        match (dir, self.weights) {
            (Direction::Forward, _) => unsafe { (self.forward)(&g, &self.plan, r.ptrs, r.alpha, r.beta, &r.epi) },
            (Direction::BackwardWeights, Some(weights)) => unsafe { weights(&g, &self.plan, r.ptrs, r.alpha, r.beta) },
            _ => return Err(Error::internal(format!("{}: {dir:?} not computed", self.name))),
        }
        Ok(())
    }
}

/// Depthwise (one input channel per group, any multiplier) within the flat kernel's taps.
fn depthwise_unsuitable(g: &Geom) -> Option<String> {
    if g.groups == 1 || g.cg() != 1 {
        return Some(format!("depthwise (one input channel per group) only ({} groups, {} channels)", g.groups, g.c));
    }
    #[cfg(target_arch = "x86_64")]
    return kernels::unsuitable(g);
    #[cfg(not(target_arch = "x86_64"))]
    None
}

impl Solver for CpuDepthwiseFlat {
    fn name(&self) -> &'static str { "CpuConvDepthwiseFlat" }
    fn solution_id(&self) -> u64 { 24 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Direct }
    fn device(&self) -> DeviceKind { DeviceKind::Cpu }

    fn check(&self, problem: &FusedProblem, device: &DeviceInfo) -> std::result::Result<(), String> {
        check_flat(problem, device, depthwise_unsuitable, true)
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 { estimate_flat(problem) }

    fn build(&self, problem: &FusedProblem, _ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        build_flat(problem, self.name(), #[cfg(target_arch = "x86_64")] kernels::forward, #[cfg(target_arch = "x86_64")] Some(weights_kernel::backward_weights))
    }
}
