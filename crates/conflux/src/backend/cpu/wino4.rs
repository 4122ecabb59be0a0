//! Winograd F(4×4, 3×3) forward convolution (2-D, 3×3, stride 1, dilation 1, any padding,
//! groups, layout and type; transforms in `wino4_math.rs`). Four parallel phases:
//! 1. x into zero-padded f32 planes, so layout, type and padding are handled once;
//! 2. input transform once per (tile, channel) into A panels V[group][ξ][tile panel][c][mr];
//! 3. filter transform once per (filter, channel) into B panels U[group][ξ][filter panel][c][nr];
//! 4. tasks of (tile block, filter block): the 36 GEMMs M_ξ = V_ξ·U_ξ through the packed
//!    micro-kernel into a task-local buffer, then the output transform, α/β and the epilogue
//!    straight into y while M is still in cache.
//!
//! Tiles are the GEMM rows (broadcast operand) and filters the columns (vector operand):
//! filter counts are multiples of 32 in real networks, tile counts often are not.

use super::access::load;
use super::conv_naive::ConvPtrs;
use super::conv_out::{spatial_offsets, OutTensor};
use super::epilogue::CpuEpilogue;
use super::gemm::{best, with_scratch, Kernel, Slot};
use super::wino4_math::{self as wm, Lanes, L};
use crate::conv::Geom;
use crate::types::DataType;
use rayon::prelude::*;

/// Sizes shared by the phases (per group unless noted).
struct Ctx<'a> {
    g: &'a Geom,
    p: ConvPtrs,
    kern: Kernel,
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
}

/// A pointer that parallel items write through at disjoint offsets.
#[derive(Clone, Copy)]
struct Shared(*mut f32);
// SAFETY: every user writes disjoint elements, and reads happen after the writing phase.
unsafe impl Sync for Shared {}
unsafe impl Send for Shared {}

/// Picks the widest vector extension once; the transforms are written on lane arrays and
/// compiled for each level by `simd!`.
fn level() -> u8 {
    use std::sync::OnceLock;
    static L: OnceLock<u8> = OnceLock::new();
    *L.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("fma") {
                return 2;
            }
            if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                return 1;
            }
        }
        0
    })
}

/// Defines `fn $name(args)` that runs `$body` compiled for AVX-512, AVX2 or the baseline.
macro_rules! simd {
    ($name:ident($($a:ident: $t:ty),*) $body:block) => {
        fn $name($($a: $t),*) {
            #[inline(always)]
            fn inner($($a: $t),*) $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,fma")]
                unsafe fn v512($($a: $t),*) { inner($($a),*) }
                #[target_feature(enable = "avx2,fma")]
                unsafe fn v256($($a: $t),*) { inner($($a),*) }
                match level() {
                    // SAFETY: the features were detected.
                    2 => return unsafe { v512($($a),*) },
                    1 => return unsafe { v256($($a),*) },
                    _ => {}
                }
            }
            inner($($a),*)
        }
    };
}

/// y = epilogue(α·conv(x, w) + β·y) for a geometry `winograd::supports` accepts.
pub fn forward(g: &Geom, p: ConvPtrs, alpha: f32, beta: f32, epi: &CpuEpilogue) {
    let kern = best();
    let (cg, kg) = (g.cg(), g.kg());
    let [_, oh, ow] = g.output;
    let (th, tw) = (oh.div_ceil(4), ow.div_ceil(4));
    let tiles = g.n * th * tw;
    let cx = Ctx {
        g,
        p,
        kern,
        cg,
        kg,
        th,
        tw,
        tiles,
        tpad: tiles.div_ceil(kern.mr) * kern.mr,
        kpad: kg.div_ceil(kern.nr) * kern.nr,
        ph: 4 * th + 2,
        pw: 4 * tw + 2,
    };
    let sp_off = spatial_offsets(g.output, g.y_strides);
    let out = OutTensor { ptr: p.y, dt: p.dt, strides: g.y_strides, dims: g.output, sp_off: &sp_off, alpha, beta, epi };
    let vlen = 36 * cx.tpad * cg; // per group
    let ulen = 36 * cx.kpad * cg;
    with_scratch(Slot::Conv, g.n * g.c * cx.ph * cx.pw, |planes| {
        pad_planes(&cx, planes);
        let planes = &*planes;
        with_scratch(Slot::PackA, g.groups * vlen, |v| {
            let vp = Shared(v.as_mut_ptr());
            let tpanels = cx.tpad / kern.mr;
            let cchunk = 16;
            let cchunks = cg.div_ceil(cchunk);
            (0..g.groups * tpanels * cchunks).into_par_iter().for_each(|i| {
                let (group, tp, cc) = (i / (tpanels * cchunks), (i / cchunks) % tpanels, i % cchunks);
                let cs = cc * cchunk..((cc + 1) * cchunk).min(cg);
                input_panel(&cx, planes, group, tp, cs.start, cs.end, vp, vlen);
            });
            with_scratch(Slot::PackBAll, g.groups * ulen, |u| {
                let up = Shared(u.as_mut_ptr());
                let kpanels = cx.kpad / kern.nr;
                let cchunk = 32;
                let cchunks = cg.div_ceil(cchunk);
                (0..g.groups * kpanels * cchunks).into_par_iter().for_each(|i| {
                    let (group, kp, cc) = (i / (kpanels * cchunks), (i / cchunks) % kpanels, i % cchunks);
                    let cs = cc * cchunk..((cc + 1) * cchunk).min(cg);
                    filter_panel(&cx, group, kp, cs.start, cs.end, up, ulen);
                });
                gemm_and_output(&cx, v, u, vlen, ulen, &out);
            });
        });
    });
}

