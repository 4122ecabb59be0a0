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

#[cfg(test)]
mod tests {
    use super::reach;

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
