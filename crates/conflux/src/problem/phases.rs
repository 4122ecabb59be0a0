//! Backward-data with stride > 1 as stride-1 forward convolutions, one per phase.
//!
//! dx[h] = Σ over (oh, r) with oh·s − p + r·d = h of dy[oh]·w[r]. The dx positions of one
//! residue h ≡ φ (mod s) — a phase — are reached by the taps r with φ + p − r·d ≡ 0 (mod s)
//! only, and along those taps dy moves one position per step. So each phase is a stride-1
//! forward convolution of dy with a sub-filter (its taps reversed, channels swapped as in
//! stride-1 backward-data) writing a strided view of dx. Its padding is usually asymmetric
//! (an even dx length with a 3×3 stride-2 filter needs one more dy row after than before),
//! which `ConvDesc::set_pads_end` carries. A phase no tap reaches (1×1 stride 2: three of
//! four) receives no gradient: dx there is β·dx.
//!
//! The decomposition is plain arithmetic on the problem; which kernel runs a phase is the
//! solver's business.

use super::ConvProblem;
use crate::conv_desc::ConvDesc;
use crate::tensor::TensorDesc;
use crate::types::{ConvMode, Direction, Layout};

/// The source taps of a sub-filter along one axis: `first`, `first − step`, … (`count` taps,
/// in the order the sub-convolution reads them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TapAxis {
    pub first: usize,
    pub step: usize,
    pub count: usize,
}

/// A sub-filter in source taps, per axis D, H, W (a 2-D filter has one D tap), with the
/// source filter's lengths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TapMap {
    pub axes: [TapAxis; 3],
    pub src: [usize; 3],
}

impl TapMap {
    /// Every tap, reversed: the filter of stride-1 backward-data.
    pub fn reversed(filter: [usize; 3]) -> TapMap {
        TapMap { axes: filter.map(|f| TapAxis { first: f - 1, step: 1, count: f }), src: filter }
    }
    pub fn is_reversed(&self) -> bool { *self == TapMap::reversed(self.src) }
    /// Taps of the sub-filter.
    pub fn count(&self) -> usize { self.axes.iter().map(|a| a.count).product() }
    /// The source tap (row-major over the source filter) of sub-filter tap `t` (D, H, W).
    pub fn source(&self, t: [usize; 3]) -> usize {
        let at = |i: usize| self.axes[i].first - t[i] * self.axes[i].step;
        (at(0) * self.src[1] + at(1)) * self.src[2] + at(2)
    }
}

/// One phase of a strided backward-data.
#[derive(Clone, Debug)]
pub struct Phase {
    /// The residue of its dx positions per spatial axis (D, H, W; D = 0 for 2-D).
    pub residue: [usize; 3],
    /// Element offset of its first dx element in dx, and of the first dy element it reads.
    pub dx_offset: usize,
    pub dy_offset: usize,
    /// dx's positions of this phase: a strided view (for β·dx where no tap reaches).
    pub dx: TensorDesc,
    /// The forward convolution writing the phase (x = the dy window, w = the sub-filter, y =
    /// `dx`), with its taps; None where no tap reaches the phase.
    pub forward: Option<(ConvProblem, TapMap)>,
}

/// Per axis: dx positions of the phase, and the sub-convolution when taps reach it.
struct AxisPlan {
    len: usize,
    sub: Option<AxisSub>,
}

struct AxisSub {
    taps: TapAxis,
    dilation: usize,
    pad: usize,
    pad_end: usize,
    dy_start: usize,
    dy_len: usize,
}

fn gcd(a: usize, b: usize) -> usize { if b == 0 { a } else { gcd(b, a % b) } }

