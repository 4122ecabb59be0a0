//! A forward convolution whose filter taps lie in the zero padding for much of its output —
//! atrous layers on small maps (DeepLab's 3×3 of dilation 12–36 on 28×28), 3×3 filters on
//! 1×1 or 2×2 maps — as a sum over its taps of 1×1 convolutions, each over the rectangle of
//! outputs whose input at that tap lies inside x: views of x, w and y at offsets, no copies.
//! A dense computation multiplies the padding's zeros and reads every tap's weights for every
//! output; here each tap's weights are read once, for the outputs it reaches.

use super::conv::ConvProblem;
use crate::conv_desc::ConvDesc;
use crate::tensor::TensorDesc;
use crate::types::{ConvMode, Direction};
use std::ops::Range;

/// The outputs along one axis at which tap `t` reads inside the input (0..0 when none).
pub fn reach(t: usize, out_len: usize, in_len: usize, stride: usize, pad: usize, dilation: usize) -> Range<usize> {
    // Output o reads input o·stride − pad + t·dilation.
    let shift = (t * dilation) as i64 - pad as i64;
    let (s, o_len, i_len) = (stride as i64, out_len as i64, in_len as i64);
    let lo = if shift >= 0 { 0 } else { (-shift + s - 1) / s };
    let hi = if i_len - 1 - shift < 0 { 0 } else { ((i_len - 1 - shift) / s + 1).min(o_len) };
    if lo >= hi { 0..0 } else { lo as usize..hi as usize }
}

/// One tap's share: the 1×1 convolution of its weights over the outputs it reaches, as views
/// starting `*_offset` elements after each tensor's first element.
#[derive(Clone, Debug)]
pub struct TapPart {
    pub tap: [usize; 2],
    pub problem: ConvProblem,
    /// Whether the tap reaches every output.
    pub whole: bool,
    pub x_offset: usize,
    pub w_offset: usize,
    pub y_offset: usize,
}

/// The taps of a 2-D forward convolution that reach some output, each as a 1×1 convolution
/// over the outputs it reaches, and the fraction of the dense products (outputs × taps) they
/// compute; or why there are none (another direction, 3-D, transpose, asymmetric padding).
pub fn live_taps(conv: &ConvProblem) -> Result<(Vec<TapPart>, f64), String> {
    if conv.direction != Direction::Forward || conv.conv.mode() != ConvMode::Convolution {
        return Err(format!("forward convolution only (this is {:?})", conv.direction));
    }
    if conv.spatial_dims() != 2 {
        return Err("2-D convolutions only".into());
    }
    let d = &conv.conv;
    if d.pads() != d.pads_end() {
        return Err("asymmetric padding".into());
    }
    let (xl, yl, f) = (conv.x.lens(), conv.y.lens(), conv.filter());
    let (xs, ws, ys) = (conv.x.strides(), conv.w.strides(), conv.y.strides());
    let (st, pad, dil) = (d.strides(), d.pads(), d.dilations());
    let err = |e: crate::error::Error| e.reason;
    let mut parts = Vec::new();
    let mut live = 0usize;
    for r in 0..f[0] {
        for s in 0..f[1] {
            let (oh, ow) = (reach(r, yl[2], xl[2], st[0], pad[0], dil[0]), reach(s, yl[3], xl[3], st[1], pad[1], dil[1]));
            if oh.is_empty() || ow.is_empty() {
                continue;
            }
            live += oh.len() * ow.len();
            let (ih, iw) = (oh.start * st[0] + r * dil[0] - pad[0], ow.start * st[1] + s * dil[1] - pad[1]);
            let x = TensorDesc::with_strides(conv.x.dtype(), &[xl[0], xl[1], (oh.len() - 1) * st[0] + 1, (ow.len() - 1) * st[1] + 1], xs).map_err(err)?;
            let w = TensorDesc::with_strides(conv.w.dtype(), &[conv.k(), conv.w.lens()[1], 1, 1], ws).map_err(err)?;
            let y = TensorDesc::with_strides(conv.y.dtype(), &[yl[0], yl[1], oh.len(), ow.len()], ys).map_err(err)?;
            let mut one = ConvDesc::new(ConvMode::Convolution, &[0, 0], &[st[0] as i64, st[1] as i64], &[1, 1]).map_err(err)?;
            one.set_groups(conv.groups() as i64).map_err(err)?;
            one.copy_attributes(d);
            parts.push(TapPart {
                tap: [r, s],
                problem: ConvProblem::forward(&one, &x, &w, &y).map_err(err)?,
                whole: oh.len() == yl[2] && ow.len() == yl[3],
                x_offset: ih * xs[2] + iw * xs[3],
                w_offset: r * ws[2] + s * ws[3],
                y_offset: oh.start * ys[2] + ow.start * ys[3],
            });
        }
    }
    let dense = (yl[2] * yl[3] * f[0] * f[1]).max(1);
    Ok((parts, live as f64 / dense as f64))
}

