//! Winograd F(4×4, 3×3) forward convolution (2-D, 3×3, stride 1, dilation 1, any padding,
//! groups, layout and type; transforms in `math.rs`), and F(2×2, 3×3) through the same
//! phases (`Variant`). Four parallel phases:
//! 1. x into zero-padded f32 planes, so layout, type and padding are handled once (skipped
//!    for f32 x with the AVX-512 transforms, which gather from x with the padding masked);
//! 2. input transform once per (tile, channel) into A panels V[group][ξ][tile panel][c][mr];
//! 3. filter transform once per (filter, channel) into B panels U[group][ξ][filter panel][c][nr];
//! 4. tasks of (tile block, filter block): the 36 (F(2×2): 16) GEMMs M_ξ = V_ξ·U_ξ through
//!    the packed micro-kernel into a task-local buffer, then the output transform, α/β and the
//!    epilogue straight into y while M is still in cache.
//!
//! Tiles are the GEMM rows (broadcast operand) and filters the columns (vector operand):
//! filter counts are multiples of 32 in real networks, tile counts often are not.

pub(crate) mod math;
mod output;
mod tasks;
mod transforms;

use output::*;
use tasks::*;
use transforms::*;

use crate::backend::cpu::tensor_io::access::load;
use crate::backend::cpu::direct::naive::ConvPtrs;
use crate::backend::cpu::tensor_io::conv_out::{spatial_offsets, OutTensor};
use crate::backend::cpu::pointwise::epilogue::CpuEpilogue;
use crate::backend::cpu::gemm::{best, with_scratch_aligned as with_scratch, Kernel, Slot};
use crate::backend::cpu::lanes::{copy_lanes, level};
use crate::backend::cpu::Shared;
use crate::backend::cpu::winograd::math::{self as wm, Lanes, L};
use crate::problem::Geom;
use crate::tensor::TensorDesc;
use crate::types::DataType;
use rayon::prelude::*;
use std::ops::Range;

/// The output tile: F(4×4, 3×3) (6×6 transforms, 36 GEMMs, 4× fewer multiplies than direct)
/// or F(2×2, 3×3) (4×4, 16 GEMMs, 2.25×). F(2×2)'s transformed filters are 16/36 the size,
/// which can win where they stream from memory for few tiles (`cpu_winograd` says where).
/// Both have AVX-512 input and filter transforms; the output transform's are F(4×4) only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    F4,
    F2,
}

impl Variant {
    /// Output rows and columns per tile.
    pub fn m(self) -> usize {
        match self {
            Variant::F4 => 4,
            Variant::F2 => 2,
        }
    }

    /// Transform points per tile (GEMMs): (m + 2)².
    pub fn points(self) -> usize { (self.m() + 2) * (self.m() + 2) }

    /// Output tiles of `g` over all images (the GEMMs' rows).
    pub fn tiles(self, g: &Geom) -> usize {
        let [_, oh, ow] = g.output;
        g.n * oh.div_ceil(self.m()) * ow.div_ceil(self.m())
    }
}

/// Where the 3×3 taps of filter k, input channel c of a group are in w (element offsets): the
/// forward problem's own filter, or, for a stride-1 backward-data problem run as a forward
/// one, the caller's filter read transposed and flipped in place (no copy).
#[derive(Clone, Copy, Debug)]
pub struct FilterView {
    pub group: usize,
    pub k: usize,
    pub c: usize,
    pub taps: [usize; 9],
}

impl FilterView {
    /// The forward problem's filter as its geometry describes it.
    pub fn of(g: &Geom) -> FilterView {
        let ws = g.w_strides;
        FilterView { group: g.kg() * ws[0], k: ws[0], c: ws[1], taps: std::array::from_fn(|i| (i / 3) * ws[3] + (i % 3) * ws[4]) }
    }

    /// The forward filter w'[g·CG + c][k][t] = w[g·KG + k][c][8 − t] of backward-data on the 2-D
    /// 3×3 filter `w` (K × C/G × 3 × 3) in `groups` groups
    /// (`ConvProblem::backward_data_as_forward`).
    pub fn flipped(w: &TensorDesc, groups: usize) -> FilterView {
        let s = w.strides();
        FilterView { group: w.lens()[0] / groups * s[0], k: s[1], c: s[0], taps: std::array::from_fn(|i| (2 - i / 3) * s[2] + (2 - i % 3) * s[3]) }
    }
}

/// Sizes shared by the phases (per group unless noted).
struct Ctx<'a> {
    g: &'a Geom,
    p: ConvPtrs,
    fv: FilterView,
    kern: Kernel,
    v: Variant,
    /// Output tile side (`Variant::m`) and transform points.
    m: usize,
    xi: usize,
    /// AVX-512 with intrinsics allowed: the GEMM's row kernels and the intrinsic input and
    /// filter transforms (else the lane-array versions); the intrinsic output transforms are
    /// F(4×4) only (`f4_intrinsics`).
    fast: bool,
    /// The input transform gathers straight from x (f32, intrinsics, offsets within i32), with
    /// padding and missing tiles masked, instead of from zero-padded planes.
    direct_x: bool,
    cg: usize,
    kg: usize,
    /// Tiles per row and column of an image, tiles in all images, padded to whole panels.
    th: usize,
    tw: usize,
    tiles: usize,
    tpad: usize,
    kpad: usize,
    /// Padded plane rows and columns.
    ph: usize,
    pw: usize,
    /// Distance between the ξ slabs of V and U (`slab`).
    vx: usize,
    ux: usize,
}

