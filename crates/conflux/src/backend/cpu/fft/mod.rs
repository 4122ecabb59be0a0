//! FFT convolution, forward: 2-D, stride 1, any filter size and dilation, any padding, groups,
//! layout and type, the fused epilogue. Overlap-save tiles: an s×s window of x gives
//! (s − eh + 1)×(s − ew + 1) outputs (eh×ew the dilated filter) as the valid part of a cyclic
//! correlation, Y = X·conj(W) bin by bin. Per output and (input, output) channel pair that is
//! 4·s(s/2 + 1)/tile-area real multiplies against eh·ew for direct convolution.
//!
//! Phases (each parallel):
//! 1. the input transform of each (tile, channel) into A panels V[group][bin][tile panel]
//!    [part][2·cg][mr] (rows c, then cg + c);
//! 2. the filter transform of each (filter, channel), U = conj(FFT(w))/s², into B panels
//!    U[group][bin][filter panel][part][2·cg][nr];
//!    the complex product needs one of the two doubled (`Plan::double_u`): either V holds
//!    [Xre | −Xim] and [Xim | Xre] for the real and imaginary parts of the output and U
//!    [Ure; Uim], or V holds [Xre | Xim] and U [Ure; −Uim] and [Uim; Ure]. The smaller one
//!    (per bin: tiles·cg against cg·filters values) is doubled;
//! 3. per (group, bin): one real GEMM M = V·U through the packed micro-kernel into
//!    M[group][bin][tile][2·kpad] (each U panel read once in all);
//! 4. per (group, tile): the inverse FFT of 16 filters at a time, the valid corner, α/β and
//!    the epilogue into y.
//!
//! The FFT is not exact on integer data (twiddles are irrational): errors are rounding-sized.

mod math;

use crate::backend::cpu::tensor_io::access::load;
use crate::backend::cpu::direct::naive::ConvPtrs;
use crate::backend::cpu::tensor_io::conv_out::{spatial_offsets, OutTensor};
use crate::backend::cpu::pointwise::epilogue::CpuEpilogue;
use crate::backend::cpu::fft::math::{self as fm, Complex, Fft, Lanes, L};
use crate::backend::cpu::gemm::{with_scratch_aligned as with_scratch, Kernel, Slot};
use crate::backend::cpu::lanes::level;
use crate::backend::cpu::Shared;
use crate::problem::Geom;
use crate::types::DataType;
use rayon::prelude::*;

/// FFT sides tried (`Plan::choose`).
const SIDES: [usize; 4] = [8, 16, 32, 64];

/// U larger than this (bytes) is written with streaming stores: half of a core's L2.
const STREAM_ABOVE_BYTES: usize = 1 << 20;

/// K rows (of 2·cg) per micro-kernel call: the A panel stays in L1 (512 × 12 × 4 bytes).
const KC: usize = 512;

/// Whether `fft_conv` computes this geometry, else why not.
pub fn supports(g: &Geom) -> Result<(), String> {
    if !g.is_2d() {
        return Err("3-D convolution (2-D only)".into());
    }
    if g.stride[1..] != [1, 1] {
        return Err(format!("stride {}×{} (1 only)", g.stride[1], g.stride[2]));
    }
    let (eh, ew) = dilated(g);
    if eh.max(ew) > SIDES[SIDES.len() - 1] / 2 {
        return Err(format!("dilated filter {eh}×{ew} (at most {} on a side)", SIDES[SIDES.len() - 1] / 2));
    }
    Ok(())
}

/// The dilated filter's extent.
fn dilated(g: &Geom) -> (usize, usize) { ((g.filter[1] - 1) * g.dilation[1] + 1, (g.filter[2] - 1) * g.dilation[2] + 1) }

/// The tiling: FFT side and output tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    pub s: usize,
    /// Output rows and columns per tile.
    pub mh: usize,
    pub mw: usize,
    /// Tiles per column and row of an image, in all.
    pub th: usize,
    pub tw: usize,
    pub tiles: usize,
    /// U holds two panels per filter panel (else V two per tile panel): fewer filters than
    /// tiles (padded to whole panels).
    pub double_u: bool,
}

