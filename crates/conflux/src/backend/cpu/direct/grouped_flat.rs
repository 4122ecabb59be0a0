//! Grouped f32 forward with a few channels per group (ResNeXt, RegNet) on channels-first planes
//! with AVX-512 (kernel in `x86/grouped_flat.rs`), at stride 1 or 2: the planes are read as
//! flat runs of 16 outputs exactly as the flat depthwise solver reads them (`FlatPlan`: masked
//! loads where the input or its stride phase lies), and a block of 4 or 8 output channels of a
//! group shares every loaded input vector. Ungrouped layers with a few input channels (stems)
//! run the same way as one group. A task is one image, group and band of output vectors (the
//! whole plane where images × groups give the threads enough tasks): at stride 2 it splits the
//! input rows its band reads into phases once for all its output blocks.

use crate::backend::cpu::direct::depthwise_flat::{planes_unsuitable, stores, FlatPlan};
use crate::backend::cpu::direct::depthwise_planes::f32_filters;
use crate::backend::cpu::direct::naive::ConvPtrs;
use crate::backend::cpu::gemm::{with_scratch, Slot};
use crate::backend::cpu::pointwise::epilogue::CpuEpilogue;
use crate::backend::cpu::tensor_io::conv_out::OutTensor;
use crate::backend::cpu::x86::depthwise_flat::split_phases;
use crate::backend::cpu::x86::depthwise_flat::LANES;
use crate::backend::cpu::x86::grouped_flat::{self as k, Block};
use crate::problem::Geom;
use rayon::prelude::*;

/// Most input channels of an ungrouped layer it takes (stems): a reduction this short would
/// leave a GEMM's panels nearly empty.
pub const MAX_STEM_CHANNELS: usize = 4;

/// Why a grouped geometry is not for this kernel, or None when it is.
pub fn unsuitable(g: &Geom) -> Option<String> {
    let (grouped, stem) = (g.groups > 1 && g.cg() >= 2, g.groups == 1 && g.cg() <= MAX_STEM_CHANNELS);
    if !grouped && !stem {
        return Some(format!("grouped with at least 2 input channels per group, or ungrouped with at most {MAX_STEM_CHANNELS} ({} groups, {} channels: depthwise and other layers have solvers of their own)", g.groups, g.c));
    }
    if g.kg() % 4 != 0 {
        return Some(format!("output channels per group a multiple of 4 ({} given: blocks of 4 or 8 share each input load)", g.kg()));
    }
    planes_unsuitable(g)
}

/// Tasks per thread wanted: planes are cut into bands of output vectors where images × groups
/// give fewer (a stem is one group).
const TASKS_PER_THREAD: usize = 4;

/// Fewest output vectors per band.
const MIN_BAND_VECTORS: usize = 16;

/// y = epilogue(α·conv(x, w) + β·y) for a 2-D f32 grouped convolution that `unsuitable`
/// accepts.
///
/// # Safety
/// The CPU has AVX-512F; the pointers hold the tensors `g` describes; `plan` is `g`'s.
pub unsafe fn forward(g: &Geom, plan: &FlatPlan, p: ConvPtrs, alpha: f32, beta: f32, epi: &CpuEpilogue) {
    let (cg, kg, taps, outputs) = (g.cg(), g.kg(), g.filter_size(), plan.outputs);
    let (xs, ys) = (g.x_strides, g.y_strides);
    let wts = f32_filters(g, p);
    let (direct, sp_off) = stores(g, alpha, beta, epi);
    let out = OutTensor { ptr: p.y, dt: p.dt, strides: ys, dims: g.output, sp_off: &sp_off, alpha, beta, epi };
    let pt = plan.taps();
    let kb = if kg % 8 == 0 { 8 } else { 4 };
    let in_place = plan.phases == [1, 1];
    let per_channel = plan.phase_len * plan.phases[0] * plan.phases[1];
    let units = g.n * g.groups;
    let want = (TASKS_PER_THREAD * rayon::current_num_threads()).div_ceil(units);
    let band = plan.vectors.div_ceil(want.max(1)).max(MIN_BAND_VECTORS).min(plan.vectors);
    let bands = plan.vectors.div_ceil(band);
    let split_len = if in_place { 0 } else { cg * per_channel };
    let dense_len = if direct.is_some() { 0 } else { kg * band * LANES };
    let (xp, yp) = (p.x as usize, p.y as usize);
    (0..units * bands).into_par_iter().for_each(|task| {
        let (n, grp, bi) = (task / (g.groups * bands), task / bands % g.groups, task % bands);
        let vs = bi * band..((bi + 1) * band).min(plan.vectors);
        // The band's outputs [p0, p1) of every plane.
        let (p0, p1) = (vs.start * LANES, (vs.end * LANES).min(outputs));
        with_scratch(Slot::Task, split_len + dense_len, |buf| {
            let (split, dense) = buf.split_at_mut(split_len);
            let x = (xp as *const f32).add(n * xs[0] + grp * cg * xs[1]);
            let (src, x_step) = if in_place {
                (x, xs[1])
            } else {
                // Only the input rows this band reads; the phases keep their whole-plane layout.
                for ci in 0..cg {
                    split_phases(x.add(ci * xs[1]), plan.rows_of(vs.clone()), g.input[2], plan.phases[0], plan.phases[1], split.as_mut_ptr().add(ci * per_channel), plan.pitch, plan.phase_len);
                }
                (split.as_ptr(), per_channel)
            };
            for k0 in (0..kg).step_by(kb) {
                let ko = grp * kg + k0;
                // The kernel stores output p at y + p: the dense band buffer is offset by p0.
                let (y, y_step, bias, clamp, hi) = match &direct {
                    Some(fs) => ((yp as *mut f32).add(n * ys[0] + ko * ys[1]), ys[1], fs.bias.map_or(std::ptr::null(), |b| b[ko..].as_ptr()), fs.clamp.on, fs.clamp.hi),
                    None => (dense.as_mut_ptr().add(k0 * band * LANES).wrapping_sub(p0), band * LANES, std::ptr::null(), false, 0.0),
                };
                let b = Block { x: src, x_step, cg, w: wts[ko * cg * taps..].as_ptr(), w_step: cg * taps, y, y_step, bias, clamp, hi };
                if kb == 8 {
                    k::block::<8>(&pt, vs.clone(), &b);
                } else {
                    k::block::<4>(&pt, vs.clone(), &b);
                }
            }
            for k0 in 0..kg {
                let ko = grp * kg + k0;
                match &direct {
                    // SAFETY: this task owns outputs [p0, p1) of y plane (n, ko), packed f32.
                    Some(fs) => fs.finish(std::slice::from_raw_parts_mut((yp as *mut f32).add(n * ys[0] + ko * ys[1] + p0), p1 - p0)),
                    // SAFETY: this task owns outputs [p0, p1) of y plane (n, ko).
                    None => out.write_span(&mut dense[k0 * band * LANES..][..p1 - p0], n, ko, p0),
                }
            }
        });
    });
}