/// Phase `phi` along one axis: dx length `h`, dy length `oh`, filter `r`, stride `s`, pad `p`,
/// dilation `d`.
fn plan_axis(phi: usize, h: usize, oh: usize, r: usize, s: usize, p: usize, d: usize) -> AxisPlan {
    let len = if phi < h { (h - phi).div_ceil(s) } else { 0 };
    let (phi, p, s, d) = (phi as i64, p as i64, s as i64, d as i64);
    let reaching: Vec<i64> = (0..r as i64).filter(|&t| (phi + p - t * d).rem_euclid(s) == 0).collect();
    let (Some(&last), true) = (reaching.last(), len > 0) else { return AxisPlan { len, sub: None } };
    let g = gcd(s as usize, d as usize) as i64;
    let (step, dilation, count) = (s / g, d / g, reaching.len() as i64);
    // The dy offset of the last reaching tap, read first: sub tap t reads dy[i + off + t·dil].
    let off = (phi + p - last * d) / s;
    let (dy_start, pad) = if off > 0 { (off, 0) } else { (0, -off) };
    let mut dy_len = oh as i64 - dy_start;
    let mut pad_end = len as i64 - 1 + (count - 1) * dilation - pad - (dy_len - 1);
    if pad_end < 0 {
        // dy rows past the last one any dx position of the phase reads: left out of the window.
        dy_len += pad_end;
        pad_end = 0;
    }
    if dy_len <= 0 {
        return AxisPlan { len, sub: None };
    }
    let taps = TapAxis { first: last as usize, step: step as usize, count: count as usize };
    AxisPlan { len, sub: Some(AxisSub { taps, dilation: dilation as usize, pad: pad as usize, pad_end: pad_end as usize, dy_start: dy_start as usize, dy_len: dy_len as usize }) }
}

/// Most phases a backward-data is cut into (4×4 stride 4 takes 16, 3-D stride 4 takes 64).
pub const MAX_PHASES: usize = 256;

