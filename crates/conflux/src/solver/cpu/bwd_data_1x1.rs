//! Backward-data of 1×1 stride-1 unpadded f32 layers with channels-first dx and dy: per image
//! and group dx (C × HW) = Wᵀ (C × K) · dy (K × HW), the forward 1×1 convolution of dy with the
//! filter transposed, on the positions-in-lanes tiles (`conv1x1::positions`). They read dy, W
//! and dx in place: Wᵀ is W with its filter and channel strides swapped, not a copy (the
//! rewrite through a copied filter and the registry's forward choice was slower than the GEMM
//! path; bench/results/2026-11-29-cpu-bwd-zoo-n8/bwd-data-1x1-as-forward.md). The generic GEMM
//! path packs dy into panels first, a copy of the layer's largest operand.
//!
//! α = 1, β = 0 is the fast path; other α/β (known only at run time) go through the GEMM
//! backward-data (`im2col::backward::backward_data`), which blends them in.

use super::common::{f32_geometry, run_parts};
use super::gemm1x1::{not_pointwise, position_stride};
use crate::backend::cpu::clamp::Clamp;
use crate::backend::cpu::conv1x1::channels::Problem;
use crate::backend::cpu::conv1x1::positions::{self, PosSplit, MAX_W_BYTES};
use crate::backend::cpu::conv1x1::positions_kernel::{self, PosKernels};
use crate::backend::cpu::im2col::backward::backward_data;
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::error::{Error, Result};
use crate::problem::{FusedProblem, Geom};
use crate::solver::{BuildContext, Invoker, RunArgs, Solver};
use crate::types::{ConvAlgorithm, Direction};
use std::sync::Arc;

pub struct CpuConv1x1BwdData;

/// The geometry, or why the tiles do not take the problem.
fn geometry(problem: &FusedProblem) -> std::result::Result<Geom, String> {
    let (conv, g) = f32_geometry(problem, false)?;
    if conv.direction != Direction::BackwardData {
        return Err(format!("backward-data only (this is {:?})", conv.direction));
    }
    if !problem.epilogue().is_empty() {
        return Err("an epilogue (fused transpose convolution)".into());
    }
    if let Some(why) = not_pointwise(&g) {
        return Err(why);
    }
    // dy is the tiles' x and dx their y: both need their positions consecutive.
    if position_stride(g.x_strides, g.input) != Some(1) || position_stride(g.y_strides, g.output) != Some(1) {
        return Err("dx or dy does not have its positions consecutive (channels-first)".into());
    }
    // The tiles read a filter's values either consecutively or, transposed, each filter's
    // value of one channel consecutively (the rewrite's filters are W's channels).
    if g.w_strides[0] != 1 && g.w_strides[1] != 1 {
        return Err(format!("the filter's strides ({}, {}) put neither its channels nor its filters next to each other", g.w_strides[0], g.w_strides[1]));
    }
    if g.kg() * g.cg() * 4 > MAX_W_BYTES {
        return Err(format!("a group's filter ({} × {} values) does not stay in L2 while every tile reads it", g.kg(), g.cg()));
    }
    Ok(g)
}

/// The forward 1×1 problem of group `group`: x = dy (K channels), W transposed, y = dx (C).
fn transposed_problem(g: &Geom, dx: u64, w: u64, dy: u64, group: usize) -> Problem {
    let (kg, cg, ws) = (g.kg(), g.cg(), g.w_strides);
    Problem {
        n: g.n,
        c: kg,
        k: cg,
        hw: g.output_size(),
        x: (dy as *const f32).wrapping_add(group * kg * g.y_strides[1]),
        xs: [g.y_strides[0], g.y_strides[1]],
        xp: 1,
        // Filter i of the rewrite is input channel i; its "channel" k is filter k.
        w: (w as *const f32).wrapping_add(group * kg * ws[0]),
        ws0: ws[1],
        wc: ws[0],
        y: (dx as *mut f32).wrapping_add(group * cg * g.x_strides[1]),
        ys: [g.x_strides[0], g.x_strides[1]],
        yp: 1,
        bias: std::ptr::null(),
        relu: Clamp::NONE,
    }
}

impl Solver for CpuConv1x1BwdData {
    fn name(&self) -> &'static str { "CpuConv1x1BwdData" }
    fn solution_id(&self) -> u64 { 28 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Gemm }
    fn device(&self) -> DeviceKind { DeviceKind::Cpu }

    fn check(&self, problem: &FusedProblem, device: &DeviceInfo) -> std::result::Result<(), String> {
        if device.kind != DeviceKind::Cpu {
            return Err("runs on the CPU".into());
        }
        geometry(problem)?;
        if positions_kernel::best().is_none() {
            return Err("needs AVX-512".into());
        }
        Ok(())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // ~200 GFLOP/s on 2 AVX-512 cores.
        problem.conv_problem().map_or(f64::MAX, |c| 2.0 * c.macs() / 200e9 * 1e3 + 0.01)
    }

    fn build(&self, problem: &FusedProblem, _ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        geometry(problem).map_err(|why| Error::not_implemented(format!("{}: {why}", self.name())))?;
        let kern = positions_kernel::best().ok_or_else(|| Error::unsupported(format!("{}: needs AVX-512", self.name())))?;
        Ok(Arc::new(TransposedInvoker { problem: problem.clone(), kern }))
    }
}

struct TransposedInvoker {
    problem: FusedProblem,
    kern: PosKernels,
}

impl Invoker for TransposedInvoker {
    fn run(&self, _ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let (g, _, r) = run_parts(&self.problem, a, "CpuConv1x1BwdData")?;
        if r.alpha != 1.0 || r.beta != 0.0 {
            backward_data(&g, r.ptrs, r.alpha, r.beta, &r.epi);
            return Ok(());
        }
        let threads = rayon::current_num_threads();
        for group in 0..g.groups {
            let p = transposed_problem(&g, r.ptrs.x, r.ptrs.w, r.ptrs.y, group);
            // SAFETY: the API validated dx, w and dy against the problem's descriptors; `p`
            // addresses group `group`'s channels of each with their strides (dx and dy with
            // consecutive positions, checked at build); dx does not overlap dy or w.
            unsafe { positions::forward(&p, &self.kern, PosSplit::choose(&p, threads)) };
        }
        Ok(())
    }
}
