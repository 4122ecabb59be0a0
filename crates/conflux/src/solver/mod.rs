//! The solver machinery shared by convolutions, fusion plans and every backend.
//!
//! A `Solver` looks at a `FusedProblem`, says whether it applies (and why not), how much
//! workspace it needs, and builds an `Invoker`: the compiled artifact that runs many times.
//! Solvers live in one ordered list per backend (`registry.rs`); `search/` decides which runs.
//! CPU solvers are in `cpu/`, CUDA solvers in `cuda/`, one per file.

pub mod cpu;
pub mod cuda;
mod folded;
mod rewritten;
pub mod registry;
mod trimmed;
mod tuned;

pub use registry::{find_by_id, find_by_name, registry, Entry, Role, SolverInfo};
pub use tuned::chosen_config;

use crate::backend::{Device, DeviceInfo, DeviceKind, RunContext};
use crate::error::Result;
use crate::memory::DevPtr;
use crate::problem::{FusedProblem, OpArg};
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
    fn run(&self, ctx: &dyn RunContext, args: &RunArgs) -> Result<()>;
    /// On the CPU: does a run use one thread only? Such a run stays on the caller's thread,
    /// since handing it to the pool (waking a worker, then the caller) costs more than its work.
    fn single_threaded(&self) -> bool { false }
}

/// Runs `inv` as the API entry points do: on the CPU, from a thread of rayon's pool
/// (`backend::cpu::on_pool`) unless it runs single-threaded; on a GPU, from the caller's thread.
pub fn invoke(inv: &dyn Invoker, ctx: &dyn RunContext, args: &RunArgs) -> Result<()> {
    if ctx.device().cuda().is_some() || inv.single_threaded() {
        return inv.run(ctx, args);
    }
    crate::backend::cpu::on_pool(|| inv.run(ctx, args))
}

/// What building an invoker may use: the device it compiles for, and the tuned configuration a
/// solver recorded for a problem (the perf-db, read by `search/`, which implements this).
pub trait BuildContext {
    fn device(&self) -> &Device;
    /// The stored configuration label of `solver` for the problem with key `problem_key`.
    fn tuned_config(&self, solver: &str, problem_key: &str) -> Option<String>;
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
    fn check(&self, problem: &FusedProblem, device: &DeviceInfo) -> std::result::Result<(), String>;
    /// Exact workspace bytes for this problem (0 for most).
    fn workspace_bytes(&self, _problem: &FusedProblem) -> usize { 0 }
    /// A rough time estimate in ms, used to order immediate-mode solutions without Find.
    fn estimate_ms(&self, problem: &FusedProblem) -> f64;
    /// Build the invoker (compiles kernels on GPU backends). Only called after `check` passed.
    /// Tunable solvers use their tuned configuration when there is one, else their heuristic.
    fn build(&self, problem: &FusedProblem, ctx: &dyn BuildContext) -> Result<Arc<dyn Invoker>>;
    /// Does this solver compute int8 / fp8 convolutions (`quant.rs`)? Every other solver is
    /// refused them by `registry::verdict`, whatever its own `check` says.
    fn computes_quantized(&self) -> bool { false }
    /// Labels of the configurations an exhaustive Find may time (empty: not tunable).
    fn tuning_space(&self, _problem: &FusedProblem) -> Vec<String> { Vec::new() }
    /// Build with one configuration of `tuning_space`.
    fn build_config(&self, problem: &FusedProblem, ctx: &dyn BuildContext, _config: &str) -> Result<Arc<dyn Invoker>> {
        self.build(problem, ctx)
    }
}

/// Building with no tuned configurations: the solvers' heuristics (an invoker building its
/// fallback at run time).
impl BuildContext for Device {
    fn device(&self) -> &Device { self }
    fn tuned_config(&self, _solver: &str, _problem_key: &str) -> Option<String> { None }
}
