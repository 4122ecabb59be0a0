//! Backward-data of patch layers — stride equal to the filter, no padding, no dilation (the
//! patchify stems and downsampling layers of ConvNeXt, Swin and ViT) — as one GEMM. Their
//! patches tile dx without overlap, so dx seen as patches is dY · W: rows (n, oh, ow), columns
//! (filter row r, filter column s, channel c), with W the caller's KRSC filter as it lies
//! (a K × fy·fx·C matrix, read in place as the MN-major B of the TMA kernel). Column (r, s, c)
//! of row (n, oh, ow) is dx[n, oh·fy + r, ow·fx + s, c]: the fx·C columns of one filter row are
//! one run of a dx row, the fy runs one dx row apart (`ChannelRuns`). One launch reads dy once;
//! the phase solvers read it once per phase and launch fy·fx times.
//!
//! Pointers the copy engine cannot use run on the next solver of the list that takes the
//! problem without workspace (the phase solvers).

use super::igemm_tma::{ChannelRuns, CudaConvIgemmTma, FilterSource};
use super::phased::backward_data_conv;
use super::tensor_core::{tensor_core_precision, TcPrecision};
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::conv_desc::ConvDesc;
use crate::error::{Error, Result};
use crate::problem::{ConvProblem, FusedProblem, TapAxis, TapMap};
use crate::solver::registry::first_without_workspace;
use crate::solver::{BuildContext, Invoker, RunArgs, Solver};
use crate::tensor::TensorDesc;
use crate::types::{ConvAlgorithm, ConvMode, Layout};
use std::sync::{Arc, OnceLock};

struct Plan {
    /// The GEMM as a forward 1×1 convolution: x = dy, w = W (fy·fx·C outputs), y = dx seen as
    /// patches (its channel runs in `runs`).
    forward: FusedProblem,
    filter: FilterSource,
    runs: ChannelRuns,
}

fn plan(problem: &FusedProblem, device: &DeviceInfo) -> std::result::Result<Plan, String> {
    let conv = backward_data_conv(problem)?;
    let d = &conv.conv;
    if conv.spatial_dims() != 2 {
        return Err("2-D layers only".into());
    }
    let (fy, fx) = (conv.filter()[0], conv.filter()[1]);
    if d.strides() != [fy, fx] || fy * fx == 1 {
        return Err(format!("stride {:?} is not the filter {fy}×{fx} (patches that tile dx)", d.strides()));
    }
    if d.pads().iter().chain(d.pads_end()).any(|&p| p != 0) || d.dilations().iter().any(|&v| v != 1) {
        return Err("padded or dilated: patches overlap the border".into());
    }
    if conv.groups() != 1 {
        return Err("grouped: one GEMM per group".into());
    }
    if tensor_core_precision(conv)? != TcPrecision::Bits16 {
        return Err("16-bit data only (W is read in place)".into());
    }
    let (dx, dy, w) = (&conv.x, &conv.y, &conv.w);
    let (n, c, k) = (dx.n(), dx.c(), conv.k());
    let (h, wd) = (dx.lens()[2], dx.lens()[3]);
    if h % fy != 0 || wd % fx != 0 {
        return Err(format!("dx {h}×{wd} is not a whole number of {fy}×{fx} patches"));
    }
    let xs = dx.strides();
    if xs[1] != 1 || xs[3] != c {
        return Err("dx must be channels-last with contiguous pixels in a row".into());
    }
    let ws = w.strides();
    if ws[1] != 1 || ws[3] != c || ws[2] != fx * c || ws[0] % 8 != 0 {
        return Err("w must be KRSC with each filter's taps and channels contiguous and 16-byte aligned rows".into());
    }
    let cols = fy * fx * c;
    if (fx * c) % 2 != 0 || cols % 8 != 0 {
        return Err(format!("a patch row of {} values (pairs and 16-byte boxes need even runs, 8 per patch)", fx * c));
    }
    let err = |e: Error| e.reason;
    let dt = conv.dtype();
    let patches = TensorDesc::with_strides(dt, &[n, cols, h / fy, wd / fx], &[xs[0], 1, fy * xs[2], fx * xs[3]]).map_err(err)?;
    let w_fwd = TensorDesc::with_layout(dt, Layout::NHWC, &[cols, k, 1, 1]).map_err(err)?;
    let mut one = ConvDesc::new(ConvMode::Convolution, &[0, 0], &[1, 1], &[1, 1]).map_err(err)?;
    one.copy_attributes(d);
    let forward = FusedProblem::conv(ConvProblem::forward(&one, dy, &w_fwd, &patches).map_err(err)?);
    CudaConvIgemmTma.check(&forward, device).map_err(|why| format!("the TMA kernel refuses the GEMM ({why})"))?;
    let single = TapAxis { first: 0, step: 1, count: 1 };
    let taps = TapMap { axes: [single; 3], src: [1; 3] };
    Ok(Plan { forward, filter: FilterSource::Flipped { rows: k, row_elems: ws[0], taps }, runs: ChannelRuns { channels: fx * c, stride: xs[2] } })
}

pub struct CudaConvBwdDataPatch;

impl Solver for CudaConvBwdDataPatch {
    fn name(&self) -> &'static str { "CudaConvBwdDataPatch" }
    fn solution_id(&self) -> u64 { 131 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::ImplicitGemm }
    fn device(&self) -> DeviceKind { DeviceKind::Cuda }

    fn check(&self, problem: &FusedProblem, device: &DeviceInfo) -> std::result::Result<(), String> {
        plan(problem, device).map(|_| ())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // The GEMM does the problem's products in one launch.
        CudaConvIgemmTma.estimate_ms(problem)
    }

    fn build(&self, problem: &FusedProblem, ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let p = plan(problem, ctx.device().info()).map_err(|why| Error::not_implemented(format!("{}: {why}", self.name())))?;
        let gemm = CudaConvIgemmTma.build_flipped_runs(&p.forward, ctx, None, p.filter, Some(p.runs))?;
        Ok(Arc::new(PatchInvoker { gemm, fallback: OnceLock::new(), problem: problem.clone() }))
    }
}

struct PatchInvoker {
    gemm: Arc<dyn Invoker>,
    /// The next solver's plan, built on first need for pointers the copy engine cannot use.
    fallback: OnceLock<Result<Arc<dyn Invoker>>>,
    problem: FusedProblem,
}

impl Invoker for PatchInvoker {
    fn run(&self, ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        // Backward-data arguments: x = dx (written), y = dy; the GEMM reads dy and writes dx.
        if a.x.0 % 16 == 0 && a.y.0 % 16 == 0 && a.w.0 % 16 == 0 {
            return self.gemm.run(ctx, &RunArgs { x: a.y, y: a.x, ..*a });
        }
        let fallback = self
            .fallback
            .get_or_init(|| {
                let device = ctx.device();
                let next = first_without_workspace(&self.problem, device.info(), |e| e.solver.solution_id() != CudaConvBwdDataPatch.solution_id())
                    .map_err(|why| Error::not_implemented(format!("{}: unaligned pointers and no other solver ({why})", CudaConvBwdDataPatch.name())))?;
                next.build(&self.problem, device)
            })
            .as_ref()
            .map_err(Clone::clone)?;
        fallback.run(ctx, a)
    }
}
