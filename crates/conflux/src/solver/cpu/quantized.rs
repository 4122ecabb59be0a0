//! int8 and fp8 forward convolutions (`quant.rs`) on the CPU: exact i32 sums of int8
//! products (AVX-512 VNNI blocks of 16 filters, else AVX2 `madd`), f32 sums of fp8 values
//! decoded on load, any
//! geometry and layout, the fused epilogue in f32 and the output conversion. The only CPU
//! solver `registry::verdict` lets quantized problems reach.
//!
//! fp8 runs in this solver rather than by converting x and w to f32 copies for an f32
//! solver: the conversion happens in the patch gather it needs anyway (no tensor-sized
//! scratch), and the fp8 output conversion with stochastic rounding stays in one place.

use crate::backend::cpu::pointwise::epilogue::CpuEpilogue;
use crate::backend::cpu::quant::{forward, QuantRun};
use crate::backend::cpu::weight_cache::WeightCache;
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::error::{Error, Result};
use crate::problem::{FusedKind, FusedProblem, Geom};
use crate::quant::Quant;
use crate::solver::{BuildContext, Invoker, RunArgs, Solver};
use crate::types::{ConvAlgorithm, ConvAttrib};
use std::sync::Arc;

pub struct CpuQuantized;

struct QuantInvoker {
    problem: FusedProblem,
    geom: Geom,
    quant: Quant,
    /// int8 filter rows kept under the constant-weights promise.
    filters: Option<WeightCache<i32>>,
}

impl Solver for CpuQuantized {
    fn name(&self) -> &'static str { "CpuConvQuantized" }
    fn solution_id(&self) -> u64 { 17 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::ImplicitGemm }
    fn device(&self) -> DeviceKind { DeviceKind::Cpu }
    fn computes_quantized(&self) -> bool { true }

    fn check(&self, problem: &FusedProblem, _device: &DeviceInfo) -> std::result::Result<(), String> { problem.quantized_conv().map(|_| ()) }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // About 4 GMAC/s per core for int8 with AVX2; fp8 (f32 sums) about half.
        problem.conv_problem().map(|c| c.macs() / 6e9 * 1e3).unwrap_or(f64::MAX)
    }

    fn build(&self, problem: &FusedProblem, _ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let conv = problem.conv_problem().ok_or_else(|| Error::internal("CpuConvQuantized: not a convolution"))?;
        let quant = conv.quant().ok_or_else(|| Error::internal("CpuConvQuantized: not an int8 or fp8 convolution"))?;
        Ok(Arc::new(QuantInvoker { problem: problem.clone(), geom: Geom::of(conv), quant, filters: WeightCache::if_promised(problem) }))
    }
}

impl Invoker for QuantInvoker {
    fn run(&self, _ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let FusedKind::Conv { conv, epilogue } = &self.problem.kind else {
            return Err(Error::internal("CpuConvQuantized: not a convolution"));
        };
        let epi = CpuEpilogue::new(epilogue, a.ops, &conv.y, 1)?;
        let run = QuantRun {
            x: a.x.0,
            w: a.w.0,
            y: a.y.0,
            y_dtype: conv.y.dtype(),
            alpha: a.alpha as f32,
            beta: a.beta as f32,
            epi: &epi,
            stochastic: conv.conv.attribute(ConvAttrib::Fp8RoundingMode) == 1,
            filters: self.filters.as_ref(),
            w_bytes: conv.w.num_bytes(),
        };
        forward(&self.geom, self.quant, &run);
        Ok(())
    }
}
