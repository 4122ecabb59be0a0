//! Depthwise f32 convolutions, every direction and layout, computed channels-last
//! (`backend/cpu/direct/depthwise_nhwc.rs`): channels in the vector lanes. Channels-first
//! operands are transposed row by row as the forward stages them (filters of ≤ 1.5 × stride
//! rows, any plane), else copied channels-last where planes are small (≤ 32×32 outputs, or
//! ≤ 56×56 with ≥ 25 taps): there the planar direct solver's short rows fill few vector lanes
//! (bench/results/2026-11-27-cpu-zoo-depthwise.md).

use super::common::{f32_geometry, run_parts};
use crate::backend::cpu::direct::depthwise_nhwc as kernels;
use crate::backend::cpu::gemm::scratch::{with_scratch, Slot};
use crate::backend::cpu::weight_cache::{transformed_filter, WeightCache};
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::error::Result;
use crate::problem::FusedProblem;
use crate::solver::{BuildContext, Invoker, RunArgs, Solver};
use crate::types::{ConvAlgorithm, Direction};
use std::sync::Arc;

pub struct CpuDepthwiseNhwc;

struct DepthwiseInvoker {
    problem: FusedProblem,
    /// The filter laid out by tap, kept per address when the caller promised constant weights.
    taps: Option<WeightCache>,
}

impl Solver for CpuDepthwiseNhwc {
    fn name(&self) -> &'static str { "CpuConvDepthwiseNhwc" }
    fn solution_id(&self) -> u64 { 12 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Direct }
    fn device(&self) -> DeviceKind { DeviceKind::Cpu }

    fn check(&self, problem: &FusedProblem, _device: &DeviceInfo) -> std::result::Result<(), String> {
        let (conv, g) = f32_geometry(problem, false)?;
        if g.groups == 1 || g.cg() != 1 || g.kg() != 1 {
            return Err(format!("depthwise with one output channel per group only ({} groups, {} → {} channels)", g.groups, g.c, g.k));
        }
        if !g.is_2d() {
            return Err("2-D convolutions only".into());
        }
        let plane = g.output[1] * g.output[2];
        let channels_first = g.x_strides[1] != 1 || g.y_strides[1] != 1;
        let no_copy = conv.direction == Direction::Forward && kernels::transposes_while_staging(&g);
        if channels_first && !no_copy && (plane > 3136 || (plane > 1024 && g.filter_size() < 25)) {
            // The copy grows with the plane; the planar kernel's rows fill their lanes.
            return Err(format!("channels-first tensors with a {}×{} output plane: the planar direct solver runs it without copies", g.output[1], g.output[2]));
        }
        if conv.direction == Direction::Forward && kernels::staged_floats(&g).is_none_or(|f| f > kernels::MAX_STAGED) {
            return Err(format!("a staged input row would exceed {} floats (stride {:?}, dilation {:?})", kernels::MAX_STAGED, g.stride, g.dilation));
        }
        if conv.direction == Direction::Forward && g.filter[1] > kernels::MAX_FILTER_ROWS {
            return Err(format!("forward with {} filter rows (at most {})", g.filter[1], kernels::MAX_FILTER_ROWS));
        }
        Ok(())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // Bound by moving x and y once (about 10 GB/s on a small VM) and by vector FMAs.
        problem.conv_problem().map_or(f64::MAX, |c| (c.x.num_bytes() + c.y.num_bytes()) as f64 / 10e9 * 1e3 + 2.0 * c.macs() / 40e9 * 1e3)
    }

    fn build(&self, problem: &FusedProblem, _ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        Ok(Arc::new(DepthwiseInvoker { problem: problem.clone(), taps: WeightCache::if_promised(problem) }))
    }
}

impl Invoker for DepthwiseInvoker {
    fn run(&self, _ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let (g, dir, r) = run_parts(&self.problem, a, "CpuConvDepthwiseNhwc")?;
        if dir == Direction::BackwardWeights {
            kernels::backward_weights(&g, r.ptrs, r.alpha, r.beta);
            return Ok(());
        }
        let fill = |t: &mut [f32]| kernels::taps_by_channel(&g, r.ptrs.w, t);
        let run = |wt: &[f32]| {
            if dir == Direction::Forward {
                kernels::forward(&g, r.ptrs, wt, r.alpha, r.beta, &r.epi);
            } else {
                kernels::backward_data(&g, r.ptrs, wt, r.alpha, r.beta, &r.epi);
            }
        };
        match &self.taps {
            // SAFETY: w is the filter the problem describes (run_parts validated the arguments).
            Some(cache) => run(unsafe { transformed_filter(Some(cache), &self.problem, r.ptrs.w, kernels::taps_len(&g), fill) }.as_slice()),
            // This call's copy in the thread's scratch: a fresh buffer of a wide 7 × 7 filter
            // is an mmap and its page faults on every call.
            None => with_scratch(Slot::PackA, kernels::taps_len(&g), |t| {
                fill(t);
                run(t)
            }),
        }
        Ok(())
    }
}
