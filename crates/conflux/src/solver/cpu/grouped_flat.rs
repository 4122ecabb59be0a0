//! f32 grouped forward with a few channels per group (ResNeXt, RegNet) at stride 1 or 2 on
//! channels-first planes with AVX-512 (`backend/cpu/direct/grouped_flat.rs`): flat runs of 16
//! outputs read with masked loads where the input (or its stride phase) lies, as
//! `CpuConvDepthwiseFlat` reads them (its check, plan and invoker are shared), each loaded input
//! vector feeding a block of 4 or 8 output channels of its group.

use super::depthwise_flat::{build_flat, check_flat, estimate_flat};
use crate::backend::{DeviceInfo, DeviceKind};
use crate::error::Result;
use crate::problem::{FusedProblem, Geom};
use crate::solver::{BuildContext, Invoker, Solver};
use crate::types::ConvAlgorithm;
use std::sync::Arc;

#[cfg(target_arch = "x86_64")]
use crate::backend::cpu::direct::grouped_flat as kernels;

pub struct CpuGroupedFlat;

fn grouped_unsuitable(g: &Geom) -> Option<String> {
    #[cfg(target_arch = "x86_64")]
    return kernels::unsuitable(g);
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = g;
        None
    }
}

impl Solver for CpuGroupedFlat {
    fn name(&self) -> &'static str { "CpuConvGroupedFlat" }
    fn solution_id(&self) -> u64 { 25 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Direct }
    fn device(&self) -> DeviceKind { DeviceKind::Cpu }

    fn check(&self, problem: &FusedProblem, device: &DeviceInfo) -> std::result::Result<(), String> {
        check_flat(problem, device, grouped_unsuitable, false)
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 { estimate_flat(problem) }

    fn build(&self, problem: &FusedProblem, _ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        build_flat(problem, self.name(), #[cfg(target_arch = "x86_64")] kernels::forward, #[cfg(target_arch = "x86_64")] None)
    }
}
