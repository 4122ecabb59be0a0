//! 3-D convolutions that are 2-D convolutions seen through other strides. Video networks are
//! mostly built from two such factors of a 3-D filter (R(2+1)D, S3D, MC3):
//!
//! - **frames as images**: a 1 × R × S filter with no depth padding, stride or dilation reads
//!   one frame per output frame, so it is the 2-D convolution of the N·D frames. Frame f = n·D + d
//!   sits at f · (x's depth stride) when x's batch stride is D depth strides — packed
//!   channels-last (NDHWC) tensors, or a batch of one.
//! - **planes as rows**: a T × 1 × 1 filter with no padding, stride or dilation in height and
//!   width only mixes frames, so it is the 2-D convolution over (D, H·W) with a T × 1 filter.
//!   Pixel (h, w) becomes column h·W + w, at w's stride when rows are W widths apart — both
//!   packed layouts.
//!
//! The folded problem addresses the same memory as the original, so an invoker built for it
//! runs on the caller's pointers unchanged. Its spatial index of an output is the original's
//! for planes as rows but not for frames as images, whose epilogue may not hold per-activation
//! batch-norm (parameters per frame position).

use super::{ConvProblem, EpiOp, FusedKind, FusedProblem};
use crate::tensor::TensorDesc;
use crate::types::BnMode;

/// How a 3-D problem was folded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fold {
    FramesAsImages,
    PlanesAsRows,
}

/// A 5-D tensor (N, C, D, H, W) as the 4-D tensor `fold` makes of it, if its strides allow.
fn fold_tensor(t: &TensorDesc, fold: Fold) -> Option<TensorDesc> {
    let (l, s) = (t.lens(), t.strides());
    if l.len() != 5 {
        return None;
    }
    let (lens, strides) = match fold {
        Fold::FramesAsImages => {
            // One frame per image when D = 1; else the batch must step over whole frames.
            let frame = if l[2] == 1 { s[0] } else if l[0] == 1 || s[0] == l[2] * s[2] { s[2] } else { return None };
            ([l[0] * l[2], l[1], l[3], l[4]], [frame, s[1], s[3], s[4]])
        }
        Fold::PlanesAsRows => {
            let column = if l[4] == 1 { s[3] } else if l[3] == 1 || s[3] == l[4] * s[4] { s[4] } else { return None };
            ([l[0], l[1], l[2], l[3] * l[4]], [s[0], s[1], s[2], column])
        }
    };
    TensorDesc::with_strides(t.dtype(), &lens, &strides).ok()
}

/// Which fold the geometry of `conv` allows (frames as images first: its 2-D problem has the
/// larger batch and keeps both spatial filter dimensions).
fn fold_of(conv: &ConvProblem) -> Option<Fold> {
    let d = &conv.conv;
    if d.spatial_dims() != 3 {
        return None;
    }
    let f = conv.filter();
    let trivial = |i: usize| d.pads()[i] == 0 && d.pads_end()[i] == 0 && d.strides()[i] == 1 && d.dilations()[i] == 1;
    if f[0] == 1 && trivial(0) {
        Some(Fold::FramesAsImages)
    } else if f[1] == 1 && f[2] == 1 && trivial(1) && trivial(2) {
        Some(Fold::PlanesAsRows)
    } else {
        None
    }
}