impl Plan {
    /// The tiling with FFT side s, if the dilated filter fits in half of it.
    pub fn with_side(g: &Geom, kern: &Kernel, s: usize) -> Option<Plan> {
        let (eh, ew) = dilated(g);
        if eh > s / 2 + 1 || ew > s / 2 + 1 {
            return None;
        }
        let (mh, mw) = (s - eh + 1, s - ew + 1);
        let (th, tw) = (g.output[1].div_ceil(mh), g.output[2].div_ceil(mw));
        let tiles = g.n * th * tw;
        let double_u = g.kg().div_ceil(kern.nr) * kern.nr <= tiles.div_ceil(kern.mr) * kern.mr;
        Some(Plan { s, mh, mw, th, tw, tiles, double_u })
    }

    /// The side with the least estimated time (`seconds`).
    pub fn choose(g: &Geom, kern: &Kernel, filters_per_call: bool) -> Plan {
        let t = |p: &Plan| p.seconds(g, kern, filters_per_call);
        SIDES.iter().filter_map(|&s| Plan::with_side(g, kern, s)).min_by(|a, b| t(a).total_cmp(&t(b))).expect("fft: no side fits (supports() first)")
    }

    /// Complex bins per transform.
    pub fn bins(&self) -> usize { self.s * fm::half(self.s) }

    /// Panels per tile panel in V and per filter panel in U.
    fn parts(&self) -> (usize, usize) { if self.double_u { (1, 2) } else { (2, 1) } }

    /// Estimated seconds on two cores: the spectral data written and read (V, M, and U when
    /// the filters are transformed on the call) at `SPECTRAL_BYTES_PER_S`, plus the GEMMs.
    pub fn seconds(&self, g: &Geom, kern: &Kernel, filters_per_call: bool) -> f64 {
        let (bins, groups) = (self.bins() as f64, g.groups as f64);
        let tpad = (self.tiles.div_ceil(kern.mr) * kern.mr) as f64;
        let kpad = (g.kg().div_ceil(kern.nr) * kern.nr) as f64;
        let cg = g.cg() as f64;
        let (pv, pu) = self.parts();
        let (v, m, u) = (tpad * 2.0 * cg * pv as f64, tpad * 2.0 * kpad, 2.0 * cg * kpad * pu as f64);
        let values = groups * bins * (v + m + if filters_per_call { u } else { 0.0 });
        let flops = groups * bins * 2.0 * (2.0 * tpad) * (2.0 * cg) * kpad;
        4.0 * values / SPECTRAL_BYTES_PER_S + flops / GEMM_FLOPS_PER_S
    }
}

/// Rates of the cost model, from per-phase measurements on the 2-core development VM on 5×5
/// and 7×7 layers at N=1 (bench/results/2026-11-25-cpu-fft.md): the transforms are
/// memory-bound (an output tile of 10×10 has 144 complex bins per channel), so their rate is
/// in bytes of spectral data; the per-bin GEMMs in flops.
const SPECTRAL_BYTES_PER_S: f64 = 5e9;
const GEMM_FLOPS_PER_S: f64 = 250e9;

/// Sizes shared by the phases (per group unless noted).
struct Ctx<'a> {
    g: &'a Geom,
    p: ConvPtrs,
    kern: Kernel,
    plan: Plan,
    /// The s-point FFT's constants, made once per call.
    fft: Fft,
    bins: usize,
    cg: usize,
    kg: usize,
    tpad: usize,
    kpad: usize,
    /// Distances between the bin slabs of V, U and M.
    vx: usize,
    ux: usize,
    mx: usize,
}

impl<'a> Ctx<'a> {
    fn new(kern: Kernel, plan: Plan, g: &'a Geom, p: ConvPtrs) -> Ctx<'a> {
        let (cg, kg) = (g.cg(), g.kg());
        let tpad = plan.tiles.div_ceil(kern.mr) * kern.mr;
        let kpad = kg.div_ceil(kern.nr) * kern.nr;
        let (pv, pu) = plan.parts();
        Ctx { g, p, kern, plan, fft: Fft::new(plan.s), bins: plan.bins(), cg, kg, tpad, kpad, vx: slab(tpad * pv * 2 * cg), ux: slab(kpad * pu * 2 * cg), mx: slab(tpad * 2 * kpad) }
    }
}

/// One task's buffers for the lane FFTs (made once per rayon job, not per item): an s×s
/// block, its bins, and a row of scratch.
struct Work {
    a: Vec<Lanes>,
    re: Vec<Lanes>,
    im: Vec<Lanes>,
    rr: Vec<Lanes>,
    ri: Vec<Lanes>,
}

impl Work {
    fn new(cx: &Ctx) -> Work {
        let (s, bins) = (cx.plan.s, cx.bins);
        let lanes = |n: usize| vec![[0f32; L]; n];
        Work { a: lanes(s * s), re: lanes(bins), im: lanes(bins), rr: lanes(s), ri: lanes(s) }
    }

