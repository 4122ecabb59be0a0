//! Reference convolutions (reference doc §2.5): cross-correlation, no filter flip, 2-D and
//! 3-D, padding, stride, dilation, groups. The three loops of the *normal* convolution are
//! written once, each straight from its defining sum; transpose mode maps onto them exactly
//! as `conv/problem.rs` does (transpose forward = normal backward-data with x as dy, and so
//! on). Every output element is overwritten, never accumulated into.

use super::strided::{check_slice, gather, offsets};
use crate::conv_desc::ConvDesc;
use crate::error::Result;
use crate::tensor::{for_each_index, TensorDesc};
use crate::types::ConvMode;
use crate::{bail, ensure};

/// Geometry of the normal convolution: the loops never look at the mode.
struct Geo<'a> {
    pads: &'a [usize],
    strides: &'a [usize],
    dils: &'a [usize],
    groups: usize,
}

impl<'a> Geo<'a> {
    fn of(conv: &'a ConvDesc) -> Self {
        Geo { pads: conv.pads(), strides: conv.strides(), dils: conv.dilations(), groups: conv.groups() }
    }

    /// Input position `o·s − p + r·d` per spatial dim, or None when any falls in the
    /// zero padding.
    fn input_pos(&self, o: &[usize], r: &[usize], in_sp: &[usize], out: &mut [usize]) -> bool {
        for i in 0..o.len() {
            let p = (o[i] * self.strides[i] + r[i] * self.dils[i]) as isize - self.pads[i] as isize;
            if p < 0 || p as usize >= in_sp[i] {
                return false;
            }
            out[i] = p as usize;
        }
        true
    }

    /// Output position o with `o·s − p + r·d = i` per spatial dim, if one exists (the
    /// backward-data gather: stride must divide, and o must be inside dy).
    fn output_pos(&self, i: &[usize], r: &[usize], out_sp: &[usize], out: &mut [usize]) -> bool {
        for d in 0..i.len() {
            let t = (i[d] + self.pads[d]) as isize - (r[d] * self.dils[d]) as isize;
            if t < 0 || !(t as usize).is_multiple_of(self.strides[d]) {
                return false;
            }
            let o = t as usize / self.strides[d];
            if o >= out_sp[d] {
                return false;
            }
            out[d] = o;
        }
        true
    }
}

/// Shapes as the user states them: `out` must be exactly what the forward operation of
/// `conv` (its own mode) produces from `inp` and `w`. Any dtype is accepted (the data is
/// f64 here), so ConvProblem's dtype gate is deliberately not used.
fn check_shapes(op: &str, conv: &ConvDesc, inp: &TensorDesc, w: &TensorDesc, out: &TensorDesc, out_name: &str) -> Result<()> {
    let want = conv.output_lens(inp, w).map_err(|e| e.context(op))?;
    if out.lens() != want.as_slice() {
        bail!(BadParm, "{op}: {out_name} lengths {:?} do not match the convolution output {:?}", out.lens(), want);
    }
    ensure!(out.rank() == inp.rank(), BadParm, "{op}: {out_name} has {} dims, input has {}", out.rank(), inp.rank());
    Ok(())
}

/// Normal forward: y[n,k,o] = Σ_{c<C/G} Σ_r x[n, g·C/G + c, o·s − p + r·d] · w[k,c,r].
fn normal_forward(g: &Geo, xd: &TensorDesc, x: &[f64], wd: &TensorDesc, w: &[f64], yd: &TensorDesc, y: &mut [f64]) {
    let (cg, kg) = (wd.c(), wd.n() / g.groups);
    let rank = xd.rank();
    let (mut xi, mut wi) = (vec![0usize; rank], vec![0usize; rank]);
    for_each_index(yd.lens(), |yi| {
        let (n, k) = (yi[0], yi[1]);
        let grp = k / kg;
        let mut acc = 0.0;
        for c in 0..cg {
            for_each_index(wd.spatial(), |r| {
                if g.input_pos(&yi[2..], r, xd.spatial(), &mut xi[2..]) {
                    xi[0] = n;
                    xi[1] = grp * cg + c;
                    wi[0] = k;
                    wi[1] = c;
                    wi[2..].copy_from_slice(r);
                    acc += x[xd.offset(&xi)] * w[wd.offset(&wi)];
                }
            });
        }
        y[yd.offset(yi)] = acc;
    });
}

