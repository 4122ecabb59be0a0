//! GEMM convolution on the CPU (packed f32 GEMM, `backend/cpu/gemm`), every direction, any
//! geometry, groups, layout and type:
//! - forward: explicit im2col per image into the caller's workspace + GEMM; 1×1 stride-1
//!   pad-0 convolutions read x directly and need no workspace;
//! - backward-data: GEMM into a column buffer + col2im; backward-weights: GEMM with the batch
//!   folded into K. Both keep their buffers in internal per-thread scratch (like oneDNN's
//!   library scratchpad), so they report no workspace.
//!
//! Fusion plans have no workspace argument: a forward run given too little workspace uses
//! internal scratch instead.

use super::common::{conv_of, run_parts};
use crate::solver::{Invoker, RunArgs, Solver};
use crate::backend::cpu::gemm::{with_scratch, Slot};
use crate::backend::cpu::im2col::{self as conv_gemm, backward as conv_gemm_bwd};
use crate::problem::Geom;
use crate::error::Result;
use crate::problem::FusedProblem;
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::solver::BuildContext;
use crate::types::{ConvAlgorithm, Direction};
use std::sync::Arc;

pub struct CpuGemm;

struct GemmInvoker {
    problem: FusedProblem,
}

/// A 1×1 filter with stride 1 and no padding: im2col is the input itself.
fn is_pointwise(g: &Geom) -> bool {
    g.filter == [1, 1, 1] && g.stride == [1, 1, 1] && g.pad == [0, 0, 0] && g.pad_end == [0, 0, 0]
}

/// f32 elements of the forward im2col buffer (0 when none is needed).
fn fwd_ws_elems(problem: &FusedProblem) -> usize {
    match problem.conv_problem() {
        Some(c) if c.direction == Direction::Forward => {
            let g = Geom::of(c);
            if is_pointwise(&g) { 0 } else { conv_gemm::im2col_len(&g) }
        }
        _ => 0,
    }
}

impl Solver for CpuGemm {
    fn name(&self) -> &'static str { "CpuConvGemm" }
    fn solution_id(&self) -> u64 { 5 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Gemm }
    fn device(&self) -> DeviceKind { DeviceKind::Cpu }

    fn check(&self, problem: &FusedProblem, _device: &DeviceInfo) -> std::result::Result<(), String> {
        conv_of(problem).map(|_| ())
    }

    fn workspace_bytes(&self, problem: &FusedProblem) -> usize { 4 * fwd_ws_elems(problem) }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // ~150 GFLOP/s on 2 AVX-512 cores, plus one pass over the im2col buffer.
        let Some(c) = problem.conv_problem() else { return f64::MAX };
        (2.0 * c.macs() / 150e9 + fwd_ws_elems(problem) as f64 * 4.0 / 10e9) * 1e3 + 0.01
    }

    fn build(&self, problem: &FusedProblem, _ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        Ok(Arc::new(GemmInvoker { problem: problem.clone() }))
    }
}

impl Invoker for GemmInvoker {
    fn run(&self, _ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let (g, dir, r) = run_parts(&self.problem, a, "CpuConvGemm")?;
        match dir {
            Direction::Forward => {
                let need = fwd_ws_elems(&self.problem);
                if need == 0 {
                    conv_gemm::forward(&g, r.ptrs, r.alpha, r.beta, &r.epi, conv_gemm::FwdB::Implicit);
                } else if a.workspace_bytes >= 4 * need && !a.workspace.is_null() && a.workspace.0.is_multiple_of(4) {
                    // SAFETY: the caller hands over `workspace_bytes` writable bytes for this run.
                    let ws = unsafe { std::slice::from_raw_parts_mut(a.workspace.0 as *mut f32, need) };
                    conv_gemm::forward(&g, r.ptrs, r.alpha, r.beta, &r.epi, conv_gemm::FwdB::Im2col(ws));
                } else {
                    with_scratch(Slot::Conv, need, |ws| {
                        conv_gemm::forward(&g, r.ptrs, r.alpha, r.beta, &r.epi, conv_gemm::FwdB::Im2col(ws))
                    });
                }
            }
            Direction::BackwardData => conv_gemm_bwd::backward_data(&g, r.ptrs, r.alpha, r.beta, &r.epi),
            Direction::BackwardWeights => conv_gemm_bwd::backward_weights(&g, r.ptrs, r.alpha, r.beta),
        }
        Ok(())
    }
}
