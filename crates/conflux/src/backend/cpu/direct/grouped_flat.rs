//! Grouped f32 forward with a few channels per group (ResNeXt, RegNet) on channels-first planes
//! with AVX-512 (kernel in `x86/grouped_flat.rs`), at stride 1 or 2: the planes are read as
//! flat runs of 16 outputs exactly as the flat depthwise solver reads them (`FlatPlan`: masked
//! loads where the input or its stride phase lies), and a block of 4 or 8 output channels of a
//! group shares every loaded input vector. One task is one image and group: at stride 2 it
//! splits the group's input planes into phases once for all its output blocks.

use crate::backend::cpu::direct::depthwise_flat::{planes_unsuitable, FlatPlan};
use crate::backend::cpu::direct::depthwise_planes::f32_filters;
use crate::backend::cpu::direct::naive::ConvPtrs;
use crate::backend::cpu::gemm::{with_scratch, Slot};
use crate::backend::cpu::pointwise::epilogue::CpuEpilogue;
use crate::backend::cpu::tensor_io::conv_out::{spatial_offsets, OutTensor};
use crate::backend::cpu::x86::depthwise_flat::split_phases;
use crate::backend::cpu::x86::grouped_flat::{self as k, Block};
use crate::problem::Geom;
use rayon::prelude::*;

/// Why a grouped geometry is not for this kernel, or None when it is.
pub fn unsuitable(g: &Geom) -> Option<String> {
    if g.groups == 1 || g.cg() < 2 {
        return Some(format!("grouped with at least 2 input channels per group ({} groups, {} channels: depthwise and ungrouped layers have solvers of their own)", g.groups, g.c));
    }
    if g.kg() % 4 != 0 {
        return Some(format!("output channels per group a multiple of 4 ({} given: blocks of 4 or 8 share each input load)", g.kg()));
    }
    planes_unsuitable(g)
}

/// y = epilogue(α·conv(x, w) + β·y) for a 2-D f32 grouped convolution that `unsuitable`
/// accepts.
///
/// # Safety
/// The CPU has AVX-512F; the pointers hold the tensors `g` describes; `plan` is `g`'s.
pub unsafe fn forward(g: &Geom, plan: &FlatPlan, p: ConvPtrs, alpha: f32, beta: f32, epi: &CpuEpilogue) {
    let (cg, kg, taps, outputs) = (g.cg(), g.kg(), g.filter_size(), plan.outputs);
    let (xs, ys) = (g.x_strides, g.y_strides);
    let wts = f32_filters(g, p);
    let packed = ys[4] == 1 && ys[3] == g.output[2];
    let direct = (alpha == 1.0 && beta == 0.0 && packed).then(|| epi.fused_store()).flatten();
    let sp_off = if direct.is_some() { Vec::new() } else { spatial_offsets(g.output, ys) };
    let out = OutTensor { ptr: p.y, dt: p.dt, strides: ys, dims: g.output, sp_off: &sp_off, alpha, beta, epi };
    let pt = plan.taps();
    let kb = if kg % 8 == 0 { 8 } else { 4 };
    let in_place = plan.phases == [1, 1];
    let per_channel = plan.phase_len * plan.phases[0] * plan.phases[1];
    let split_len = if in_place { 0 } else { cg * per_channel };
    let dense_len = if direct.is_some() { 0 } else { kg * outputs };
    let (xp, yp) = (p.x as usize, p.y as usize);
    (0..g.n * g.groups).into_par_iter().for_each(|task| {
        let (n, grp) = (task / g.groups, task % g.groups);
        with_scratch(Slot::Task, split_len + dense_len, |buf| {
            let (split, dense) = buf.split_at_mut(split_len);
            let x = (xp as *const f32).add(n * xs[0] + grp * cg * xs[1]);
            let (src, x_step) = if in_place {
                (x, xs[1])
            } else {
                for ci in 0..cg {
                    split_phases(x.add(ci * xs[1]), 0..g.input[1], g.input[2], plan.phases[0], plan.phases[1], split.as_mut_ptr().add(ci * per_channel), plan.pitch, plan.phase_len);
                }
                (split.as_ptr(), per_channel)
            };
            for k0 in (0..kg).step_by(kb) {
                let ko = grp * kg + k0;
                let (y, y_step, bias, clamp, hi) = match &direct {
                    Some(fs) => ((yp as *mut f32).add(n * ys[0] + ko * ys[1]), ys[1], fs.bias.map_or(std::ptr::null(), |b| b[ko..].as_ptr()), fs.clamp.on, fs.clamp.hi),
                    None => (dense.as_mut_ptr().add(k0 * outputs), outputs, std::ptr::null(), false, 0.0),
                };
                let b = Block { x: src, x_step, cg, w: wts[ko * cg * taps..].as_ptr(), w_step: cg * taps, y, y_step, bias, clamp, hi };
                if kb == 8 {
                    k::block::<8>(&pt, 0..plan.vectors, &b);
                } else {
                    k::block::<4>(&pt, 0..plan.vectors, &b);
                }
            }
            for k0 in 0..kg {
                let ko = grp * kg + k0;
                match &direct {
                    // SAFETY: this task owns y plane (n, ko), Ho·Wo packed f32 elements.
                    Some(fs) => fs.finish(std::slice::from_raw_parts_mut((yp as *mut f32).add(n * ys[0] + ko * ys[1]), outputs)),
                    // SAFETY: this task owns y plane (n, ko).
                    None => out.write_span(&mut dense[k0 * outputs..][..outputs], n, ko, 0),
                }
            }
        });
    });
}