/// Normal backward-data, as a gather per dx element:
/// dx[n, g·C/G + c, i] = Σ_{k in group g} Σ_r dy[n,k,o] · w[k,c,r] over o with o·s − p + r·d = i.
/// Written independently of the forward loop so the adjoint tests compare two derivations.
fn normal_backward_data(g: &Geo, yd: &TensorDesc, dy: &[f64], wd: &TensorDesc, w: &[f64], xd: &TensorDesc, dx: &mut [f64]) {
    let (cg, kg) = (wd.c(), wd.n() / g.groups);
    let rank = xd.rank();
    let (mut yi, mut wi) = (vec![0usize; rank], vec![0usize; rank]);
    for_each_index(xd.lens(), |xi| {
        let (n, ci) = (xi[0], xi[1]);
        let (grp, c) = (ci / cg, ci % cg);
        let mut acc = 0.0;
        for k in grp * kg..(grp + 1) * kg {
            for_each_index(wd.spatial(), |r| {
                if g.output_pos(&xi[2..], r, yd.spatial(), &mut yi[2..]) {
                    yi[0] = n;
                    yi[1] = k;
                    wi[0] = k;
                    wi[1] = c;
                    wi[2..].copy_from_slice(r);
                    acc += dy[yd.offset(&yi)] * w[wd.offset(&wi)];
                }
            });
        }
        dx[xd.offset(xi)] = acc;
    });
}

/// Normal backward-weights: dw[k,c,r] = Σ_n Σ_o dy[n,k,o] · x[n, g·C/G + c, o·s − p + r·d].
fn normal_backward_weights(g: &Geo, yd: &TensorDesc, dy: &[f64], xd: &TensorDesc, x: &[f64], wd: &TensorDesc, dw: &mut [f64]) {
    let (cg, kg) = (wd.c(), wd.n() / g.groups);
    let rank = xd.rank();
    let mut xi = vec![0usize; rank];
    let mut yi = vec![0usize; rank];
    for_each_index(wd.lens(), |wi| {
        let (k, c) = (wi[0], wi[1]);
        let grp = k / kg;
        let mut acc = 0.0;
        for n in 0..yd.n() {
            for_each_index(yd.spatial(), |o| {
                if g.input_pos(o, &wi[2..], xd.spatial(), &mut xi[2..]) {
                    xi[0] = n;
                    xi[1] = grp * cg + c;
                    yi[0] = n;
                    yi[1] = k;
                    yi[2..].copy_from_slice(o);
                    acc += dy[yd.offset(&yi)] * x[xd.offset(&xi)];
                }
            });
        }
        dw[wd.offset(wi)] = acc;
    });
}

/// Forward convolution as the user states it: `y = conv(x, w)`. In transpose mode this is the
/// normal backward-data with x in the role of dy and y in the role of dx.
#[allow(clippy::too_many_arguments)]
pub fn conv_forward(conv: &ConvDesc, x_desc: &TensorDesc, x: &[f64], w_desc: &TensorDesc, w: &[f64], y_desc: &TensorDesc, y: &mut [f64]) -> Result<()> {
    check_shapes("reference forward convolution", conv, x_desc, w_desc, y_desc, "y")?;
    check_slice("x", x_desc, x.len())?;
    check_slice("w", w_desc, w.len())?;
    check_slice("y", y_desc, y.len())?;
    let g = Geo::of(conv);
    match conv.mode() {
        ConvMode::Transpose => normal_backward_data(&g, x_desc, x, w_desc, w, y_desc, y),
        _ => normal_forward(&g, x_desc, x, w_desc, w, y_desc, y),
    }
    Ok(())
}

