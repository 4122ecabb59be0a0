//! Horizontal plans (`miopenHorizontalFusion`, seed 002: "different operations operate on the
//! same data", as in Inception's blocks). Every convolution starts a branch that reads the
//! plan's input; the pointwise ops after it belong to that branch; the plan's one output is
//! the branch outputs concatenated along channels, in op order. Each branch lowers to the
//! vertical problem whose output is its channel slice of that tensor (same strides, an offset
//! of the channels before it), so every solver that takes strided outputs runs it unchanged.

use super::lower::lower;
use super::plan::{FusionOp, FusionOpKind};
use crate::conv_desc::output_desc_like;
use crate::error::{Error, Result};
use crate::problem::FusedProblem;
use crate::tensor::TensorDesc;
use crate::types::FusionDirection;
use std::ops::Range;

/// One branch: its ops, the channel of the plan output where its slice starts, and the
/// vertical problem writing that slice.
#[derive(Clone, Debug)]
pub struct Branch {
    pub ops: Range<usize>,
    pub k_offset: usize,
    pub problem: FusedProblem,
}

/// Op ranges of the branches: each starts at a convolution (op 0 must be one).
fn branch_ranges(ops: &[FusionOp]) -> Result<Vec<Range<usize>>> {
    let starts: Vec<usize> = ops.iter().enumerate().filter(|(_, o)| matches!(o.kind, FusionOpKind::ConvForward { .. })).map(|(i, _)| i).collect();
    match (ops.first(), starts.first()) {
        (None, _) => Err(Error::unknown("fusion plan: the plan has no operators")),
        (Some(op), _) if starts.first() != Some(&0) => Err(Error::unsupported(format!(
            "op 0 ({}): a horizontal plan starts with a convolution (every convolution starts a branch)",
            op.kind.name()
        ))),
        _ => Ok(starts.iter().enumerate().map(|(b, &s)| s..starts.get(b + 1).copied().unwrap_or(ops.len())).collect()),
    }
}

/// The plan's output: the branch outputs (equal but for channels) concatenated along channels,
/// packed in the input's layout family; None before the first convolution.
pub fn concat_output(input: &TensorDesc, ops: &[FusionOp]) -> Option<TensorDesc> {
    let convs: Vec<&FusionOp> = ops.iter().filter(|o| matches!(o.kind, FusionOpKind::ConvForward { .. })).collect();
    let first = convs.first()?;
    let mut lens = first.output.lens().to_vec();
    lens[1] = convs.iter().map(|o| o.output.c()).sum();
    output_desc_like(input, &lens).ok()
}

/// Whether a new branch output `y` matches the earlier ones (`concat`) but for its channels.
pub fn check_branch_shape(at: usize, concat: &TensorDesc, y: &TensorDesc) -> Result<()> {
    let same = concat.rank() == y.rank() && concat.n() == y.n() && concat.spatial() == y.spatial();
    if same {
        return Ok(());
    }
    Err(Error::bad_parm(format!(
        "op {at} (convolution forward): a horizontal branch's output {:?} differs from the earlier branches' {:?} in N or the spatial sizes; branches are concatenated along channels",
        y.lens(),
        concat.lens()
    )))
}

/// Every branch of a horizontal plan over `input`, its output `out` (`concat_output`).
pub fn branches(input: &TensorDesc, ops: &[FusionOp], out: &TensorDesc) -> Result<Vec<Branch>> {
    let mut k_offset = 0;
    let mut all = Vec::new();
    for range in branch_ranges(ops)? {
        let k = ops[range.start].output.c();
        let mut lens = out.lens().to_vec();
        lens[1] = k;
        let slice = TensorDesc::with_strides(out.dtype(), &lens, out.strides())?;
        // The branch's ops as a vertical plan writing the slice; op indices in refusals are the
        // plan's own.
        let local: Vec<FusionOp> = ops[range.clone()]
            .iter()
            .enumerate()
            .map(|(i, op)| FusionOp { kind: op.kind.clone(), input: if i == 0 { input.clone() } else { slice.clone() }, output: slice.clone() })
            .collect();
        let problem = lower(FusionDirection::Vertical, input, &local).map_err(|e| renumber(e, range.start))?;
        all.push(Branch { ops: range, k_offset, problem });
        k_offset += k;
    }
    Ok(all)
}

/// A branch-local refusal ("op i (…)") with i made the plan's index.
fn renumber(mut e: Error, first: usize) -> Error {
    if let Some(rest) = e.reason.strip_prefix("op ") {
        if let Some((num, tail)) = rest.split_once(' ') {
            if let Ok(i) = num.parse::<usize>() {
                e.reason = format!("op {} {tail}", i + first);
            }
        }
    }
    e
}