/// A forward convolution with filter rows (or columns, or frames) that reach no output at both
/// ends of an axis — an atrous 3×3 whose dilation exceeds the map, where only the centre tap
/// reads inside x — as the same convolution with those taps cut off: the filter a view of w
/// starting `w_offset` elements in (no copy), the padding shrunk by the taps cut, the output
/// unchanged. Cutting the same count at both ends keeps the padding symmetric. The cut taps
/// multiply only the padding's zeros. None when no axis has dead taps at both ends.
pub fn trim_dead_taps(conv: &ConvProblem) -> Result<Option<(ConvProblem, usize)>, String> {
    if conv.direction != Direction::Forward || conv.conv.mode() != ConvMode::Convolution {
        return Err(format!("forward convolution only (this is {:?})", conv.direction));
    }
    let d = &conv.conv;
    if d.pads() != d.pads_end() {
        return Err("asymmetric padding".into());
    }
    let dims = conv.spatial_dims();
    let (xl, yl, f) = (conv.x.lens(), conv.y.lens(), conv.filter());
    let (st, pad, dil) = (d.strides(), d.pads(), d.dilations());
    let mut cut = vec![0usize; dims];
    for i in 0..dims {
        let dead = |t: usize| reach(t, yl[2 + i], xl[2 + i], st[i], pad[i], dil[i]).is_empty();
        let lead = (0..f[i]).take_while(|&t| dead(t)).count();
        let trail = (0..f[i]).rev().take_while(|&t| dead(t)).count();
        if lead < f[i] {
            cut[i] = lead.min(trail).min(pad[i] / dil[i]);
        }
    }
    if cut.iter().all(|&c| c == 0) {
        return Ok(None);
    }
    let err = |e: crate::error::Error| e.reason;
    let mut lens = conv.w.lens().to_vec();
    let mut strides = conv.w.strides().to_vec();
    let mut offset = 0;
    for i in 0..dims {
        lens[2 + i] = f[i] - 2 * cut[i];
        offset += cut[i] * strides[2 + i];
    }
    // A spatial axis left with one tap takes the stride a packed filter would have there, so
    // that kernels needing taps and channels contiguous still take the view (its index is 0).
    for a in (2..lens.len() - 1).rev() {
        if lens[a] == 1 {
            strides[a] = strides[a + 1] * lens[a + 1];
        }
    }
    let w = TensorDesc::with_strides(conv.w.dtype(), &lens, &strides).map_err(err)?;
    let to_i64 = |v: Vec<usize>| v.into_iter().map(|u| u as i64).collect::<Vec<_>>();
    let pads = to_i64((0..dims).map(|i| pad[i] - cut[i] * dil[i]).collect());
    let dils = to_i64((0..dims).map(|i| if lens[2 + i] == 1 { 1 } else { dil[i] }).collect());
    let mut trimmed = ConvDesc::new(ConvMode::Convolution, &pads, &to_i64(st.to_vec()), &dils).map_err(err)?;
    trimmed.set_groups(conv.groups() as i64).map_err(err)?;
    trimmed.copy_attributes(d);
    let problem = ConvProblem::forward(&trimmed, &conv.x, &w, &conv.y).map_err(err)?;
    Ok(Some((problem, offset)))
}

