//! Find 2.0 solutions (`miopenSolution_t`): `find_solutions` times the solvers of a problem
//! and returns one solution per solver; `run` runs one with the caller's tensors. A solution
//! carries its problem, so it runs (and, saved, reloads) without searching again.

use super::problem::{arg, Lowered, Problem, ProblemDirection, Step};
use crate::conv::api::{bind_backward_data, bind_backward_weights, bind_forward, run_bound, Bound, Choice};
use crate::conv::{find_all, workspace_size, Workspace};
use crate::error::{Error, Result};
use crate::fusion::{FusionPlan, OpArg, OpArgs};
use crate::handle::{Buffer, Handle};
use crate::memory::DevPtr;
use crate::ops::{softmax_backward, softmax_forward};
use crate::problem::{FusedKind, FusedProblem, LayerOp};
use crate::search::{find_db, first_applicable, perf_db, time_plan_on_scratch, FindEntry};
use crate::tensor::TensorDesc;
use crate::types::ConvAlgorithm;
use crate::{bail, ensure};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Workspace Find 2.0 falls back to when the largest any solver needs cannot be allocated.
const FALLBACK_WORKSPACE: usize = 256 << 20;

/// `miopenFindOptions_t`.
#[derive(Clone, Debug)]
pub struct FindOptions {
    /// Tune tunable solvers (an exhaustive search).
    pub tuning: bool,
    /// Order results by workspace size instead of time.
    pub order_by_workspace: bool,
    pub workspace_limit: usize,
    /// Buffers Find may use instead of allocating its own (it writes the outputs).
    pub workspace: Option<(DevPtr, usize)>,
    pub tensors: BTreeMap<u32, DevPtr>,
}

impl Default for FindOptions {
    fn default() -> Self {
        FindOptions { tuning: false, order_by_workspace: false, workspace_limit: usize::MAX, workspace: None, tensors: BTreeMap::new() }
    }
}

/// The caller's buffers for `run`, by argument id; a descriptor given with a buffer must
/// equal the problem's. Scalars (batch-norm ε and the running-average factor) by id.
#[derive(Clone, Debug, Default)]
pub struct RunTensors {
    pub tensors: BTreeMap<u32, (Option<TensorDesc>, DevPtr)>,
    pub scalars: BTreeMap<u32, f64>,
}

/// `miopenSolution_t`.
pub struct Solution {
    pub problem: Problem,
    pub solver: &'static str,
    pub solution_id: u64,
    pub algorithm: ConvAlgorithm,
    /// Find's measurement in ms; -1 when one solver applies and nothing was timed.
    pub time_ms: f32,
    pub workspace_bytes: usize,
    /// The solver's tuned configuration when Find had one (travels with a saved solution).
    pub config: Option<String>,
    /// The device class the solution was found on (`device_class`).
    pub device: String,
    /// The problem lowered once (a run reuses it): what runs, and the input and output.
    lowered: Lowered,
    io: (u32, TensorDesc, u32, TensorDesc),
    /// A fused problem's plan compiled with this solver, for the handle (by address) it
    /// was compiled on.
    compiled: Mutex<Option<(usize, FusionPlan)>>,
    /// The handle (by address) a convolution's tuned configuration was last installed for.
    config_installed_for: AtomicUsize,
}

/// What a solution must run on: the GPU model, or the CPU architecture (CPU solvers recheck
/// the instruction sets they need when they run).
pub fn device_class(handle: &Handle) -> String {
    match handle.device().info().cuda {
        Some(_) => handle.device().identity(),
        None => format!("cpu-{}", std::env::consts::ARCH),
    }
}

impl Solution {
    pub(super) fn new(problem: Problem, e: &FindEntry, config: Option<String>, device: String) -> Result<Solution> {
        let (lowered, io) = (problem.lower()?, problem.io()?);
        Ok(Solution {
            problem,
            lowered,
            io,
            solver: e.solver,
            solution_id: e.solution_id,
            algorithm: e.algorithm,
            time_ms: e.time_ms,
            workspace_bytes: e.workspace_bytes,
            config,
            device,
            compiled: Mutex::new(None),
            config_installed_for: AtomicUsize::new(0),
        })
    }
}