/// A slab length for n f32 that is an odd number of cache lines: the 36 ξ slabs are written
/// and read together, and power-of-two distances put them all in one L1 set (4K aliasing;
/// measured on the filter transform: bench/results/2026-11-21-cpu-winograd.md).
fn slab(n: usize) -> usize {
    let lines = n.div_ceil(16);
    16 * (lines | 1)
}

/// Whether `wino4` computes this geometry (2-D, 3×3, stride 1, dilation 1), else why not.
pub fn supports(g: &Geom) -> Result<(), String> {
    if !g.is_2d() {
        return Err("3-D convolution (2-D only)".into());
    }
    if g.filter[1..] != [3, 3] {
        return Err(format!("filter {}×{} (3×3 only)", g.filter[1], g.filter[2]));
    }
    if g.stride[1..] != [1, 1] || g.dilation[1..] != [1, 1] {
        return Err("stride or dilation ≠ 1".into());
    }
    Ok(())
}

/// y = epilogue(α·conv(x, w) + β·y) for a geometry `supports` accepts.
pub fn forward(g: &Geom, p: ConvPtrs, alpha: f32, beta: f32, epi: &CpuEpilogue) {
    forward_view(g, FilterView::of(g), p, alpha, beta, epi)
}

/// `forward` reading the filter through `fv` (backward-data: the caller's filter flipped).
pub fn forward_view(g: &Geom, fv: FilterView, p: ConvPtrs, alpha: f32, beta: f32, epi: &CpuEpilogue) {
    forward_with(panel_kernel(g, Variant::F4), Variant::F4, true, g, fv, p, alpha, beta, epi, None)
}

/// The GEMM micro-kernel for `g`'s tiles: `gemm::best()`, or its 8-row form where 12-row tile
/// panels would end in one of 1–4 rows and 8-row panels would not. Such a panel runs a
/// kernel of ≤ 8 accumulators, which the FMA latency starves (16 tiles as 12 + 4 spent a
/// disproportionate share of the GEMM time in the 4-row panel). Elsewhere the 12-row kernel
/// stays: with a remainder of one row or none, 8-row panels measured slower or equal
/// (bench/results/2026-11-25-cpu-session18.md).
pub fn panel_kernel(g: &Geom, v: Variant) -> Kernel {
    let (kern, tiles) = (best(), v.tiles(g));
    let short_tail = |mr: usize| (1..=4).contains(&(tiles % mr));
    match crate::backend::cpu::gemm::kernel::avx512_8() {
        Some(k8) if kern.mr == 12 && kern.nr == k8.nr && short_tail(12) && !short_tail(8) => k8,
        _ => kern,
    }
}

/// Values of the transformed filters U of every group of `g` for `kern` and `v`
/// (`transform_filters`).
pub fn transformed_len(kern: Kernel, v: Variant, g: &Geom) -> usize {
    g.groups * v.points() * slab(g.kg().div_ceil(kern.nr) * kern.nr * g.cg())
}

/// The filters (read through `fv` from `p.w`) transformed into `u` (`transformed_len` values),
/// in the layout `forward_with` reads when it is given them: for callers that keep them
/// across calls (constant weights).
pub fn transform_filters(kern: Kernel, v: Variant, intrinsics: bool, g: &Geom, fv: FilterView, p: ConvPtrs, u: &mut [f32]) {
    let cx = Ctx::new(kern, v, intrinsics, g, fv, p);
    assert_eq!(u.len(), transformed_len(kern, v, g), "wino4: transformed filter buffer");
    let ulen = cx.xi * cx.ux;
    let up = Shared(u.as_mut_ptr());
    let kpanels = cx.kpad / kern.nr;
    let cchunk = 32;
    let cchunks = cx.cg.div_ceil(cchunk);
    (0..g.groups * kpanels * cchunks).into_par_iter().for_each(|i| {
        let (group, kp, cc) = (i / (kpanels * cchunks), (i / cchunks) % kpanels, i % cchunks);
        let c0 = cc * cchunk;
        // SAFETY: U holds every (group, ξ, panel, channel).
        let dst = unsafe { up.at(group * ulen + kp * kern.nr * cx.cg + c0 * kern.nr) };
        filter_panel(&cx, group, kp, c0, (c0 + cchunk).min(cx.cg), dst, cx.ux);
    });
}

