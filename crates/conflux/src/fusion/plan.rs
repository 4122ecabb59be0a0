//! `FusionPlan`: an ordered list of ops over an input descriptor. Each op's output descriptor
//! is derived as it is added, and shapes are checked then (MIOpen defers these checks to
//! compile or execute; conflux reports them at op creation with BadParm). A vertical plan is
//! one chain; a horizontal plan is one chain per convolution over the same input, its output
//! the chains' outputs concatenated along channels (`horizontal.rs`).

use crate::problem::{OpArg, OpArgs};
use super::horizontal::{self, Branch, Merged};
use super::lower::lower;
use super::staged;
use crate::problem::FusedProblem;
use crate::batchnorm::derive_bn_desc;
use crate::conv_desc::ConvDesc;
use crate::error::{Error, Result};
use crate::handle::Handle;
use crate::memory::DevPtr;
use crate::search;
use crate::solver::{Invoker, RunArgs, Solver};
use crate::tensor::TensorDesc;
use crate::types::{ActivationMode, BnMode, ConvAlgorithm, FindMode, FusionDirection};
use crate::{bail, ensure};
use std::sync::Arc;

/// What an op computes (compile-time data only).
#[derive(Clone, Debug, PartialEq)]
pub enum FusionOpKind {
    ConvForward { conv: ConvDesc, w: TensorDesc },
    BiasForward { b: TensorDesc },
    ActivationForward { mode: ActivationMode },
    ActivationBackward { mode: ActivationMode },
    BnInference { mode: BnMode, param: TensorDesc },
    BnForward { mode: BnMode, running: bool },
    BnBackward { mode: BnMode },
    /// Residual add `out = in + α·z` (MIOpen's internal TensorScaleAdd).
    AddTensor { z: TensorDesc },
}

impl FusionOpKind {
    pub fn name(&self) -> &'static str {
        match self {
            FusionOpKind::ConvForward { .. } => "convolution forward",
            FusionOpKind::BiasForward { .. } => "bias forward",
            FusionOpKind::ActivationForward { .. } => "activation forward",
            FusionOpKind::ActivationBackward { .. } => "activation backward",
            FusionOpKind::BnInference { .. } => "batch-norm inference",
            FusionOpKind::BnForward { .. } => "batch-norm forward training",
            FusionOpKind::BnBackward { .. } => "batch-norm backward",
            FusionOpKind::AddTensor { .. } => "tensor add",
        }
    }

    /// Does `arg` belong to an op of this kind?
    fn accepts(&self, arg: &OpArg) -> bool {
        matches!(
            (self, arg),
            (FusionOpKind::ConvForward { .. }, OpArg::Conv { .. })
                | (FusionOpKind::BiasForward { .. }, OpArg::Bias { .. })
                | (FusionOpKind::ActivationForward { .. }, OpArg::Activation { .. })
                | (FusionOpKind::ActivationBackward { .. }, OpArg::ActivationBackward { .. })
                | (FusionOpKind::BnInference { .. }, OpArg::BnInference { .. })
                | (FusionOpKind::BnForward { .. }, OpArg::BnForward { .. })
                | (FusionOpKind::BnBackward { .. }, OpArg::BnBackward { .. })
                | (FusionOpKind::AddTensor { .. }, OpArg::AddTensor { .. })
        )
    }
}

/// One op of a plan with its derived input and output descriptors.
#[derive(Clone, Debug)]
pub struct FusionOp {
    pub kind: FusionOpKind,
    pub input: TensorDesc,
    pub output: TensorDesc,
}

/// What execute runs: one chain, a horizontal plan's run of merging branches, or a vertical
/// plan's two chains through scratch (x → t → y; `staged.rs`).
enum Chain {
    One(Compiled),
    Merged(MergedChain),
    Staged { first: Compiled, second: Compiled, t_bytes: usize },
}

/// Consecutive horizontal branches run as one convolution over their concatenated filters
/// (`horizontal::merged_runs`); the branches compiled on their own too, for runs whose
/// arguments differ between branches (α, β or activation arguments).
struct MergedChain {
    merged: Compiled,
    branches: Vec<Compiled>,
}

