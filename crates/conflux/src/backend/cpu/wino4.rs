//! Winograd F(4×4, 3×3) forward convolution (2-D, 3×3, stride 1, dilation 1, any padding,
//! groups, layout and type; transforms in `wino4_math.rs`), and F(2×2, 3×3) through the same
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

use super::access::load;
use super::conv_naive::ConvPtrs;
use super::conv_out::{spatial_offsets, OutTensor};
use super::epilogue::CpuEpilogue;
use super::gemm::{best, with_scratch_aligned as with_scratch, Kernel, Slot};
use super::lanes::{copy_lanes, level};
use super::Shared;
use super::wino4_math::{self as wm, Lanes, L};
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
    if g.input[0] != 1 || g.filter[0] != 1 {
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
    match super::gemm::kernel::avx512_8() {
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

/// Materialized U above this size (bytes) is transformed inside the tasks instead.
const FUSE_ABOVE_BYTES: usize = 64 << 20;
/// With at most this many tile blocks each task transforms its own filters (the transform
/// done twice) rather than reading a U written by either core, which measured faster with
/// two tile blocks and made no difference with one or five
/// (bench/results/2026-11-25-cpu-constant-weights.md).
const FUSE_UP_TO_TILE_BLOCKS: usize = 2;
/// Channels per GEMM step when the tasks transform the filters themselves.
const FUSED_CHUNK: usize = 64;

/// Task blocking: tile panels × filter panels per task.
struct Blocks {
    kb: usize,
    tblocks: usize,
    kblocks: usize,
    /// One task per tile block, transforming its tile panels' input itself into a buffer of
    /// its thread and then running every filter block over it: V is written and read in the
    /// core's L2. A separate input phase wrote all of V to lines that had left L2 since the
    /// last call, and those store misses were a large share of the layer
    /// (bench/results/2026-11-25-cpu-session17.md).
    input_in_tasks: bool,
}

/// Most bytes of V one task's tile block, and of U per group, when the tasks transform their
/// own input (`Blocks::input_in_tasks`): V stays in the core's L2 across the filter blocks,
/// and every task reads all of U, from L2. (With U streaming from memory, the smaller tile
/// blocks read it more often and measured slower: bench/results/2026-11-25-cpu-session17.md.)
const INPUT_IN_TASK_BYTES: usize = 1 << 20;

impl Blocks {
    fn choose(cx: &Ctx) -> Blocks {
        let (mr, nr) = (cx.kern.mr, cx.kern.nr);
        let (tpanels, kpanels) = (cx.tpad / mr, cx.kpad / nr);
        let want = 3 * rayon::current_num_threads();
        // Most tile and filter panels per task (48 tiles, 64 filters).
        let (tb_most, kb_most) = (tpanels.min((48 / mr).max(1)), kpanels.min((64 / nr).max(1)));
        // Enough tile blocks for every thread, each block's V in L2.
        let panel_bytes = 4 * mr * cx.cg * cx.xi;
        let tb_own = tpanels.div_ceil(want.div_ceil(cx.g.groups)).min(tb_most);
        let u_bytes = 4 * cx.kpad * cx.cg * cx.xi;
        if cx.g.groups * tpanels.div_ceil(tb_own) >= want && tb_own * panel_bytes <= INPUT_IN_TASK_BYTES && u_bytes <= INPUT_IN_TASK_BYTES {
            return Blocks { kb: kb_most, tblocks: tpanels.div_ceil(tb_own), kblocks: kpanels.div_ceil(kb_most), input_in_tasks: true };
        }
        let (mut tb, mut kb) = (tb_most, kb_most);
        let tasks = |tb: usize, kb: usize| cx.g.groups * tpanels.div_ceil(tb) * kpanels.div_ceil(kb);
        // Narrower filter blocks first: every extra tile block repeats the filter transform
        // when the tasks do it themselves.
        while tasks(tb, kb) < want && kb > 1 {
            kb -= 1;
        }
        while tasks(tb, kb) < want && tb > 1 {
            tb -= 1;
        }
        Blocks { kb, tblocks: tpanels.div_ceil(tb), kblocks: kpanels.div_ceil(kb), input_in_tasks: false }
    }

    /// Tile panels of tile block `ti`: the blocks differ by at most one panel. A last block of
    /// one partial panel streamed every filter panel again for a few rows (49 tiles = 4 + 1
    /// panels: that block took 7% of 128-28-28-128 at N=1; 3 + 2 is the same block count).
    fn tile_panels(&self, ti: usize, tpanels: usize) -> Range<usize> {
        super::even_part(tpanels, self.tblocks, ti)
    }
}

/// U' of filters kp·nr.. (lanes) and channels c0..c1; element (ξ, c, lane) goes to
/// dst + ξ·xi_stride + (c − c0)·nr + lane.
fn filter_panel(cx: &Ctx, group: usize, kp: usize, c0: usize, c1: usize, dst: Shared, xi_stride: usize) {
    #[cfg(target_arch = "x86_64")]
    if cx.fast && cx.p.dt == DataType::Float && cx.kern.nr.is_multiple_of(16) && cx.fv.k < (i32::MAX / 16) as usize {
        let (nr, fv) = (cx.kern.nr, cx.fv);
        let idx: [i32; 16] = std::array::from_fn(|l| (l * fv.k) as i32);
        for c in c0..c1 {
            for l0 in (0..nr).step_by(16) {
                let k = kp * nr + l0;
                if k >= cx.kg {
                    break;
                }
                let mask = if cx.kg - k >= 16 { 0xffff } else { (1u16 << (cx.kg - k)) - 1 };
                // SAFETY: AVX-512 was detected; lanes in the mask are filters of this group; the
                // 16 destination values lie inside panel kp's row for channel c.
                unsafe {
                    let w = (cx.p.w as *const f32).add(group * fv.group + k * fv.k + c * fv.c);
                    let idx = std::arch::x86_64::_mm512_loadu_si512(idx.as_ptr() as *const _);
                    let f = if cx.v == Variant::F4 { super::wino4_x86::filter16 } else { super::wino4_x86::filter16_f2 };
                    f(w, idx, mask, &fv.taps, dst.0.add((c - c0) * nr + l0), xi_stride);
                }
            }
        }
        return;
    }
    filter_panel_lanes(cx, group, kp, c0, c1, dst, xi_stride)
}

/// V of tile panel tp for channels c0..c1 (see `input_panel_lanes`).
#[allow(clippy::too_many_arguments)]
fn input_panel(cx: &Ctx, planes: &[f32], group: usize, tp: usize, c0: usize, c1: usize, vp: Shared, vlen: usize) {
    input_panel_to(cx, planes, group, tp, c0, c1, Shared(vp.0.wrapping_add(group * vlen + tp * cx.kern.mr * cx.cg)), cx.vx)
}

/// `input_panel` with V's panel at `dst` (channel c's rows at dst + c·mr) and the ξ slabs
/// `vx` apart.
#[allow(clippy::too_many_arguments)]
fn input_panel_to(cx: &Ctx, planes: &[f32], group: usize, tp: usize, c0: usize, c1: usize, dst: Shared, vx: usize) {
    #[cfg(target_arch = "x86_64")]
    if cx.fast && cx.kern.mr <= 16 {
        let (mr, tm) = (cx.kern.mr, cx.m as isize);
        let live = mr.min(cx.tiles - tp * mr);
        // Each lane's window start (element offset, before the tensor for border tiles with
        // direct_x), and which of its six rows and columns exist.
        let (g, mut base, mut rows, mut cols) = (cx.g, [0isize; 16], [0u16; 6], [0u16; 6]);
        let (rs, cs, ch) = if cx.direct_x { (g.x_strides[3], g.x_strides[4], g.x_strides[1]) } else { (cx.pw, 1, cx.ph * cx.pw) };
        for (l, b) in base.iter_mut().enumerate().take(live) {
            let t = tp * mr + l;
            let (n, i, j) = (t / (cx.th * cx.tw), (t / cx.tw) % cx.th, t % cx.tw);
            let (r0, s0) = if cx.direct_x { (tm * i as isize - g.pad[1] as isize, tm * j as isize - g.pad[2] as isize) } else { (tm * i as isize, tm * j as isize) };
            let (h, w) = if cx.direct_x { (g.input[1] as isize, g.input[2] as isize) } else { (cx.ph as isize, cx.pw as isize) };
            let image = if cx.direct_x { n * g.x_strides[0] } else { n * g.c * ch };
            *b = (image + group * cx.cg * ch) as isize + r0 * rs as isize + s0 * cs as isize;
            for k in 0..6 {
                rows[k] |= u16::from((0..h).contains(&(r0 + k as isize))) << l;
                cols[k] |= u16::from((0..w).contains(&(s0 + k as isize))) << l;
            }
        }
        // Relative offsets fit in i32: `x_span` bounds them for direct_x (which has no planes to
        // fall back to); plane offsets are checked.
        if cx.direct_x || base[live - 1].abs_diff(base[0]) < (i32::MAX / 2) as usize {
            let idx: [i32; 16] = std::array::from_fn(|l| if l < live { (base[l] - base[0]) as i32 } else { 0 });
            let store_mask = ((1u32 << mr) - 1) as u16;
            let src: *const f32 = if cx.direct_x { cx.p.x as *const f32 } else { planes.as_ptr() };
            for c in c0..c1 {
                // SAFETY: AVX-512 was detected; the masks let through only elements of x (or of
                // the planes of (n, group·cg + c)) inside each lane's window; the panel row of
                // channel c holds mr values per ξ.
                unsafe {
                    let idx = std::arch::x86_64::_mm512_loadu_si512(idx.as_ptr() as *const _);
                    let p = src.wrapping_offset(base[0] + (c * ch) as isize);
                    let dst = dst.0.add(c * mr);
                    let f = if cx.v == Variant::F4 { super::wino4_x86::input16_masked } else { super::wino4_x86::input16_masked_f2 };
                    f(p, idx, rows, cols, rs, cs, store_mask, dst, vx);
                }
            }
            return;
        }
    }
    input_panel_lanes(cx, planes, group, tp, c0, c1, dst, vx)
}

/// Phase 4: (group, tile block, filter block) tasks, or (group, tile block) tasks that first
/// transform their own input (`Blocks::input_in_tasks`). `u` is the materialized U, or None
/// when each task transforms its filters per channel chunk.
fn gemm_and_output(cx: &Ctx, blk: &Blocks, io: &Io, u: Option<&[f32]>) {
    let (tblocks, kblocks) = (blk.tblocks, blk.kblocks);
    if blk.input_in_tasks {
        let tpanels = cx.tpad / cx.kern.mr;
        (0..cx.g.groups * tblocks).into_par_iter().for_each(|i| {
            let (group, ti) = (i / tblocks, i % tblocks);
            let tps = blk.tile_panels(ti, tpanels);
            let panel = cx.kern.mr * cx.cg;
            let vx = slab(tps.len() * panel);
            // In this thread's own buffer, whose lines its previous tasks left in L2.
            with_scratch(Slot::TaskInput, cx.xi * vx, |v| {
                let vp = Shared(v.as_mut_ptr());
                for (j, tp) in tps.clone().enumerate() {
                    input_panel_to(cx, io.planes, group, tp, 0, cx.cg, Shared(vp.0.wrapping_add(j * panel)), vx);
                }
                let view = VView { base: vp.0, vx, tp0: tps.start };
                for ki in 0..kblocks {
                    gemm_task(cx, blk, io, view, u, group, ti, ki);
                }
            });
        });
    } else {
        (0..cx.g.groups * tblocks * kblocks).into_par_iter().for_each(|i| {
            let group = i / (tblocks * kblocks);
            let view = VView { base: io.v.0.wrapping_add(group * io.vlen), vx: cx.vx, tp0: 0 };
            gemm_task(cx, blk, io, view, u, group, (i / kblocks) % tblocks, i % kblocks);
        });
    }
}

/// Where a task finds V: tile panel tp, channel c at base + ξ·vx + (tp − tp0)·mr·cg + c·mr.
#[derive(Clone, Copy)]
struct VView {
    base: *mut f32,
    vx: usize,
    tp0: usize,
}

/// What the phases share: the padded planes, V, the per-group lengths of V and U, y.
struct Io<'a> {
    planes: &'a [f32],
    v: Shared,
    vlen: usize,
    ulen: usize,
    out: &'a OutTensor<'a>,
}

/// Tile block ti × filter block ki of one group: the GEMMs over its V rows (all written by
/// now) and the output transform.
#[allow(clippy::too_many_arguments)]
fn gemm_task(cx: &Ctx, blk: &Blocks, io: &Io, view: VView, u: Option<&[f32]>, group: usize, ti: usize, ki: usize) {
    let (mr, nr, cg) = (cx.kern.mr, cx.kern.nr, cx.cg);
    let (tpanels, kpanels) = (cx.tpad / mr, cx.kpad / nr);
    let kb = blk.kb;
    let (ulen, out) = (io.ulen, io.out);
    let chunk = if u.is_some() { cg } else { FUSED_CHUNK };
    // The partial last tile panel runs a kernel of its own height (AVX-512 12×32 only).
    let rows_kernel = cx.fast && (mr, nr) == (12, 32);
    let tps = blk.tile_panels(ti, tpanels);
    let kps = ki * kb..((ki + 1) * kb).min(kpanels);
    let (rows, cols) = (tps.len() * mr, kps.len() * nr);
    let ms = slab(rows * cols);
    with_scratch(Slot::Task, cx.xi * ms, |m| {
        with_scratch(Slot::PackB, if u.is_some() { 0 } else { cx.xi * slab(cols * chunk.min(cg)) }, |ul| {
            for c0 in (0..cg).step_by(chunk) {
                let cl = chunk.min(cg - c0);
                if u.is_none() {
                    for (kj, kp) in kps.clone().enumerate() {
                        let dst = Shared(ul[kj * nr * cl..].as_mut_ptr());
                        filter_panel(cx, group, kp, c0, c0 + cl, dst, slab(cols * cl));
                    }
                }
                for xi in 0..cx.xi {
                    // SAFETY: inside V; these rows were written before this task reads
                    // them, and nothing writes them while it runs.
                    let vx = unsafe { std::slice::from_raw_parts(view.base.add(xi * view.vx + c0 * mr), (tps.end - view.tp0) * mr * cg - c0 * mr) };
                    let mx = &mut m[xi * ms..];
                    for (kj, kp) in kps.clone().enumerate() {
                        let bp = match u {
                            Some(u) => u[group * ulen + xi * cx.ux + kp * nr * cg + c0 * nr..].as_ptr(),
                            None => ul[xi * slab(cols * cl) + kj * nr * cl..].as_ptr(),
                        };
                        for (tj, tp) in tps.clone().enumerate() {
                            let ap = vx[(tp - view.tp0) * mr * cg..].as_ptr();
                            let cp = mx[tj * mr * cols + kj * nr..].as_mut_ptr();
                            let live = mr.min(cx.tiles - tp * mr);
                            #[cfg(target_arch = "x86_64")]
                            if live < mr && rows_kernel {
                                // SAFETY: as below, for the first `live` rows only.
                                unsafe { super::wino4_x86::gemm_rows(live, cl, ap, bp, cp, cols, c0 > 0, tj == 0) };
                                continue;
                            }
                            // The first tile panel streams this U panel in (`Kernel::fb`).
                            let f = if tj == 0 { cx.kern.fb } else { cx.kern.f };
                            // SAFETY: panels of cl·mr and cl·nr values; the mr×nr tile lies in m.
                            unsafe { f(cl, ap, bp, cp, cols, c0 > 0) };
                        }
                    }
                }
            }
        });
        let t0 = tps.start * mr;
        let k0 = kps.start * nr;
        let tlive = rows.min(cx.tiles - t0);
        let klive = cols.min(cx.kg - k0);
        write_block(cx, out, m, ms, cols, group, t0, tlive, k0, klive);
    });
}

/// Every (n, c) plane of x as f32, zero-padded: row r, column s hold x[.., r − pad, s − pad].
fn pad_planes(cx: &Ctx, planes: &mut [f32]) {
    let g = cx.g;
    let (xs, [_, h, w]) = (g.x_strides, g.input);
    let (ph, pw, pt, pl) = (cx.ph, cx.pw, g.pad[1], g.pad[2]);
    if cx.p.dt == DataType::Float && xs[1] == 1 && g.c > 1 {
        return pad_planes_channels_last(cx, planes);
    }
    planes.par_chunks_mut(ph * pw).enumerate().for_each(|(i, pln)| {
        let base = (i / g.c) * xs[0] + (i % g.c) * xs[1];
        zero_borders(cx, pln);
        for r in 0..h {
            let row = &mut pln[(pt + r) * pw..(pt + r + 1) * pw];
            let o = base + r * xs[3];
            if cx.p.dt == DataType::Float && xs[4] == 1 {
                // SAFETY: w consecutive elements of one row of x.
                row[pl..pl + w].copy_from_slice(unsafe { std::slice::from_raw_parts((cx.p.x as *const f32).add(o), w) });
            } else {
                for (s, e) in row[pl..pl + w].iter_mut().enumerate() {
                    // SAFETY: element (n, c, r, s) of x.
                    *e = unsafe { load(cx.p.dt, cx.p.x, o + s * xs[4]) };
                }
            }
        }
    });
}

/// Zero the padding of one plane: the rows above and below the input and the columns beside it.
fn zero_borders(cx: &Ctx, pln: &mut [f32]) {
    let (g, pw) = (cx.g, cx.pw);
    let ([_, h, w], pt, pl) = (g.input, g.pad[1], g.pad[2]);
    pln[..pt * pw].fill(0.0);
    for r in 0..h {
        let row = &mut pln[(pt + r) * pw..(pt + r + 1) * pw];
        row[..pl].fill(0.0);
        row[pl + w..].fill(0.0);
    }
    pln[(pt + h) * pw..].fill(0.0);
}

/// `pad_planes` for f32 x with consecutive channels (NHWC): the borders of every plane first,
/// then one task per (image, input row) reading that row's positions front to back and
/// scattering each position's channels across the planes. Plane by plane, each element was a
/// separate cache line (a 28×28×128 layer: 14% of the call in the gathers).
fn pad_planes_channels_last(cx: &Ctx, planes: &mut [f32]) {
    let g = cx.g;
    let (xs, [_, h, w]) = (g.x_strides, g.input);
    let (pw, pt, pl) = (cx.pw, g.pad[1], g.pad[2]);
    let plane = cx.ph * pw;
    planes.par_chunks_mut(plane).for_each(|pln| zero_borders(cx, pln));
    let dst = Shared(planes.as_mut_ptr());
    let x = cx.p.x;
    (0..g.n * h).into_par_iter().for_each(|nr| {
        let (n, r) = (nr / h, nr % h);
        let row0 = n * g.c * plane + (pt + r) * pw + pl;
        for s in 0..w {
            // SAFETY: position (n, r, s) of x holds g.c consecutive channels; this task alone
            // writes row pt + r of image n's planes, whose elements lie inside `planes`.
            unsafe {
                let src = (x as *const f32).add(n * xs[0] + r * xs[3] + s * xs[4]);
                for c in 0..g.c {
                    *dst.at(row0 + c * plane + s).0 = *src.add(c);
                }
            }
        }
    });
}

simd!(input_panel_lanes(cx: &Ctx, planes: &[f32], group: usize, tp: usize, c0: usize, c1: usize, dst: Shared, vx: usize) {
    // Plane offsets of the panel's tiles (tiles past the end read tile 0 and are zeroed later).
    let (mr, pw, tm) = (cx.kern.mr, cx.pw, cx.m);
    let a = tm + 2;
    let mut base = [0usize; L];
    for (l, b) in base.iter_mut().enumerate().take(mr) {
        let t = (tp * mr + l).min(cx.tiles - 1);
        let (n, i, j) = (t / (cx.th * cx.tw), (t / cx.tw) % cx.th, t % cx.tw);
        *b = (n * cx.g.c + group * cx.cg) * cx.ph * pw + tm * i * pw + tm * j;
    }
    let live = mr.min(cx.tiles - tp * mr);
    let plane = cx.ph * pw;
    for c in c0..c1 {
        let mut d = [[0f32; L]; 36];
        for (l, &b) in base.iter().enumerate().take(live) {
            let src = &planes[b + c * plane..];
            for r in 0..a {
                for s in 0..a {
                    d[a * r + s][l] = src[r * pw + s];
                }
            }
        }
        let v = match cx.v {
            Variant::F4 => wm::input(&d),
            Variant::F2 => wm::f2::input(&d),
        };
        for (xi, row) in v.iter().enumerate().take(cx.xi) {
            // SAFETY: this item alone writes panel tp, channel c of every ξ.
            unsafe { copy_lanes(row, dst.0.add(xi * vx + c * mr), mr) };
        }
    }
});

simd!(filter_panel_lanes(cx: &Ctx, group: usize, kp: usize, c0: usize, c1: usize, dst: Shared, xi_stride: usize) {
    // U' of filters kp·nr.. (lanes) and channels c0..c1; element (ξ, c, lane) goes to
    // dst + ξ·xi_stride + (c − c0)·nr + lane.
    let (nr, fv, p) = (cx.kern.nr, cx.fv, cx.p);
    let taps = fv.taps;
    for l0 in (0..nr).step_by(L) {
        let lanes = L.min(nr - l0).min(cx.kg.saturating_sub(kp * nr + l0));
        for cb in (c0..c1).step_by(FILTER_CHUNK) {
            let ce = (cb + FILTER_CHUNK).min(c1);
            // Gather filter by filter (each one's channels are near each other in memory) into
            // f[c][tap][lane]; lanes past the last filter stay zero.
            let mut f = [[[0f32; L]; 9]; FILTER_CHUNK];
            for l in 0..lanes {
                let base = group * fv.group + (kp * nr + l0 + l) * fv.k;
                for (ci, c) in (cb..ce).enumerate() {
                    let o = base + c * fv.c;
                    for (t, &to) in taps.iter().enumerate() {
                        f[ci][t][l] = if p.dt == DataType::Float {
                            // SAFETY: a weight element.
                            unsafe { *(p.w as *const f32).add(o + to) }
                        } else {
                            // SAFETY: a weight element.
                            unsafe { load(p.dt, p.w, o + to) }
                        };
                    }
                }
            }
            for (ci, c) in (cb..ce).enumerate() {
                let u = match cx.v {
                    Variant::F4 => wm::filter(&f[ci]),
                    Variant::F2 => wm::f2::filter(&f[ci]),
                };
                for (xi, row) in u.iter().enumerate().take(cx.xi) {
                    // SAFETY: this caller alone writes these elements.
                    unsafe { copy_lanes(row, dst.0.add(xi * xi_stride + (c - c0) * nr + l0), lanes) };
                }
            }
        }
    }
});

/// Channels gathered at once by `filter_panel` (its stack buffer: 9 KiB per 16 channels).
const FILTER_CHUNK: usize = 16;

/// Output transform of a task's M (`cx.xi` slabs of `ms` holding rows × cols; rows = tiles
/// from t0, cols = filters from k0) into y: per run of tiles in one tile row, m output rows
/// per filter.
#[allow(clippy::too_many_arguments)]
fn write_block(cx: &Ctx, out: &OutTensor, m: &[f32], ms: usize, cols: usize, group: usize, t0: usize, tlive: usize, k0: usize, klive: usize) {
    #[cfg(target_arch = "x86_64")]
    if write_block_direct(cx, out, m, ms, cols, group, t0, tlive, k0, klive) {
        return;
    }
    let [_, oh, ow] = cx.g.output;
    let tm = cx.m;
    let span = tm * cx.tw;
    with_scratch(Slot::Task2, klive * tm * span, |stage| {
        let mut tl = 0;
        while tl < tlive {
            let t = t0 + tl;
            let (n, ti, tj0) = (t / (cx.th * cx.tw), (t / cx.tw) % cx.th, t % cx.tw);
            let len = (cx.tw - tj0).min(tlive - tl);
            #[cfg(target_arch = "x86_64")]
            if cx.f4_intrinsics() {
                for i in 0..len {
                    let mut l0 = 0;
                    while l0 + 16 <= klive {
                        // SAFETY: AVX-512 was detected; M holds 36 slabs of `ms` with this tile's
                        // row of `cols` filters; the stage has 4 rows of `span` per filter.
                        unsafe { super::wino4_x86::output16(m[(tl + i) * cols + l0..].as_ptr(), ms, stage[l0 * 4 * span + 4 * i..].as_mut_ptr(), span) };
                        l0 += 16;
                    }
                    if l0 < klive {
                        transform_run(cx.v, &m[l0..], ms, cols, tl + i, 1, klive - l0, span, &mut stage[l0 * 4 * span + 4 * i..]);
                    }
                }
            } else {
                transform_run(cx.v, m, ms, cols, tl, len, klive, span, stage);
            }
            #[cfg(not(target_arch = "x86_64"))]
            transform_run(cx.v, m, ms, cols, tl, len, klive, span, stage);
            let (ow0, wlen) = (tm * tj0, (tm * len).min(ow - tm * tj0));
            for k in 0..klive {
                for r in 0..tm {
                    let o = tm * ti + r;
                    if o < oh {
                        let row = &mut stage[(k * tm + r) * span..][..wlen];
                        // SAFETY: this task alone owns these (n, filter, tile) outputs.
                        unsafe { out.write_span(row, n, group * cx.kg + k0 + k, o * ow + ow0) };
                    }
                }
            }
            tl += len;
        }
    });
}

/// `write_block` for f32 y, α = 1, β = 0 and a none / bias / ReLU / bias + ReLU epilogue,
/// stored straight from the output transform (AVX-512 intrinsics; for F(2×2)
/// `output4_rows_f2` / `output4_channels_last_f2`), 16 filters at a time:
/// - channels consecutive (NHWC): each position's 16-filter run from the transform's lanes
///   (`output16_channels_last`). Through the per-channel stage, NHWC y was written one element
///   per cache line.
/// - positions consecutive in a row (NCHW): each filter's 4×4 block after one transpose
///   (`output16_rows`), saving the stage and a second pass over the block.
/// Measurements: bench/results/2026-11-25-cpu-constant-weights.md (NHWC),
/// 2026-11-25-cpu-session14.md (NCHW), 2026-11-25-cpu-session17.md (F(2×2)).
///
/// False when the block does not qualify (then nothing was written).
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
fn write_block_direct(cx: &Ctx, out: &OutTensor, m: &[f32], ms: usize, cols: usize, group: usize, t0: usize, tlive: usize, k0: usize, klive: usize) -> bool {
    let ys = cx.g.y_strides;
    let channels_last = ys[1] == 1;
    if !cx.fast || out.dt != DataType::Float || !(channels_last || ys[4] == 1) || out.alpha != 1.0 || out.beta != 0.0 || cols % 16 != 0 {
        return false;
    }
    let Some((bias, relu)) = out.epi.bias_relu_all() else { return false };
    let [_, oh, ow] = cx.g.output;
    for tl in 0..tlive {
        let t = t0 + tl;
        let (n, ti, tj) = (t / (cx.th * cx.tw), (t / cx.tw) % cx.th, t % cx.tw);
        let tm = cx.m;
        let (rows, wcols) = ((oh - tm * ti).min(tm), (ow - tm * tj).min(tm));
        for l0 in (0..klive).step_by(16) {
            let live = (klive - l0).min(16);
            let ch = group * cx.kg + k0 + l0;
            let b = bias.map_or(std::ptr::null(), |b| b[ch..].as_ptr());
            // SAFETY: AVX-512 was detected (cx.fast); M holds the ξ slabs of `ms` with this
            // tile's row of `cols` (a multiple of 16) filters, so 16 lanes from l0 are readable;
            // the stored outputs are this task's (n, channel, tile) elements of y.
            unsafe {
                let y = (out.ptr as *mut f32).add(n * ys[0] + ch * ys[1] + tm * ti * ys[3] + tm * tj * ys[4]);
                let mv = m[tl * cols + l0..].as_ptr();
                let mask: u16 = if live == 16 { 0xffff } else { (1u16 << live) - 1 };
                use super::wino4_x86 as x86;
                match (cx.v, channels_last) {
                    (Variant::F4, true) => x86::output16_channels_last(mv, ms, y, ys[3], ys[4], rows, wcols, mask, b, relu),
                    (Variant::F4, false) => x86::output16_rows(mv, ms, y, ys[1], ys[3], rows, wcols, live, b, relu),
                    (Variant::F2, true) => x86::output4_channels_last_f2(mv, ms, y, ys[3], ys[4], rows, wcols, mask, b, relu),
                    (Variant::F2, false) => x86::output4_rows_f2(mv, ms, y, ys[1], ys[3], rows, wcols, live, b, relu),
                }
            }
        }
    }
    true
}

simd!(transform_run(v: Variant, m: &[f32], ms: usize, cols: usize, tl: usize, len: usize, klive: usize, span: usize, stage: &mut [f32]) {
    // Lanes are filters: M's rows hold consecutive filters of one tile.
    let tm = v.m();
    for i in 0..len {
        for l0 in (0..klive).step_by(L) {
            let lanes = L.min(klive - l0);
            let mut mv = [[0f32; L]; 36];
            for (xi, e) in mv.iter_mut().enumerate().take(v.points()) {
                let src = &m[xi * ms + (tl + i) * cols + l0..];
                if lanes == L {
                    *e = src[..L].try_into().unwrap();
                } else {
                    e[..lanes].copy_from_slice(&src[..lanes]);
                }
            }
            let y: [Lanes; 16] = match v {
                Variant::F4 => wm::output(&mv),
                Variant::F2 => wm::f2::output(&mv),
            };
            for l in 0..lanes {
                for r in 0..tm {
                    let dst = &mut stage[((l0 + l) * tm + r) * span + tm * i..][..tm];
                    for s in 0..tm {
                        dst[s] = y[tm * r + s][l];
                    }
                }
            }
        }
    }
});
