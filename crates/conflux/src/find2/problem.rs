//! A Find 2.0 problem (`miopenProblem_t`): one operator, or several fused in order, with the
//! tensor descriptors the caller registered by argument id, and how it lowers onto the
//! convolution API (one convolution, any direction) or a fusion plan (everything else).

use crate::activation::ActivationDesc;
use crate::conv::{ConvDesc, ConvProblem};
use crate::error::{Error, Result};
use crate::fusion::FusionPlan;
use crate::softmax::{SoftmaxAlgorithm, SoftmaxMode};
use crate::tensor::TensorDesc;
use crate::types::{BnMode, FusionDirection};
use crate::{bail, ensure};
use std::collections::BTreeMap;

/// `miopenTensorArgumentId_t` values (MIOpen's numbering; scalars have the top bit set).
pub mod arg {
    pub const CONV_X: u32 = 1;
    pub const CONV_W: u32 = 2;
    pub const CONV_Y: u32 = 3;
    pub const ACTIVATION_X: u32 = 37;
    pub const ACTIVATION_Y: u32 = 38;
    pub const ACTIVATION_DX: u32 = 39;
    pub const ACTIVATION_DY: u32 = 40;
    pub const BIAS_X: u32 = 41;
    pub const BIAS_Y: u32 = 42;
    pub const BIAS: u32 = 43;
    pub const SOFTMAX_X: u32 = 44;
    pub const SOFTMAX_Y: u32 = 45;
    pub const SOFTMAX_DX: u32 = 46;
    pub const SOFTMAX_DY: u32 = 47;
    pub const BN_X: u32 = 48;
    pub const BN_Y: u32 = 49;
    pub const BN_RUNNING_MEAN: u32 = 50;
    pub const BN_RUNNING_VARIANCE: u32 = 51;
    pub const BN_SAVED_MEAN: u32 = 52;
    pub const BN_SAVED_VARIANCE: u32 = 53;
    pub const BN_SCALE: u32 = 54;
    pub const BN_SCALE_DIFF: u32 = 55;
    pub const BN_ESTIMATED_MEAN: u32 = 56;
    pub const BN_ESTIMATED_VARIANCE: u32 = 57;
    pub const BN_BIAS: u32 = 58;
    pub const BN_BIAS_DIFF: u32 = 59;
    pub const BN_DX: u32 = 60;
    pub const BN_DY: u32 = 61;
    pub const SCALAR: u32 = 1 << 31;
    pub const BN_EXP_AVG_FACTOR: u32 = SCALAR | 2;
    pub const BN_EPSILON: u32 = SCALAR | 3;
}

/// `miopenProblemDirection_t`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProblemDirection {
    Forward = 0,
    Backward = 1,
    BackwardWeights = 2,
    Inference = 4,
}

impl ProblemDirection {
    pub fn from_i32(v: i32) -> Result<ProblemDirection> {
        Ok(match v {
            0 => ProblemDirection::Forward,
            1 => ProblemDirection::Backward,
            2 => ProblemDirection::BackwardWeights,
            4 => ProblemDirection::Inference,
            _ => bail!(BadParm, "problem direction {v} is not defined"),
        })
    }
}

/// The operator of one problem.
#[derive(Clone, Debug, PartialEq)]
pub enum Operator {
    Conv(ConvDesc),
    Activation(ActivationDesc),
    Bias,
    BatchNorm { mode: BnMode, running: bool },
    Softmax { algo: SoftmaxAlgorithm, mode: SoftmaxMode, alpha: f64, beta: f64 },
}

impl Operator {
    fn name(&self) -> &'static str {
        match self {
            Operator::Conv(_) => "convolution",
            Operator::Activation(_) => "activation",
            Operator::Bias => "bias",
            Operator::BatchNorm { .. } => "batch norm",
            Operator::Softmax { .. } => "softmax",
        }
    }
}

/// One operator with its direction and registered descriptors.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    pub op: Operator,
    pub direction: ProblemDirection,
    pub tensors: BTreeMap<u32, TensorDesc>,
}

impl Step {
    /// The argument the operator reads as its data input (MIOpen's choice per direction).
    pub fn input_id(&self) -> u32 {
        let fwd = self.direction != ProblemDirection::Backward;
        match self.op {
            Operator::Conv(_) if self.direction == ProblemDirection::Forward => arg::CONV_X,
            Operator::Conv(_) => arg::CONV_Y,
            Operator::Activation(_) => if fwd { arg::ACTIVATION_X } else { arg::ACTIVATION_DY },
            Operator::Bias => if fwd { arg::BIAS_X } else { arg::BIAS_Y },
            Operator::BatchNorm { .. } => if fwd { arg::BN_X } else { arg::BN_DY },
            Operator::Softmax { .. } => if fwd { arg::SOFTMAX_X } else { arg::SOFTMAX_DY },
        }
    }