/// One compiled chain: a vertical plan's, or one branch of a horizontal plan (its ops and the
/// byte offset of its channel slice in the output).
struct Compiled {
    problem: FusedProblem,
    solver: &'static dyn Solver,
    invoker: Arc<dyn Invoker>,
    ops: std::ops::Range<usize>,
    y_offset: u64,
}

/// `miopenFusionPlanDescriptor_t`.
pub struct FusionPlan {
    direction: FusionDirection,
    input: TensorDesc,
    ops: Vec<FusionOp>,
    algo: Option<ConvAlgorithm>,
    /// A solution id compile must use (Find 2.0 runs the solution it found or loaded).
    solution: Option<u64>,
    find_mode: FindMode,
    compiled: Option<Vec<Chain>>,
    /// A horizontal plan's output (the branches concatenated), once it has a convolution.
    concat: Option<TensorDesc>,
}

impl FusionPlan {
    pub fn new(direction: FusionDirection, input: TensorDesc) -> FusionPlan {
        FusionPlan { direction, input, ops: Vec::new(), algo: None, solution: None, find_mode: crate::search::default_find_mode(), compiled: None, concat: None }
    }

    pub fn input_desc(&self) -> &TensorDesc { &self.input }
    pub fn direction(&self) -> FusionDirection { self.direction }
    pub fn ops(&self) -> &[FusionOp] { &self.ops }
    /// `miopenFusionPlanGetOp`: BadParm when out of range.
    pub fn op(&self, index: i64) -> Result<&FusionOp> {
        usize::try_from(index)
            .ok()
            .and_then(|i| self.ops.get(i))
            .ok_or_else(|| Error::bad_parm(format!("fusion plan: op index {index} out of range (plan has {} ops)", self.ops.len())))
    }
    /// Descriptor of the plan's output: the last op's output, or the input for an empty plan;
    /// for a horizontal plan the branches' outputs concatenated along channels.
    pub fn output_desc(&self) -> &TensorDesc {
        self.concat.as_ref().or(self.ops.last().map(|o| &o.output)).unwrap_or(&self.input)
    }

    fn push(&mut self, kind: FusionOpKind, input: TensorDesc, output: TensorDesc) -> usize {
        self.ops.push(FusionOp { kind, input, output });
        if self.direction == FusionDirection::Horizontal {
            self.concat = horizontal::concat_output(&self.input, &self.ops);
        }
        self.compiled = None;
        self.ops.len() - 1
    }

    /// The input of the next pointwise op: the last op's output (in a horizontal plan, its
    /// branch's), or the plan's input.
    fn current(&self) -> &TensorDesc { self.ops.last().map(|o| &o.output).unwrap_or(&self.input) }

    /// A pointwise op on the current tensor.
    fn push_pointwise(&mut self, kind: FusionOpKind, x: TensorDesc) -> usize { self.push(kind, x.clone(), x) }

    /// `miopenCreateOpConvForward`. The output shape is computed and validated now. In a
    /// horizontal plan the convolution starts a branch reading the plan's input, whose output
    /// must equal the earlier branches' but for its channels.
    pub fn add_conv_forward(&mut self, conv: &ConvDesc, w: &TensorDesc) -> Result<usize> {
        let at = self.ops.len();
        let x = if self.direction == FusionDirection::Horizontal { self.input.clone() } else { self.current().clone() };
        let y = conv.output_desc(&x, w).map_err(|e| e.context(format!("op {at} (convolution forward)")))?;
        crate::problem::ConvProblem::forward(conv, &x, w, &y).map_err(|e| e.context(format!("op {at} (convolution forward)")))?;
        if let Some(concat) = &self.concat {
            horizontal::check_branch_shape(at, concat, &y)?;
        }
        Ok(self.push(FusionOpKind::ConvForward { conv: conv.clone(), w: w.clone() }, x, y))
    }

    /// `miopenCreateOpBiasForward`: b must be 1×C×1×1(×1) for the op's input channels C.
    pub fn add_bias(&mut self, b: &TensorDesc) -> Result<usize> {
        let at = self.ops.len();
        let x = self.current().clone();
        ensure!(
            b.rank() == x.rank() && b.lens()[1] == x.c() && b.lens().iter().enumerate().all(|(i, &l)| i == 1 || l == 1),
            BadParm,
            "op {at} (bias forward): bias lengths {:?} must be 1×{}×1… for input lengths {:?}",
            b.lens(),
            x.c(),
            x.lens()
        );
        ensure!(b.dtype().is_compute_type(), BadParm, "op {at} (bias forward): bias type {:?} not supported", b.dtype());
        Ok(self.push_pointwise(FusionOpKind::BiasForward { b: b.clone() }, x))
    }