/// Every (n, c) plane of x as f32, zero-padded: row r, column s hold x[.., r − pad, s − pad].
fn pad_planes(cx: &Ctx, planes: &mut [f32]) {
    let g = cx.g;
    let (xs, [_, h, w]) = (g.x_strides, g.input);
    let (ph, pw, pt, pl) = (cx.ph, cx.pw, g.pad[1], g.pad[2]);
    planes.par_chunks_mut(ph * pw).enumerate().for_each(|(i, pln)| {
        let base = (i / g.c) * xs[0] + (i % g.c) * xs[1];
        pln[..pt * pw].fill(0.0);
        for r in 0..h {
            let row = &mut pln[(pt + r) * pw..(pt + r + 1) * pw];
            row[..pl].fill(0.0);
            row[pl + w..].fill(0.0);
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
        pln[(pt + h) * pw..].fill(0.0);
    });
}

simd!(input_panel(cx: &Ctx, planes: &[f32], group: usize, tp: usize, c0: usize, c1: usize, vp: Shared, vlen: usize) {
    // Plane offsets of the panel's tiles (tiles past the end read tile 0 and are zeroed later).
    let (mr, pw) = (cx.kern.mr, cx.pw);
    let mut base = [0usize; L];
    for (l, b) in base.iter_mut().enumerate().take(mr) {
        let t = (tp * mr + l).min(cx.tiles - 1);
        let (n, i, j) = (t / (cx.th * cx.tw), (t / cx.tw) % cx.th, t % cx.tw);
        *b = (n * cx.g.c + group * cx.cg) * cx.ph * pw + 4 * i * pw + 4 * j;
    }
    let live = mr.min(cx.tiles - tp * mr);
    let plane = cx.ph * pw;
    for c in c0..c1 {
        let mut d = [[0f32; L]; 36];
        for (l, &b) in base.iter().enumerate().take(live) {
            let src = &planes[b + c * plane..];
            for r in 0..6 {
                for s in 0..6 {
                    d[6 * r + s][l] = src[r * pw + s];
                }
            }
        }
        let v = wm::input(&d);
        for (xi, row) in v.iter().enumerate() {
            let o = group * vlen + (xi * cx.tpad + tp * mr) * cx.cg + c * mr;
            // SAFETY: this item alone writes panel tp, channel c of every ξ.
            unsafe { std::ptr::copy_nonoverlapping(row.as_ptr(), vp.0.add(o), mr) };
        }
    }
});

simd!(filter_panel(cx: &Ctx, group: usize, kp: usize, c0: usize, c1: usize, up: Shared, ulen: usize) {
    let (nr, ws, p) = (cx.kern.nr, cx.g.w_strides, cx.p);
    for c in c0..c1 {
        for l0 in (0..nr).step_by(L) {
            let lanes = L.min(nr - l0);
            let mut f = [[0f32; L]; 9];
            for l in 0..lanes {
                let k = kp * nr + l0 + l;
                if k >= cx.kg {
                    break;
                }
                let o = (group * cx.kg + k) * ws[0] + c * ws[1];
                for (i, e) in f.iter_mut().enumerate() {
                    // SAFETY: a weight element.
                    e[l] = unsafe { load(p.dt, p.w, o + (i / 3) * ws[3] + (i % 3) * ws[4]) };
                }
            }
            let u = wm::filter(&f);
            for (xi, row) in u.iter().enumerate() {
                let o = group * ulen + (xi * cx.kpad + kp * nr) * cx.cg + c * nr + l0;
                // SAFETY: this item alone writes panel kp, channel c of every ξ.
                unsafe { std::ptr::copy_nonoverlapping(row.as_ptr(), up.0.add(o), lanes) };
            }
        }
    }
});

/// Phase 4: (group, tile block, filter block) tasks.
fn gemm_and_output(cx: &Ctx, v: &[f32], u: &[f32], vlen: usize, ulen: usize, out: &OutTensor) {
    let (mr, nr) = (cx.kern.mr, cx.kern.nr);
    let (tpanels, kpanels) = (cx.tpad / mr, cx.kpad / nr);
    let (mut tb, mut kb) = (tpanels.min((48 / mr).max(1)), kpanels.min((64 / nr).max(1)));
    let tasks = |tb: usize, kb: usize| cx.g.groups * tpanels.div_ceil(tb) * kpanels.div_ceil(kb);
    let want = 3 * rayon::current_num_threads();
    while tasks(tb, kb) < want && tb > 1 {
        tb -= 1;
    }
    while tasks(tb, kb) < want && kb > 1 {
        kb -= 1;
    }
    let (tblocks, kblocks) = (tpanels.div_ceil(tb), kpanels.div_ceil(kb));
    (0..cx.g.groups * tblocks * kblocks).into_par_iter().for_each(|i| {
        let (group, ti, ki) = (i / (tblocks * kblocks), (i / kblocks) % tblocks, i % kblocks);
        let tps = ti * tb..((ti + 1) * tb).min(tpanels);
        let kps = ki * kb..((ki + 1) * kb).min(kpanels);
        let (rows, cols) = (tps.len() * mr, kps.len() * nr);
        with_scratch(Slot::Task, 36 * rows * cols, |m| {
            for xi in 0..36 {
                let vx = &v[group * vlen + xi * cx.tpad * cx.cg..];
                let ux = &u[group * ulen + xi * cx.kpad * cx.cg..];
                let mx = &mut m[xi * rows * cols..];
                for (kj, kp) in kps.clone().enumerate() {
                    let bp = ux[kp * nr * cx.cg..].as_ptr();
                    for (tj, tp) in tps.clone().enumerate() {
                        let ap = vx[tp * mr * cx.cg..].as_ptr();
                        let cp = mx[tj * mr * cols + kj * nr..].as_mut_ptr();
                        // SAFETY: panels of cg·mr and cg·nr values; the mr×nr tile lies in m.
                        unsafe { (cx.kern.f)(cx.cg, ap, bp, cp, cols, false) };
                    }
                }
            }
            let t0 = tps.start * mr;
            let k0 = kps.start * nr;
            let tlive = rows.min(cx.tiles - t0);
            let klive = cols.min(cx.kg - k0);
            write_block(cx, out, m, rows, cols, group, t0, tlive, k0, klive);
        });
    });
}

/// Output transform of a task's M (36 × rows × cols; rows = tiles from t0, cols = filters
/// from k0) into y: per run of tiles in one tile row, four output rows per filter.
#[allow(clippy::too_many_arguments)]
fn write_block(cx: &Ctx, out: &OutTensor, m: &[f32], rows: usize, cols: usize, group: usize, t0: usize, tlive: usize, k0: usize, klive: usize) {
    let [_, oh, ow] = cx.g.output;
    let span = 4 * cx.tw;
    with_scratch(Slot::Task2, klive * 4 * span, |stage| {
        let mut tl = 0;
        while tl < tlive {
            let t = t0 + tl;
            let (n, ti, tj0) = (t / (cx.th * cx.tw), (t / cx.tw) % cx.th, t % cx.tw);
            let len = (cx.tw - tj0).min(tlive - tl);
            transform_run(m, rows, cols, tl, len, klive, span, stage);
            let (ow0, wlen) = (4 * tj0, (4 * len).min(ow - 4 * tj0));
            for k in 0..klive {
                for r in 0..4 {
                    let o = 4 * ti + r;
                    if o < oh {
                        let row = &mut stage[(k * 4 + r) * span..][..wlen];
                        // SAFETY: this task alone owns these (n, filter, tile) outputs.
                        unsafe { out.write_span(row, n, group * cx.kg + k0 + k, o * ow + ow0) };
                    }
                }
            }
            tl += len;
        }
    });
}

simd!(transform_run(m: &[f32], rows: usize, cols: usize, tl: usize, len: usize, klive: usize, span: usize, stage: &mut [f32]) {
    // Lanes are filters: M's rows hold consecutive filters of one tile.
    for i in 0..len {
        for l0 in (0..klive).step_by(L) {
            let lanes = L.min(klive - l0);
            let mut mv = [[0f32; L]; 36];
            for (xi, e) in mv.iter_mut().enumerate() {
                let src = &m[xi * rows * cols + (tl + i) * cols + l0..];
                e[..lanes].copy_from_slice(&src[..lanes]);
            }
            let y: [Lanes; 16] = wm::output(&mv);
            for l in 0..lanes {
                for r in 0..4 {
                    let dst = &mut stage[((l0 + l) * 4 + r) * span + 4 * i..][..4];
                    for s in 0..4 {
                        dst[s] = y[4 * r + s][l];
                    }
                }
            }
        }
    }
});
