//! Forward f32 convolutions with small groups (4, 8, 16 or 32 output channels and at most 32
//! input channels per group: ResNeXt's grouped 3×3 layers) on a direct channels-last kernel
//! (`backend/cpu/direct/small_groups.rs`): per group a GEMM would be a sliver of KG rows.

use super::common::{f32_geometry, run_parts};
use crate::backend::cpu::direct::small_groups as kernels;
use crate::backend::cpu::weight_cache::{transformed_filter, WeightCache};
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::error::{Error, Result};
use crate::problem::FusedProblem;
use crate::solver::{BuildContext, Invoker, RunArgs, Solver};
use crate::types::{ConvAlgorithm, Direction};
use std::sync::Arc;

/// Most input channels per group (each a broadcast against the group's output vector).
const MAX_GROUP_INPUTS: usize = 32;

pub struct CpuSmallGroups;

struct SmallGroupsInvoker {
    problem: FusedProblem,
    /// The filter laid out by group, kept per address when the caller promised constant weights.
    filter: Option<WeightCache>,
}

impl Solver for CpuSmallGroups {
    fn name(&self) -> &'static str { "CpuConvSmallGroups" }
    fn solution_id(&self) -> u64 { 14 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Direct }
    fn device(&self) -> DeviceKind { DeviceKind::Cpu }

    fn check(&self, problem: &FusedProblem, _device: &DeviceInfo) -> std::result::Result<(), String> {
        let (_, g) = f32_geometry(problem, true)?;
        if g.groups == 1 {
            return Err("ungrouped".into());
        }
        if !kernels::GROUP_OUTPUTS.contains(&g.kg()) || g.cg() > MAX_GROUP_INPUTS {
            return Err(format!("{} → {} channels per group (4, 8, 16 or 32 outputs from at most {MAX_GROUP_INPUTS} inputs)", g.cg(), g.kg()));
        }
        if !g.is_2d() {
            return Err("2-D convolutions only".into());
        }
        Ok(())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // Vector FMAs at about 40 GFLOP/s on a small VM, plus moving x and y once.
        problem.conv_problem().map_or(f64::MAX, |c| 2.0 * c.macs() / 40e9 * 1e3 + (c.x.num_bytes() + c.y.num_bytes()) as f64 / 10e9 * 1e3)
    }

    fn build(&self, problem: &FusedProblem, _ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        Ok(Arc::new(SmallGroupsInvoker { problem: problem.clone(), filter: WeightCache::if_promised(problem) }))
    }
}

impl Invoker for SmallGroupsInvoker {
    fn run(&self, _ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let (g, dir, r) = run_parts(&self.problem, a, "CpuConvSmallGroups")?;
        if dir != Direction::Forward {
            return Err(Error::internal("CpuConvSmallGroups: not a forward problem"));
        }
        let fill = |t: &mut [f32]| kernels::filter_by_group(&g, r.ptrs.w, t);
        // SAFETY: w is the filter the problem describes (run_parts validated the arguments).
        let wt = unsafe { transformed_filter(self.filter.as_ref(), &self.problem, r.ptrs.w, kernels::filter_len(&g), fill) };
        let wt = wt.as_slice();
        kernels::forward(&g, r.ptrs, wt, r.alpha, r.beta, &r.epi);
        Ok(())
    }
}
