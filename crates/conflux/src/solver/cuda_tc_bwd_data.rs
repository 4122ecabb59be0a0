//! Backward-data on tensor cores. With stride 1, the gradient of the input is itself a forward
//! convolution: dx = conv(dy, w') where w' swaps each group's input and output channels and
//! reverses the taps (w'[g·CG + c][k][t] = w[g·KG + k][c][T − 1 − t]) and the padding becomes
//! dilation·(taps − 1) − pad. This solver copies w' into channels-last scratch
//! (`layout::ChannelsFirst::flipped_filter`, one small pass) and runs the first forward
//! tensor-core solver that takes the rewritten problem (NCHW dy goes through the layout
//! adapter). α/β and the descriptor's attributes carry over unchanged: f32 runs on the TF32
//! kernel, as split TF32 products when the descriptor asks for strict f32.
//!
//! Scratch comes from the device's pool (or the caller's allocator), taken per execution
//! (safe for concurrent executions of one invoker); no workspace is reported.

use super::cuda_direct::cuda_of;
use super::cuda_igemm_tc::tensor_core_precision;
use super::{adapter, Invoker, RunArgs, Solver};
use crate::backend::cuda::driver::Scratch;
use crate::backend::cuda::layout::{to_channels_last, ChannelsFirst};
use crate::backend::cuda::{timed, CudaBackend};
use crate::error::{Error, Result};
use crate::fusion::FusedProblem;
use crate::handle::{DeviceKind, Handle};
use crate::memory::DevPtr;
use crate::types::{ConvAlgorithm, Layout};
use std::sync::Arc;

/// Forward tensor-core solvers in registry order (NCHW dy goes through the layout adapter).
const INNER: [&dyn Solver; 4] = adapter::FORWARD_TC;

struct Rewrite {
    /// dx = conv(dy, w') as a forward problem.
    forward: FusedProblem,
    solver: &'static dyn Solver,
    w: ChannelsFirst,
}

fn rewrite(problem: &FusedProblem, handle: &Handle) -> std::result::Result<Rewrite, String> {
    let Some(conv) = problem.conv_problem() else { return Err("not a convolution problem".into()) };
    tensor_core_precision(conv)?;
    let layout = if conv.filter().len() == 2 { Layout::NHWC } else { Layout::NDHWC };
    let forward = FusedProblem::conv(conv.backward_data_as_forward(layout)?);
    let view = ChannelsFirst::flipped_filter(&conv.w, conv.groups()).ok_or("w's spatial dimensions do not collapse into rows")?;
    if let Some(why) = view.refusal() {
        return Err(format!("w: {why}"));
    }
    let solver = adapter::first_taker(&INNER, &forward, handle).map_err(|why| format!("no forward tensor-core kernel takes dx = conv(dy, flipped w) ({why})"))?;
    Ok(Rewrite { forward, solver, w: view })
}

pub struct CudaConvBwdDataTc;

impl Solver for CudaConvBwdDataTc {
    fn name(&self) -> &'static str { "CudaConvBwdDataTensorCore" }
    fn solution_id(&self) -> u64 { 108 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::ImplicitGemm }
    fn device(&self) -> DeviceKind { DeviceKind::Cuda }

    fn check(&self, problem: &FusedProblem, handle: &Handle) -> std::result::Result<(), String> {
        rewrite(problem, handle).map(|_| ())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        adapter::CHANNELS_LAST_TC[0].estimate_ms(problem) + problem.conv_problem().map_or(0.0, |c| 2.0 * c.w.num_bytes() as f64 / 3e12 * 1e3)
    }

    fn build(&self, problem: &FusedProblem, handle: &Handle) -> Result<Arc<dyn Invoker>> {
        adapter::build_tuned(self, problem, handle, || self.build_inner(problem, handle, |s, p| s.build(p, handle)))
    }

    fn tuning_space(&self, problem: &FusedProblem) -> Vec<String> { adapter::tensor_core_space(problem) }

    fn build_config(&self, problem: &FusedProblem, handle: &Handle, config: &str) -> Result<Arc<dyn Invoker>> {
        self.build_inner(problem, handle, |s, p| s.build_config(p, handle, config))
    }
}

impl CudaConvBwdDataTc {
    fn build_inner(
        &self,
        problem: &FusedProblem,
        handle: &Handle,
        build: impl FnOnce(&dyn Solver, &FusedProblem) -> Result<Arc<dyn Invoker>>,
    ) -> Result<Arc<dyn Invoker>> {
        let r = rewrite(problem, handle).map_err(|why| Error::not_implemented(format!("{}: {why}", self.name())))?;
        let inner = build(r.solver, &r.forward)?;
        Ok(Arc::new(BwdDataInvoker { be: cuda_of(handle)?.clone(), inner, w: r.w }))
    }
}

struct BwdDataInvoker {
    be: Arc<CudaBackend>,
    inner: Arc<dyn Invoker>,
    w: ChannelsFirst,
}

impl Invoker for BwdDataInvoker {
    fn run(&self, handle: &Handle, a: &RunArgs) -> Result<()> {
        // Backward-data arguments: x = dx (written), y = dy. The forward problem reads dy as
        // its input and writes dx as its output.
        timed(handle, &self.be, || {
            let scratch = Scratch::new(handle, &self.be.dev, self.w.packed_bytes())?;
            to_channels_last(&self.be, &self.w, a.w.0, scratch.ptr())?;
            self.inner.run(handle, &RunArgs { x: a.y, w: DevPtr(scratch.ptr()), y: a.x, ..*a })
        })
    }
}
