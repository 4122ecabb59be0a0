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

/// A chain-local refusal ("op i (…)") with i made the plan's index.
pub(super) fn renumber(mut e: Error, first: usize) -> Error {
    if let Some(rest) = e.reason.strip_prefix("op ") {
        if let Some((num, tail)) = rest.split_once(' ') {
            if let Ok(i) = num.parse::<usize>() {
                e.reason = format!("op {} {tail}", i + first);
            }
        }
    }
    e
}

/// Branches that merge into one convolution: the same convolution (one group) and filter
/// shape but for K, filters packed with K outermost in one layout, and the same chain after
/// it — nothing, a bias, an activation whose formula takes no arguments, or a bias then such
/// an activation. Their filters (and biases) are concatenated per execute, and one kernel
/// writes all their channels, reading x once.
#[derive(Clone, Debug, PartialEq)]
struct MergeKey {
    conv: crate::conv_desc::ConvDesc,
    filter: Vec<usize>,
    layout: crate::types::Layout,
    bias: Option<crate::types::DataType>,
    act: Option<crate::types::ActivationMode>,
}

fn merge_key(ops: &[FusionOp]) -> Option<MergeKey> {
    use crate::types::{ActivationMode as A, Layout, ConvMode};
    let FusionOpKind::ConvForward { conv, w } = &ops.first()?.kind else { return None };
    let layout = w.packed_layout().filter(|l| !matches!(l, Layout::CHWN))?;
    if conv.groups() != 1 || conv.mode() != ConvMode::Convolution {
        return None;
    }
    let arg_free = |m: &A| matches!(m, A::PassThru | A::Relu | A::Abs | A::Logistic | A::Silu | A::HardSwish | A::HardSigmoid | A::Gelu | A::GeluTanh | A::Mish);
    let (bias, act) = match &ops[1..] {
        [] => (None, None),
        [FusionOp { kind: FusionOpKind::BiasForward { b }, .. }] => (Some(b.dtype()), None),
        [FusionOp { kind: FusionOpKind::ActivationForward { mode }, .. }] if arg_free(mode) => (None, Some(*mode)),
        [FusionOp { kind: FusionOpKind::BiasForward { b }, .. }, FusionOp { kind: FusionOpKind::ActivationForward { mode }, .. }] if arg_free(mode) => (Some(b.dtype()), Some(*mode)),
        _ => return None,
    };
    Some(MergeKey { conv: conv.clone(), filter: w.lens()[1..].to_vec(), layout, bias, act })
}

/// A run of consecutive branches merged into one chain: the branches, and the merged problem
/// (a convolution over every filter, writing all their channels).
#[derive(Clone, Debug)]
pub struct Merged {
    pub branches: Range<usize>,
    pub problem: FusedProblem,
}

/// The runs of two or more consecutive branches that merge (`MergeKey`) and gain by it, with
/// their problems.
pub fn merged_runs(input: &TensorDesc, ops: &[FusionOp], out: &TensorDesc, branches: &[Branch]) -> Result<Vec<Merged>> {
    let keys: Vec<Option<MergeKey>> = branches.iter().map(|b| merge_key(&ops[b.ops.clone()])).collect();
    let mut runs = Vec::new();
    let mut i = 0;
    while i < branches.len() {
        let mut j = i + 1;
        while j < branches.len() && keys[i].is_some() && keys[j] == keys[i] {
            j += 1;
        }
        // Merging reads x once instead of once per branch, but copies every filter per
        // execute (the caller may change them between calls): worth it where the x reads
        // saved outweigh the filter bytes read and written (batch-1 layers with wide filters
        // measured slower merged).
        let filters: usize = branches[i..j].iter().map(|b| match &ops[b.ops.start].kind {
            FusionOpKind::ConvForward { w, .. } => w.element_count(),
            _ => 0,
        }).sum();
        let pays = (j - i).saturating_sub(1) * input.element_count() > 2 * filters;
        if let (Some(key), true, true) = (&keys[i], j - i >= 2, pays) {
            let k: usize = branches[i..j].iter().map(|b| ops[b.ops.start].output.c()).sum();
            let first = &ops[branches[i].ops.start];
            let dt = first.output.dtype();
            let mut lens = out.lens().to_vec();
            lens[1] = k;
            let slice = TensorDesc::with_strides(out.dtype(), &lens, out.strides())?;
            let mut wl = vec![k];
            wl.extend(&key.filter);
            let w = TensorDesc::with_layout(dt, key.layout, &wl)?;
            let mut local = vec![FusionOp { kind: FusionOpKind::ConvForward { conv: key.conv.clone(), w }, input: input.clone(), output: slice.clone() }];
            if let Some(bdt) = key.bias {
                let mut bl = vec![1; out.rank()];
                bl[1] = k;
                local.push(FusionOp { kind: FusionOpKind::BiasForward { b: TensorDesc::new(bdt, &bl)? }, input: slice.clone(), output: slice.clone() });
            }
            if let Some(mode) = key.act {
                local.push(FusionOp { kind: FusionOpKind::ActivationForward { mode }, input: slice.clone(), output: slice.clone() });
            }
            let problem = lower(FusionDirection::Vertical, input, &local)?;
            runs.push(Merged { branches: i..j, problem });
        }
        i = j;
    }
    Ok(runs)
}
