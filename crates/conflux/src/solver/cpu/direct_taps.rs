//! Direct forward convolution over the filter's taps on the CPU (`backend/cpu/conv_taps.rs`):
//! f32, 2-D, stride 1, any filter size, dilation, padding and groups, with a none / bias /
//! ReLU / bias + ReLU epilogue (other α/β and epilogues at run time go through the implicit
//! GEMM, as in `CpuConvGemm1x1`). For short reductions over many taps — few channels, large
//! filters — where the GEMM solvers spend their time building im2col panels
//! (bench/results/2026-11-25-cpu-session16.md).
//!
//! W is packed per tap on every call, or once per filter address under the constant-weights
//! promise.

use crate::backend::cpu::direct::depthwise;
use super::common::run_parts;
use super::gemm1x1::{direct_epilogue, forward_f32_bias_relu};
use crate::solver::{Invoker, RunArgs, Solver};
use crate::backend::cpu::conv1x1::channels_kernel;
use crate::backend::cpu::direct::taps as conv_taps;
use crate::backend::cpu::gemm::{with_scratch, Slot};
use crate::backend::cpu::weight_cache::WeightCache;
use crate::problem::Geom;
use crate::error::Result;
use crate::problem::FusedProblem;
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::solver::BuildContext;
use crate::types::ConvAlgorithm;
use std::sync::Arc;

/// Fewest taps: a 1×1 or 1×3 filter has the 1×1 and GEMM solvers.
const MIN_TAPS: usize = 4;
/// Longest reduction per output (C/G · taps) taken: measured faster than the implicit GEMM up
/// to 4608 (512-7-7-512 3×3), not beyond.
const MAX_REDUCTION: usize = 5000;
/// Fewest filters per group: the tile computes 32 (depthwise layers would leave 31 of 32 lanes
/// empty; CpuConvDirect and the GEMM solvers take them).
const MIN_FILTERS: usize = 8;

pub struct CpuDirectTaps;

/// Whether `CpuDirectTaps` applies, else why not (also the FFT solver's yardstick).
pub(super) fn taps_check(problem: &FusedProblem) -> std::result::Result<(), String> {
    let g = Geom::of(forward_f32_bias_relu(problem)?);
    if !g.is_2d() {
        return Err("3-D convolution (2-D only)".into());
    }
    if g.stride[1..] != [1, 1] {
        return Err(format!("stride {}×{} (1 only)", g.stride[1], g.stride[2]));
    }
    let taps = g.filter[1] * g.filter[2];
    if taps < MIN_TAPS {
        return Err(format!("{taps} filter taps (< {MIN_TAPS}: the 1×1 and GEMM solvers)"));
    }
    if g.kg() < MIN_FILTERS {
        return Err(format!("{} filters per group (< {MIN_FILTERS}: the 32-filter tile would be mostly empty)", g.kg()));
    }
    let red = g.cg() * taps;
    if red > MAX_REDUCTION {
        return Err(format!("reduction C/G·taps = {red} > {MAX_REDUCTION} (not measured beyond: the GEMM solvers take it)"));
    }
    if g.y_strides[4] != 1 && g.y_strides[1] != 1 {
        return Err("y has neither its positions nor its channels consecutive".into());
    }
    if depthwise::padded_plane(&g).is_none_or(|e| e > depthwise::MAX_PADDED_PLANE) {
        return Err(format!("the padded input plane exceeds {} elements (padding {:?})", depthwise::MAX_PADDED_PLANE, g.pad));
    }
    if channels_kernel::best().and_then(|k| k.tile_taps).is_none() {
        return Err("needs AVX-512 (its 1×1 tile)".into());
    }
    Ok(())
}

struct TapsInvoker {
    problem: FusedProblem,
    /// W packed by filter address, when the caller promised constant weights.
    packed: Option<WeightCache>,
}

impl Solver for CpuDirectTaps {
    fn name(&self) -> &'static str { "CpuConvDirectTaps" }
    fn solution_id(&self) -> u64 { 11 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Direct }
    fn device(&self) -> DeviceKind { DeviceKind::Cpu }

    fn check(&self, problem: &FusedProblem, _device: &DeviceInfo) -> std::result::Result<(), String> { taps_check(problem) }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // ~250 GFLOP/s on 2 AVX-512 cores (the 1×1 tile, one partial-sum round trip per tap).
        problem.conv_problem().map(|c| 2.0 * c.macs() / 250e9 * 1e3 + 0.01).unwrap_or(f64::MAX)
    }

    fn build(&self, problem: &FusedProblem, _ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        Ok(Arc::new(TapsInvoker { problem: problem.clone(), packed: WeightCache::if_promised(problem) }))
    }
}

impl Invoker for TapsInvoker {
    fn run(&self, _ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let (g, _, r) = run_parts(&self.problem, a, "CpuConvDirectTaps")?;
        let Some((bias, relu)) = direct_epilogue(&g, &r) else { return Ok(()) };
        let kern = channels_kernel::best().ok_or_else(|| crate::error::Error::internal("CpuConvDirectTaps: no AVX-512"))?;
        let len = conv_taps::packed_len(&g);
        let w = r.ptrs.w as *const f32;
        let run = |wp: &[f32]| {
            // SAFETY: `check` established f32, 2-D, stride 1 and y's layout; the descriptors
            // were checked against the buffers by the caller.
            unsafe { conv_taps::forward(&kern, &g, r.ptrs.x, r.ptrs.dt, wp, r.ptrs.y as *mut f32, bias, relu) }
        };
        match &self.packed {
            // SAFETY: w is the filter the descriptors describe.
            Some(cache) => run(unsafe { cache.filter(&self.problem, r.ptrs.w, len, |d| conv_taps::pack_w(&g, w, kern.transpose, d)) }.as_slice()),
            None => with_scratch(Slot::PackBAll, len, |d| {
                // SAFETY: as above.
                unsafe { conv_taps::pack_w(&g, w, kern.transpose, d) };
                run(d);
            }),
        }
        Ok(())
    }
}