    /// The argument the operator writes.
    pub fn output_id(&self) -> u32 {
        let fwd = self.direction != ProblemDirection::Backward;
        match self.op {
            Operator::Conv(_) if self.direction == ProblemDirection::Forward => arg::CONV_Y,
            Operator::Conv(_) => arg::CONV_X,
            Operator::Activation(_) => if fwd { arg::ACTIVATION_Y } else { arg::ACTIVATION_DX },
            Operator::Bias => if fwd { arg::BIAS_Y } else { arg::BIAS_X },
            Operator::BatchNorm { .. } => if fwd { arg::BN_Y } else { arg::BN_DX },
            Operator::Softmax { .. } => if fwd { arg::SOFTMAX_Y } else { arg::SOFTMAX_DX },
        }
    }

    fn need(&self, id: u32, what: &str) -> Result<&TensorDesc> {
        self.tensors.get(&id).ok_or_else(|| Error::bad_parm(format!("{} problem: the {what} descriptor (argument {id}) is not set", self.op.name())))
    }
}

/// `miopenProblem_t`: the steps run in order, each step's output feeding the next.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub steps: Vec<Step>,
}

/// What a problem runs as.
pub enum Lowered {
    /// One convolution in the caller's roles (transpose included).
    Conv { conv: ConvDesc, direction: ProblemDirection, x: TensorDesc, w: TensorDesc, y: TensorDesc },
    /// A fusion plan of one chain (uncompiled).
    Plan(FusionPlan),
    /// Softmax alone (`ops::softmax_*`); `y` is the forward output (read by backward).
    Softmax { algo: SoftmaxAlgorithm, mode: SoftmaxMode, scale: (f64, f64), backward: bool, input: TensorDesc, output: TensorDesc },
}

impl Problem {
    pub fn new(op: Operator, direction: ProblemDirection) -> Result<Problem> {
        match (&op, direction) {
            (Operator::Conv(_), ProblemDirection::Inference) => bail!(BadParm, "convolution problem: direction Inference is for batch norm only"),
            (Operator::Activation(_) | Operator::Bias, ProblemDirection::BackwardWeights | ProblemDirection::Inference) => {
                bail!(BadParm, "{} problem: direction {direction:?} is not defined for it", op.name())
            }
            (Operator::BatchNorm { .. }, ProblemDirection::BackwardWeights) => bail!(BadParm, "batch norm problem: direction BackwardWeights is not defined for it"),
            (Operator::Softmax { .. }, ProblemDirection::BackwardWeights | ProblemDirection::Inference) => {
                bail!(BadParm, "softmax problem: direction {direction:?} is not defined for it")
            }
            _ => {}
        }
        Ok(Problem { steps: vec![Step { op, direction, tensors: BTreeMap::new() }] })
    }

    /// `miopenSetProblemTensorDescriptor` on a single-operator problem.
    pub fn set_tensor(&mut self, id: u32, desc: TensorDesc) -> Result<()> {
        ensure!(id & arg::SCALAR == 0, BadParm, "problem: argument {id:#x} is a scalar and has no descriptor");
        ensure!(self.steps.len() == 1, BadParm, "problem: descriptors are set on each problem before fusing, not on a fused problem");
        self.steps[0].tensors.insert(id, desc);
        Ok(())
    }

    /// `miopenFuseProblems`: append `other`'s steps after this problem's.
    pub fn fuse(&mut self, other: &Problem) {
        self.steps.extend(other.steps.iter().cloned());
    }

    /// Each step's input and output descriptor: given ones win, missing ones come from the
    /// previous step's output and the operator's shape rule.
    fn propagated(&self) -> Result<Vec<(TensorDesc, TensorDesc)>> {
        let mut out: Vec<(TensorDesc, TensorDesc)> = Vec::new();
        for (i, step) in self.steps.iter().enumerate() {
            let input = match (step.tensors.get(&step.input_id()), out.last()) {
                (Some(d), _) => d.clone(),
                (None, Some((_, prev))) => prev.clone(),
                (None, None) => step.need(step.input_id(), "input")?.clone(),
            };
            let output = match (step.tensors.get(&step.output_id()), &step.op) {
                (Some(d), _) => d.clone(),
                (None, Operator::Conv(conv)) if step.direction == ProblemDirection::Forward => conv.output_desc(&input, step.need(arg::CONV_W, "w")?)?,
                (None, Operator::Conv(_)) => bail!(BadParm, "convolution problem: the output descriptor (argument {}) is not set", step.output_id()),
                (None, _) => input.clone(),
            };
            if let Some((_, prev)) = out.last() {
                ensure!(prev == &input, BadParm, "fused problem: operator {i} ({}) reads {} but operator {} writes {}", step.op.name(), input.key(), i - 1, prev.key());
            }
            out.push((input, output));
        }
        Ok(out)
    }

