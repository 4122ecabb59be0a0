//! Running a backward-data as its phases (`problem::backward_data_phases`): what the solvers
//! that do so share (`bwd_data_strided` on tensor cores, `bwd_data_few_channels` on the
//! few-channels kernel). Each phase is a forward convolution of dy with a sub-filter written
//! straight into a strided view of dx, or β·dx where no tap reaches. The phases are disjoint
//! and cover dx, so α/β carry over to each unchanged. Scratch (a channels-last dy, sub-filter
//! copies) comes from the device's pool per execution; no workspace is reported.

use super::common::cuda_of;
use super::igemm_tma::{CudaConvIgemmTma, FilterSource};
use crate::backend::cuda::driver::Scratch;
use crate::backend::cuda::fork::fork_join;
use crate::backend::cuda::layout::{to_channels_last, ChannelsFirst};
use crate::backend::cuda::scale::scale_view;
use crate::backend::cuda::sub_filter::SubFilter;
use crate::backend::cuda::{timed, CudaBackend};
use crate::backend::RunContext;
use crate::error::Result;
use crate::memory::DevPtr;
use crate::problem::{backward_data_phases, ConvProblem, FusedProblem, TapMap};
use crate::solver::{BuildContext, Invoker, RunArgs, Solver};
use crate::tensor::TensorDesc;
use crate::types::{Direction, Layout};
use std::sync::{Arc, OnceLock};

/// How a phase's sub-filter is copied out of w.
pub(crate) enum FilterCopy {
    /// Through the coalescing layout kernel (even channel counts).
    Layout(ChannelsFirst),
    /// Through the element gather (any channel count).
    Gather(SubFilter),
}

impl FilterCopy {
    fn bytes(&self) -> usize {
        match self {
            FilterCopy::Layout(v) => v.packed_bytes(),
            FilterCopy::Gather(g) => g.packed_bytes(),
        }
    }
    fn run(&self, be: &CudaBackend, w: u64, dst: u64) -> Result<()> {
        match self {
            FilterCopy::Layout(v) => to_channels_last(be, v, w, dst),
            FilterCopy::Gather(g) => g.gather(be, w, dst),
        }
    }
}

/// How one phase is computed.
pub(crate) enum PhaseWork {
    /// No tap reaches these dx positions: β·dx.
    Scale(TensorDesc),
    Conv {
        forward: FusedProblem,
        solver: &'static dyn Solver,
        copy: FilterCopy,
        /// The caller's w as the TMA kernel reads the sub-filter in place, where it can.
        in_place: Option<FilterSource>,
    },
}

struct PhasePlan {
    /// Element offsets of the phase's first dx element and first dy element read.
    dx_offset: usize,
    dy_offset: usize,
    work: PhaseWork,
}

pub(crate) struct Plan {
    /// dy's channels-last copy, when the phases read one.
    dy_copy: Option<ChannelsFirst>,
    phases: Vec<PhasePlan>,
    /// dx's bytes when it is packed (no gaps) and some phase is β·dx alone.
    zero_whole_dx: Option<usize>,
}

/// The convolution of a backward-data problem without an epilogue (what every phased solver
/// takes), else why not.
pub(crate) fn backward_data_conv(problem: &FusedProblem) -> std::result::Result<&ConvProblem, String> {
    let Some(conv) = problem.conv_problem() else { return Err("not a convolution problem".into()) };
    if conv.direction != Direction::BackwardData {
        return Err(format!("backward-data only (this is {:?})", conv.direction));
    }
    if !problem.epilogue().is_empty() {
        return Err("backward-data with an epilogue".into());
    }
    Ok(conv)
}

/// The phases of a backward-data problem over `dy` (as the kernels read it), each phase a
/// tap-less β·dx or the work `conv` makes of its forward convolution and tap map (the Err of
/// which names the phase's residue).
pub(crate) fn plan_phases(
    conv: &ConvProblem,
    dy: &TensorDesc,
    dy_copy: Option<ChannelsFirst>,
    mut work: impl FnMut(FusedProblem, TapMap) -> std::result::Result<PhaseWork, String>,
) -> std::result::Result<Plan, String> {
    let layout = if conv.spatial_dims() == 2 { Layout::NHWC } else { Layout::NDHWC };
    let mut phases = Vec::new();
    for p in backward_data_phases(conv, dy, layout)? {
        let work = match p.forward {
            None => PhaseWork::Scale(p.dx),
            Some((sub, taps)) => work(FusedProblem::conv(sub), taps).map_err(|why| format!("phase {:?}: {why}", p.residue))?,
        };
        phases.push(PhasePlan { dx_offset: p.dx_offset, dy_offset: p.dy_offset, work });
    }
    let scaled = phases.iter().any(|p| matches!(p.work, PhaseWork::Scale(_)));
    let zero_whole_dx = (scaled && conv.x.is_packed()).then(|| conv.x.num_bytes());
    Ok(Plan { dy_copy, phases, zero_whole_dx })
}

