//! Backward-data on tensor cores. With stride 1, the gradient of the input is itself a forward
//! convolution: dx = conv(dy, w') where w' swaps each group's input and output channels and
//! reverses the taps (w'[g·CG + c][k][t] = w[g·KG + k][c][T − 1 − t]) and the padding becomes
//! dilation·(taps − 1) − pad. This solver copies w' into channels-last scratch
//! (`layout::ChannelsFirst::flipped_filter`, one small pass) and runs the first forward
//! tensor-core solver that takes the rewritten problem (NCHW dy goes through the layout
//! adapter). α/β and the descriptor's attributes carry over unchanged: f32 runs on the TF32
//! kernel, as split TF32 products when the descriptor asks for strict f32.
//!
//! 16-bit problems whose filter keeps each output channel's taps and channels contiguous (KRSC,
//! or any 1×1) skip the copy — channels-last dy directly, NCHW dy through the layout adapter:
//! the TMA kernel reads w' straight out of the caller's w (each k-step's B tile is a block of
//! w's rows, MN-major; `FilterSource::Flipped`). The copy path stays for the rest, and for
//! pointers the copy engine cannot use.
//!
//! Scratch comes from the device's pool (or the caller's allocator), taken per execution
//! (safe for concurrent executions of one invoker); no workspace is reported.

use super::common::cuda_of;
use super::tensor_core::{tensor_core_precision, TcPrecision};
use super::igemm_tma::{is_3d, CudaConvIgemmTma, FilterSource};
use super::nchw_tc::CudaConvTcNchw;
use crate::solver::{Invoker, RunArgs, Solver};
use super::adapter;
use crate::backend::cuda::driver::Scratch;
use crate::backend::cuda::layout::{to_channels_last, ChannelsFirst};
use crate::backend::cuda::{timed, CudaBackend};
use crate::problem::{ConvProblem, Geom, TapMap};
use crate::error::{Error, Result};
use crate::problem::FusedProblem;
use crate::backend::{DeviceInfo, DeviceKind, RunContext};
use crate::solver::BuildContext;
use crate::memory::DevPtr;
use crate::types::{ConvAlgorithm, Layout};
use std::sync::{Arc, OnceLock};


struct Rewrite {
    /// dx = conv(dy, w') as a forward problem.
    forward: FusedProblem,
    solver: &'static dyn Solver,
    w: ChannelsFirst,
    /// The caller's w as the TMA kernel reads it in place, where it can.
    in_place: Option<FilterSource>,
}

/// w as the forward TMA kernel can read it flipped in place (the taps `taps` of it: all,
/// reversed, for stride 1): 16-bit, 2-D, channels contiguous after the taps of each output
/// channel, rows and each tap's channel block 16-byte aligned.
pub(crate) fn in_place_filter(conv: &ConvProblem, forward: &FusedProblem, solver: &dyn Solver, device: &DeviceInfo, taps: TapMap) -> Option<FilterSource> {
    // The TMA kernel itself, or through the NCHW adapter when it copies dy only.
    let kernel_takes = solver.name() == CudaConvIgemmTma.name() || (solver.name() == CudaConvTcNchw.name() && CudaConvTcNchw.takes_flipped(forward, device));
    if !kernel_takes || tensor_core_precision(conv) != Ok(TcPrecision::Bits16) {
        return None;
    }
    let g = Geom::of(conv);
    // The in-place read maps 2-D taps only; a 3-D rewrite (even of a 1 × 1 × 1 filter) copies.
    if forward.conv_problem().is_none_or(|f| is_3d(&Geom::of(f))) {
        return None;
    }
    let ws = g.w_strides;
    // (A tap dimension of extent 1 never moves an offset: its stride does not matter.)
    let [fd, fh, fw] = g.filter;
    let dense = fd == 1 && ws[1] == 1 && (fw == 1 || ws[4] == g.cg()) && (fh == 1 || ws[3] == fw * g.cg());
    (dense && g.cg() % 8 == 0 && ws[0] % 8 == 0).then_some(FilterSource::Flipped { rows: g.k, row_elems: ws[0], taps })
}

fn rewrite(problem: &FusedProblem, device: &DeviceInfo) -> std::result::Result<Rewrite, String> {
    let Some(conv) = problem.conv_problem() else { return Err("not a convolution problem".into()) };
    tensor_core_precision(conv)?;
    let layout = if conv.filter().len() == 2 { Layout::NHWC } else { Layout::NDHWC };
    let forward = FusedProblem::conv(conv.backward_data_as_forward(layout)?);
    let view = ChannelsFirst::flipped_filter(&conv.w, conv.groups()).ok_or("w's spatial dimensions do not collapse into rows")?;
    if let Some(why) = view.refusal() {
        return Err(format!("w: {why}"));
    }
    let solver = adapter::first_taker(adapter::FORWARD_TC, &forward, device).map_err(|why| format!("no forward tensor-core kernel takes dx = conv(dy, flipped w) ({why})"))?;
    let taps = TapMap::reversed(Geom::of(conv).filter);
    Ok(Rewrite { in_place: in_place_filter(conv, &forward, solver, device, taps), forward, solver, w: view })
}

