//! Backward-weights of 1×1 stride-1 unpadded f32 layers with channels-first x and dy, computed
//! from the tensors in place where the GEMM path packs dy or x across the reduction first (a
//! transpose of a whole tensor):
//! - maps of ≥ 256 positions: each dW element a dot product of a dy row and an x row over the
//!   batch's positions (`conv1x1::weights`), any α/β;
//! - smaller maps (7 × 7, 14 × 14) of layers with at least as many output as input channels: the
//!   forward positions tiles with x's channels in the lanes over a per-image transpose of x
//!   (`conv1x1::weights_lanes`); other α/β than 1 and 0 go through the GEMM backward-weights
//!   (`im2col::backward`), which blends them in. Contracting layers spend more on the
//!   element-wise transpose of the larger x than the lanes save
//!   (bench/results/2026-11-29-cpu-bwd-1x1.md).

use super::common::{f32_geometry, run_parts};
use super::gemm1x1::{not_pointwise, position_stride};
use crate::backend::cpu::conv1x1::positions_kernel::{self, PosKernels};
use crate::backend::cpu::conv1x1::weights::{self, WeightsKernels, WeightsProblem, WeightsSplit};
use crate::backend::cpu::conv1x1::weights_lanes;
use crate::backend::cpu::im2col::backward::backward_weights;
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::error::{Error, Result};
use crate::problem::{FusedProblem, Geom};
use crate::solver::{BuildContext, Invoker, RunArgs, Solver};
use crate::types::{ConvAlgorithm, Direction};
use std::sync::Arc;

pub struct CpuConv1x1BwdWeights;

/// Fewest positions per image for the dot products. On 14 × 14 and 7 × 7 maps they measured
/// slower than the GEMM path (AMD EPYC, N = 8; bench/results/2026-11-29-cpu-bwd-1x1.md): each
/// tile's run is short against its sums' round trip, and the last vector of a 49-position row is
/// mostly masked. Those maps take the channels-in-lanes path.
const MIN_DOT_POSITIONS: usize = 256;
/// Most channels on the narrower side (per group) for the dot products. Where both sides are
/// wider the GEMM path's register tiles, which reuse each load across more products, measured
/// faster (same file); at 128 and below the layer is bound by reading x and dy, which this path
/// does once and in place.
const MAX_NARROW_SIDE: usize = 128;

/// Which kernels a problem's map takes.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Path {
    DotProducts,
    ChannelLanes,
}

fn plan(problem: &FusedProblem) -> std::result::Result<(Geom, Path), String> {
    let (conv, g) = f32_geometry(problem, false)?;
    if conv.direction != Direction::BackwardWeights {
        return Err(format!("backward-weights only (this is {:?})", conv.direction));
    }
    if let Some(why) = not_pointwise(&g) {
        return Err(why);
    }
    if position_stride(g.x_strides, g.input) != Some(1) || position_stride(g.y_strides, g.output) != Some(1) {
        return Err("x or dy does not have its positions consecutive (channels-first)".into());
    }
    if g.output_size() >= MIN_DOT_POSITIONS {
        if g.cg().min(g.kg()) > MAX_NARROW_SIDE {
            return Err(format!("{} input and {} output channels per group, both over {MAX_NARROW_SIDE}", g.cg(), g.kg()));
        }
        return Ok((g, Path::DotProducts));
    }
    if g.kg() < g.cg() {
        return Err(format!("{} positions per image with fewer output channels ({}) than input channels ({}): transposing x costs more than the GEMM path on such maps", g.output_size(), g.kg(), g.cg()));
    }
    if g.w_strides[1] != 1 {
        return Err("dW's channels are not consecutive (the channels-in-lanes tiles store rows of them)".into());
    }
    Ok((g, Path::ChannelLanes))
}

impl Solver for CpuConv1x1BwdWeights {
    fn name(&self) -> &'static str { "CpuConv1x1BwdWeights" }
    fn solution_id(&self) -> u64 { 29 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Gemm }
    fn device(&self) -> DeviceKind { DeviceKind::Cpu }

    fn check(&self, problem: &FusedProblem, device: &DeviceInfo) -> std::result::Result<(), String> {
        if device.kind != DeviceKind::Cpu {
            return Err("runs on the CPU".into());
        }
        plan(problem)?;
        match (weights::best(), positions_kernel::best()) {
            (Some(_), Some(_)) => Ok(()),
            _ => Err("needs AVX-512".into()),
        }
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // ~180 GFLOP/s on 2 AVX-512 cores.
        problem.conv_problem().map_or(f64::MAX, |c| 2.0 * c.macs() / 180e9 * 1e3 + 0.01)
    }

    fn build(&self, problem: &FusedProblem, _ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let (_, path) = plan(problem).map_err(|why| Error::not_implemented(format!("{}: {why}", self.name())))?;
        let need = || Error::unsupported(format!("{}: needs AVX-512", self.name()));
        Ok(Arc::new(InPlaceInvoker { problem: problem.clone(), path, dots: weights::best().ok_or_else(need)?, lanes: positions_kernel::best().ok_or_else(need)? }))
    }
}

struct InPlaceInvoker {
    problem: FusedProblem,
    path: Path,
    dots: WeightsKernels,
    lanes: PosKernels,
}

impl Invoker for InPlaceInvoker {
    fn run(&self, _ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        // Backward-weights arguments: x = x, w = dW (written), y = dy.
        let (g, _, r) = run_parts(&self.problem, a, "CpuConv1x1BwdWeights")?;
        if self.path == Path::ChannelLanes && (r.alpha != 1.0 || r.beta != 0.0) {
            backward_weights(&g, r.ptrs, r.alpha, r.beta);
            return Ok(());
        }
        let (kg, cg) = (g.kg(), g.cg());
        let threads = rayon::current_num_threads();
        for group in 0..g.groups {
            let p = WeightsProblem {
                n: g.n,
                c: cg,
                k: kg,
                hw: g.output_size(),
                x: (r.ptrs.x as *const f32).wrapping_add(group * cg * g.x_strides[1]),
                xs: [g.x_strides[0], g.x_strides[1]],
                dy: (r.ptrs.y as *const f32).wrapping_add(group * kg * g.y_strides[1]),
                ys: [g.y_strides[0], g.y_strides[1]],
                dw: (r.ptrs.w as *mut f32).wrapping_add(group * kg * g.w_strides[0]),
                dws: [g.w_strides[0], g.w_strides[1]],
                alpha: r.alpha,
                beta: r.beta,
            };
            // SAFETY: the API validated x, dW and dy against the problem's descriptors; `p`
            // addresses group `group`'s channels of each with their strides (positions
            // consecutive in x and dy, and on the lanes path dW's channels, checked at build);
            // dW overlaps neither.
            unsafe {
                match self.path {
                    Path::DotProducts => weights::backward_weights(&p, self.dots, WeightsSplit::choose(&p, threads)),
                    Path::ChannelLanes => weights_lanes::backward_weights(&p, &self.lanes, threads),
                }
            }
        }
        Ok(())
    }
}