    /// The descriptor of the problem's input and output.
    pub fn io(&self) -> Result<(u32, TensorDesc, u32, TensorDesc)> {
        let io = self.propagated()?;
        let (first, last) = (&self.steps[0], &self.steps[self.steps.len() - 1]);
        Ok((first.input_id(), io[0].0.clone(), last.output_id(), io[io.len() - 1].1.clone()))
    }

    pub fn lower(&self) -> Result<Lowered> {
        let io = self.propagated()?;
        if let [step] = self.steps.as_slice() {
            if let Operator::Conv(conv) = &step.op {
                let (x, y) = match step.direction {
                    ProblemDirection::Forward => (io[0].0.clone(), io[0].1.clone()),
                    _ => (step.need(arg::CONV_X, "x")?.clone(), step.need(arg::CONV_Y, "y")?.clone()),
                };
                let w = step.need(arg::CONV_W, "w")?.clone();
                // Shapes are checked here so that Find and load report them, not run.
                match step.direction {
                    ProblemDirection::Forward => ConvProblem::forward(conv, &x, &w, &y)?,
                    ProblemDirection::Backward => ConvProblem::backward_data(conv, &y, &w, &x)?,
                    _ => ConvProblem::backward_weights(conv, &y, &x, &w)?,
                };
                return Ok(Lowered::Conv { conv: conv.clone(), direction: step.direction, x, w, y });
            }
        }
        if let Some((i, _)) = self.steps.iter().enumerate().find(|(_, s)| matches!(s.op, Operator::Softmax { .. })) {
            ensure!(self.steps.len() == 1, UnsupportedOp, "fused problem: operator {i}: softmax runs alone, it does not fuse");
            let step = &self.steps[0];
            let Operator::Softmax { algo, mode, alpha, beta } = step.op else { unreachable!("matched above") };
            let (input, output) = io[0].clone();
            return Ok(Lowered::Softmax { algo, mode, scale: (alpha, beta), backward: step.direction == ProblemDirection::Backward, input, output });
        }
        let mut plan = FusionPlan::new(FusionDirection::Vertical, io[0].0.clone());
        for (i, step) in self.steps.iter().enumerate() {
            let added = match (&step.op, step.direction) {
                (Operator::Conv(conv), ProblemDirection::Forward) => plan.add_conv_forward(conv, step.need(arg::CONV_W, "w")?),
                (Operator::Conv(_), d) => bail!(UnsupportedOp, "fused problem: operator {i}: a fused convolution runs forward only, not {d:?}"),
                (Operator::Bias, ProblemDirection::Forward) => plan.add_bias(step.need(arg::BIAS, "bias")?),
                (Operator::Bias, d) => bail!(UnsupportedOp, "fused problem: operator {i}: bias runs forward only here, not {d:?}"),
                (Operator::Activation(a), ProblemDirection::Forward) => plan.add_activation(a.mode),
                (Operator::Activation(a), _) => plan.add_activation_backward(a.mode),
                (Operator::BatchNorm { mode, .. }, ProblemDirection::Inference) => {
                    plan.add_bn_inference(*mode, step.need(arg::BN_ESTIMATED_MEAN, "estimated mean")?)
                }
                (Operator::BatchNorm { mode, running }, ProblemDirection::Forward) => plan.add_bn_forward(*mode, *running),
                (Operator::BatchNorm { mode, .. }, _) => plan.add_bn_backward(*mode),
                (Operator::Softmax { .. }, _) => unreachable!("softmax lowers alone"),
            };
            added.map_err(|e| e.context(format!("problem operator {i} ({})", step.op.name())))?;
        }
        let want = &io[io.len() - 1].1;
        ensure!(
            plan.output_desc() == want,
            BadParm,
            "problem: the output descriptor {} differs from the one the operators produce ({})",
            want.key(),
            plan.output_desc().key()
        );
        // One chain only: a solution names one solver.
        plan.problem()?;
        Ok(Lowered::Plan(plan))
    }
}