impl<'a> Ctx<'a> {
    fn new(kern: Kernel, v: Variant, intrinsics: bool, g: &'a Geom, fv: FilterView, p: ConvPtrs) -> Ctx<'a> {
        let (cg, kg, m) = (g.cg(), g.kg(), v.m());
        let [_, oh, ow] = g.output;
        let (th, tw, tiles) = (oh.div_ceil(m), ow.div_ceil(m), v.tiles(g));
        Ctx {
            g,
            p,
            fv,
            kern,
            v,
            m,
            xi: v.points(),
            fast: intrinsics && level() == 2,
            direct_x: intrinsics && level() == 2 && p.dt == DataType::Float && x_span(g) < (i32::MAX / 4) as usize,
            cg,
            kg,
            th,
            tw,
            tiles,
            tpad: tiles.div_ceil(kern.mr) * kern.mr,
            kpad: kg.div_ceil(kern.nr) * kern.nr,
            ph: m * th + 2,
            pw: m * tw + 2,
            vx: slab(tiles.div_ceil(kern.mr) * kern.mr * cg),
            ux: slab(kg.div_ceil(kern.nr) * kern.nr * cg),
        }
    }

    /// The AVX-512 intrinsic output transforms apply (F(4×4) only).
    fn f4_intrinsics(&self) -> bool { self.fast && self.v == Variant::F4 }
}

/// Elements from x's first to one past its last (all strides, all dimensions), widened by
/// the padding and a tile's overhang on both sides: a bound on the offsets between any two
/// window elements of the direct input transform.
fn x_span(g: &Geom) -> usize {
    let [_, h, w] = g.input;
    let s = g.x_strides;
    let span = 1 + (g.n.max(1) - 1) * s[0] + (g.c.max(1) - 1) * s[1] + (h.max(1) - 1) * s[3] + (w.max(1) - 1) * s[4];
    span + 2 * ((g.pad[1] + 6) * s[3] + (g.pad[2] + 6) * s[4])
}

/// `forward` with a chosen GEMM micro-kernel, and the AVX-512 intrinsic transforms allowed
/// or not (tests run every combination this CPU has); `transformed`: the filters as
/// `transform_filters` left them with the same kernel (then they are not read).
#[doc(hidden)]
#[allow(clippy::too_many_arguments)]
pub fn forward_with(kern: Kernel, v: Variant, intrinsics: bool, g: &Geom, fv: FilterView, p: ConvPtrs, alpha: f32, beta: f32, epi: &CpuEpilogue, transformed: Option<&[f32]>) {
    let cx = Ctx::new(kern, v, intrinsics, g, fv, p);
    let sp_off = spatial_offsets(g.output, g.y_strides);
    let out = OutTensor { ptr: p.y, dt: p.dt, strides: g.y_strides, dims: g.output, sp_off: &sp_off, alpha, beta, epi };
    let (vlen, ulen) = (cx.xi * cx.vx, cx.xi * cx.ux); // per group
    // Zero-padded planes only where the input transform cannot read x itself.
    with_scratch(Slot::Conv, if cx.direct_x { 0 } else { g.n * g.c * cx.ph * cx.pw }, |planes| {
        if !cx.direct_x {
            pad_planes(&cx, planes);
        }
        let planes = &*planes;
        let blk = Blocks::choose(&cx);
        // V for all tiles, unless each task transforms its own tile panels.
        with_scratch(Slot::PackA, if blk.input_in_tasks { 0 } else { g.groups * vlen }, |v| {
            let vp = Shared(v.as_mut_ptr());
            let tpanels = cx.tpad / kern.mr;
            if !blk.input_in_tasks {
                let cchunk = 16;
                let cchunks = cx.cg.div_ceil(cchunk);
                (0..g.groups * tpanels * cchunks).into_par_iter().for_each(|i| {
                    let (group, tp, cc) = (i / (tpanels * cchunks), (i / cchunks) % tpanels, i % cchunks);
                    let cs = cc * cchunk..((cc + 1) * cchunk).min(cx.cg);
                    input_panel(&cx, planes, group, tp, cs.start, cs.end, vp, vlen);
                });
            }
            let io = Io { planes, v: vp, vlen, ulen, out: &out };
            if let Some(u) = transformed {
                assert_eq!(u.len(), transformed_len(kern, cx.v, g), "wino4: transformed filters of another problem");
                return gemm_and_output(&cx, &blk, &io, Some(u));
            }
            // U materialized once when it is reused by several tile blocks and small; else
            // each task transforms its filters chunk by chunk (no large U round trip, and
            // each task's U stays in its own core's cache).
            let fused = blk.tblocks <= FUSE_UP_TO_TILE_BLOCKS || 4 * g.groups * ulen > FUSE_ABOVE_BYTES;
            with_scratch(Slot::PackBAll, if fused { 0 } else { g.groups * ulen }, |u| {
                if !fused {
                    transform_filters(kern, cx.v, intrinsics, g, fv, p, u);
                }
                let uopt = if fused { None } else { Some(&*u) };
                gemm_and_output(&cx, &blk, &io, uopt);
            });
        });
    });
}