/// Backward-data as the user states it: `dx = conv_bwd_data(dy, w)`; dy has the shape of the
/// forward output of `conv` applied to dx. In transpose mode this is the normal forward with
/// dy as its input and dx as its output.
#[allow(clippy::too_many_arguments)]
pub fn conv_backward_data(conv: &ConvDesc, dy_desc: &TensorDesc, dy: &[f64], w_desc: &TensorDesc, w: &[f64], dx_desc: &TensorDesc, dx: &mut [f64]) -> Result<()> {
    check_shapes("reference backward-data convolution", conv, dx_desc, w_desc, dy_desc, "dy")?;
    check_slice("dy", dy_desc, dy.len())?;
    check_slice("w", w_desc, w.len())?;
    check_slice("dx", dx_desc, dx.len())?;
    let g = Geo::of(conv);
    match conv.mode() {
        ConvMode::Transpose => normal_forward(&g, dy_desc, dy, w_desc, w, dx_desc, dx),
        _ => normal_backward_data(&g, dy_desc, dy, w_desc, w, dx_desc, dx),
    }
    Ok(())
}

/// Backward-weights as the user states it: `dw = conv_bwd_weights(x, dy)`. In transpose mode
/// x and dy swap roles (the transpose input is the normal convolution's output).
#[allow(clippy::too_many_arguments)]
pub fn conv_backward_weights(conv: &ConvDesc, dy_desc: &TensorDesc, dy: &[f64], x_desc: &TensorDesc, x: &[f64], dw_desc: &TensorDesc, dw: &mut [f64]) -> Result<()> {
    check_shapes("reference backward-weights convolution", conv, x_desc, dw_desc, dy_desc, "dy")?;
    check_slice("dy", dy_desc, dy.len())?;
    check_slice("x", x_desc, x.len())?;
    check_slice("dw", dw_desc, dw.len())?;
    let g = Geo::of(conv);
    match conv.mode() {
        ConvMode::Transpose => normal_backward_weights(&g, x_desc, x, dy_desc, dy, dw_desc, dw),
        _ => normal_backward_weights(&g, dy_desc, dy, x_desc, x, dw_desc, dw),
    }
    Ok(())
}

/// out = α·result + β·out_old over the logical elements of `desc`. With β = 0 the old
/// output is not read at all, so a NaN-poisoned output buffer does not leak into the result
/// (BLAS/MIOpen convention).
fn blend(alpha: f64, beta: f64, desc: &TensorDesc, out: &mut [f64], run: impl FnOnce(&mut [f64]) -> Result<()>) -> Result<()> {
    check_slice("output", desc, out.len())?;
    let old = if beta != 0.0 { gather(desc, out) } else { Vec::new() };
    run(out)?;
    for (i, o) in offsets(desc).into_iter().enumerate() {
        let prev = if beta != 0.0 { beta * old[i] } else { 0.0 };
        out[o] = alpha * out[o] + prev;
    }
    Ok(())
}

/// y = α·conv(x, w) + β·y (reference doc §2.4).
#[allow(clippy::too_many_arguments)]
pub fn conv_forward_alpha_beta(alpha: f64, beta: f64, conv: &ConvDesc, x_desc: &TensorDesc, x: &[f64], w_desc: &TensorDesc, w: &[f64], y_desc: &TensorDesc, y: &mut [f64]) -> Result<()> {
    blend(alpha, beta, y_desc, y, |y| conv_forward(conv, x_desc, x, w_desc, w, y_desc, y))
}

/// dx = α·conv_bwd_data(dy, w) + β·dx.
#[allow(clippy::too_many_arguments)]
pub fn conv_backward_data_alpha_beta(alpha: f64, beta: f64, conv: &ConvDesc, dy_desc: &TensorDesc, dy: &[f64], w_desc: &TensorDesc, w: &[f64], dx_desc: &TensorDesc, dx: &mut [f64]) -> Result<()> {
    blend(alpha, beta, dx_desc, dx, |dx| conv_backward_data(conv, dy_desc, dy, w_desc, w, dx_desc, dx))
}

/// dw = α·conv_bwd_weights(x, dy) + β·dw.
#[allow(clippy::too_many_arguments)]
pub fn conv_backward_weights_alpha_beta(alpha: f64, beta: f64, conv: &ConvDesc, dy_desc: &TensorDesc, dy: &[f64], x_desc: &TensorDesc, x: &[f64], dw_desc: &TensorDesc, dw: &mut [f64]) -> Result<()> {
    blend(alpha, beta, dw_desc, dw, |dw| conv_backward_weights(conv, dy_desc, dy, x_desc, x, dw_desc, dw))
}