/// Scratch buffers Find allocates for tensors the caller did not preallocate.
struct Scratch<'h> {
    handle: &'h Handle,
    given: &'h BTreeMap<u32, DevPtr>,
    owned: Vec<Buffer>,
}

impl Scratch<'_> {
    fn get(&mut self, id: u32, desc: &TensorDesc) -> Result<DevPtr> {
        if let Some(p) = self.given.get(&id) {
            return Ok(*p);
        }
        let b = self.handle.alloc(desc.num_bytes().max(1))?;
        let p = b.ptr();
        self.owned.push(b);
        Ok(p)
    }
}

fn bind(conv: &crate::ConvDesc, direction: ProblemDirection, x: (&TensorDesc, DevPtr), w: (&TensorDesc, DevPtr), y: (&TensorDesc, DevPtr)) -> Result<Bound> {
    match direction {
        ProblemDirection::Forward => bind_forward(conv, x.0, x.1, w.0, w.1, y.0, y.1),
        ProblemDirection::Backward => bind_backward_data(conv, y.0, y.1, w.0, w.1, x.0, x.1),
        _ => bind_backward_weights(conv, y.0, y.1, x.0, x.1, w.0, w.1),
    }
}

/// `miopenFindSolutions`: at most `max` solutions, best first by the options' order. A
/// convolution is timed on the caller's preallocated buffers or on scratch (its output is
/// written); a fused problem's solvers are timed on scratch.
pub fn find_solutions(handle: &Handle, problem: &Problem, options: &FindOptions, max: usize) -> Result<Vec<Solution>> {
    ensure!(max >= 1, BadParm, "find solutions: maxSolutions must be at least 1");
    let device = device_class(handle);
    let (entries, key) = match problem.lower()? {
        Lowered::Conv { conv, direction, x, w, y } => {
            let mut scratch = Scratch { handle, given: &options.tensors, owned: Vec::new() };
            let (px, pw, py) = (scratch.get(arg::CONV_X, &x)?, scratch.get(arg::CONV_W, &w)?, scratch.get(arg::CONV_Y, &y)?);
            let b = bind(&conv, direction, (&x, px), (&w, pw), (&y, py))?;
            let ws = match options.workspace {
                Some((ptr, bytes)) => Workspace { ptr, bytes: bytes.min(options.workspace_limit) },
                None => {
                    // The most any solver asks for; when that much cannot be had, a smaller
                    // workspace times the solvers that fit in it (the rest are skipped).
                    let need = workspace_size(handle, &b.problem)?.min(options.workspace_limit);
                    let (buf, bytes) = [need, need.min(FALLBACK_WORKSPACE), 0]
                        .into_iter()
                        .find_map(|bytes| handle.alloc(bytes.max(1)).ok().map(|b| (b, bytes)))
                        .ok_or_else(|| Error::alloc("find solutions: not even one byte of workspace could be allocated"))?;
                    let ptr = buf.ptr();
                    scratch.owned.push(buf);
                    Workspace { ptr, bytes }
                }
            };
            let found = find_all(handle, &b, options.tuning, ws)?;
            handle.synchronize()?;
            (found, FusedProblem::conv(b.problem).key())
        }
        Lowered::Plan(plan) => {
            let fp = plan.problem()?;
            let found = if fp.conv_problem().is_some() {
                let measured = time_plan_on_scratch(handle, &fp, None)?;
                find_db::store(handle, &fp, &measured);
                measured
            } else {
                let s = first_applicable(handle, &fp, None)?;
                vec![FindEntry { solver: s.name(), solution_id: s.solution_id(), algorithm: s.algorithm(), time_ms: -1.0, workspace_bytes: s.workspace_bytes(&fp) }]
            };
            (found, fp.key())
        }
        Lowered::Softmax { algo, mode, backward, input, output, .. } => {
            let op = if backward {
                LayerOp::SoftmaxBackward { y: input.clone(), dy: input, dx: output, algo, mode }
            } else {
                LayerOp::SoftmaxForward { x: input, y: output, algo, mode }
            };
            let fp = FusedProblem { kind: FusedKind::Layer(op) };
            let s = first_applicable(handle, &fp, None)?;
            (vec![FindEntry { solver: s.name(), solution_id: s.solution_id(), algorithm: s.algorithm(), time_ms: -1.0, workspace_bytes: 0 }], fp.key())
        }
    };
    let mut entries: Vec<FindEntry> = entries.into_iter().filter(|e| e.workspace_bytes <= options.workspace_limit).collect();
    if options.order_by_workspace {
        entries.sort_by(|a, b| a.workspace_bytes.cmp(&b.workspace_bytes).then(a.time_ms.total_cmp(&b.time_ms)));
    }
    entries.truncate(max);
    entries.iter().map(|e| Solution::new(problem.clone(), e, perf_db::lookup(handle.device(), e.solver, &key), device.clone())).collect()
}