/// The 2-D problem a 3-D convolution problem folds into, and how, else why it does not.
pub fn fold_3d(problem: &FusedProblem) -> Result<(FusedProblem, Fold), String> {
    let FusedKind::Conv { conv, epilogue } = &problem.kind else { return Err("not a convolution problem".into()) };
    let fold = fold_of(conv).ok_or("not a 3-D convolution with a 1 × R × S filter unpadded in depth, or a T × 1 × 1 filter unpadded in height and width")?;
    let tensor = |t: &TensorDesc, name: &str| fold_tensor(t, fold).ok_or_else(|| format!("{name}'s strides do not allow folding ({fold:?})"));
    let mut folded_epilogue = Vec::with_capacity(epilogue.len());
    for op in epilogue {
        folded_epilogue.push(match op {
            EpiOp::AddTensor { z } => EpiOp::AddTensor { z: tensor(z, "the residual z")? },
            EpiOp::BnInference { mode: BnMode::PerActivation, .. } if fold == Fold::FramesAsImages => {
                return Err("per-activation batch norm after a frames-as-images fold (its parameters vary by frame)".into());
            }
            other => other.clone(),
        });
    }
    let d = &conv.conv;
    let pick = |v: &[usize]| match fold {
        Fold::FramesAsImages => vec![v[1], v[2]],
        Fold::PlanesAsRows => vec![v[0], 0],
    };
    let unit = |v: &[usize]| match fold {
        Fold::FramesAsImages => vec![v[1], v[2]],
        Fold::PlanesAsRows => vec![v[0], 1],
    };
    let geometry = d.with_geometry(&pick(d.pads()), &pick(d.pads_end()), &unit(d.strides()), &unit(d.dilations()));
    let folded = ConvProblem { direction: conv.direction, x: tensor(&conv.x, "x")?, w: tensor(&conv.w, "w")?, y: tensor(&conv.y, "y")?, conv: geometry };
    Ok((FusedProblem { kind: FusedKind::Conv { conv: folded, epilogue: folded_epilogue } }, fold))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conv_desc::ConvDesc;
    use crate::types::{ConvMode, DataType, Layout};

    fn problem(layout: Layout, x: [usize; 5], w: [usize; 5], pads: [i64; 3], strides: [i64; 3]) -> FusedProblem {
        let d = ConvDesc::new(ConvMode::Convolution, &pads, &strides, &[1, 1, 1]).unwrap();
        let xd = TensorDesc::with_layout(DataType::Half, layout, &x).unwrap();
        let wd = TensorDesc::with_layout(DataType::Half, layout, &w).unwrap();
        let yd = TensorDesc::with_layout(DataType::Half, layout, &d.output_lens(&xd, &wd).unwrap()).unwrap();
        FusedProblem::conv(ConvProblem::forward(&d, &xd, &wd, &yd).unwrap())
    }

    #[test]
    fn frames_fold_into_the_batch_when_channels_last() {
        let p = problem(Layout::NDHWC, [2, 16, 4, 10, 12], [32, 16, 1, 3, 3], [0, 1, 1], [1, 2, 2]);
        let (f, how) = fold_3d(&p).unwrap();
        assert_eq!(how, Fold::FramesAsImages);
        let c = f.conv_problem().unwrap();
        assert_eq!(c.x.lens(), &[8, 16, 10, 12]);
        assert_eq!(c.x.strides(), &[10 * 12 * 16, 1, 12 * 16, 16]);
        assert_eq!(c.y.lens(), &[8, 32, 5, 6]);
        assert_eq!((c.conv.pads(), c.conv.strides()), (&[1usize, 1][..], &[2usize, 2][..]));
        // Channels-first frames are not a batch: the batch stride spans every channel.
        assert!(fold_3d(&problem(Layout::NCDHW, [2, 16, 4, 10, 12], [32, 16, 1, 3, 3], [0, 1, 1], [1, 1, 1])).is_err());
    }

    #[test]
    fn planes_fold_into_rows_in_both_layouts() {
        for layout in [Layout::NCDHW, Layout::NDHWC] {
            let p = problem(layout, [2, 24, 8, 7, 7], [16, 24, 3, 1, 1], [1, 0, 0], [2, 1, 1]);
            let (f, how) = fold_3d(&p).unwrap();
            assert_eq!(how, Fold::PlanesAsRows);
            let c = f.conv_problem().unwrap();
            assert_eq!((c.x.lens(), c.w.lens(), c.y.lens()), (&[2, 24, 8, 49][..], &[16, 24, 3, 1][..], &[2, 16, 4, 49][..]));
            assert_eq!((c.conv.pads(), c.conv.strides()), (&[1usize, 0][..], &[2usize, 1][..]));
            // Every element of the folded tensors is the original's at the same offset.
            let (o, v) = (p.conv_problem().unwrap(), c);
            assert_eq!(o.x.offset(&[1, 5, 3, 4, 6]), v.x.offset(&[1, 5, 3, 4 * 7 + 6]));
        }
    }

    #[test]
    fn full_3d_filters_do_not_fold() {
        let why = fold_3d(&problem(Layout::NDHWC, [1, 8, 4, 6, 6], [8, 8, 3, 3, 3], [1, 1, 1], [1, 1, 1])).unwrap_err();
        assert!(why.contains("not a 3-D convolution with"), "{why}");
        // Depth padding reads frames that do not exist: not one frame per output frame.
        assert!(fold_3d(&problem(Layout::NDHWC, [1, 8, 4, 6, 6], [8, 8, 1, 3, 3], [1, 1, 1], [1, 1, 1])).is_err());
    }
}
