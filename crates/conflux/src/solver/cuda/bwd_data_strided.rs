//! Backward-data with stride > 1 on tensor cores, by phases (`problem::backward_data_phases`,
//! run by `phased`): each residue class of dx positions modulo the stride is a stride-1 forward
//! convolution of dy with a sub-filter of w (taps reversed, channels swapped), written straight
//! into a strided view of dx by the first channels-last tensor-core kernel that takes it.
//! Phases no tap reaches (1×1 stride 2: three of four) get β·dx.
//!
//! 16-bit filters whose taps and channels are contiguous per output channel (KRSC, or any 1×1)
//! are read in place by the TMA kernel (`FilterSource::Flipped` with the phase's tap map);
//! otherwise each phase's sub-filter is copied to channels-last scratch
//! (`ChannelsFirst::sub_filter`, or the element gather `SubFilter` for 3-D phases). Channels-first dy is copied to channels-last once for all
//! phases.

use super::adapter;
use super::bwd_data_tc::in_place_filter;
use super::igemm_tma::CudaConvIgemmTma;
use super::phased::{self, FilterCopy, PhaseWork, Plan};
use super::tensor_core::tensor_core_precision;
use crate::backend::cuda::layout::ChannelsFirst;
use crate::backend::cuda::sub_filter::SubFilter;
use crate::backend::{DeviceInfo, DeviceKind};
use crate::error::{Error, Result};
use crate::problem::FusedProblem;
use crate::solver::{BuildContext, Invoker, Solver};
use crate::tensor::TensorDesc;
use crate::types::{ConvAlgorithm, Layout};
use std::sync::Arc;

fn plan(problem: &FusedProblem, device: &DeviceInfo) -> std::result::Result<Plan, String> {
    let conv = phased::backward_data_conv(problem)?;
    if conv.conv.strides().iter().all(|&s| s == 1) {
        return Err("stride 1: one forward convolution of dy (CudaConvBwdDataTensorCore)".into());
    }
    tensor_core_precision(conv)?;
    let layout = if conv.spatial_dims() == 2 { Layout::NHWC } else { Layout::NDHWC };
    // dy as it is when the tensor-core loaders read it in place (channels-last, 16-byte
    // pixel rows), else one channels-last copy for all phases.
    let chunk = 16 / conv.dtype().size();
    let ys = conv.y.strides();
    let (dy_copy, dy) = if ys[1] == 1 && ys.iter().enumerate().all(|(i, s)| i == 1 || s % chunk == 0) {
        (None, conv.y.clone())
    } else {
        let v = ChannelsFirst::of(&conv.y).ok_or("dy's spatial dimensions do not collapse into rows")?;
        if let Some(why) = v.refusal() {
            return Err(format!("dy: {why}"));
        }
        (Some(v), TensorDesc::with_layout(conv.dtype(), layout, conv.y.lens()).map_err(|e| e.reason)?)
    };
    phased::plan_phases(conv, &dy, dy_copy, |forward, taps| {
        let solver = adapter::first_taker(adapter::CHANNELS_LAST_TC, &forward, device).map_err(|why| format!("no tensor-core kernel takes it ({why})"))?;
        let copy = match ChannelsFirst::sub_filter(&conv.w, conv.groups(), &taps) {
            Some(view) if view.refusal().is_none() => FilterCopy::Layout(view),
            // 3-D phases' sub-filters (the layout kernel walks reversed 3-D filters whole only)
            // and filters it refuses: the element gather.
            _ => FilterCopy::Gather(SubFilter::new(&conv.w, conv.groups(), taps)),
        };
        let in_place = in_place_filter(conv, &forward, solver, device, taps);
        Ok(PhaseWork::Conv { forward, solver, copy, in_place })
    })
}

pub struct CudaConvBwdDataStrided;

impl Solver for CudaConvBwdDataStrided {
    fn name(&self) -> &'static str { "CudaConvBwdDataStridedTensorCore" }
    fn solution_id(&self) -> u64 { 114 }
    fn algorithm(&self) -> ConvAlgorithm { ConvAlgorithm::ImplicitGemm }
    fn device(&self) -> DeviceKind { DeviceKind::Cuda }

    fn check(&self, problem: &FusedProblem, device: &DeviceInfo) -> std::result::Result<(), String> {
        plan(problem, device).map(|_| ())
    }

    fn estimate_ms(&self, problem: &FusedProblem) -> f64 {
        // The tensor-core GEMMs (the phases together do the problem's products) plus a launch
        // per phase and a pass over dx.
        problem.conv_problem().map_or(f64::MAX, |c| {
            let phases: usize = c.conv.strides().iter().product();
            CudaConvIgemmTma.estimate_ms(problem) + 0.004 * phases as f64 + c.x.num_bytes() as f64 / 3e12 * 1e3
        })
    }

    fn build(&self, problem: &FusedProblem, ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
        let p = plan(problem, ctx.device().info()).map_err(|why| Error::not_implemented(format!("{}: {why}", self.name())))?;
        phased::build(p, problem.dtype().size(), ctx)
    }
}
