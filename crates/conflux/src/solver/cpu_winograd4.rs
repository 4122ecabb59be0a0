//! Winograd F(4×4, 3×3) convolution on the CPU (`backend/cpu/wino4.rs`): 2-D, 3×3, stride 1,
//! dilation 1, any padding, groups, layout and type, with the fused epilogue. 4× fewer
//! multiplies than direct per output (F(2×2): 2.25×). Backward-data runs as the forward
//! convolution of dy with the flipped filter (`ConvProblem::backward_data_as_forward`), whose
//! filter transform reads the caller's filter transposed and flipped in place
//! (`wino4::FilterView::flipped`).
//!
//! With constant weights (`ConvDesc::weights_constant`) the forward filter transform runs once
//! per filter address and the invoker keeps U (4× the filter); without it, it runs every call.

use super::cpu_conv::run_parts;
use super::cpu_winograd::winograd_check;
use super::{Invoker, RunArgs, Solver};
use crate::backend::cpu::conv_naive::ConvPtrs;
use crate::backend::cpu::weight_cache::WeightCache;
use crate::backend::cpu::wino4::{self, FilterView, Variant};
use crate::conv::{ConvProblem, Geom};
use crate::error::{Error, Result};
use crate::fusion::FusedProblem;
use crate::handle::{DeviceKind, Handle};
use crate::types::{ConvAlgorithm, Direction, Layout};
use std::sync::Arc;
/// Most filters (C/G·K/G) per 4×4 output tile (all images) unless the weights are constant:
/// the filters are transformed on every call, and beyond this that costs more than the
/// multiplies it saves
/// (measured 2026-11-21, N=1: 512-7-7-512 at 65536 per tile 1.25 ms vs implicit GEMM 1.7 ms;
/// 1024-7-7-1024 and 512-4-4-512 at 262144 per tile 5.2 vs 6.7 ms and 1.02 vs 0.95 ms).
const MAX_FILTERS_PER_TILE: usize = 262144;

/// Fewest 4×4 output tiles (all images) of a forward problem: with fewer, each transformed
/// filter serves at most four tiles and streams from memory, and F(2×2) (`cpu_winograd`, next
/// in the registry) is faster. Measured (`bench_cpu one CFG N NCHW Winograd 0.4 [const]`,
/// medians, 2026-11-25): 4 tiles, 512-7-7-512 N=1: F(2×2) 595–615 vs 797–808 µs with
/// constant weights, 940–984 vs 990–1044 without; 256-7-7-256 N=1: 191 vs 228 const, 272 vs
/// 259 plain. 8 tiles (512-7-7-512 N=2): F(4×4) 842 vs 1243 const, 1246 vs 1469 plain; 16
/// tiles (256-14-14-256 N=1): 408–427 vs 522–525 const.
const MIN_FORWARD_TILES: usize = 5;

pub struct CpuWinograd4;

impl Solver for CpuWinograd4 {
    fn name(&self) -> &'static str { "CpuConvWinogradF4x3" }
    fn solution_id(&self) -> u64 { 7 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Winograd }
    fn device(&self) -> DeviceKind { DeviceKind::Cpu }

    fn check(&self, problem: &FusedProblem, _handle: &Handle) -> std::result::Result<(), String> {
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
        // Measured 250-400 direct-equivalent GFLOP/s on the ResNet 3×3 layers (2 cores),
        // against ~140 for the GEMM solvers.
        problem.conv_problem().map(|c| 2.0 * c.macs() / 300e9 * 1e3 + 0.01).unwrap_or(f64::MAX)
    }

    fn build(&self, problem: &FusedProblem, _handle: &Handle) -> Result<Arc<dyn Invoker>> {
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
    fn run(&self, _handle: &Handle, a: &RunArgs) -> Result<()> {
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
    fn run(&self, _handle: &Handle, a: &RunArgs) -> Result<()> {
        let (_, _, r) = run_parts(&self.problem, a, "CpuConvWinogradF4x3")?;
        let conv = self.problem.conv_problem().ok_or_else(|| Error::internal("winograd backward-data: not a convolution"))?;
        // Backward-data arguments: x = dx (written), y = dy; the forward reads dy, writes dx.
        let ptrs = ConvPtrs { x: r.ptrs.y, w: r.ptrs.w, y: r.ptrs.x, dt: r.ptrs.dt };
        let fv = FilterView::flipped(&conv.w, conv.groups());
        wino4::forward_view(&Geom::of(&self.forward), fv, ptrs, r.alpha, r.beta, &r.epi);
        Ok(())
    }
}