/// The phases of a backward-data problem (any stride; stride 1 gives one phase), each with the
/// forward convolution over `dy` (dy as the kernels will read it: the caller's, or a
/// channels-last copy of it) whose sub-filter has lengths [C, K/G, taps…] in `w_layout`.
/// Phases without dx positions (stride above the dx length) are left out.
pub fn backward_data_phases(conv: &ConvProblem, dy: &TensorDesc, w_layout: Layout) -> std::result::Result<Vec<Phase>, String> {
    if conv.direction != Direction::BackwardData {
        return Err(format!("backward-data only (this is {:?})", conv.direction));
    }
    let d = &conv.conv;
    let nd = conv.spatial_dims();
    if d.pads() != d.pads_end() {
        return Err("asymmetric padding: phases are cut from symmetric problems only".into());
    }
    let err = |e: crate::error::Error| e.reason;
    let (dx, filter) = (&conv.x, conv.filter());
    let (dxl, dxs, dyl, dys) = (dx.lens(), dx.strides(), dy.lens(), dy.strides());
    let mut phases = Vec::new();
    // Residues at or past dx's length have no positions: at most one phase per dx position.
    let counts: Vec<usize> = (0..nd).map(|i| d.strides()[i].min(dxl[2 + i]).max(1)).collect();
    let total: usize = counts.iter().product();
    if total > MAX_PHASES {
        return Err(format!("{total} phases (at most {MAX_PHASES}): a stride this large leaves each phase a sliver"));
    }
    for index in 0..total {
        // Residues per axis, the last axis fastest.
        let mut residue = vec![0; nd];
        let mut rest = index;
        for i in (0..nd).rev() {
            residue[i] = rest % counts[i];
            rest /= counts[i];
        }
        let plans: Vec<AxisPlan> =
            (0..nd).map(|i| plan_axis(residue[i], dxl[2 + i], dyl[2 + i], filter[i], d.strides()[i], d.pads()[i], d.dilations()[i])).collect();
        if plans.iter().any(|p| p.len == 0) {
            continue;
        }
        let dx_lens: Vec<usize> = [dxl[0], dxl[1]].into_iter().chain(plans.iter().map(|p| p.len)).collect();
        let dx_strides: Vec<usize> = [dxs[0], dxs[1]].into_iter().chain((0..nd).map(|i| dxs[2 + i] * d.strides()[i])).collect();
        let dx_view = TensorDesc::with_strides(dx.dtype(), &dx_lens, &dx_strides).map_err(err)?;
        let dx_offset = (0..nd).map(|i| residue[i] * dxs[2 + i]).sum();
        let lift = |v: Vec<usize>| -> [usize; 3] { if nd == 2 { [0, v[0], v[1]] } else { [v[0], v[1], v[2]] } };
        let residue3 = lift(residue.clone());
        let subs: Option<Vec<&AxisSub>> = plans.iter().map(|p| p.sub.as_ref()).collect();
        let Some(subs) = subs else {
            phases.push(Phase { residue: residue3, dx_offset, dy_offset: 0, dx: dx_view, forward: None });
            continue;
        };
        let dy_lens: Vec<usize> = [dyl[0], dyl[1]].into_iter().chain(subs.iter().map(|s| s.dy_len)).collect();
        let dy_view = TensorDesc::with_strides(dy.dtype(), &dy_lens, dys).map_err(err)?;
        let dy_offset = (0..nd).map(|i| subs[i].dy_start * dys[2 + i]).sum();
        let g = conv.groups();
        let w_lens: Vec<usize> = [dx.c(), conv.k() / g].into_iter().chain(subs.iter().map(|s| s.taps.count)).collect();
        let w_sub = TensorDesc::with_layout(conv.dtype(), w_layout, &w_lens).map_err(err)?;
        let as_i64 = |f: fn(&AxisSub) -> usize| subs.iter().map(|s| f(s) as i64).collect::<Vec<i64>>();
        let mut fwd = ConvDesc::new(ConvMode::Convolution, &as_i64(|s| s.pad), &vec![1; nd], &as_i64(|s| s.dilation)).map_err(err)?;
        fwd.set_groups(g as i64).map_err(err)?;
        fwd.set_pads_end(&subs.iter().map(|s| s.pad_end).collect::<Vec<_>>());
        fwd.copy_attributes(d);
        let forward = ConvProblem::forward(&fwd, &dy_view, &w_sub, &dx_view).map_err(err)?;
        let one = TapAxis { first: 0, step: 1, count: 1 };
        let axes = if nd == 2 { [one, subs[0].taps, subs[1].taps] } else { [subs[0].taps, subs[1].taps, subs[2].taps] };
        let src = if nd == 2 { [1, filter[0], filter[1]] } else { [filter[0], filter[1], filter[2]] };
        phases.push(Phase { residue: residue3, dx_offset, dy_offset, dx: dx_view, forward: Some((forward, TapMap { axes, src })) });
    }
    Ok(phases)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::conv::{conv_backward_data, conv_forward};
    use crate::reference::fill::{fill_small_int, SplitMix64};
    use crate::tensor::for_each_index;
    use crate::types::DataType;

    /// The sub-filter of a phase gathered from w (K × CG × taps, any layout) on the host.
    fn gather_sub_filter(w_desc: &TensorDesc, w: &[f64], groups: usize, sub: &TensorDesc, taps: &TapMap) -> Vec<f64> {
        let (cg, kg) = (w_desc.c(), w_desc.n() / groups);
        let nd = w_desc.rank() - 2;
        let mut out = vec![f64::NAN; sub.element_space()];
        for_each_index(sub.lens(), |i| {
            let (gc, k) = (i[0], i[1]);
            let (g, c) = (gc / cg, gc % cg);
            let t3 = if nd == 2 { [0, i[2], i[3]] } else { [i[2], i[3], i[4]] };
            let src = taps.source(t3);
            let (sh, sw) = (taps.src[1] * taps.src[2], taps.src[2]);
            let mut wi = vec![g * kg + k, c];
            if nd == 3 {
                wi.push(src / sh);
            }
            wi.extend([src % sh / sw, src % sw]);
            out[sub.offset(i)] = w[w_desc.offset(&wi)];
        });
        out
    }

    /// Every phase's forward convolution, summed into dx, equals the reference backward-data
    /// exactly (small integers), over random strides 1–4, dilations 1–3, paddings, filters and
    /// odd sizes the stride does not divide, 2-D and 3-D, with groups.
    #[test]
    fn phases_sum_to_backward_data() {
        let mut rng = SplitMix64::new(7);
        let mut pick = |lo: usize, hi: usize| lo + (rng.next_u64() % (hi - lo + 1) as u64) as usize;
        let mut checked = 0;
        for case in 0..400 {
            let nd = if case % 5 == 4 { 3 } else { 2 };
            let groups = pick(1, 2);
            let (cg, kg) = (pick(1, 3), pick(1, 3));
            let filter: Vec<usize> = (0..nd).map(|_| pick(1, 5)).collect();
            let stride: Vec<usize> = (0..nd).map(|_| pick(1, 4)).collect();
            let dil: Vec<usize> = (0..nd).map(|_| pick(1, 3)).collect();
            let pad: Vec<usize> = (0..nd).map(|i| pick(0, dil[i] * (filter[i] - 1) + 1)).collect();
            let input: Vec<usize> = (0..nd).map(|_| pick(1, if nd == 2 { 13 } else { 7 })).collect();
            let i64s = |v: &[usize]| v.iter().map(|&x| x as i64).collect::<Vec<_>>();
            let conv = ConvDesc::new(ConvMode::Convolution, &i64s(&pad), &i64s(&stride), &i64s(&dil)).unwrap();
            let mut conv = conv;
            conv.set_groups(groups as i64).unwrap();
            let dx_lens: Vec<usize> = [pick(1, 2), groups * cg].into_iter().chain(input.iter().copied()).collect();
            let w_lens: Vec<usize> = [groups * kg, cg].into_iter().chain(filter.iter().copied()).collect();
            let dx_desc = TensorDesc::new(DataType::Float, &dx_lens).unwrap();
            let w_desc = TensorDesc::new(DataType::Float, &w_lens).unwrap();
            let Ok(dy_lens) = conv.output_lens(&dx_desc, &w_desc) else { continue };
            // Skip geometries whose filter window does not fit (MIOpen clamps those to 1).
            if (0..nd).any(|i| input[i] + 2 * pad[i] < dil[i] * (filter[i] - 1) + 1) {
                continue;
            }
            let layout = if nd == 2 { Layout::NHWC } else { Layout::NDHWC };
            let dy_desc = TensorDesc::with_layout(DataType::Float, layout, &dy_lens).unwrap();
            let problem = ConvProblem::backward_data(&conv, &dy_desc, &w_desc, &dx_desc).unwrap();
            let dy = fill_small_int(case, dy_desc.element_space(), -3, 3);
            let w = fill_small_int(case + 1000, w_desc.element_space(), -3, 3);
            let mut want = vec![0.0; dx_desc.element_space()];
            conv_backward_data(&conv, &dy_desc, &dy, &w_desc, &w, &dx_desc, &mut want).unwrap();
            let mut got = vec![f64::NAN; dx_desc.element_space()];
            let phases = backward_data_phases(&problem, &dy_desc, layout).unwrap();
            for ph in &phases {
                match &ph.forward {
                    None => for_each_index(ph.dx.lens(), |i| got[ph.dx_offset + ph.dx.offset(i)] = 0.0),
                    Some((f, taps)) => {
                        assert_eq!(f.conv.strides(), vec![1; nd].as_slice());
                        let sub = gather_sub_filter(&w_desc, &w, groups, &f.w, taps);
                        let mut out = got[ph.dx_offset..].to_vec();
                        conv_forward(&f.conv, &f.x, &dy[ph.dy_offset..], &f.w, &sub, &f.y, &mut out).unwrap();
                        for_each_index(f.y.lens(), |i| got[ph.dx_offset + f.y.offset(i)] = out[f.y.offset(i)]);
                    }
                }
            }
            assert_eq!(got, want, "case {case}: dx {dx_lens:?} w {w_lens:?} pad {pad:?} stride {stride:?} dil {dil:?} groups {groups}");
            checked += 1;
        }
        assert!(checked > 250, "only {checked} geometries checked");
    }

    #[test]
    fn stride_one_is_one_reversed_phase() {
        let conv = ConvDesc::new(ConvMode::Convolution, &[1, 1], &[1, 1], &[1, 1]).unwrap();
        let dx = TensorDesc::new(DataType::Half, &[2, 8, 9, 9]).unwrap();
        let w = TensorDesc::new(DataType::Half, &[16, 8, 3, 3]).unwrap();
        let dy = conv.output_desc(&dx, &w).unwrap();
        let p = ConvProblem::backward_data(&conv, &dy, &w, &dx).unwrap();
        let phases = backward_data_phases(&p, &dy, Layout::NHWC).unwrap();
        assert_eq!(phases.len(), 1);
        let (f, taps) = phases[0].forward.as_ref().unwrap();
        assert!(taps.is_reversed());
        assert_eq!((f.conv.pads(), f.conv.pads_end()), (&[1usize, 1][..], &[1usize, 1][..]));
    }
}
