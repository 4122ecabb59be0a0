//! Winograd F(4×4, 3×3) convolution on the CPU (`backend/cpu/wino4.rs`): 2-D, 3×3, stride 1,
//! dilation 1, any padding, groups, layout and type, with the fused epilogue. 4× fewer
//! multiplies than direct per output (F(2×2): 2.25×). Backward-data runs as the forward
//! convolution of dy with the flipped filter (`ConvProblem::backward_data_as_forward`), whose
//! filter transform reads the caller's filter transposed and flipped in place
//! (`wino4::FilterView::flipped`).
//!
//! With constant weights (`ConvDesc::weights_constant`) the forward filter transform runs once
//! per filter address and the invoker keeps U (4× the filter); without it, it runs every call.

use super::common::run_parts;
use super::winograd_f2::winograd_check;
use crate::solver::{Invoker, RunArgs, Solver};
use crate::backend::cpu::direct::naive::ConvPtrs;
use crate::backend::cpu::weight_cache::WeightCache;
use crate::backend::cpu::winograd::{self as wino4, FilterView, Variant};
use crate::problem::{ConvProblem, Geom};
use crate::error::{Error, Result};
use crate::problem::FusedProblem;
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::solver::BuildContext;
use crate::types::{ConvAlgorithm, Direction, Layout};
use std::sync::Arc;
/// Most filters (C/G·K/G) per 4×4 output tile (all images) unless the weights are constant:
/// the filters are transformed on every call, and beyond this that costs more than the
/// multiplies it saves; the bound is where the implicit GEMM caught up in the measurements
/// (bench/results/2026-11-21-cpu-winograd.md).
const MAX_FILTERS_PER_TILE: usize = 262144;

/// Fewest 4×4 output tiles (all images) of a forward problem: with fewer, each transformed
/// filter serves at most four tiles and streams from memory, and F(2×2) (`cpu_winograd`, next
/// in the registry), whose transformed filters are 16/36 the size, is faster; from 8 tiles on
/// F(4×4) wins (F(2×2) against F(4×4) on 4 to 16 tiles:
/// bench/results/2026-11-25-cpu-session14.md).
const MIN_FORWARD_TILES: usize = 5;

pub struct CpuWinograd4;

impl Solver for CpuWinograd4 {
    fn name(&self) -> &'static str { "CpuConvWinogradF4x3" }
    fn solution_id(&self) -> u64 { 7 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Winograd }
    fn device(&self) -> DeviceKind { DeviceKind::Cpu }

    fn check(&self, problem: &FusedProblem, _device: &DeviceInfo) -> std::result::Result<(), String> {
        let (g, forward) = match backward_data_forward(problem)? {
            Some(fwd) => (winograd_check(&FusedProblem::conv(fwd))?, false),
            None => (winograd_check(problem)?, true),
        };
        let tiles = Variant::F4.tiles(&g);
        if forward && tiles < MIN_FORWARD_TILES {
            return Err(format!("{tiles} output tiles (< {MIN_FORWARD_TILES}): F(2×2) is faster there (transformed filters 16/36 the size)"));
        }
        let constant = problem.conv_problem().is_some_and(|c| c.direction == Direction::Forward && c.conv.weights_constant());
        if !constant && g.cg() * g.kg() > MAX_FILTERS_PER_TILE * tiles {
            return Err(format!(
                "{}×{} filters for {tiles} output tiles (> {MAX_FILTERS_PER_TILE} per tile: the per-call filter transform outweighs the saved multiplies)",
                g.kg(),
                g.cg()
            ));
        }
        Ok(())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // 300 direct-equivalent GFLOP/s on 2 cores, about twice the GEMM solvers' rate on the
        // ResNet 3×3 layers (bench/results/2026-11-21-cpu-winograd.md), so immediate mode
        // ranks it ahead of them.
        problem.conv_problem().map(|c| 2.0 * c.macs() / 300e9 * 1e3 + 0.01).unwrap_or(f64::MAX)
    }

    fn build(&self, problem: &FusedProblem, _ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        match backward_data_forward(problem).map_err(|why| Error::not_implemented(format!("{}: {why}", self.name())))? {
            Some(forward) => Ok(Arc::new(BackwardDataInvoker { problem: problem.clone(), forward })),
            None => Ok(Arc::new(ForwardInvoker::new(problem, self.name(), Variant::F4))),
        }
    }
}

/// The forward problem a backward-data problem runs as (its filter packed KCRS), None for a
/// forward problem.
fn backward_data_forward(problem: &FusedProblem) -> std::result::Result<Option<ConvProblem>, String> {
    match problem.conv_problem() {
        Some(c) if c.direction == Direction::BackwardData => c.backward_data_as_forward(Layout::NCHW).map(Some),
        _ => Ok(None),
    }
}

/// y = α·conv(x, w) + β·y through `wino4` with one `Variant`, with the filters transformed
/// per call or kept by address (both Winograd solvers).
pub(crate) struct ForwardInvoker {
    problem: FusedProblem,
    name: &'static str,
    variant: Variant,
    /// U by filter address, when the caller promised constant weights.
    transformed: Option<WeightCache>,
}

impl ForwardInvoker {
    pub(crate) fn new(problem: &FusedProblem, name: &'static str, variant: Variant) -> ForwardInvoker {
        ForwardInvoker { problem: problem.clone(), name, variant, transformed: WeightCache::if_promised(problem) }
    }
}

impl Invoker for ForwardInvoker {
    fn run(&self, _ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let (g, dir, r) = run_parts(&self.problem, a, self.name)?;
        if dir != Direction::Forward {
            return Err(Error::internal(format!("{}: forward invoker on another direction", self.name)));
        }
        let (kern, fv, v) = (wino4::panel_kernel(&g, self.variant), FilterView::of(&g), self.variant);
        let u = match &self.transformed {
            // SAFETY: w is the filter tensor the descriptors describe.
            Some(cache) => Some(unsafe { cache.filter(&self.problem, r.ptrs.w, wino4::transformed_len(kern, v, &g), |u| wino4::transform_filters(kern, v, true, &g, fv, r.ptrs, u)) }),
            None => None,
        };
        wino4::forward_with(kern, v, true, &g, fv, r.ptrs, r.alpha, r.beta, &r.epi, u.as_ref().map(|u| u.as_slice()));
        Ok(())
    }
}

/// dx = α·conv(dy, flipped w) + β·dx through the forward kernel.
struct BackwardDataInvoker {
    problem: FusedProblem,
    forward: ConvProblem,
}

impl Invoker for BackwardDataInvoker {
    fn run(&self, _ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let (_, _, r) = run_parts(&self.problem, a, "CpuConvWinogradF4x3")?;
        let conv = self.problem.conv_problem().ok_or_else(|| Error::internal("winograd backward-data: not a convolution"))?;
        // Backward-data arguments: x = dx (written), y = dy; the forward reads dy, writes dx.
        let ptrs = ConvPtrs { x: r.ptrs.y, w: r.ptrs.w, y: r.ptrs.x, dt: r.ptrs.dt };
        let fv = FilterView::flipped(&conv.w, conv.groups());
        wino4::forward_view(&Geom::of(&self.forward), fv, ptrs, r.alpha, r.beta, &r.epi);
        Ok(())
    }
}