    pub fn add_activation(&mut self, mode: ActivationMode) -> Result<usize> {
        let x = self.current().clone();
        Ok(self.push_pointwise(FusionOpKind::ActivationForward { mode }, x))
    }

    pub fn add_activation_backward(&mut self, mode: ActivationMode) -> Result<usize> {
        let x = self.current().clone();
        Ok(self.push_pointwise(FusionOpKind::ActivationBackward { mode }, x))
    }

    /// `miopenCreateOpBatchNormInference`: `param` must have the derived BN shape.
    pub fn add_bn_inference(&mut self, mode: BnMode, param: &TensorDesc) -> Result<usize> {
        let at = self.ops.len();
        let x = self.current().clone();
        let want = derive_bn_desc(&x, mode).map_err(|e| e.context(format!("op {at} (batch-norm inference)")))?;
        ensure!(
            param.lens() == want.lens() && param.is_packed(),
            BadParm,
            "op {at} (batch-norm inference): parameter lengths {:?} must be packed {:?} for {mode:?} mode",
            param.lens(),
            want.lens()
        );
        ensure!(param.dtype().is_compute_type(), BadParm, "op {at} (batch-norm inference): parameter type {:?} not supported", param.dtype());
        Ok(self.push_pointwise(FusionOpKind::BnInference { mode, param: param.clone() }, x))
    }

    /// `miopenCreateOpBatchNormForward` (training). Parameters are Float, derived shape.
    pub fn add_bn_forward(&mut self, mode: BnMode, running: bool) -> Result<usize> {
        let at = self.ops.len();
        let x = self.current().clone();
        derive_bn_desc(&x, mode).map_err(|e| e.context(format!("op {at} (batch-norm forward training)")))?;
        Ok(self.push_pointwise(FusionOpKind::BnForward { mode, running }, x))
    }

    /// `miopenCreateOpBatchNormBackward`: plan input is dy, output dx.
    pub fn add_bn_backward(&mut self, mode: BnMode) -> Result<usize> {
        let at = self.ops.len();
        let x = self.current().clone();
        derive_bn_desc(&x, mode).map_err(|e| e.context(format!("op {at} (batch-norm backward)")))?;
        Ok(self.push_pointwise(FusionOpKind::BnBackward { mode }, x))
    }

    /// Residual add `out = in + α·z`; z must have the current output's lengths.
    pub fn add_tensor_add(&mut self, z: &TensorDesc) -> Result<usize> {
        let at = self.ops.len();
        let x = self.current().clone();
        // After an int8 / fp8 convolution with an 8-bit or int32 output the sum runs in f32:
        // z may then be of any compute type.
        let z_type_ok = z.dtype() == x.dtype() || (!x.dtype().is_compute_type() && z.dtype().is_compute_type());
        ensure!(
            z.lens() == x.lens() && z_type_ok,
            BadParm,
            "op {at} (tensor add): z ({}) must match the op input ({})",
            z.key(),
            x.key()
        );
        Ok(self.push_pointwise(FusionOpKind::AddTensor { z: z.clone() }, x))
    }

