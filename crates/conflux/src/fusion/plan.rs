//! `FusionPlan`: an ordered list of ops over an input descriptor. Each op's output descriptor
//! is derived as it is added, and shapes are checked then (MIOpen defers these checks to
//! compile or execute; conflux reports them at op creation with BadParm).

use crate::problem::{OpArg, OpArgs};
use super::lower::lower;
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

struct Compiled {
    problem: FusedProblem,
    solver: &'static dyn Solver,
    invoker: Arc<dyn Invoker>,
}

/// `miopenFusionPlanDescriptor_t`.
pub struct FusionPlan {
    direction: FusionDirection,
    input: TensorDesc,
    ops: Vec<FusionOp>,
    algo: Option<ConvAlgorithm>,
    find_mode: FindMode,
    compiled: Option<Compiled>,
}

impl FusionPlan {
    pub fn new(direction: FusionDirection, input: TensorDesc) -> FusionPlan {
        FusionPlan { direction, input, ops: Vec::new(), algo: None, find_mode: crate::search::default_find_mode(), compiled: None }
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
    /// Descriptor of the plan's output (the last op's output, or the input for an empty plan).
    pub fn output_desc(&self) -> &TensorDesc {
        self.ops.last().map(|o| &o.output).unwrap_or(&self.input)
    }

    fn push(&mut self, kind: FusionOpKind, output: TensorDesc) -> usize {
        let input = self.output_desc().clone();
        self.ops.push(FusionOp { kind, input, output });
        self.compiled = None;
        self.ops.len() - 1
    }

    fn current(&self) -> &TensorDesc { self.output_desc() }

    /// `miopenCreateOpConvForward`. The output shape is computed and validated now.
    pub fn add_conv_forward(&mut self, conv: &ConvDesc, w: &TensorDesc) -> Result<usize> {
        let at = self.ops.len();
        let x = self.current().clone();
        let y = conv.output_desc(&x, w).map_err(|e| e.context(format!("op {at} (convolution forward)")))?;
        crate::problem::ConvProblem::forward(conv, &x, w, &y).map_err(|e| e.context(format!("op {at} (convolution forward)")))?;
        Ok(self.push(FusionOpKind::ConvForward { conv: conv.clone(), w: w.clone() }, y))
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
        Ok(self.push(FusionOpKind::BiasForward { b: b.clone() }, x))
    }

    pub fn add_activation(&mut self, mode: ActivationMode) -> Result<usize> {
        let x = self.current().clone();
        Ok(self.push(FusionOpKind::ActivationForward { mode }, x))
    }

    pub fn add_activation_backward(&mut self, mode: ActivationMode) -> Result<usize> {
        let x = self.current().clone();
        Ok(self.push(FusionOpKind::ActivationBackward { mode }, x))
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
        Ok(self.push(FusionOpKind::BnInference { mode, param: param.clone() }, x))
    }

    /// `miopenCreateOpBatchNormForward` (training). Parameters are Float, derived shape.
    pub fn add_bn_forward(&mut self, mode: BnMode, running: bool) -> Result<usize> {
        let at = self.ops.len();
        let x = self.current().clone();
        derive_bn_desc(&x, mode).map_err(|e| e.context(format!("op {at} (batch-norm forward training)")))?;
        Ok(self.push(FusionOpKind::BnForward { mode, running }, x))
    }

    /// `miopenCreateOpBatchNormBackward`: plan input is dy, output dx.
    pub fn add_bn_backward(&mut self, mode: BnMode) -> Result<usize> {
        let at = self.ops.len();
        let x = self.current().clone();
        derive_bn_desc(&x, mode).map_err(|e| e.context(format!("op {at} (batch-norm backward)")))?;
        Ok(self.push(FusionOpKind::BnBackward { mode }, x))
    }

    /// Residual add `out = in + α·z`; z must have the current output's lengths.
    pub fn add_tensor_add(&mut self, z: &TensorDesc) -> Result<usize> {
        let at = self.ops.len();
        let x = self.current().clone();
        ensure!(
            z.lens() == x.lens() && z.dtype() == x.dtype(),
            BadParm,
            "op {at} (tensor add): z ({}) must match the op input ({})",
            z.key(),
            x.key()
        );
        Ok(self.push(FusionOpKind::AddTensor { z: z.clone() }, x))
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

    /// The fused problem this plan lowers to (UnsupportedOp with a reason otherwise).
    pub fn problem(&self) -> Result<FusedProblem> {
        lower(self.direction, &self.input, &self.ops)
    }

    /// `miopenCompileFusionPlan`: lower, select a solver, build (or reuse) its invoker.
    pub fn compile(&mut self, handle: &Handle) -> Result<()> {
        self.compiled = None;
        let problem = self.problem()?;
        super::log_cmd::plan("CompileFusionPlan", &self.input, &self.ops, || problem.short_name());
        let algo = if problem.conv_problem().is_some() { self.algo } else { None };
        let solver = search::pick_for_plan(handle, &problem, algo, self.find_mode)?;
        let invoker = handle.invoker(&problem, solver)?;
        tracing::debug!(plan = %problem.short_name(), solver = solver.name(), "fusion plan compiled");
        self.compiled = Some(Compiled { problem, solver, invoker });
        Ok(())
    }

    pub fn is_compiled(&self) -> bool { self.compiled.is_some() }
    /// Name of the solver chosen at compile time.
    pub fn solver_name(&self) -> Option<&'static str> { self.compiled.as_ref().map(|c| c.solver.name()) }

    /// `miopenFusionPlanConvolutionGetAlgo`: the algorithms that have an applicable solver for
    /// this plan on this handle (MIOpen returns a fixed list).
    pub fn convolution_algos(&self, handle: &Handle) -> Result<Vec<ConvAlgorithm>> {
        let problem = self.problem()?;
        let mut algos: Vec<ConvAlgorithm> = Vec::new();
        for s in search::applicable(handle, &problem).unwrap_or_default() {
            if !algos.contains(&s.algorithm()) {
                algos.push(s.algorithm());
            }
        }
        Ok(algos)
    }

    /// `miopenFusionPlanGetWorkSpaceSize`: workspace of the compiled solver (else of the
    /// solver compile would choose).
    pub fn workspace_size(&self, handle: &Handle) -> Result<usize> {
        if let Some(c) = &self.compiled {
            return Ok(c.solver.workspace_bytes(&c.problem));
        }
        let problem = self.problem()?;
        Ok(search::first_applicable(handle, &problem, self.algo)?.workspace_bytes(&problem))
    }

    /// `miopenExecuteFusionPlan`. Descriptors must equal the compiled ones; every op needs its
    /// arguments. Nothing is written when a check fails.
    pub fn execute(&self, handle: &Handle, x_desc: &TensorDesc, x: DevPtr, y_desc: &TensorDesc, y: DevPtr, args: &OpArgs) -> Result<()> {
        let Some(c) = &self.compiled else {
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
        let mut w = DevPtr::NULL;
        let (mut alpha, mut beta) = (1.0, 0.0);
        let mut rest: Vec<OpArg> = Vec::with_capacity(self.ops.len());
        for (i, op) in self.ops.iter().enumerate() {
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
        // A transpose convolution runs as the backward-data of a normal one, whose "x" is the
        // plan's output and whose "y" is the plan's input.
        let (x, y) = match c.problem.direction() {
            Some(crate::types::Direction::BackwardData) => (y, x),
            _ => (x, y),
        };
        let run = RunArgs { x, w, y, alpha, beta, workspace: DevPtr::NULL, workspace_bytes: 0, ops: &rest };
        crate::solver::invoke(&*c.invoker, handle, &run)
    }
}
