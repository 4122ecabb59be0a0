//! Backward-data of depthwise, few-channels-per-group and few-channel stem convolutions (any
//! stride) on the few-channels and few-outputs forward kernels (`few_channels`,
//! `few_outputs`), by phases (`problem::backward_data_phases`,
//! run by `phased`): stride 1 is one phase, dx = conv(dy, w with taps reversed and each
//! group's channels swapped); a stride s is s² (s³) such phases over strided views of dx. The
//! groups keep their sizes swapped (KG outputs per group become the phase's inputs), so the
//! layers the forward kernel takes — depthwise, ResNeXt-like groups — are the ones whose
//! backward-data it takes. An ungrouped stem's phases (3 dx channels from 64 of dy) go to the
//! few-outputs kernel. Each phase's sub-filter is gathered into packed scratch.

use super::few_channels::CudaConvFewChannels;
use super::few_outputs::CudaConvFewOutputs;
use super::phased::{self, FilterCopy, PhaseWork, Plan};
use crate::backend::cuda::sub_filter::SubFilter;
use crate::backend::{DeviceInfo, DeviceKind};
use crate::error::{Error, Result};
use crate::problem::FusedProblem;
use crate::solver::{BuildContext, Invoker, Solver};
use crate::types::ConvAlgorithm;
use std::sync::Arc;

fn plan(problem: &FusedProblem, device: &DeviceInfo) -> std::result::Result<Plan, String> {
    let conv = phased::backward_data_conv(problem)?;
    // Grouped layers keep their group sizes swapped, so the forward kernel's small groups
    // come back; an ungrouped stem's phases have dx's few channels as their outputs.
    let solver: &'static dyn Solver = if conv.groups() == 1 { &CudaConvFewOutputs } else { &CudaConvFewChannels };
    phased::plan_phases(conv, &conv.y, None, |forward, taps| {
        solver.check(&forward, device)?;
        let copy = FilterCopy::Gather(SubFilter::new(&conv.w, conv.groups(), taps));
        Ok(PhaseWork::Conv { forward, solver, copy, in_place: None })
    })
}

pub struct CudaConvBwdDataFewChannels;

impl Solver for CudaConvBwdDataFewChannels {
    fn name(&self) -> &'static str { "CudaConvBwdDataFewChannels" }
    fn solution_id(&self) -> u64 { 115 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Direct }
    fn device(&self) -> DeviceKind { DeviceKind::Cuda }

    fn check(&self, problem: &FusedProblem, device: &DeviceInfo) -> std::result::Result<(), String> {
        plan(problem, device).map(|_| ())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // Bound by the bytes moved, as the forward kernel, plus a launch per phase.
        problem.conv_problem().map_or(f64::MAX, |c| {
            let phases: usize = c.conv.strides().iter().product();
            (c.x.num_bytes() + c.w.num_bytes() + c.y.num_bytes()) as f64 / 2.5e12 * 1e3 + 0.004 * phases as f64
        })
    }

    fn build(&self, problem: &FusedProblem, ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let p = plan(problem, ctx.device().info()).map_err(|why| Error::not_implemented(format!("{}: {why}", self.name())))?;
        phased::build(p, problem.dtype().size(), ctx)
    }
}