    /// `confluxFusionPlanSetOutputType`: the output type of a vertical plan around an int8 or
    /// fp8 convolution (`quant.rs`: int8 → Int32, Float, Half, BFloat16, Int8; fp8 → Float,
    /// Half, BFloat16, Float8, BFloat8). The convolution's output and every later op's tensors
    /// take it: the epilogue runs in f32 and the result is converted once. Ops added later
    /// keep it. Other plans: BadParm.
    pub fn set_output_type(&mut self, dt: crate::types::DataType) -> Result<()> {
        let what = "fusion plan output type";
        ensure!(self.direction == FusionDirection::Vertical, BadParm, "{what}: vertical plans only");
        let Some(at) = self.ops.iter().position(|o| matches!(o.kind, FusionOpKind::ConvForward { .. })) else {
            bail!(BadParm, "{what}: the plan has no convolution (add it first)")
        };
        let FusionOpKind::ConvForward { conv, w } = &self.ops[at].kind else { unreachable!() };
        let (x, y) = (&self.ops[at].input, self.ops[at].output.with_dtype(dt)?);
        let dir = if conv.mode() == crate::types::ConvMode::Transpose { crate::types::Direction::BackwardData } else { crate::types::Direction::Forward };
        ensure!(
            crate::quant::conv_types(what, dir, x, w, &y)?.is_some(),
            BadParm,
            "{what}: {dt:?} outputs are for int8 and fp8 convolutions (x is {:?})",
            x.dtype()
        );
        for (i, op) in self.ops.iter_mut().enumerate().skip(at) {
            if i > at {
                op.input = op.input.with_dtype(dt)?;
            }
            op.output = op.output.with_dtype(dt)?;
        }
        self.compiled = None;
        Ok(())
    }

    /// `miopenFusionPlanConvolutionSetAlgo`: restrict the convolution solver's algorithm.
    pub fn set_algo(&mut self, algo: ConvAlgorithm) {
        self.algo = Some(algo);
        self.compiled = None;
    }

    /// How compile chooses the convolution solver (MIOpen's find modes; the default is
    /// `MIOPEN_FIND_MODE_FUSION`, else Fast): Fast takes the find-db's fastest solver when
    /// one is recorded, else the first applicable; Hybrid and DynamicHybrid take the find-db's
    /// fastest, else time every applicable solver on scratch buffers during compile (and
    /// record the result); Normal always times them. Plans without a convolution have one
    /// solver per device and never time.
    pub fn set_find_mode(&mut self, mode: FindMode) {
        self.find_mode = mode;
        self.compiled = None;
    }
    pub fn find_mode(&self) -> FindMode { self.find_mode }

    /// Compile with solution `id` (BadParm at compile when it does not apply), or choose as
    /// usual (None). Applies to plans that lower to one problem.
    pub fn set_solution(&mut self, id: Option<u64>) {
        self.solution = id;
        self.compiled = None;
    }

    /// The fused problem this plan lowers to (UnsupportedOp with a reason otherwise); a
    /// horizontal plan of several branches lowers to one problem each (`problems`).
    pub fn problem(&self) -> Result<FusedProblem> {
        let mut all = self.problems()?;
        if all.len() > 1 {
            bail!(UnsupportedOp, "fusion plan: this plan lowers to {} problems (horizontal branches, or a prologue and its convolution)", all.len());
        }
        Ok(all.remove(0))
    }

    /// The problem of each chain: one for a vertical plan (two for a prologue and its
    /// convolution, or a convolution and BN training), one per branch of a horizontal one.
    pub fn problems(&self) -> Result<Vec<FusedProblem>> {
        if let Some(p) = self.staged()? {
            return Ok(vec![p.first, p.second]);
        }
        Ok(self.chains()?.into_iter().map(|b| b.problem).collect())
    }

    /// A vertical plan's two-chain split (`staged.rs`), if it has one.
    fn staged(&self) -> Result<Option<staged::Staged>> {
        if self.direction != FusionDirection::Vertical {
            return Ok(None);
        }
        staged::split(&self.input, &self.ops)
    }

    /// The chains compile builds, with their ops and output channel offsets.
    fn chains(&self) -> Result<Vec<Branch>> {
        match (self.direction, &self.concat) {
            (FusionDirection::Vertical, _) => Ok(vec![Branch { ops: 0..self.ops.len(), k_offset: 0, problem: lower(self.direction, &self.input, &self.ops)? }]),
            (FusionDirection::Horizontal, Some(out)) => horizontal::branches(&self.input, &self.ops, out),
            (FusionDirection::Horizontal, None) => match self.ops.first() {
                None => Err(Error::unknown("fusion plan: the plan has no operators")),
                Some(op) => Err(Error::unsupported(format!(
                    "op 0 ({}): a horizontal plan starts with a convolution (every convolution starts a branch)",
                    op.kind.name()
                ))),
            },
        }
    }

