//! Backward-data on tensor cores. With stride 1, the gradient of the input is itself a forward
//! convolution: dx = conv(dy, w') where w' swaps each group's input and output channels and
//! reverses the taps (w'[g·CG + c][k][t] = w[g·KG + k][c][T − 1 − t]) and the padding becomes
//! dilation·(taps − 1) − pad. This solver copies w' into channels-last scratch
//! (`layout::ChannelsFirst::flipped_filter`, one small pass) and runs the first forward
//! tensor-core solver that takes the rewritten problem (NCHW dy goes through the layout
//! adapter). α/β and the descriptor's attributes carry over unchanged: f32 runs on the TF32
//! kernel, as split TF32 products when the descriptor asks for strict f32.
//!
//! Scratch is stream-ordered memory from the device's pool, taken per execution (safe for
//! concurrent executions of one invoker); no workspace is reported.

use super::cuda_direct::cuda_of;
use super::cuda_igemm_tc::tensor_core_precision;
use super::{adapter, Invoker, RunArgs, Solver};
use crate::backend::cuda::driver::Scratch;
use crate::backend::cuda::layout::{to_channels_last, ChannelsFirst};
use crate::backend::cuda::{timed, CudaBackend};
use crate::conv::{ConvDesc, ConvProblem};
use crate::error::{Error, Result};
use crate::fusion::FusedProblem;
use crate::handle::{DeviceKind, Handle};
use crate::memory::DevPtr;
use crate::tensor::TensorDesc;
use crate::types::{ConvAlgorithm, ConvMode, Direction, Layout};
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
    if conv.direction != Direction::BackwardData {
        return Err(format!("backward-data only (this is {:?})", conv.direction));
    }
    tensor_core_precision(conv)?;
    let d = &conv.conv;
    if d.strides().iter().any(|&s| s != 1) {
        return Err(format!("stride {:?}: only stride 1 is a forward convolution of dy", d.strides()));
    }
    let taps = conv.filter();
    let mut pads = Vec::with_capacity(taps.len());
    for ((&t, &p), &dil) in taps.iter().zip(d.pads()).zip(d.dilations()) {
        let reach = dil * (t - 1);
        if p > reach {
            return Err(format!("padding {p} exceeds the filter's reach {reach}: dx would need negative padding"));
        }
        pads.push((reach - p) as i64);
    }
    let groups = conv.groups();
    let view = ChannelsFirst::flipped_filter(&conv.w, groups).ok_or("w's spatial dimensions do not collapse into rows")?;
    if let Some(why) = view.refusal() {
        return Err(format!("w: {why}"));
    }
    let err = |e: Error| e.reason;
    let ones = vec![1i64; taps.len()];
    let dils: Vec<i64> = d.dilations().iter().map(|&v| v as i64).collect();
    let mut fwd = ConvDesc::new(ConvMode::Convolution, &pads, &ones, &dils).map_err(err)?;
    fwd.set_groups(groups as i64).map_err(err)?;
    fwd.copy_attributes(d);
    let layout = if taps.len() == 2 { Layout::NHWC } else { Layout::NDHWC };
    let w_lens: Vec<usize> = [conv.x.c(), conv.k() / groups].into_iter().chain(taps.iter().copied()).collect();
    let w2 = TensorDesc::with_layout(conv.dtype(), layout, &w_lens).map_err(err)?;
    let forward = FusedProblem::conv(ConvProblem::forward(&fwd, &conv.y, &w2, &conv.x).map_err(err)?);
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
