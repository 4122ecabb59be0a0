//! Backward-data of stride-1 depthwise f32 layers as the forward convolution it is: dx =
//! conv(dy, w') where w' reverses each filter's taps and the padding becomes dilation·(taps − 1)
//! − pad (`ConvProblem::backward_data_as_forward`), run on the first CPU solver that takes that
//! forward problem without workspace — the flat-plane and block kernels, which read
//! channels-first planes in place, where the direct solver's backward loops pad a copy of every
//! plane and run scalar. w' is a copy of the caller's filter made per call.

use super::common::f32_geometry;
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::error::{Error, Result};
use crate::memory::DevPtr;
use crate::problem::{FusedKind, FusedProblem};
use crate::solver::registry::first_without_workspace;
use crate::solver::{BuildContext, Invoker, RunArgs, Solver};
use crate::tensor::TensorDesc;
use crate::types::{ConvAlgorithm, ConvAttrib, Direction, Layout};
use std::sync::Arc;

pub struct CpuDepthwiseBwdData;

const ID: u64 = 26;

/// The forward problem dx = conv(dy, w') (epilogue kept) and the solver that runs it.
fn rewrite(problem: &FusedProblem, device: &DeviceInfo) -> std::result::Result<(FusedProblem, &'static dyn Solver), String> {
    let (conv, g) = f32_geometry(problem, false)?;
    if conv.direction != Direction::BackwardData {
        return Err(format!("backward-data only (this is {:?})", conv.direction));
    }
    if g.groups == 1 || g.cg() != 1 {
        return Err(format!("depthwise (one input channel per group) only ({} groups, {} channels)", g.groups, g.c));
    }
    if g.stride != [1; 3] {
        return Err(format!("stride {:?}: only stride 1 is a forward convolution of dy", &g.stride[3 - conv.spatial_dims()..]));
    }
    let mut forward = conv.backward_data_as_forward(Layout::NCHW)?;
    // w' is a new copy per call, often at the previous call's address: a forward solver keeping
    // transformed filters by address under the constant-weights promise must not see it.
    forward.conv.set_attribute(ConvAttrib::ConstantWeights, 0).map_err(|e| e.reason)?;
    let fp = FusedProblem { kind: FusedKind::Conv { conv: forward, epilogue: problem.epilogue().to_vec() } };
    let inner = first_without_workspace(&fp, device, |e| e.solver.solution_id() != ID).map_err(|why| format!("no solver takes dx = conv(dy, w') ({why})"))?;
    Ok((fp, inner))
}

impl Solver for CpuDepthwiseBwdData {
    fn name(&self) -> &'static str { "CpuConvDepthwiseBwdData" }
    fn solution_id(&self) -> u64 { ID }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::Direct }
    fn device(&self) -> DeviceKind { DeviceKind::Cpu }

    fn check(&self, problem: &FusedProblem, device: &DeviceInfo) -> std::result::Result<(), String> {
        if device.kind != DeviceKind::Cpu {
            return Err("runs on the CPU".into());
        }
        rewrite(problem, device).map(|_| ())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 { super::depthwise_flat::estimate_flat(problem) }

    fn build(&self, problem: &FusedProblem, ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let (forward, inner) = rewrite(problem, ctx.device().info()).map_err(|why| Error::not_implemented(format!("{}: {why}", self.name())))?;
        let conv = problem.conv_problem().ok_or_else(|| Error::internal(format!("{}: not a convolution", self.name())))?;
        Ok(Arc::new(FlippedInvoker { inner: inner.build(&forward, ctx)?, w: conv.w.clone(), groups: conv.groups() }))
    }
}

struct FlippedInvoker {
    inner: Arc<dyn Invoker>,
    /// The caller's filter: K × CG × taps.
    w: TensorDesc,
    groups: usize,
}

impl Invoker for FlippedInvoker {
    fn run(&self, ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        let flipped = flipped_filter(&self.w, self.groups, a.w.0 as *const f32);
        // Backward-data arguments: x = dx (written), y = dy; the forward reads dy, writes dx.
        self.inner.run(ctx, &RunArgs { x: a.y, w: DevPtr(flipped.as_ptr() as u64), y: a.x, ..*a })
    }
}

/// w' packed KCRS: w'[g·CG + c][k][T − 1 − t] = w[g·KG + k][c][t] (the caller's K filters of CG
/// channels become CG·groups filters of KG channels, taps reversed).
fn flipped_filter(w: &TensorDesc, groups: usize, src: *const f32) -> Vec<f32> {
    let l = w.lens();
    let (k_all, cg) = (l[0], l[1]);
    let kg = k_all / groups;
    let taps: usize = l[2..].iter().product();
    let mut out = vec![0.0f32; k_all * cg * taps];
    let mut index = vec![0usize; l.len()];
    for k in 0..k_all {
        let (g, kk) = (k / kg, k % kg);
        index[0] = k;
        for c in 0..cg {
            index[1] = c;
            let row = ((g * cg + c) * kg + kk) * taps;
            for t in 0..taps {
                let mut rest = t;
                for d in (2..l.len()).rev() {
                    index[d] = rest % l[d];
                    rest /= l[d];
                }
                // SAFETY: the caller's filter holds every element its descriptor addresses (the
                // API validated the pointer against it).
                out[row + taps - 1 - t] = unsafe { *src.add(w.offset(&index)) };
            }
        }
    }
    out
}