    /// `miopenCompileFusionPlan`: lower, select a solver, build (or reuse) its invoker — per
    /// branch for a horizontal plan, and per run of branches that merge.
    pub fn compile(&mut self, handle: &Handle) -> Result<()> {
        self.compiled = None;
        if let Some(p) = self.staged()? {
            let first = self.compile_chain(handle, p.first, 0..p.split_at, 0)?;
            let second = self.compile_chain(handle, p.second, p.split_at..self.ops.len(), 0)?;
            self.compiled = Some(vec![Chain::Staged { first, second, t_bytes: p.t.num_bytes() }]);
            return Ok(());
        }
        let chains = self.chains()?;
        let out = self.output_desc().clone();
        // Merged branches copy their filters together per execute: on the GPU six small copies
        // cost more than the x reads they save (bench/results/2026-11-28-horizontal-fusion.md),
        // so only the CPU merges.
        let runs = match (self.direction, &self.concat, handle.device_kind()) {
            (FusionDirection::Horizontal, Some(out), crate::handle::DeviceKind::Cpu) => horizontal::merged_runs(&self.input, &self.ops, out, &chains)?,
            _ => Vec::new(),
        };
        let offset = |k: usize| (k * out.strides()[1] * out.dtype().size()) as u64;
        let mut one = Vec::with_capacity(chains.len());
        for chain in &chains {
            one.push(self.compile_chain(handle, chain.problem.clone(), chain.ops.clone(), offset(chain.k_offset))?);
        }
        let mut compiled = Vec::new();
        let mut singles = one.into_iter().enumerate().peekable();
        for Merged { branches, problem } in runs {
            while let Some((_, c)) = singles.next_if(|(i, _)| *i < branches.start) {
                compiled.push(Chain::One(c));
            }
            let ops = chains[branches.start].ops.start..chains[branches.end - 1].ops.end;
            let merged = self.compile_chain(handle, problem, ops, offset(chains[branches.start].k_offset))?;
            let parts = (0..branches.len()).filter_map(|_| singles.next().map(|(_, c)| c)).collect();
            compiled.push(Chain::Merged(MergedChain { merged, branches: parts }));
        }
        compiled.extend(singles.map(|(_, c)| Chain::One(c)));
        self.compiled = Some(compiled);
        Ok(())
    }

    fn compile_chain(&self, handle: &Handle, problem: FusedProblem, ops: std::ops::Range<usize>, y_offset: u64) -> Result<Compiled> {
        super::log_cmd::plan("CompileFusionPlan", &self.input, &self.ops[ops.clone()], || problem.short_name());
        let algo = if problem.conv_problem().is_some() { self.algo } else { None };
        let solver = match self.solution {
            Some(id) => search::solution(handle, &problem, id, usize::MAX)?,
            None => search::pick_for_plan(handle, &problem, algo, self.find_mode)?,
        };
        let invoker = handle.invoker(&problem, solver)?;
        tracing::debug!(plan = %problem.short_name(), solver = solver.name(), "fusion plan compiled");
        Ok(Compiled { problem, solver, invoker, ops, y_offset })
    }

