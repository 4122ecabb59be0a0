//! f32 depthwise forward at stride 1 or 2 on channels-first planes with AVX-512, each output
//! plane one flat run of 16-output vectors whose taps are masked loads from the input plane
//! where it lies, or from its stride phases (`backend/cpu/direct/depthwise_flat.rs`): no staged
//! band, padding or transpose.

use super::common::{f32_geometry, run_parts};
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::error::{Error, Result};
use crate::problem::FusedProblem;
use crate::solver::{BuildContext, Invoker, RunArgs, Solver};
use crate::types::{ConvAlgorithm, Direction};
use std::sync::Arc;

pub struct CpuDepthwiseFlat;

#[cfg(target_arch = "x86_64")]
use crate::backend::cpu::direct::depthwise_flat::{self as kernels, FlatPlan};

#[cfg(target_arch = "x86_64")]
struct FlatInvoker {
    problem: FusedProblem,
    plan: FlatPlan,
}

impl Solver for CpuDepthwiseFlat {
    fn name(&self) -> &'static str { "CpuConvDepthwiseFlat" }
    fn solution_id(&self) -> u64 { 24 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Direct }
    fn device(&self) -> DeviceKind { DeviceKind::Cpu }

    fn check(&self, problem: &FusedProblem, device: &DeviceInfo) -> std::result::Result<(), String> {
        let (_, g) = f32_geometry(problem, true)?;
        #[cfg(target_arch = "x86_64")]
        {
            if !(device.cpu.avx512 && kernels::available()) {
                return Err("needs AVX-512 (masked loads of 16 outputs)".into());
            }
            if g.groups == 1 || g.cg() != 1 {
                return Err(format!("depthwise (one input channel per group) only ({} groups, {} channels)", g.groups, g.c));
            }
            if !g.is_2d() {
                return Err("2-D convolutions only".into());
            }
            if g.x_strides[1] == 1 || g.y_strides[1] == 1 {
                return Err("channels-first tensors only (channels-last ones fill the lanes with channels: CpuConvDepthwiseNhwc)".into());
            }
            if let Some(why) = kernels::unsuitable(&g) {
                return Err(why);
            }
            if FlatPlan::of(&g).is_none() {
                return Err(format!("a plane of {}×{} outputs with {} taps needs more than {} masks, or its stride phases more than {} floats", g.output[1], g.output[2], g.filter_size(), kernels::MAX_MASKS, crate::backend::cpu::direct::depthwise_planes::MAX_PHASE_FLOATS));
            }
            Ok(())
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (device, g);
            Err("needs AVX-512 (masked loads of 16 outputs)".into())
        }
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // Moving x and y once and the vector FMAs at about the machine's FMA rate.
        problem.conv_problem().map_or(f64::MAX, |c| (c.x.num_bytes() + c.y.num_bytes()) as f64 / 10e9 * 1e3 + 2.0 * c.macs() / 100e9 * 1e3)
    }

    fn build(&self, problem: &FusedProblem, _ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        #[cfg(target_arch = "x86_64")]
        {
            let conv = problem.conv_problem().ok_or_else(|| Error::internal("CpuConvDepthwiseFlat: not a convolution"))?;
            let plan = FlatPlan::of(&crate::problem::Geom::of(conv)).ok_or_else(|| Error::internal("CpuConvDepthwiseFlat: the plan its check accepted overflows"))?;
            Ok(Arc::new(FlatInvoker { problem: problem.clone(), plan }))
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = problem;
            Err(Error::internal("CpuConvDepthwiseFlat: built without x86-64"))
        }
    }
}

#[cfg(target_arch = "x86_64")]
impl Invoker for FlatInvoker {
    fn run(&self, _ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let (g, dir, r) = run_parts(&self.problem, a, "CpuConvDepthwiseFlat")?;
        if dir != Direction::Forward {
            return Err(Error::internal(format!("CpuConvDepthwiseFlat: {dir:?} (forward only)")));
        }
        // SAFETY: the check found AVX-512 and this geometry, whose plan this is; run_parts
        // validated the pointers against the problem.
        unsafe { kernels::forward(&g, &self.plan, r.ptrs, r.alpha, r.beta, &r.epi) };
        Ok(())
    }
}
