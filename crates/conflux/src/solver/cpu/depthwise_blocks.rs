//! Depthwise f32 forward on AVX-512 in blocks of 16 channels over staged, zero-padded bands of
//! input rows (`backend/cpu/direct/depthwise_blocks.rs`), either layout: channels fill the
//! lanes on every plane size, with no tap table and no per-row copy to channels-last and back.

use super::common::{f32_geometry, run_parts};
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::error::{Error, Result};
use crate::problem::{EpiOp, FusedProblem};
use crate::solver::{BuildContext, Invoker, RunArgs, Solver};
use crate::types::{ActivationMode, ConvAlgorithm, Direction};
use std::sync::Arc;

pub struct CpuDepthwiseBlocks;

/// Output planes (pixels) where channels-first layers gain from staging whatever the filter:
/// 14 × 14 and smaller.
const SMALL_PLANE: usize = 196;
/// Filters this long (5 × 5 and up) gain on every plane at stride 1.
const LONG_FILTER: usize = 25;
/// Strided channels-last layers gain only on the smallest planes (7 × 7 outputs).
const STRIDED_CHANNELS_LAST_PLANE: usize = 64;

#[cfg(target_arch = "x86_64")]
use crate::backend::cpu::direct::depthwise_blocks::{self as kernels, BlocksPlan};

#[cfg(target_arch = "x86_64")]
struct BlocksInvoker {
    problem: FusedProblem,
    plan: BlocksPlan,
}

impl Solver for CpuDepthwiseBlocks {
    fn name(&self) -> &'static str { "CpuConvDepthwiseBlocks" }
    fn solution_id(&self) -> u64 { 23 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Direct }
    fn device(&self) -> DeviceKind { DeviceKind::Cpu }

    fn check(&self, problem: &FusedProblem, device: &DeviceInfo) -> std::result::Result<(), String> {
        let (_, g) = f32_geometry(problem, true)?;
        #[cfg(target_arch = "x86_64")]
        let avx512 = device.cpu.avx512 && kernels::available();
        #[cfg(not(target_arch = "x86_64"))]
        let avx512 = {
            let _ = device;
            false
        };
        if !avx512 {
            return Err("needs AVX-512 (16-channel blocks in zmm registers)".into());
        }
        if g.groups == 1 || g.cg() != 1 || g.kg() != 1 {
            return Err(format!("depthwise with one output channel per group only ({} groups, {} → {} channels)", g.groups, g.c, g.k));
        }
        if !g.is_2d() {
            return Err("2-D convolutions only".into());
        }
        #[cfg(target_arch = "x86_64")]
        {
            if g.filter[1] > crate::backend::cpu::x86::depthwise_blocks::MAX_FILTER_ROWS {
                return Err(format!("{} filter rows (at most {})", g.filter[1], crate::backend::cpu::x86::depthwise_blocks::MAX_FILTER_ROWS));
            }
            if BlocksPlan::of(&g, 1).is_none() {
                return Err(format!("a padded input row would exceed {} floats (padding {:?}, stride {:?}, dilation {:?})", kernels::MAX_ROW_FLOATS, g.pad, g.stride, g.dilation));
            }
        }
        // Where it beats the older solvers (bench/results/2026-11-28-cpu-depthwise-blocks.md):
        // staging costs a copy or transposes of each input pixel, which pays where the
        // older kernels leave lanes empty (small planes) or the filter is long.
        let plane = g.output[1] * g.output[2];
        let strided = g.stride[1] > 1 || g.stride[2] > 1;
        let channels_first = g.x_strides[1] != 1 || g.y_strides[1] != 1;
        if channels_first && plane > SMALL_PLANE && !(g.filter_size() >= LONG_FILTER && !strided) {
            return Err(format!("channels-first planes of {}×{} outputs: CpuConvDepthwisePlanes runs them without transposes", g.output[1], g.output[2]));
        }
        if !channels_first && strided && plane > STRIDED_CHANNELS_LAST_PLANE {
            return Err(format!("strided channels-last with {}×{} outputs: CpuConvDepthwiseNhwc reads x in place, staging the band costs more", g.output[1], g.output[2]));
        }
        if g.y_strides[1] == 1 && g.c > 1 {
            // Channels-last outputs take bias and clamp from registers; a general epilogue would
            // go one element at a time, where the channels-last solver runs it per pixel.
            let (_, ops) = super::common::conv_of(problem)?;
            if let Some(op) = ops.iter().find(|op| !clamp_or_bias(op)) {
                return Err(format!("a channels-last output with a {} epilogue op: CpuConvDepthwiseNhwc applies it per pixel", op.letter()));
            }
        }
        Ok(())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // Moving x and y once and the vector FMAs at about the machine's FMA rate.
        problem.conv_problem().map_or(f64::MAX, |c| (c.x.num_bytes() + c.y.num_bytes()) as f64 / 10e9 * 1e3 + 2.0 * c.macs() / 100e9 * 1e3)
    }

    fn build(&self, problem: &FusedProblem, _ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        #[cfg(target_arch = "x86_64")]
        {
            let conv = problem.conv_problem().ok_or_else(|| Error::internal("CpuConvDepthwiseBlocks: not a convolution"))?;
            let g = crate::problem::Geom::of(conv);
            let plan = BlocksPlan::of(&g, rayon::current_num_threads()).ok_or_else(|| Error::internal("CpuConvDepthwiseBlocks: the plan its check accepted overflows"))?;
            Ok(Arc::new(BlocksInvoker { problem: problem.clone(), plan }))
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = problem;
            Err(Error::internal("CpuConvDepthwiseBlocks: built without x86-64"))
        }
    }
}

/// Bias, ReLU, CLIPPEDRELU (ReLU6) and PASSTHRU: what the kernel applies from registers.
fn clamp_or_bias(op: &EpiOp) -> bool {
    matches!(op, EpiOp::Bias { .. } | EpiOp::Activation { mode: ActivationMode::Relu | ActivationMode::ClippedRelu | ActivationMode::PassThru })
}

#[cfg(target_arch = "x86_64")]
impl Invoker for BlocksInvoker {
    fn run(&self, _ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let (g, dir, r) = run_parts(&self.problem, a, "CpuConvDepthwiseBlocks")?;
        if dir != Direction::Forward {
            return Err(Error::internal(format!("CpuConvDepthwiseBlocks: {dir:?} (forward only)")));
        }
        // SAFETY: the check found AVX-512 and this geometry, whose plan this is; run_parts
        // validated the pointers against the problem.
        unsafe { kernels::forward(&g, &self.plan, r.ptrs, r.alpha, r.beta, &r.epi) };
        Ok(())
    }
}