    pub fn is_compiled(&self) -> bool { self.compiled.is_some() }
    /// Name of the solver chosen at compile time (a horizontal plan's first branch's).
    pub fn solver_name(&self) -> Option<&'static str> { self.solver_names().first().copied() }
    /// The solver of each compiled chain in op order (a run of merged horizontal branches once).
    pub fn solver_names(&self) -> Vec<&'static str> {
        self.compiled.iter().flatten().map(|c| match c {
            Chain::One(c) => c.solver.name(),
            Chain::Staged { first, second, .. } => if first.problem.conv_problem().is_some() { first.solver.name() } else { second.solver.name() },
            Chain::Merged(m) => m.merged.solver.name(),
        }).collect()
    }

    /// `miopenFusionPlanConvolutionGetAlgo`: the algorithms that have an applicable solver for
    /// this plan on this handle (MIOpen returns a fixed list); for a horizontal plan, those
    /// every branch has (`set_algo` applies to all of them).
    pub fn convolution_algos(&self, handle: &Handle) -> Result<Vec<ConvAlgorithm>> {
        let mut common: Option<Vec<ConvAlgorithm>> = None;
        // A prologue's pointwise pass has no convolution: the convolution's algorithms count.
        let problems = self.problems()?;
        let with_conv = problems.iter().any(|p| p.conv_problem().is_some());
        for problem in problems.into_iter().filter(|p| !with_conv || p.conv_problem().is_some()) {
            let mut algos: Vec<ConvAlgorithm> = Vec::new();
            for s in search::applicable(handle, &problem).unwrap_or_default() {
                if !algos.contains(&s.algorithm()) {
                    algos.push(s.algorithm());
                }
            }
            common = Some(match common {
                None => algos,
                Some(c) => c.into_iter().filter(|a| algos.contains(a)).collect(),
            });
        }
        Ok(common.unwrap_or_default())
    }

    /// `miopenFusionPlanGetWorkSpaceSize`: workspace of the compiled solvers (else of those
    /// compile would choose); the largest over a horizontal plan's branches, which run in turn.
    pub fn workspace_size(&self, handle: &Handle) -> Result<usize> {
        if let Some(chains) = &self.compiled {
            let each = |c: &Compiled| c.solver.workspace_bytes(&c.problem);
            let most = chains.iter().map(|c| match c {
                Chain::One(c) => each(c),
                Chain::Merged(m) => m.branches.iter().map(each).fold(each(&m.merged), usize::max),
                Chain::Staged { first, second, .. } => each(first).max(each(second)),
            });
            return Ok(most.max().unwrap_or(0));
        }
        let mut most = 0;
        for problem in self.problems()? {
            most = most.max(search::first_applicable(handle, &problem, self.algo)?.workspace_bytes(&problem));
        }
        Ok(most)
    }

    /// `miopenExecuteFusionPlan`. Descriptors must equal the compiled ones; every op needs its
    /// arguments. Nothing is written when a check fails.
    pub fn execute(&self, handle: &Handle, x_desc: &TensorDesc, x: DevPtr, y_desc: &TensorDesc, y: DevPtr, args: &OpArgs) -> Result<()> {
        let Some(compiled) = &self.compiled else {
            bail!(BadParm, "fusion plan: execute before a successful compile");
        };
        ensure!(
            x_desc == &self.input,
            BadParm,
            "fusion plan: input descriptor {} differs from the plan's {}",
            x_desc.key(),
            self.input.key()
        );
        ensure!(
            y_desc == self.output_desc(),
            BadParm,
            "fusion plan: output descriptor {} differs from the plan's derived output {}",
            y_desc.key(),
            self.output_desc().key()
        );
        ensure!(!x.is_null(), BadParm, "fusion plan: input pointer is NULL");
        ensure!(!y.is_null(), BadParm, "fusion plan: output pointer is NULL");
        // Every op's arguments are checked before any chain runs.
        let mut runs = Vec::with_capacity(compiled.len());
        for chain in compiled {
            runs.push(match chain {
                Chain::One(c) => vec![self.chain_args(c.ops.clone(), args)?],
                Chain::Merged(m) => m.branches.iter().map(|c| self.chain_args(c.ops.clone(), args)).collect::<Result<Vec<_>>>()?,
                Chain::Staged { first, second, .. } => vec![self.chain_args(first.ops.clone(), args)?, self.chain_args(second.ops.clone(), args)?],
            });
        }
        for (chain, run) in compiled.iter().zip(runs) {
            match chain {
                Chain::One(c) => Self::run_chain(handle, c, x, y, &run[0])?,
                Chain::Staged { first, second, t_bytes } => handle.device().with_concatenated(handle, &[(0, *t_bytes)], |t| {
                    Self::run_chain(handle, first, x, DevPtr(t), &run[0])?;
                    Self::run_chain(handle, second, DevPtr(t), y, &run[1])
                })?,
                Chain::Merged(m) => {
                    let (_, alpha, beta, rest) = &run[0];
                    let same = run.iter().all(|(_, a, b, r)| a == alpha && b == beta && same_pointwise_args(r, rest));
                    if !same {
                        for (c, r) in m.branches.iter().zip(&run) {
                            Self::run_chain(handle, c, x, y, r)?;
                        }
                        continue;
                    }
                    self.run_merged(handle, m, x, y, &run)?;
                }
            }
        }
        Ok(())
    }

    /// One compiled chain with its arguments (weights, α, β, the other ops').
    fn run_chain(handle: &Handle, c: &Compiled, x: DevPtr, y: DevPtr, (w, alpha, beta, rest): &(DevPtr, f64, f64, Vec<OpArg>)) -> Result<()> {
        let y = DevPtr(y.0 + c.y_offset);
        // A transpose convolution runs as the backward-data of a normal one, whose "x" is the
        // plan's output and whose "y" is the plan's input.
        let (x, y) = match c.problem.direction() {
            Some(crate::types::Direction::BackwardData) => (y, x),
            _ => (x, y),
        };
        let run = RunArgs { x, w: *w, y, alpha: *alpha, beta: *beta, workspace: DevPtr::NULL, workspace_bytes: 0, ops: rest };
        crate::solver::invoke(&*c.invoker, handle, &run)
    }

    /// A run of merged branches: their filters, then (256-byte aligned) their biases, copied
    /// into one scratch block; the merged chain reads them there.
    fn run_merged(&self, handle: &Handle, m: &MergedChain, x: DevPtr, y: DevPtr, run: &[(DevPtr, f64, f64, Vec<OpArg>)]) -> Result<()> {
        let mut pieces = Vec::new();
        for (c, (w, ..)) in m.branches.iter().zip(run) {
            let FusionOpKind::ConvForward { w: wd, .. } = &self.ops[c.ops.start].kind else {
                bail!(InternalError, "fusion plan: a merged branch does not start with its convolution");
            };
            pieces.push((w.0, wd.num_bytes()));
        }
        let w_bytes: usize = pieces.iter().map(|p| p.1).sum();
        pieces.push((0, w_bytes.next_multiple_of(256) - w_bytes));
        let b_at = w_bytes.next_multiple_of(256) as u64;
        let mut has_bias = false;
        for (c, (_, _, _, rest)) in m.branches.iter().zip(run) {
            for (op, arg) in self.ops[c.ops.start + 1..c.ops.end].iter().zip(rest) {
                if let (FusionOpKind::BiasForward { b }, OpArg::Bias { b: bp }) = (&op.kind, arg) {
                    pieces.push((bp.0, b.num_bytes()));
                    has_bias = true;
                }
            }
        }
        let (_, alpha, beta, rest) = &run[0];
        handle.device().with_concatenated(handle, &pieces, |base| {
            let ops: Vec<OpArg> = rest.iter().map(|a| match a {
                OpArg::Bias { .. } if has_bias => OpArg::Bias { b: DevPtr(base + b_at) },
                other => *other,
            }).collect();
            Self::run_chain(handle, &m.merged, x, y, &(DevPtr(base), *alpha, *beta, ops))
        })
    }

    /// One chain's run arguments from the plan's: (weights, α, β, the other ops' arguments).
    fn chain_args(&self, ops: std::ops::Range<usize>, args: &OpArgs) -> Result<(DevPtr, f64, f64, Vec<OpArg>)> {
        let mut w = DevPtr::NULL;
        let (mut alpha, mut beta) = (1.0, 0.0);
        let mut rest: Vec<OpArg> = Vec::with_capacity(ops.len());
        for i in ops {
            let op = &self.ops[i];
            let Some(arg) = args.get(i) else {
                bail!(BadParm, "fusion plan: op {i} ({}) has no arguments set", op.kind.name());
            };
            ensure!(
                op.kind.accepts(arg),
                BadParm,
                "fusion plan: op {i} ({}) was given arguments of a {} op",
                op.kind.name(),
                arg.kind_name()
            );
            match arg {
                OpArg::Conv { w: wp, alpha: a, beta: b } => {
                    ensure!(!wp.is_null(), BadParm, "fusion plan: op {i} (convolution forward): weights pointer is NULL");
                    w = *wp;
                    alpha = *a;
                    beta = *b;
                }
                other => rest.push(*other),
            }
        }
        Ok((w, alpha, beta, rest))
    }
}

/// Whether two merged branches' pointwise arguments give the same results: equal but for the
/// bias pointers (which are concatenated).
fn same_pointwise_args(a: &[OpArg], b: &[OpArg]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| matches!((x, y), (OpArg::Bias { .. }, OpArg::Bias { .. })) || x == y)
}