fn tensor(args: &RunTensors, id: u32, desc: Option<&TensorDesc>, required: bool) -> Result<DevPtr> {
    match args.tensors.get(&id) {
        Some((given, ptr)) => {
            if let (Some(given), Some(want)) = (given, desc) {
                ensure!(given == want, BadParm, "run solution: argument {id}'s descriptor {} differs from the problem's {}", given.key(), want.key());
            }
            ensure!(!(required && ptr.is_null()), BadParm, "run solution: argument {id}'s buffer is NULL");
            Ok(*ptr)
        }
        None if required => bail!(BadParm, "run solution: argument {id} is required and was not given"),
        None => Ok(DevPtr::NULL),
    }
}

fn scalar(args: &RunTensors, id: u32) -> Result<f64> {
    args.scalars.get(&id).copied().ok_or_else(|| Error::bad_parm(format!("run solution: scalar argument {id:#x} is required and was not given")))
}

/// The fusion op argument of one step.
fn op_arg(step: &Step, args: &RunTensors) -> Result<Option<OpArg>> {
    use super::problem::Operator;
    let t = |id: u32, required: bool| tensor(args, id, step.tensors.get(&id), required);
    Ok(match (&step.op, step.direction) {
        (Operator::Conv(_), _) => Some(OpArg::Conv { w: t(arg::CONV_W, true)?, alpha: 1.0, beta: 0.0 }),
        (Operator::Bias, _) => Some(OpArg::Bias { b: t(arg::BIAS, true)? }),
        (Operator::Activation(a), ProblemDirection::Forward) => Some(OpArg::Activation { alpha: a.alpha, beta: a.beta, gamma: a.gamma }),
        (Operator::Activation(a), _) => Some(OpArg::ActivationBackward {
            y: t(arg::ACTIVATION_Y, false)?,
            x: t(arg::ACTIVATION_X, true)?,
            alpha: a.alpha,
            beta: a.beta,
            gamma: a.gamma,
        }),
        (Operator::BatchNorm { .. }, ProblemDirection::Inference) => Some(OpArg::BnInference {
            scale: t(arg::BN_SCALE, true)?,
            bias: t(arg::BN_BIAS, true)?,
            mean: t(arg::BN_ESTIMATED_MEAN, true)?,
            var: t(arg::BN_ESTIMATED_VARIANCE, true)?,
            eps: scalar(args, arg::BN_EPSILON)?,
        }),
        (Operator::BatchNorm { running, .. }, ProblemDirection::Forward) => Some(OpArg::BnForward {
            scale: t(arg::BN_SCALE, true)?,
            bias: t(arg::BN_BIAS, true)?,
            saved_mean: t(arg::BN_SAVED_MEAN, false)?,
            saved_inv_var: t(arg::BN_SAVED_VARIANCE, false)?,
            running_mean: t(arg::BN_RUNNING_MEAN, *running)?,
            running_var: t(arg::BN_RUNNING_VARIANCE, *running)?,
            exp_avg_factor: if *running { scalar(args, arg::BN_EXP_AVG_FACTOR)? } else { 0.0 },
            eps: scalar(args, arg::BN_EPSILON)?,
        }),
        (Operator::Softmax { .. }, _) => None,
        (Operator::BatchNorm { .. }, _) => Some(OpArg::BnBackward {
            x: t(arg::BN_X, true)?,
            scale: t(arg::BN_SCALE, true)?,
            bias: t(arg::BN_BIAS, false)?,
            dscale: t(arg::BN_SCALE_DIFF, true)?,
            dbias: t(arg::BN_BIAS_DIFF, true)?,
            saved_mean: t(arg::BN_SAVED_MEAN, true)?,
            saved_inv_var: t(arg::BN_SAVED_VARIANCE, true)?,
            eps: 0.0,
        }),
    })
}