pub struct CudaConvBwdDataTc;

impl Solver for CudaConvBwdDataTc {
    fn name(&self) -> &'static str { "CudaConvBwdDataTensorCore" }
    fn solution_id(&self) -> u64 { 108 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::ImplicitGemm }
    fn device(&self) -> DeviceKind { DeviceKind::Cuda }

    fn check(&self, problem: &FusedProblem, device: &DeviceInfo) -> std::result::Result<(), String> {
        rewrite(problem, device).map(|_| ())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        CudaConvIgemmTma.estimate_ms(problem) + problem.conv_problem().map_or(0.0, |c| 2.0 * c.w.num_bytes() as f64 / 3e12 * 1e3)
    }

    fn build(&self, problem: &FusedProblem, ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        adapter::build_tuned(self, problem, ctx, || self.build_inner(problem, ctx, None))
    }

    fn tuning_space(&self, problem: &FusedProblem) -> Vec<String> { adapter::tensor_core_space(problem) }

    fn build_config(&self, problem: &FusedProblem, ctx: &dyn BuildContext, config: &str) -> Result<Arc<dyn Invoker>> {
        self.build_inner(problem, ctx, Some(config))
    }
}

impl CudaConvBwdDataTc {
    /// The kernel with tile `config` (else the inner solver's choice): reading w in place
    /// where it can, the copy path built on first need.
    fn build_inner(&self, problem: &FusedProblem, ctx: &dyn BuildContext, config: Option<&str>) -> Result<Arc<dyn Invoker>> {
        let r = rewrite(problem, ctx.device().info()).map_err(|why| Error::not_implemented(format!("{}: {why}", self.name())))?;
        tracing::debug!(solver = self.name(), in_place = r.in_place.is_some(), "backward-data filter read");
        let in_place = match r.in_place {
            Some(src) if r.solver.name() == CudaConvTcNchw.name() => Some(CudaConvTcNchw.build_flipped(&r.forward, ctx, config, src)?),
            Some(src) => Some(CudaConvIgemmTma.build_flipped(&r.forward, ctx, config, src)?),
            None => None,
        };
        // Without the in-place kernel the copy path is the plan: built now, so that a
        // configuration its kernel does not know is refused here.
        let copy = OnceLock::new();
        if in_place.is_none() {
            let _ = copy.set(Ok(build_copy_path(r.solver, &r.forward, ctx, config)?));
        }
        Ok(Arc::new(BwdDataInvoker {
            be: cuda_of(ctx.device())?.clone(),
            in_place,
            copy,
            solver: r.solver,
            forward: r.forward,
            config: config.map(str::to_string),
            w: r.w,
        }))
    }
}

fn build_copy_path(solver: &dyn Solver, forward: &FusedProblem, ctx: &dyn BuildContext, config: Option<&str>) -> Result<Arc<dyn Invoker>> {
    match config {
        Some(c) => solver.build_config(forward, ctx, c),
        None => solver.build(forward, ctx),
    }
}

struct BwdDataInvoker {
    be: Arc<CudaBackend>,
    /// The forward kernel reading the caller's w flipped in place.
    in_place: Option<Arc<dyn Invoker>>,
    /// The forward kernel reading the flipped copy of w.
    copy: OnceLock<Result<Arc<dyn Invoker>>>,
    solver: &'static dyn Solver,
    forward: FusedProblem,
    config: Option<String>,
    w: ChannelsFirst,
}

impl Invoker for BwdDataInvoker {
    fn run(&self, ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        // Backward-data arguments: x = dx (written), y = dy. The forward problem reads dy as
        // its input and writes dx as its output.
        if let Some(inv) = &self.in_place {
            // The copy engine needs 16-byte aligned tensors; the copy path's kernel has its own
            // fallback for the others.
            if a.x.0 % 16 == 0 && a.y.0 % 16 == 0 && a.w.0 % 16 == 0 {
                return inv.run(ctx, &RunArgs { x: a.y, y: a.x, ..*a });
            }
        }
        let copy = self.copy.get_or_init(|| build_copy_path(self.solver, &self.forward, ctx.device(), self.config.as_deref())).as_ref().map_err(Clone::clone)?;
        timed(ctx, &self.be, || {
            let scratch = Scratch::new(ctx, &self.be.dev, self.w.packed_bytes())?;
            to_channels_last(&self.be, &self.w, a.w.0, scratch.ptr())?;
            copy.run(ctx, &RunArgs { x: a.y, w: DevPtr(scratch.ptr()), y: a.x, ..*a })
        })
    }
}

/// Whether this problem's filter is read in place (no flipped copy) by the kernel chosen for it.
pub fn reads_filter_in_place(problem: &FusedProblem, device: &DeviceInfo) -> bool { rewrite(problem, device).is_ok_and(|r| r.in_place.is_some()) }