#[cfg(test)]
mod tests {
    use super::{reach, trim_dead_taps};
    use crate::conv_desc::ConvDesc;
    use crate::problem::conv::ConvProblem;
    use crate::tensor::TensorDesc;
    use crate::types::{ConvMode, DataType, Layout};

    fn problem(x: [usize; 4], w: [usize; 4], pad: i64, dil: i64, layout: Layout) -> ConvProblem {
        let conv = ConvDesc::new(ConvMode::Convolution, &[pad, pad], &[1, 1], &[dil, dil]).unwrap();
        let (x, w) = (TensorDesc::with_layout(DataType::Half, layout, &x).unwrap(), TensorDesc::with_layout(DataType::Half, layout, &w).unwrap());
        let y = conv.output_desc(&x, &w).unwrap();
        ConvProblem::forward(&conv, &x, &w, &y).unwrap()
    }

    #[test]
    fn atrous_taps_past_the_map_are_cut() {
        // DeepLab's dilation-36 3×3 on 28×28: the centre tap, a 1×1 view of w's middle tap.
        let p = problem([2, 64, 28, 28], [32, 64, 3, 3], 36, 36, Layout::NHWC);
        let (t, offset) = trim_dead_taps(&p).unwrap().unwrap();
        assert_eq!((t.w.lens(), t.w.strides(), offset), (&[32, 64, 1, 1][..], &[576, 1, 64, 64][..], 4 * 64));
        assert_eq!((t.conv.pads(), t.conv.dilations(), t.y.lens()), (&[0, 0][..], &[1, 1][..], p.y.lens()));
        // Channels-first filter: the centre element of each 3×3 plane.
        let p = problem([2, 64, 28, 28], [32, 64, 3, 3], 36, 36, Layout::NCHW);
        let (t, offset) = trim_dead_taps(&p).unwrap().unwrap();
        assert_eq!((t.w.strides(), offset), (&[576, 9, 1, 1][..], 4));
        // Dilation 24 reaches four outputs from each outer tap, dilation 12 more: nothing cut.
        assert!(trim_dead_taps(&problem([1, 8, 28, 28], [8, 8, 3, 3], 24, 24, Layout::NHWC)).unwrap().is_none());
        assert!(trim_dead_taps(&problem([1, 8, 28, 28], [8, 8, 3, 3], 1, 1, Layout::NHWC)).unwrap().is_none());
        // A 5×5 of dilation 4 on 6×6: the outer ring lies in the padding, the inner 3×3 stays.
        let (t, offset) = trim_dead_taps(&problem([1, 8, 6, 6], [8, 8, 5, 5], 8, 4, Layout::NHWC)).unwrap().unwrap();
        assert_eq!((t.w.lens(), t.conv.pads(), t.conv.dilations(), offset), (&[8, 8, 3, 3][..], &[4, 4][..], &[4, 4][..], 5 * 8 + 8));
    }

    #[test]
    fn reach_of_atrous_taps() {
        // 3 taps, dilation 36, pad 36 on 28 positions: only the centre tap reaches inside.
        assert_eq!([0, 1, 2].map(|t| reach(t, 28, 28, 1, 36, 36)), [0..0, 0..28, 0..0]);
        // Dilation 24: the outer taps reach the last / first four outputs.
        assert_eq!([0, 1, 2].map(|t| reach(t, 28, 28, 1, 24, 24)), [24..28, 0..28, 0..4]);
        // Stride 2, pad 1, 3 taps on 7 positions (4 outputs): tap 0 reads −1, 1, 3, 5; tap 2 reads 1, 3, 5, 7.
        assert_eq!([0, 1, 2].map(|t| reach(t, 4, 7, 2, 1, 1)), [1..4, 0..4, 0..3]);
        // One input, padding 2: tap 0 reaches output 2 only; a tap past a 2-wide input.
        assert_eq!(reach(0, 5, 1, 1, 2, 1), 2..3);
        assert!(reach(4, 3, 2, 1, 0, 1).is_empty());
    }
}
