//! The solver machinery shared by convolutions, fusion plans and every backend.
//!
//! A `Solver` looks at a `FusedProblem`, says whether it applies (and why not), how much
//! workspace it needs, and builds an `Invoker`: the compiled artifact that runs many times.
//! Solvers live in one ordered registry (`registry.rs`); immediate mode takes the first
//! applicable one, Find times all applicable ones.

mod adapter;
mod registry;
pub(crate) mod cpu_conv;
pub mod cpu_amx1x1;
pub mod cpu_direct;
pub mod cpu_direct_taps;
pub mod cpu_fft;
pub mod cpu_gemm;
pub mod cpu_gemm1x1;
pub mod cpu_igemm;
pub mod cpu_naive;
pub mod cpu_pointwise;
pub mod cpu_winograd;
pub mod cpu_winograd4;
pub mod cuda_direct;
pub mod cuda_gemm_lt;
pub mod cuda_igemm;
pub mod cuda_igemm_tc;
pub mod cuda_igemm_tma;
pub mod cuda_igemm_wgmma;
pub mod cuda_pointwise;
pub mod cuda_tc_bwd_data;
pub mod cuda_tc_nchw;
pub mod cuda_wgrad_simt;
pub mod cuda_wgrad_tf32;
pub mod cuda_wgrad_tma;
pub(crate) mod op_args;
pub mod perf_db;

pub use registry::{applicable, find_by_id, find_by_name, registry, select_first, SolverInfo};

use crate::error::Result;
use crate::fusion::{FusedProblem, OpArg};
use crate::handle::{DeviceKind, Handle};
use crate::memory::DevPtr;
use crate::types::ConvAlgorithm;
use std::sync::Arc;

/// Run-time arguments of one invocation.
#[derive(Clone, Copy, Debug)]
pub struct RunArgs<'a> {
    /// Tensors by role. For convolutions these are the normal convolution's x, w and y; the
    /// direction says which one is written (y forward, x backward-data, w backward-weights).
    /// For pointwise and batch-norm problems x is the plan input and y the plan output.
    pub x: DevPtr,
    pub w: DevPtr,
    pub y: DevPtr,
    /// `out = α·result + β·out` for convolutions.
    pub alpha: f64,
    pub beta: f64,
    pub workspace: DevPtr,
    pub workspace_bytes: usize,
    /// Arguments of the problem's epilogue / pointwise / batch-norm ops, in problem order.
    pub ops: &'a [OpArg],
}

/// A compiled solution: runs many times, from many threads at once.
pub trait Invoker: Send + Sync {
    fn run(&self, handle: &Handle, args: &RunArgs) -> Result<()>;
}

/// Runs `inv` as the API entry points do: on the CPU, from a thread of rayon's pool
/// (`backend::cpu::on_pool`); on a GPU, from the caller's thread.
pub fn invoke(inv: &dyn Invoker, handle: &Handle, args: &RunArgs) -> Result<()> {
    if handle.device().cuda().is_some() {
        return inv.run(handle, args);
    }
    crate::backend::cpu::on_pool(|| inv.run(handle, args))
}

/// A way to compute a class of problems on one kind of device.
pub trait Solver: Send + Sync {
    /// Stable literal id, never reused.
    fn name(&self) -> &'static str;
    /// Numeric solution id for the immediate-mode API (append-only, never 0).
    fn solution_id(&self) -> u64;
    /// The algorithm bucket this solver reports under.
    fn algorithm(&self) -> ConvAlgorithm;
    fn device(&self) -> DeviceKind;
    /// `Ok(())` when applicable, else the reason it refuses.
    fn check(&self, problem: &FusedProblem, handle: &Handle) -> std::result::Result<(), String>;
    /// Exact workspace bytes for this problem (0 for most).
    fn workspace_bytes(&self, _problem: &FusedProblem) -> usize { 0 }
    /// A rough time estimate in ms, used to order immediate-mode solutions without Find.
    fn estimate_ms(&self, problem: &FusedProblem) -> f64;
    /// Build the invoker (compiles kernels on GPU backends). Only called after `check` passed.
    /// Tunable solvers use their perf-db entry when there is one, else their heuristic.
    fn build(&self, problem: &FusedProblem, handle: &Handle) -> Result<Arc<dyn Invoker>>;
    /// Labels of the configurations an exhaustive Find may time (empty: not tunable).
    fn tuning_space(&self, _problem: &FusedProblem) -> Vec<String> { Vec::new() }
    /// Build with one configuration of `tuning_space`.
    fn build_config(&self, problem: &FusedProblem, handle: &Handle, _config: &str) -> Result<Arc<dyn Invoker>> {
        self.build(problem, handle)
    }
}
