//! Backward-data of stride-2 depthwise f32 layers by phases (`problem::backward_data_phases`):
//! each residue class of dx positions modulo 2 is a stride-1 depthwise forward of dy with a
//! sub-filter (the taps reaching it, reversed), computed per plane by the flat-plane kernel and
//! interleaved into dx (`backend/cpu/direct/depthwise_flat_phases.rs`). Each phase must be a
//! forward the flat solver takes (`CpuConvDepthwiseFlat`'s check: its masks bound every tap by
//! the input, so the phases' unequal end padding needs nothing more); dx of even height and
//! width, so that the four phases are equal planes.

use super::common::{f32_geometry, run_parts};
use super::depthwise_flat::CpuDepthwiseFlat;
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::error::{Error, Result};
use crate::problem::{backward_data_phases, ConvProblem, FusedProblem, Geom, TapMap};
use crate::solver::{BuildContext, Invoker, RunArgs, Solver};
use crate::types::{ConvAlgorithm, Direction, Layout};
use std::sync::Arc;

#[cfg(target_arch = "x86_64")]
use crate::backend::cpu::direct::{depthwise_flat::FlatPlan, depthwise_flat_phases as kernels};

pub struct CpuDepthwiseBwdPhases;

/// Per phase in residue order: its forward problem, taps and dy window offset.
fn plan(problem: &FusedProblem, device: &DeviceInfo) -> std::result::Result<Vec<(ConvProblem, TapMap, usize)>, String> {
    let (conv, g) = f32_geometry(problem, false)?;
    if conv.direction != Direction::BackwardData {
        return Err(format!("backward-data only (this is {:?})", conv.direction));
    }
    if g.groups == 1 || g.cg() != 1 || g.kg() != 1 {
        return Err(format!("depthwise with one output channel per group only ({} groups, {} → {} channels)", g.groups, g.c, g.k));
    }
    if !g.is_2d() || g.stride[1..] != [2, 2] {
        return Err(format!("2-D stride 2 only (stride {:?})", &g.stride[3 - conv.spatial_dims()..]));
    }
    if g.input[1] % 2 != 0 || g.input[2] % 2 != 0 {
        return Err(format!("dx of even height and width only ({}×{})", g.input[1], g.input[2]));
    }
    if g.x_strides[4] != 1 {
        return Err("dx rows must be dense".into());
    }
    if !problem.epilogue().is_empty() {
        return Err("an epilogue on a strided backward-data".into());
    }
    let mut phases = Vec::new();
    for p in backward_data_phases(conv, &conv.y, Layout::NCHW)? {
        let Some((sub, taps)) = p.forward else {
            return Err(format!("phase {:?} has no taps (stride above the filter): dx there is β·dx alone", p.residue));
        };
        if p.dx_offset != p.residue[1] * g.x_strides[3] + p.residue[2] {
            return Err(format!("phase {:?} does not start at its residue", p.residue));
        }
        let forward = FusedProblem::conv(sub.clone());
        CpuDepthwiseFlat.check(&forward, device).map_err(|why| format!("phase {:?} on the flat kernel: {why}", p.residue))?;
        phases.push((sub, taps, p.dy_offset));
    }
    if phases.len() != 4 {
        return Err(format!("{} phases (four expected)", phases.len()));
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
        #[cfg(target_arch = "x86_64")]
        {
            let mut built = Vec::with_capacity(4);
            for (sub, taps, dy_offset) in phases {
                let plan = FlatPlan::of(&Geom::of(&sub)).ok_or_else(|| Error::internal(format!("{}: a phase's plan its check accepted overflows", self.name())))?;
                let [_, th, tw] = taps.axes.map(|a| a.count);
                let src: Vec<(usize, usize)> = (0..th * tw).map(|t| taps.source([0, t / tw, t % tw])).map(|s| (s / taps.src[2], s % taps.src[2])).collect();
                built.push(kernels::Phase { plan, dy_offset, taps: src });
            }
            let phases: [kernels::Phase; 4] = built.try_into().map_err(|_| Error::internal(format!("{}: four phases expected", self.name())))?;
            Ok(Arc::new(PhasesInvoker { problem: problem.clone(), phases }))
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = phases;
            Err(Error::internal(format!("{}: built without x86-64", self.name())))
        }
    }
}

#[cfg(target_arch = "x86_64")]
struct PhasesInvoker {
    problem: FusedProblem,
    phases: [kernels::Phase; 4],
}

#[cfg(target_arch = "x86_64")]
impl Invoker for PhasesInvoker {
    fn run(&self, _ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let (g, dir, r) = run_parts(&self.problem, a, "CpuConvDepthwiseBwdPhases")?;
        if dir != Direction::BackwardData {
            return Err(Error::internal(format!("CpuConvDepthwiseBwdPhases: {dir:?}")));
        }
        // SAFETY: the check found AVX-512 (each phase passed the flat solver's check) and this
        // geometry, whose phase plans these are; run_parts validated the pointers.
        unsafe { kernels::backward_data(&g, &self.phases, r.ptrs, r.alpha, r.beta) };
        Ok(())
    }
}
