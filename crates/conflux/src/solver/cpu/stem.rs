//! Networks' stems (forward f32, ungrouped, ≤ 4 input channels, overlapping windows: 3-channel
//! 3×3 s2, 7×7 s2) as a direct kernel over bands of output rows (`backend/cpu/direct/stem.rs`), where
//! the im2col GEMM spent them on strided gathers and a 27–147-deep reduction.

use super::common::{f32_geometry, run_parts};
use crate::backend::cpu::direct::stem::{self as kernel, StemLayout};
use crate::backend::cpu::tensor_io::conv_out::spatial_offsets;
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::error::{Error, Result};
use crate::problem::{FusedProblem, Geom};
use crate::solver::{BuildContext, Invoker, RunArgs, Solver};
use crate::types::ConvAlgorithm;
use std::sync::Arc;

/// Fewest output channels: with fewer, a register block of channels is mostly empty.
const MIN_OUTPUTS: usize = 8;

pub struct CpuStem;

fn layout(problem: &FusedProblem) -> std::result::Result<StemLayout, String> {
    let (_, g) = f32_geometry(problem, true)?;
    if !g.is_2d() {
        return Err("2-D convolutions only".into());
    }
    if g.groups != 1 || g.c > kernel::MAX_CHANNELS {
        return Err(format!("ungrouped layers of at most {} input channels only ({} channels, {} groups)", kernel::MAX_CHANNELS, g.c, g.groups));
    }
    if g.k < MIN_OUTPUTS {
        return Err(format!("{} output channels (at least {MIN_OUTPUTS})", g.k));
    }
    if g.dilation != [1, 1, 1] {
        return Err(format!("dilation {:?} (dense filters only)", &g.dilation[1..]));
    }
    if g.stride[1] >= g.filter[1] && g.stride[2] >= g.filter[2] {
        // (ConvNeXt's 4×4 s4 measured 290 µs here against 210 on the im2col GEMM.)
        return Err("windows that do not overlap (patches): the im2col GEMM's matrix is x rearranged, with no gathers to save".into());
    }
    if g.filter[1] * g.filter[2] < 4 {
        return Err("filters of fewer than 4 taps (the 1×1 and GEMM solvers take them)".into());
    }
    StemLayout::of(&g).ok_or_else(|| format!("a band of input rows exceeds {} floats (width {}, padding {:?}, stride {:?})", kernel::MAX_BAND_FLOATS, g.input[2], &g.pad[1..], &g.stride[1..]))
}

struct StemInvoker {
    problem: FusedProblem,
    layout: StemLayout,
    /// Offset of every output pixel in a y plane, made once (the stores need it per row).
    sp_off: Vec<usize>,
}

impl Solver for CpuStem {
    fn name(&self) -> &'static str { "CpuConvStem" }
    fn solution_id(&self) -> u64 { 21 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Direct }
    fn device(&self) -> DeviceKind { DeviceKind::Cpu }

    fn check(&self, problem: &FusedProblem, _device: &DeviceInfo) -> std::result::Result<(), String> { layout(problem).map(|_| ()) }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // Vector FMAs at about 100 GFLOP/s on a small VM, and moving x and y.
        problem.conv_problem().map_or(f64::MAX, |c| 2.0 * c.macs() / 100e9 * 1e3 + (c.x.num_bytes() + c.y.num_bytes()) as f64 / 10e9 * 1e3)
    }

    fn build(&self, problem: &FusedProblem, _ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let layout = layout(problem).map_err(|why| Error::not_implemented(format!("{}: {why}", self.name())))?;
        let conv = problem.conv_problem().ok_or_else(|| Error::internal("CpuConvStem: not a convolution"))?;
        let g = Geom::of(conv);
        let sp_off = spatial_offsets(g.output, g.y_strides);
        Ok(Arc::new(StemInvoker { problem: problem.clone(), layout, sp_off }))
    }
}

impl Invoker for StemInvoker {
    fn run(&self, _ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let (g, _, r): (Geom, _, _) = run_parts(&self.problem, a, "CpuConvStem")?;
        kernel::forward(&g, &self.layout, &self.sp_off, r.ptrs, r.alpha, r.beta, &r.epi);
        Ok(())
    }
}
