//! Strided 1×1 forward f32 convolutions (ResNet's downsampling shortcuts: 1024-14-14 → 2048
//! stride 2) as a 1×1 stride-1 convolution over a packed copy of the input positions they read
//! (a quarter of x at stride 2). The 1×1 solvers need consecutive positions; over the strided
//! input the implicit GEMM gathered every column instead. The copy is written once per call;
//! the inner problem writes the caller's y with the whole epilogue.

use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::conv_desc::ConvDesc;
use crate::error::{Error, Result};
use crate::memory::DevPtr;
use crate::problem::{ConvProblem, FusedKind, FusedProblem, Geom};
use crate::solver::registry;
use crate::solver::{BuildContext, Invoker, RunArgs, Solver};
use crate::tensor::TensorDesc;
use crate::types::{ConvAlgorithm, ConvMode, DataType, Direction};
use rayon::prelude::*;
use std::sync::Arc;

/// Fewest input channels per group: the product is a GEMM.
const MIN_CHANNELS: usize = 16;

pub struct CpuSubsample1x1;

/// The stride-1 problem over the packed positions, or why not.
fn rewrite(problem: &FusedProblem) -> std::result::Result<FusedProblem, String> {
    let FusedKind::Conv { conv, epilogue } = &problem.kind else { return Err("not a convolution problem".into()) };
    if conv.direction != Direction::Forward || conv.conv.mode() != ConvMode::Convolution {
        return Err(format!("forward convolution only (this is {:?})", conv.direction));
    }
    if conv.dtype() != DataType::Float {
        return Err(format!("f32 only (this is {:?})", conv.dtype()));
    }
    let d = &conv.conv;
    if conv.spatial_dims() != 2 || conv.filter() != [1, 1] || d.pads() != [0, 0] || d.pads_end() != [0, 0] {
        return Err("2-D 1×1 unpadded filters only".into());
    }
    if d.strides() == [1, 1] {
        return Err("stride 1 (the 1×1 solvers read it in place)".into());
    }
    let cg = conv.w.lens()[1];
    if cg < MIN_CHANNELS {
        return Err(format!("{cg} input channels per group (at least {MIN_CHANNELS}: depthwise and small groups have their own kernels)"));
    }
    let yl = conv.y.lens();
    let err = |e: crate::error::Error| e.reason;
    let x2 = TensorDesc::new(DataType::Float, &[yl[0], conv.x.c(), yl[2], yl[3]]).map_err(err)?;
    let mut one = ConvDesc::new(ConvMode::Convolution, &[0, 0], &[1, 1], &[1, 1]).map_err(err)?;
    one.set_groups(conv.groups() as i64).map_err(err)?;
    one.copy_attributes(d);
    let inner = ConvProblem::forward(&one, &x2, &conv.w, &conv.y).map_err(err)?;
    Ok(FusedProblem { kind: FusedKind::Conv { conv: inner, epilogue: epilogue.clone() } })
}

impl Solver for CpuSubsample1x1 {
    fn name(&self) -> &'static str { "CpuConvSubsample1x1" }
    fn solution_id(&self) -> u64 { 20 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Gemm }
    fn device(&self) -> DeviceKind { DeviceKind::Cpu }

    fn check(&self, problem: &FusedProblem, device: &DeviceInfo) -> std::result::Result<(), String> {
        let inner = rewrite(problem)?;
        inner_solver(&inner, device).map(|_| ())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // The products at about 200 GFLOP/s plus the copy.
        problem.conv_problem().map_or(f64::MAX, |c| 2.0 * c.macs() / 200e9 * 1e3 + 0.01)
    }

    fn build(&self, problem: &FusedProblem, ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let inner = rewrite(problem).map_err(|why| Error::not_implemented(format!("{}: {why}", self.name())))?;
        let solver = inner_solver(&inner, ctx.device().info()).map_err(|why| Error::not_implemented(format!("{}: {why}", self.name())))?;
        let run = solver.build(&inner, ctx)?;
        let conv = problem.conv_problem().ok_or_else(|| Error::internal("subsample 1×1: not a convolution"))?;
        Ok(Arc::new(Subsample1x1Invoker { run, geom: Geom::of(conv) }))
    }
}

/// The 1×1 solver that runs the packed problem: the first without workspace that reads
/// consecutive positions (not the implicit GEMM, which would gather them again).
fn inner_solver(inner: &FusedProblem, device: &DeviceInfo) -> std::result::Result<&'static dyn Solver, String> {
    registry::walk(inner, device, |e| matches!(e.solver.name(), "CpuConvGemm1x1" | "CpuConvAmx1x1" | "CpuConvSinglePixel"))
        .find(|s| s.verdict.is_ok() && s.solver.workspace_bytes(inner) == 0)
        .map(|s| s.solver)
        .ok_or_else(|| "no 1×1 solver takes the packed problem".into())
}

struct Subsample1x1Invoker {
    run: Arc<dyn Invoker>,
    geom: Geom,
}

impl Invoker for Subsample1x1Invoker {
    fn run(&self, ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let g = &self.geom;
        let [_, oh, ow] = g.output;
        let mut x2 = vec![0f32; g.n * g.c * oh * ow];
        let (xs, [_, sh, sw], xa) = (g.x_strides, g.stride, a.x.0 as usize);
        x2.par_chunks_mut(oh * ow).enumerate().for_each(|(plane, out)| {
            let src = (xa as *const f32).wrapping_add((plane / g.c) * xs[0] + (plane % g.c) * xs[1]);
            for (i, row) in out.chunks_exact_mut(ow).enumerate() {
                for (j, v) in row.iter_mut().enumerate() {
                    // SAFETY: (n, c, i·sh, j·sw) is an element of the caller's validated x.
                    *v = unsafe { *src.add(i * sh * xs[3] + j * sw * xs[4]) };
                }
            }
        });
        self.run.run(ctx, &RunArgs { x: DevPtr(x2.as_ptr() as u64), ..*a })
    }
}
