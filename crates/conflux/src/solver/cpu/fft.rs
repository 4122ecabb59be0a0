//! FFT convolution on the CPU (`backend/cpu/fft_conv.rs`): forward, 2-D, stride 1, any filter
//! size and dilation, padding, groups, layout and type, with the fused epilogue. It pays off
//! for large filters: per output it needs 4·s(s/2 + 1)/tile-area real multiplies per channel
//! pair, independent of the filter's size, against fh·fw for the GEMM solvers
//! (bench/results/2026-11-25-cpu-fft.md has the measurements).
//!
//! With constant weights the filter transform runs once per filter address (the invoker keeps
//! it); without, every call.

use super::common::{conv_of, run_parts};
use super::direct_taps::taps_check;
use crate::solver::{Invoker, RunArgs, Solver};
use crate::backend::cpu::fft::{self as fft_conv, Plan};
use crate::backend::cpu::gemm;
use crate::backend::cpu::weight_cache::WeightCache;
use crate::problem::Geom;
use crate::error::{Error, Result};
use crate::problem::FusedProblem;
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::solver::BuildContext;
use crate::types::{ConvAlgorithm, Direction};
use std::sync::Arc;

/// Fewest channels per group (in and out): the transforms cost about as much as the GEMMs
/// below this.
const MIN_CHANNELS: usize = 4;

/// The rate of the solver that would run instead on the filters this solver is for (5×5 and
/// 7×7 on 2 cores), the yardstick of `check`: CpuConvDirectTaps where it applies, else the
/// GEMM solvers (bench/results/2026-11-25-cpu-fft.md, 2026-11-25-cpu-session16.md).
const DIRECT_TAPS_FLOPS_PER_S: f64 = 270e9;
const GEMM_FLOPS_PER_S: f64 = 190e9;

/// It applies where its estimated time is at most this fraction of direct convolution's (the
/// cost model came within ~25% of the measured times, on both sides; Find times both).
const MAX_TIME_RATIO: f64 = 1.0;

/// Scratch (transformed input, filters and products, bytes) above which it declines.
const MAX_SCRATCH_BYTES: usize = 2 << 30;


pub struct CpuFft;

/// The geometry and estimated seconds when the solver applies, else why not.
fn fft_check(problem: &FusedProblem) -> std::result::Result<(Geom, f64), String> {
    let (conv, _) = conv_of(problem)?;
    if conv.direction != Direction::Forward {
        return Err(format!("forward only (this is {:?})", conv.direction));
    }
    let g = Geom::of(conv);
    fft_conv::supports(&g)?;
    if g.cg() < MIN_CHANNELS || g.kg() < MIN_CHANNELS {
        return Err(format!("{} input / {} output channels per group (< {MIN_CHANNELS})", g.cg(), g.kg()));
    }
    let kern = gemm::best();
    let per_call = !conv.conv.weights_constant();
    let fft = Plan::choose(&g, &kern, per_call).seconds(&g, &kern, per_call);
    let rate = if taps_check(problem).is_ok() { DIRECT_TAPS_FLOPS_PER_S } else { GEMM_FLOPS_PER_S };
    let direct = 2.0 * conv.macs() / rate;
    if fft > MAX_TIME_RATIO * direct {
        return Err(format!(
            "{}×{} filter, {}×{} output: estimated {:.0} µs{} against {:.0} µs direct (> {MAX_TIME_RATIO}×)",
            g.filter[1],
            g.filter[2],
            g.output[1],
            g.output[2],
            fft * 1e6,
            if per_call { " with the filter transform (no constant weights)" } else { "" },
            direct * 1e6
        ));
    }
    let bytes = 4 * fft_conv::scratch_len(kern, &g);
    if bytes > MAX_SCRATCH_BYTES {
        return Err(format!("{} MiB of scratch (> {} MiB)", bytes >> 20, MAX_SCRATCH_BYTES >> 20));
    }
    Ok((g, fft))
}

impl Solver for CpuFft {
    fn name(&self) -> &'static str { "CpuConvFft" }
    fn solution_id(&self) -> u64 { 10 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Fft }
    fn device(&self) -> DeviceKind { DeviceKind::Cpu }

    fn check(&self, problem: &FusedProblem, _device: &DeviceInfo) -> std::result::Result<(), String> {
        fft_check(problem).map(|_| ())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        fft_check(problem).map_or(f64::MAX, |(_, seconds)| seconds * 1e3 + 0.02)
    }

    fn build(&self, problem: &FusedProblem, _ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        fft_check(problem).map_err(|why| Error::not_implemented(format!("{}: {why}", self.name())))?;
        Ok(Arc::new(FftInvoker { problem: problem.clone(), transformed: WeightCache::if_promised(problem) }))
    }
}

struct FftInvoker {
    problem: FusedProblem,
    /// Transformed filters by address, when the caller promised constant weights.
    transformed: Option<WeightCache>,
}

impl Invoker for FftInvoker {
    fn run(&self, _ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let (g, dir, r) = run_parts(&self.problem, a, "CpuConvFft")?;
        if dir != Direction::Forward {
            return Err(Error::internal("CpuConvFft: forward invoker on another direction"));
        }
        let kern = gemm::best();
        let u = match &self.transformed {
            // SAFETY: w is the filter tensor the descriptors describe.
            Some(cache) => Some(unsafe { cache.filter(&self.problem, r.ptrs.w, fft_conv::transformed_len(kern, &g), |u| fft_conv::transform_filters(kern, &g, r.ptrs, u)) }),
            None => None,
        };
        fft_conv::forward_with(kern, &g, r.ptrs, r.alpha, r.beta, &r.epi, u.as_ref().map(|u| u.as_slice()));
        Ok(())
    }
}
