//! Winograd F(4×4, 3×3) forward convolution on the CPU (`backend/cpu/wino4.rs`): 2-D, 3×3,
//! stride 1, dilation 1, any padding, groups, layout and type, with the fused epilogue.
//! 4× fewer multiplies than direct per output (F(2×2): 2.25×). Backward-data is not
//! implemented (the GEMM solver serves it).

use super::cpu_winograd::{winograd_check, WinogradInvoker};
use super::{Invoker, Solver};
use crate::backend::cpu::wino4;
use crate::error::Result;
use crate::fusion::FusedProblem;
use crate::handle::{DeviceKind, Handle};
use crate::types::ConvAlgorithm;
use std::sync::Arc;
/// Most filters (C/G·K/G) per 4×4 output tile (all images): the filters are transformed on
/// every call (no weight cache), and beyond this that costs more than the multiplies it saves
/// (measured 2026-11-21, N=1: 512-7-7-512 at 65536 per tile 1.25 ms vs implicit GEMM 1.7 ms;
/// 1024-7-7-1024 and 512-4-4-512 at 262144 per tile 5.2 vs 6.7 ms and 1.02 vs 0.95 ms).
const MAX_FILTERS_PER_TILE: usize = 262144;

pub struct CpuWinograd4;

impl Solver for CpuWinograd4 {
    fn name(&self) -> &'static str { "CpuConvWinogradF4x3" }
    fn solution_id(&self) -> u64 { 7 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Winograd }
    fn device(&self) -> DeviceKind { DeviceKind::Cpu }

    fn check(&self, problem: &FusedProblem, _handle: &Handle) -> std::result::Result<(), String> {
        let g = winograd_check(problem)?;
        let tiles = g.n * g.output[1].div_ceil(4) * g.output[2].div_ceil(4);
        if g.cg() * g.kg() > MAX_FILTERS_PER_TILE * tiles {
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
        Ok(Arc::new(WinogradInvoker { problem: problem.clone(), name: self.name(), forward: wino4::forward }))
    }
}