/// `miopenRunSolution`: every check happens before anything runs; nothing is written on
/// failure.
pub fn run(handle: &Handle, solution: &Solution, args: &RunTensors, ws: Workspace) -> Result<()> {
    let here = device_class(handle);
    ensure!(
        solution.device == here,
        BadParm,
        "run solution: {} was found on {}, this handle's device is {here}; find solutions on this device",
        solution.solver,
        solution.device
    );
    match &solution.lowered {
        Lowered::Conv { conv, direction, x, w, y } => {
            let px = tensor(args, arg::CONV_X, Some(x), true)?;
            let pw = tensor(args, arg::CONV_W, Some(w), true)?;
            let py = tensor(args, arg::CONV_Y, Some(y), true)?;
            let b = bind(conv, *direction, (x, px), (w, pw), (y, py))?;
            // Once per handle: the perf-db lookup reads a file.
            let key = handle as *const Handle as usize;
            if solution.config.is_some() && solution.config_installed_for.swap(key, Ordering::Relaxed) != key {
                install_config(handle, solution, &FusedProblem::conv(b.problem.clone()));
            }
            run_bound(handle, &b, Choice::Solution(solution.solution_id), 1.0, 0.0, ws)
        }
        Lowered::Softmax { algo, mode, scale, backward, input, output } => {
            let (algo, mode, scale) = (*algo, *mode, *scale);
            if *backward {
                let y = tensor(args, arg::SOFTMAX_Y, Some(input), true)?;
                let dy = tensor(args, arg::SOFTMAX_DY, Some(input), true)?;
                let dx = tensor(args, arg::SOFTMAX_DX, Some(output), true)?;
                softmax_backward(handle, algo, mode, scale, input, y, input, dy, output, dx)
            } else {
                let x = tensor(args, arg::SOFTMAX_X, Some(input), true)?;
                let y = tensor(args, arg::SOFTMAX_Y, Some(output), true)?;
                softmax_forward(handle, algo, mode, scale, input, x, output, y)
            }
        }
        Lowered::Plan(_) => {
            let (in_id, in_desc, out_id, out_desc) = &solution.io;
            let x = tensor(args, *in_id, Some(in_desc), true)?;
            let y = tensor(args, *out_id, Some(out_desc), true)?;
            let mut op_args = OpArgs::new();
            for (i, step) in solution.problem.steps.iter().enumerate() {
                if let Some(a) = op_arg(step, args)? {
                    op_args.set(i, a);
                }
            }
            let key = handle as *const Handle as usize;
            let mut compiled = solution.compiled.lock().unwrap_or_else(|p| p.into_inner());
            if compiled.as_ref().is_none_or(|(k, _)| *k != key) {
                // The plan compiles once per handle; lowering again gives a plan to compile.
                let Lowered::Plan(mut fresh) = solution.problem.lower()? else { unreachable!("lowered as a plan above") };
                install_config(handle, solution, &fresh.problem()?);
                fresh.set_solution(Some(solution.solution_id));
                fresh.compile(handle)?;
                *compiled = Some((key, fresh));
            }
            let (_, plan) = compiled.as_ref().expect("compiled above");
            plan.execute(handle, in_desc, x, out_desc, y, &op_args)
        }
    }
}

/// A loaded solution's tuned configuration goes to this machine's perf-db, so the solver
/// builds with it instead of its default.
fn install_config(handle: &Handle, solution: &Solution, problem: &FusedProblem) {
    if let Some(config) = &solution.config {
        let key = problem.key();
        if perf_db::lookup(handle.device(), solution.solver, &key).as_deref() != Some(config) {
            perf_db::store(handle.device(), solution.solver, &key, config);
        }
    }
}