/// The invoker of `plan`: in-place kernels built now, the copy path's where there is none.
pub(crate) fn build(plan: Plan, elem: usize, ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>> {
    let mut phases = Vec::with_capacity(plan.phases.len());
    for p in plan.phases {
        let run = match p.work {
            PhaseWork::Scale(view) => PhaseRun::Scale(view),
            PhaseWork::Conv { forward, solver, copy, in_place } => {
                let in_place = match in_place {
                    Some(src) => Some(CudaConvIgemmTma.build_flipped(&forward, ctx, None, src)?),
                    None => None,
                };
                // Without the in-place kernel the copy path is the plan: built now.
                let copied = OnceLock::new();
                if in_place.is_none() {
                    let _ = copied.set(Ok(solver.build(&forward, ctx)?));
                }
                PhaseRun::Conv { in_place, copied, solver, forward, copy }
            }
        };
        phases.push((p.dx_offset as u64, p.dy_offset as u64, run));
    }
    Ok(Arc::new(PhasedInvoker { be: cuda_of(ctx.device())?.clone(), elem: elem as u64, dy_copy: plan.dy_copy, phases, zero_whole_dx: plan.zero_whole_dx }))
}

enum PhaseRun {
    Scale(TensorDesc),
    Conv {
        /// The forward kernel reading the caller's w in place.
        in_place: Option<Arc<dyn Invoker>>,
        /// The forward kernel reading the sub-filter's copy, built on first need.
        copied: OnceLock<Result<Arc<dyn Invoker>>>,
        solver: &'static dyn Solver,
        forward: FusedProblem,
        copy: FilterCopy,
    },
}

struct PhasedInvoker {
    be: Arc<CudaBackend>,
    elem: u64,
    dy_copy: Option<ChannelsFirst>,
    /// dx offset, dy offset (elements) and the work of each phase.
    phases: Vec<(u64, u64, PhaseRun)>,
    /// `Plan::zero_whole_dx`.
    zero_whole_dx: Option<usize>,
}

impl Invoker for PhasedInvoker {
    fn run(&self, ctx: &dyn RunContext, a: &RunArgs) -> Result<()> {
        // Backward-data arguments: x = dx (written), y = dy.
        let dy_bytes = self.dy_copy.map_or(0, |v| v.packed_bytes().next_multiple_of(256));
        let filter_bytes: usize = self
            .phases
            .iter()
            .map(|(_, _, p)| match p {
                PhaseRun::Conv { copy, .. } => copy.bytes().next_multiple_of(256),
                PhaseRun::Scale(_) => 0,
            })
            .sum();
        timed(ctx, &self.be, || {
            let scratch = Scratch::new(ctx, &self.be.dev, dy_bytes + filter_bytes)?;
            let dy = match &self.dy_copy {
                Some(v) => {
                    to_channels_last(&self.be, v, a.y.0, scratch.ptr())?;
                    scratch.ptr()
                }
                None => a.y.0,
            };
            let mut filter_at = scratch.ptr() + dy_bytes as u64;
            // β = 0 over a packed dx: one memset for every tap-less phase (the others overwrite
            // their positions after it) instead of a launch per phase.
            let zeroed = match self.zero_whole_dx {
                Some(bytes) if a.beta == 0.0 => {
                    self.be.dev.memset_async(a.x.0, bytes)?;
                    true
                }
                _ => false,
            };
            // The phases write disjoint positions of dx: side by side (`fork`), each a piece
            // with its own region of the scratch for a sub-filter copy.
            let mut pieces: Vec<Box<dyn FnOnce() -> Result<()> + '_>> = Vec::with_capacity(self.phases.len());
            for (dx_off, dy_off, phase) in &self.phases {
                let (x, y) = (dy + dy_off * self.elem, a.x.0 + dx_off * self.elem);
                match phase {
                    PhaseRun::Scale(_) if zeroed => {}
                    PhaseRun::Scale(view) => pieces.push(Box::new(move || scale_view(&self.be, view, y, a.beta as f32))),
                    PhaseRun::Conv { in_place, copied, solver, forward, copy } => {
                        let args = RunArgs { x: DevPtr(x), y: DevPtr(y), ..*a };
                        match in_place {
                            // The copy engine needs 16-byte aligned tensors.
                            Some(inv) if x % 16 == 0 && y % 16 == 0 && a.w.0 % 16 == 0 => pieces.push(Box::new(move || inv.run(ctx, &args))),
                            _ => {
                                let inv = copied.get_or_init(|| solver.build(forward, ctx.device())).as_ref().map_err(Clone::clone)?;
                                let at = filter_at;
                                filter_at += copy.bytes().next_multiple_of(256) as u64;
                                pieces.push(Box::new(move || {
                                    copy.run(&self.be, a.w.0, at)?;
                                    inv.run(ctx, &RunArgs { w: DevPtr(at), ..args })
                                }));
                            }
                        }
                    }
                }
            }
            fork_join(&self.be.dev, pieces)
        })
    }
}
