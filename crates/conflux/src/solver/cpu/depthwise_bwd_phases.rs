//! Backward-data of strided depthwise f32 layers by phases (`problem::backward_data_phases`):
//! each residue class of dx positions modulo the stride is a stride-1 depthwise forward
//! convolution of dy with a sub-filter (the taps reaching it, reversed) into a strided view of
//! dx, run on the flat-plane kernel (`CpuConvDepthwiseFlat`, which reads dy's planes in place and
//! stores through the view's offsets). That kernel alone is asked: it masks each tap by the
//! input's bounds, so the phases' unequal end padding needs nothing of it, where other CPU
//! solvers assume symmetric padding. Every phase must have taps (stride ≤ filter); the
//! sub-filters are gathered per call (channels × ≤ 9 floats each).

use super::common::f32_geometry;
use super::depthwise_flat::CpuDepthwiseFlat;
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::error::{Error, Result};
use crate::memory::DevPtr;
use crate::problem::{backward_data_phases, FusedProblem, TapMap};
use crate::solver::{BuildContext, Invoker, RunArgs, Solver};
use crate::types::{ConvAlgorithm, Direction, Layout};
use std::sync::Arc;

pub struct CpuDepthwiseBwdPhases;

/// One phase: its forward problem and taps, and the element offsets of its dx and dy windows.
struct PhasePlan {
    forward: FusedProblem,
    taps: TapMap,
    dx_offset: usize,
    dy_offset: usize,
}

fn plan(problem: &FusedProblem, device: &DeviceInfo) -> std::result::Result<Vec<PhasePlan>, String> {
    let (conv, g) = f32_geometry(problem, false)?;
    if conv.direction != Direction::BackwardData {
        return Err(format!("backward-data only (this is {:?})", conv.direction));
    }
    if g.groups == 1 || g.cg() != 1 || g.kg() != 1 {
        return Err(format!("depthwise with one output channel per group only ({} groups, {} → {} channels)", g.groups, g.c, g.k));
    }
    if g.stride == [1; 3] {
        return Err("stride 1: one forward convolution (CpuConvDepthwiseBwdData)".into());
    }
    if !problem.epilogue().is_empty() {
        return Err("an epilogue on a strided backward-data".into());
    }
    let mut phases = Vec::new();
    for p in backward_data_phases(conv, &conv.y, Layout::NCHW)? {
        let Some((sub, taps)) = p.forward else {
            return Err(format!("phase {:?} has no taps (stride above the filter): dx there is β·dx alone", p.residue));
        };
        let forward = FusedProblem::conv(sub);
        CpuDepthwiseFlat.check(&forward, device).map_err(|why| format!("phase {:?} on the flat kernel: {why}", p.residue))?;
        phases.push(PhasePlan { forward, taps, dx_offset: p.dx_offset, dy_offset: p.dy_offset });
    }
    Ok(phases)
}

impl Solver for CpuDepthwiseBwdPhases {
    fn name(&self) -> &'static str { "CpuConvDepthwiseBwdPhases" }
    fn solution_id(&self) -> u64 { 27 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Direct }
    fn device(&self) -> DeviceKind { DeviceKind::Cpu }

    fn check(&self, problem: &FusedProblem, device: &DeviceInfo) -> std::result::Result<(), String> {
        if device.kind != DeviceKind::Cpu {
            return Err("runs on the CPU".into());
        }
        plan(problem, device).map(|_| ())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 { super::depthwise_flat::estimate_flat(problem) }

    fn build(&self, problem: &FusedProblem, ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let phases = plan(problem, ctx.device().info()).map_err(|why| Error::not_implemented(format!("{}: {why}", self.name())))?;
        let conv = problem.conv_problem().ok_or_else(|| Error::internal(format!("{}: not a convolution", self.name())))?;
        let runs = phases
            .into_iter()
            .map(|p| Ok((CpuDepthwiseFlat.build(&p.forward, ctx)?, p.taps, p.dx_offset, p.dy_offset)))
            .collect::<Result<Vec<_>>>()?;
        Ok(Arc::new(PhasesInvoker { runs, w: conv.w.clone() }))
    }
}

struct PhasesInvoker {
    /// Per phase: the flat kernel's invoker, the taps, the dx and dy offsets (elements).
    runs: Vec<(Arc<dyn Invoker>, TapMap, usize, usize)>,
    w: crate::tensor::TensorDesc,
}

impl Invoker for PhasesInvoker {
    fn run(&self, ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        // Backward-data arguments: x = dx (written), y = dy; each phase reads dy, writes dx.
        let channels = self.w.lens()[0];
        for (inv, taps, dx_off, dy_off) in &self.runs {
            let [_, th, tw] = taps.axes.map(|t| t.count);
            let mut sub = vec![0.0f32; channels * th * tw];
            for k in 0..channels {
                for i in 0..th {
                    for j in 0..tw {
                        let src = taps.source([0, i, j]);
                        let (r, s) = (src / taps.src[2], src % taps.src[2]);
                        // SAFETY: the caller's filter holds every element its descriptor
                        // addresses (the API validated the pointer against it).
                        sub[(k * th + i) * tw + j] = unsafe { *(a.w.0 as *const f32).add(self.w.offset(&[k, 0, r, s])) };
                    }
                }
            }
            let args = RunArgs { x: DevPtr(a.y.0 + 4 * *dy_off as u64), w: DevPtr(sub.as_ptr() as u64), y: DevPtr(a.x.0 + 4 * *dx_off as u64), ..*a };
            inv.run(ctx, &args)?;
        }
        Ok(())
    }
}
