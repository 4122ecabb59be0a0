//! 3-D convolutions that are 2-D ones in disguise (`problem::fold_3d`: 1 × R × S filters over
//! the frames of channels-last video, T × 1 × 1 filters over (D, H·W) planes) run as that 2-D
//! problem on the first solver of the same backend that takes it without workspace. The folded
//! problem addresses the caller's memory unchanged, so the inner invoker runs on the caller's
//! arguments: no copy, and every 2-D fast path (tensor cores, split-K, Winograd, the 1×1 GEMMs)
//! serves video layers. One instance per backend, each in its own list.

use super::registry::first_without_workspace;
use super::{BuildContext, Invoker, Solver};
use crate::backend::{DeviceInfo, DeviceKind};
use crate::error::{Error, Result};
use crate::problem::{fold_3d, FusedProblem};
use crate::types::ConvAlgorithm;
use std::sync::Arc;

pub struct Folded3d {
    kind: DeviceKind,
    name: &'static str,
    id: u64,
    /// The backend's main general kernel, whose estimate for the folded problem is this
    /// solver's (the fold is free; without a device the inner solver is not known).
    estimate_like: &'static dyn Solver,
}

pub static CPU_FOLDED_3D: Folded3d = Folded3d { kind: DeviceKind::Cpu, name: "CpuConvFolded3d", id: 22, estimate_like: &super::cpu::CpuImplicitGemm };
pub static CUDA_FOLDED_3D: Folded3d = Folded3d { kind: DeviceKind::Cuda, name: "CudaConvFolded3d", id: 127, estimate_like: &super::cuda::CudaConvIgemmTma };

impl Folded3d {
    /// The folded problem and the solver that runs it, else why not.
    fn inner(&self, problem: &FusedProblem, device: &DeviceInfo) -> std::result::Result<(FusedProblem, &'static dyn Solver), String> {
        let (folded, _) = fold_3d(problem)?;
        let solver = first_without_workspace(&folded, device, |_| true).map_err(|why| format!("no solver takes the folded 2-D problem ({why})"))?;
        Ok((folded, solver))
    }
}

impl Solver for Folded3d {
    fn name(&self) -> &'static str { self.name }
    fn solution_id(&self) -> u64 { self.id }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::ImplicitGemm }
    fn device(&self) -> DeviceKind { self.kind }
    // The inner solver's own check decides (the registry's quantized gate applies to it).
    fn computes_quantized(&self) -> bool { true }

    fn check(&self, problem: &FusedProblem, device: &DeviceInfo) -> std::result::Result<(), String> {
        if device.kind != self.kind {
            return Err(format!("runs on {:?} devices", self.kind));
        }
        self.inner(problem, device).map(|_| ())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        fold_3d(problem).map_or(f64::MAX, |(folded, _)| self.estimate_like.estimate_ms(&folded))
    }

    fn build(&self, problem: &FusedProblem, ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let (folded, solver) = self.inner(problem, ctx.device().info()).map_err(|why| Error::not_implemented(format!("{}: {why}", self.name)))?;
        // The inner invoker reads the same pointers through the folded descriptors.
        solver.build(&folded, ctx)
    }
}