    /// `fft_math::forward_2d` of `a` (rows from `rows` on zero) into the bins.
    #[inline(always)]
    fn forward(&mut self, f: &Fft, rows: usize) {
        fm::forward_2d(f, &self.a, rows, &mut Complex { re: &mut self.re, im: &mut self.im }, &mut Complex { re: &mut self.rr, im: &mut self.ri });
    }
}

/// A slab length for n f32 that is an odd number of cache lines, so the bin slabs written
/// together do not share L1 sets.
fn slab(n: usize) -> usize { 16 * (n.div_ceil(16) | 1) }

/// Values of the transformed filters of every group (`transform_filters`; the tiling chosen
/// for filters kept across calls).
pub fn transformed_len(kern: Kernel, g: &Geom) -> usize {
    let plan = Plan::choose(g, &kern, false);
    g.groups * plan.bins() * slab(g.kg().div_ceil(kern.nr) * kern.nr * plan.parts().1 * 2 * g.cg())
}

/// Scratch values of one call: V, U (none with the filters kept) and M of every group.
pub fn scratch_len(kern: Kernel, g: &Geom) -> usize {
    let cx = Ctx::new(kern, Plan::choose(g, &kern, true), g, ConvPtrs { x: 0, w: 0, y: 0, dt: DataType::Float });
    g.groups * cx.bins * (cx.vx + cx.ux + cx.mx)
}

/// y = epilogue(α·conv(x, w) + β·y) for a geometry `supports` accepts; `transformed`: the
/// filters as `transform_filters` left them for the same kernel (then w is not read).
pub fn forward_with(kern: Kernel, g: &Geom, p: ConvPtrs, alpha: f32, beta: f32, epi: &CpuEpilogue, transformed: Option<&[f32]>) {
    forward_on(kern, Plan::choose(g, &kern, transformed.is_none()), g, p, alpha, beta, epi, transformed)
}

/// `forward_with` on a given tiling (tests run every FFT side); `transformed` must have been
/// made for the same tiling.
#[doc(hidden)]
#[allow(clippy::too_many_arguments)]
pub fn forward_on(kern: Kernel, plan: Plan, g: &Geom, p: ConvPtrs, alpha: f32, beta: f32, epi: &CpuEpilogue, transformed: Option<&[f32]>) {
    let cx = Ctx::new(kern, plan, g, p);
    let sp_off = spatial_offsets(g.output, g.y_strides);
    let out = OutTensor { ptr: p.y, dt: p.dt, strides: g.y_strides, dims: g.output, sp_off: &sp_off, alpha, beta, epi };
    let (vlen, ulen, mlen) = (cx.bins * cx.vx, cx.bins * cx.ux, cx.bins * cx.mx);
    with_scratch(Slot::PackA, g.groups * vlen, |v| {
        input_transform(&cx, v);
        with_scratch(Slot::Conv, g.groups * mlen, |m| {
            match transformed {
                Some(u) => {
                    assert_eq!(u.len(), g.groups * ulen, "fft: transformed filters of another problem");
                    gemms(&cx, v, u, m);
                }
                None => with_scratch(Slot::PackBAll, g.groups * ulen, |u| {
                    filters_into(&cx, u);
                    gemms(&cx, v, u, m);
                }),
            }
            output_transform(&cx, m, &out);
        });
    });
}

/// `f(work, group, panel, c0, c1)` in parallel for every group, panel and chunk of 16
/// channels.
fn by_channel_chunks(cx: &Ctx, panels: usize, f: impl Fn(&mut Work, usize, usize, usize, usize) + Sync) {
    let chunk = 16;
    let chunks = cx.cg.div_ceil(chunk);
    (0..cx.g.groups * panels * chunks).into_par_iter().for_each_init(
        || Work::new(cx),
        |w, i| {
            let (group, panel, cc) = (i / (panels * chunks), (i / chunks) % panels, i % chunks);
            f(w, group, panel, cc * chunk, ((cc + 1) * chunk).min(cx.cg));
        },
    );
}

/// Phase 1: V of every (group, tile panel, channel chunk).
fn input_transform(cx: &Ctx, v: &mut [f32]) {
    let vp = Shared(v.as_mut_ptr());
    by_channel_chunks(cx, cx.tpad / cx.kern.mr, |w, group, tp, c0, c1| input_panel(cx, w, group, tp, c0, c1, vp));
}

simd!(input_panel(cx: &Ctx, work: &mut Work, group: usize, tp: usize, c0: usize, c1: usize, vp: Shared) {
    // Lanes are the panel's tiles (missing tiles stay zero).
    let (g, plan, mr) = (cx.g, cx.plan, cx.kern.mr);
    let (s, bins) = (plan.s, cx.bins);
    let live = mr.min(plan.tiles - tp * mr);
    let xs = g.x_strides;
    let (h, w) = (g.input[1] as isize, g.input[2] as isize);
    // Each lane's image offset and window origin (may lie before the image: padding).
    let mut org = [(0usize, 0isize, 0isize); L];
    for (l, o) in org.iter_mut().enumerate().take(live) {
        let t = tp * mr + l;
        let (n, i, j) = (t / (plan.th * plan.tw), (t / plan.tw) % plan.th, t % plan.tw);
        *o = (n * xs[0] + group * cx.cg * xs[1], (i * plan.mh) as isize - g.pad[1] as isize, (j * plan.mw) as isize - g.pad[2] as isize);
    }
    let vlen = bins * cx.vx;
    let gather = window_gather(cx, &org[..live]);
    work.a.fill([0.0; L]);
    for c in c0..c1 {
        match &gather {
            #[cfg(target_arch = "x86_64")]
            Some((first, idx, rows, cols)) => {
                // SAFETY: AVX-512 (checked by `window_gather`); the masks pass only elements
                // inside the image of each lane, and `window_gather` bounded the offsets.
                unsafe {
                    let x = (cx.p.x as *const f32).wrapping_offset(first + (c * xs[1]) as isize);
                    crate::backend::cpu::x86::fft::gather_window16(x, idx, rows, cols, xs[3], xs[4], s, work.a.as_mut_ptr() as *mut f32);
                }
            }
            _ => {
                for (l, &(base, r0, s0)) in org.iter().enumerate().take(live) {
                    let base = base + c * xs[1];
                    for r in 0..s {
                        let y = r0 + r as isize;
                        let inside_row = (0..h).contains(&y);
                        for q in 0..s {
                            let x = s0 + q as isize;
                            work.a[r * s + q][l] = if inside_row && (0..w).contains(&x) {
                                // SAFETY: (y, x) is inside image n, channel group·cg + c of x.
                                unsafe { load(cx.p.dt, cx.p.x, base + y as usize * xs[3] + x as usize * xs[4]) }
                            } else {
                                0.0
                            };
                        }
                    }
                }
            }
        }
        work.forward(&cx.fft, s);
        let (re, im) = (&work.re, &work.im);
        // Rows c and cg + c of each A panel: [Xre | −Xim], [Xim | Xre] or [Xre | Xim].
        let (k2, one, neg) = (2 * cx.cg, Part { imag: false, scale: 1.0 }, Part { imag: true, scale: -1.0 });
        let (im1, a2) = (Part { imag: true, scale: 1.0 }, k2 * mr);
        let double_v = [(c * mr, one), ((cx.cg + c) * mr, neg), (a2 + c * mr, im1), (a2 + (cx.cg + c) * mr, one)];
        let single = [(c * mr, one), ((cx.cg + c) * mr, im1)];
        let rows: &[(usize, Part)] = if plan.double_u { &single } else { &double_v };
        let o = group * vlen + tp * mr * k2 * plan.parts().0;
        // SAFETY: this item alone writes rows c and cg + c of the A panels of tile panel tp in
        // every bin.
        unsafe {
            match mr {
                12 => store_parts::<12>(re, im, vp, o, cx.vx, rows),
                6 => store_parts::<6>(re, im, vp, o, cx.vx, rows),
                4 => store_parts::<4>(re, im, vp, o, cx.vx, rows),
                _ => store_parts_any(re, im, vp, o, cx.vx, rows, mr),
            }
        }
    }
});

/// What a panel row holds: a channel's real or imaginary parts times `scale`.
#[derive(Clone, Copy)]
struct Part {
    imag: bool,
    scale: f32,
}

/// Each bin's value (first W lanes) into panel rows: for (offset, part) in `rows`, bin b goes
/// to `dst + o + b·stride + offset`. W is a constant so the copies stay vector moves (a
/// runtime width became one memcpy call per row).
///
/// # Safety
/// Those W values of every bin lie in the buffer and are written by no one else.
#[inline(always)]
unsafe fn store_parts<const W: usize>(re: &[Lanes], im: &[Lanes], dst: Shared, o: usize, stride: usize, rows: &[(usize, Part)]) {
    for (b, (r, i)) in re.iter().zip(im).enumerate() {
        for &(off, part) in rows {
            let src = if part.imag { i } else { r };
            let mut v = [0f32; L];
            for l in 0..L {
                v[l] = src[l] * part.scale;
            }
            (dst.at(o + b * stride + off).0 as *mut [f32; W]).write_unaligned(*(v.as_ptr() as *const [f32; W]));
        }
    }
}

/// `store_parts` for other widths.
///
/// # Safety
/// As `store_parts`.
unsafe fn store_parts_any(re: &[Lanes], im: &[Lanes], dst: Shared, o: usize, stride: usize, rows: &[(usize, Part)], w: usize) {
    for (b, (r, i)) in re.iter().zip(im).enumerate() {
        for &(off, part) in rows {
            let v = if part.imag { i } else { r }.map(|x| x * part.scale);
            std::ptr::copy_nonoverlapping(v.as_ptr(), dst.at(o + b * stride + off).0, w);
        }
    }
}

/// Lane offsets and in-image masks for the AVX-512 window gather (f32 x): lane 0's window
/// origin (elements from x, before it for padding), each lane's offset from it, and per window
/// row and column the lanes for which it lies inside the image. None where the gather does
/// not apply (no AVX-512, another type, offsets beyond i32).
#[allow(clippy::type_complexity)]
fn window_gather(cx: &Ctx, org: &[(usize, isize, isize)]) -> Option<(isize, [i32; L], Vec<u16>, Vec<u16>)> {
    let (g, s) = (cx.g, cx.plan.s);
    if !cfg!(target_arch = "x86_64") || level() < 2 || cx.p.dt != DataType::Float || org.is_empty() {
        return None;
    }
    let xs = g.x_strides;
    let at = |&(base, r0, s0): &(usize, isize, isize)| base as isize + r0 * xs[3] as isize + s0 * xs[4] as isize;
    let first = at(&org[0]);
    let reach = ((s - 1) * (xs[3] + xs[4])) as isize;
    let (mut idx, mut rows, mut cols) = ([0i32; L], vec![0u16; s], vec![0u16; s]);
    for (l, o) in org.iter().enumerate() {
        let d = at(o) - first;
        if d.abs() + reach + (g.c * xs[1]) as isize >= i32::MAX as isize {
            return None;
        }
        idx[l] = d as i32;
        for k in 0..s {
            rows[k] |= u16::from((0..g.input[1] as isize).contains(&(o.1 + k as isize))) << l;
            cols[k] |= u16::from((0..g.input[2] as isize).contains(&(o.2 + k as isize))) << l;
        }
    }
    Some((first, idx, rows, cols))
}

/// The filters (from `p.w`) transformed into `u` (`transformed_len` values), in the layout
/// `forward_with` reads: for callers that keep them across calls (constant weights).
pub fn transform_filters(kern: Kernel, g: &Geom, p: ConvPtrs, u: &mut [f32]) {
    assert_eq!(u.len(), transformed_len(kern, g), "fft: transformed filter buffer");
    filters_into(&Ctx::new(kern, Plan::choose(g, &kern, false), g, p), u)
}

/// Phase 2: U of every (group, filter panel, channel chunk).
fn filters_into(cx: &Ctx, u: &mut [f32]) {
    let up = Shared(u.as_mut_ptr());
    by_channel_chunks(cx, cx.kpad / cx.kern.nr, |w, group, kp, c0, c1| filter_panel(cx, w, group, kp, c0, c1, up));
}

simd!(filter_panel(cx: &Ctx, work: &mut Work, group: usize, kp: usize, c0: usize, c1: usize, up: Shared) {
    // Lanes are filters kp·nr + l0 + l (missing filters stay zero).
    let (g, plan, nr) = (cx.g, cx.plan, cx.kern.nr);
    let (s, bins, cg) = (plan.s, cx.bins, cx.cg);
    let (ws, dil) = (g.w_strides, g.dilation);
    let (eh, _) = dilated(g);
    let scale = 1.0 / (s * s) as f32;
    // Streaming stores where U does not stay in cache anyway: they skip reading each line
    // first (measured on the filter transform: bench/results/2026-11-27-history-from-status.md,
    // fft_conv.rs).
    let stream = level() == 2 && (up.0 as usize).is_multiple_of(64) && 4 * cx.g.groups * bins * cx.ux > STREAM_ABOVE_BYTES;
    let ulen = bins * cx.ux;
    for l0 in (0..nr).step_by(L) {
        let lanes = L.min(nr - l0).min(cx.kg.saturating_sub(kp * nr + l0));
        // Every c writes the same taps of the same lanes: the rest stays zero.
        work.a.fill([0.0; L]);
        for c in c0..c1 {
            for l in 0..lanes {
                let base = (group * cx.kg + kp * nr + l0 + l) * ws[0] + c * ws[1];
                for u in 0..g.filter[1] {
                    for q in 0..g.filter[2] {
                        // SAFETY: a weight element.
                        work.a[u * dil[1] * s + q * dil[2]][l] = unsafe { load(cx.p.dt, cx.p.w, base + u * ws[3] + q * ws[4]) };
                    }
                }
            }
            work.forward(&cx.fft, eh);
            let (re, im) = (&work.re, &work.im);
            // Rows c and cg + c of each B panel, U = conj(W)/s²: [Ure; Uim], or [Ure; −Uim] and
            // [Uim; Ure].
            let (re1, im1) = (Part { imag: false, scale }, Part { imag: true, scale: -scale });
            let (nim1, b2) = (Part { imag: true, scale }, 2 * cg * nr);
            let double_u = [(c * nr, re1), ((cg + c) * nr, nim1), (b2 + c * nr, im1), (b2 + (cg + c) * nr, re1)];
            let single = [(c * nr, re1), ((cg + c) * nr, im1)];
            let rows: &[(usize, Part)] = if plan.double_u { &double_u } else { &single };
            let o = group * ulen + kp * 2 * cg * nr * plan.parts().1 + l0;
            // Lanes past the last filter are zero (so is their FFT) and are written too.
            // SAFETY: this item alone writes rows c and cg + c (lanes l0.. of nr) of the B panels
            // of filter panel kp in every bin; `stream` checked the alignment.
            unsafe {
                match L.min(nr - l0) {
                    #[cfg(target_arch = "x86_64")]
                    16 if stream => {
                        let mut flat = [(0, false, 0.0); 4];
                        for (d, &(off, p)) in flat.iter_mut().zip(rows) {
                            *d = (off, p.imag, p.scale);
                        }
                        crate::backend::cpu::x86::fft::store_parts16_stream(re, im, up.at(o).0, cx.ux, &flat[..rows.len()]);
                    }
                    16 => store_parts::<16>(re, im, up, o, cx.ux, rows),
                    8 => store_parts::<8>(re, im, up, o, cx.ux, rows),
                    n => store_parts_any(re, im, up, o, cx.ux, rows, n),
                }
            }
        }
    }
});

/// Phase 3: M = V·U for every (group, bin), each U panel read once: the real parts of the
/// output (M's first kpad columns) and the imaginary parts, each from its own A or B panel.
fn gemms(cx: &Ctx, v: &[f32], u: &[f32], m: &mut [f32]) {
    let (mr, nr) = (cx.kern.mr, cx.kern.nr);
    let (tpanels, kpanels) = (cx.tpad / mr, cx.kpad / nr);
    let (vlen, ulen, mlen) = (cx.bins * cx.vx, cx.bins * cx.ux, cx.bins * cx.mx);
    let (pv, pu) = cx.plan.parts();
    let k2 = 2 * cx.cg;
    let (ld, mp) = (2 * cx.kpad, Shared(m.as_mut_ptr()));
    (0..cx.g.groups * cx.bins).into_par_iter().for_each(|i| {
        let (group, b) = (i / cx.bins, i % cx.bins);
        let va = &v[group * vlen + b * cx.vx..];
        let ub = &u[group * ulen + b * cx.ux..];
        for k0 in (0..k2).step_by(KC) {
            let kc = KC.min(k2 - k0);
            for kp in 0..kpanels {
                for part in 0..2 {
                    let bp = ub[(pu * kp + part % pu) * k2 * nr + k0 * nr..].as_ptr();
                    for tp in 0..tpanels {
                        let ap = va[(pv * tp + part % pv) * mr * k2 + k0 * mr..].as_ptr();
                        // The first tile panel streams this B panel in (`Kernel::fb`).
                        let f = if tp == 0 && (part == 0 || pu == 2) { cx.kern.fb } else { cx.kern.f };
                        let col = part * cx.kpad + kp * nr;
                        // SAFETY: panels of kc·mr and kc·nr values; the mr×nr tile lies in this
                        // (group, bin)'s slab of M, which only this item writes.
                        unsafe { f(kc, ap, bp, mp.at(group * mlen + b * cx.mx + tp * mr * ld + col).0, ld, k0 > 0) };
                    }
                }
            }
        }
    });
}

/// Phase 4: per (group, tile), the inverse transform of 16 filters at a time into y.
fn output_transform(cx: &Ctx, m: &[f32], out: &OutTensor) {
    let plan = cx.plan;
    (0..cx.g.groups * plan.tiles).into_par_iter().for_each_init(|| Work::new(cx), |w, i| output_tile(cx, w, m, out, i / plan.tiles, i % plan.tiles));
}

simd!(output_tile(cx: &Ctx, work: &mut Work, m: &[f32], out: &OutTensor, group: usize, t: usize) {
    let (g, plan) = (cx.g, cx.plan);
    let (s, bins) = (plan.s, cx.bins);
    let [_, oh, ow] = g.output;
    let (n, ti, tj) = (t / (plan.th * plan.tw), (t / plan.tw) % plan.th, t % plan.tw);
    let (rows, cols) = (plan.mh.min(oh - ti * plan.mh), plan.mw.min(ow - tj * plan.mw));
    let Work { a, re, im, rr, ri } = work;
    let mut span = [0f32; 64];
    let span = &mut span[..cols];
    let base = group * bins * cx.mx + t * 2 * cx.kpad;
    for l0 in (0..cx.kg).step_by(L) {
        let lanes = L.min(cx.kg - l0);
        for b in 0..bins {
            let row = &m[base + b * cx.mx..];
            if lanes == L {
                re[b] = row[l0..l0 + L].try_into().unwrap();
                im[b] = row[cx.kpad + l0..cx.kpad + l0 + L].try_into().unwrap();
            } else {
                re[b][..lanes].copy_from_slice(&row[l0..l0 + lanes]);
                im[b][..lanes].copy_from_slice(&row[cx.kpad + l0..cx.kpad + l0 + lanes]);
            }
        }
        // Lanes past `lanes` hold an earlier group's values: computed, never written out.
        fm::inverse_2d(&cx.fft, &mut Complex { re, im }, rows, cols, a, &mut Complex { re: rr, im: ri });
        for l in 0..lanes {
            for r in 0..rows {
                for (q, v) in span.iter_mut().enumerate() {
                    *v = a[r * s + q][l];
                }
                let o = ti * plan.mh + r;
                // SAFETY: this item alone writes tile t of filter group·kg + l0 + l.
                unsafe { out.write_span(span, n, group * cx.kg + l0 + l, o * ow + tj * plan.mw) };
            }
        }
    }
});
