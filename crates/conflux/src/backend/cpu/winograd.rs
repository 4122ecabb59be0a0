//! Winograd F(2×2, 3×3) forward convolution (2-D, 3×3, stride 1, dilation 1, any padding,
//! groups): per 4×4 input tile d and filter g, Y = Aᵀ[(G g Gᵀ) ⊙ (Bᵀ d B)]A, so the channel
//! sum becomes 16 independent GEMMs M_ξ[k, tile] = Σ_c U_ξ[k, c]·V_ξ[c, tile] with 2.25× fewer
//! multiplies. U is packed once per run as micro-kernel A panels; each task transforms a chunk
//! of tiles straight into B panels, runs the 16 GEMMs for a block of filters, and transforms
//! back into output rows that get α/β and the epilogue. All transform coefficients are 0, ±1
//! and ½, so small-integer data stays exact.

use super::access::load;
use super::conv_naive::ConvPtrs;
use super::conv_out::{spatial_offsets, OutTensor};
use super::epilogue::CpuEpilogue;
use super::gemm::{best, with_scratch, Kernel, Slot};
use crate::conv::Geom;
use rayon::prelude::*;

/// U = G g Gᵀ for one 3×3 filter (row-major 4×4).
fn filter_transform(g: [f32; 9]) -> [f32; 16] {
    let mut t = [0f32; 12]; // G·g, 4×3
    for j in 0..3 {
        let (a, b, c) = (g[j], g[3 + j], g[6 + j]);
        t[j] = a;
        t[3 + j] = 0.5 * (a + b + c);
        t[6 + j] = 0.5 * (a - b + c);
        t[9 + j] = c;
    }
    let mut u = [0f32; 16];
    for i in 0..4 {
        let (a, b, c) = (t[3 * i], t[3 * i + 1], t[3 * i + 2]);
        u[4 * i] = a;
        u[4 * i + 1] = 0.5 * (a + b + c);
        u[4 * i + 2] = 0.5 * (a - b + c);
        u[4 * i + 3] = c;
    }
    u
}

/// V = Bᵀ d B for one 4×4 input tile.
#[inline(always)]
fn input_transform(d: &[f32; 16]) -> [f32; 16] {
    let mut t = [0f32; 16];
    for j in 0..4 {
        let (d0, d1, d2, d3) = (d[j], d[4 + j], d[8 + j], d[12 + j]);
        t[j] = d0 - d2;
        t[4 + j] = d1 + d2;
        t[8 + j] = d2 - d1;
        t[12 + j] = d1 - d3;
    }
    let mut v = [0f32; 16];
    for i in 0..4 {
        let (d0, d1, d2, d3) = (t[4 * i], t[4 * i + 1], t[4 * i + 2], t[4 * i + 3]);
        v[4 * i] = d0 - d2;
        v[4 * i + 1] = d1 + d2;
        v[4 * i + 2] = d2 - d1;
        v[4 * i + 3] = d1 - d3;
    }
    v
}

/// Y = Aᵀ m A (2×2) from the 16 GEMM outputs of one (filter, tile).
#[inline(always)]
fn output_transform(m: &[f32; 16]) -> [f32; 4] {
    let mut t = [0f32; 8]; // Aᵀ·m, 2×4
    for j in 0..4 {
        let (a, b, c, d) = (m[j], m[4 + j], m[8 + j], m[12 + j]);
        t[j] = a + b + c;
        t[4 + j] = b - c - d;
    }
    [t[0] + t[1] + t[2], t[1] - t[2] - t[3], t[4] + t[5] + t[6], t[5] - t[6] - t[7]]
}

/// Whether the geometry is one this solver computes, else why not.
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

/// Work split: tiles per chunk (whole micro-panels) and filter rows per block.
fn split(kern: &Kernel, groups: usize, tiles: usize, kg: usize, threads: usize) -> (usize, usize) {
    let (mut tb, mut kb) = (2 * kern.nr, (4 * kern.mr).min(kg.div_ceil(kern.mr) * kern.mr));
    let tasks = |tb: usize, kb: usize| groups * tiles.div_ceil(tb) * kg.div_ceil(kb);
    while tasks(tb, kb) < 3 * threads && tb > kern.nr {
        tb -= kern.nr;
    }
    while tasks(tb, kb) < 3 * threads && kb > kern.mr {
        kb -= kern.mr;
    }
    (tb, kb)
}

/// y = epilogue(α·conv(x, w) + β·y) for a geometry `supports` accepts.
pub fn forward(g: &Geom, p: ConvPtrs, alpha: f32, beta: f32, epi: &CpuEpilogue) {
    let kern = best();
    let (mr, nr) = (kern.mr, kern.nr);
    let (kg, cg) = (g.kg(), g.cg());
    let [_, oh_n, ow_n] = g.output;
    let (th_n, tw_n) = (oh_n.div_ceil(2), ow_n.div_ceil(2));
    let tiles = g.n * th_n * tw_n;
    let kgpad = kg.div_ceil(mr) * mr;
    let ulen = 16 * kgpad * cg; // per group
    let (tb, kb) = split(&kern, g.groups, tiles, kg, rayon::current_num_threads());
    let sp_off = spatial_offsets(g.output, g.y_strides);
    let out = OutTensor { ptr: p.y, dt: p.dt, strides: g.y_strides, dims: g.output, sp_off: &sp_off, alpha, beta, epi };
    with_scratch(Slot::Conv, g.groups * ulen, |u| {
        // U, packed per (group, ξ) as A panels: [panel][c][mr].
        u.par_chunks_mut(ulen).enumerate().for_each(|(group, ug)| {
            ug.fill(0.0);
            let ws = g.w_strides;
            for kl in 0..kg {
                let k = group * kg + kl;
                for c in 0..cg {
                    let mut f = [0f32; 9];
                    for (i, v) in f.iter_mut().enumerate() {
                        // SAFETY: a weight element.
                        *v = unsafe { load(p.dt, p.w, k * ws[0] + c * ws[1] + (i / 3) * ws[3] + (i % 3) * ws[4]) };
                    }
                    let t = filter_transform(f);
                    for (xi, v) in t.iter().enumerate() {
                        ug[xi * kgpad * cg + (kl / mr) * mr * cg + c * mr + kl % mr] = *v;
                    }
                }
            }
        });
        let u = &*u;
        let (chunks, kblocks) = (tiles.div_ceil(tb), kg.div_ceil(kb));
        (0..g.groups * chunks * kblocks).into_par_iter().for_each(|task| {
            let group = task / (chunks * kblocks);
            let (ch, kbi) = ((task / kblocks) % chunks, task % kblocks);
            let t0 = ch * tb;
            let tlive = tb.min(tiles - t0);
            let tbpad = tlive.div_ceil(nr) * nr;
            let krows = kb.min(kg - kbi * kb);
            let kpad = krows.div_ceil(mr) * mr;
            with_scratch(Slot::Task, 16 * cg * tbpad, |v| {
                // V for this chunk: per ξ, B panels [panel][c][nr].
                v.fill(0.0);
                for tl in 0..tlive {
                    let t = t0 + tl;
                    let (n, th, tw) = (t / (th_n * tw_n), (t / tw_n) % th_n, t % tw_n);
                    for c in 0..cg {
                        let xbase = n * g.x_strides[0] + (group * cg + c) * g.x_strides[1];
                        let mut d = [0f32; 16];
                        for i in 0..4 {
                            let ih = (2 * th + i) as isize - g.pad[1] as isize;
                            if ih < 0 || ih as usize >= g.input[1] {
                                continue;
                            }
                            for j in 0..4 {
                                let iw = (2 * tw + j) as isize - g.pad[2] as isize;
                                if iw >= 0 && (iw as usize) < g.input[2] {
                                    let o = xbase + ih as usize * g.x_strides[3] + iw as usize * g.x_strides[4];
                                    // SAFETY: (n, c, ih, iw) is an element of x.
                                    d[4 * i + j] = unsafe { load(p.dt, p.x, o) };
                                }
                            }
                        }
                        let vt = input_transform(&d);
                        for (xi, val) in vt.iter().enumerate() {
                            v[xi * cg * tbpad + (tl / nr) * nr * cg + c * nr + tl % nr] = *val;
                        }
                    }
                }
                with_scratch(Slot::Task2, 16 * kpad * tbpad, |m| {
                    for xi in 0..16 {
                        let ua = &u[group * ulen + xi * kgpad * cg..];
                        let vb = &v[xi * cg * tbpad..];
                        for ir in 0..kpad / mr {
                            let ap = ua[(kbi * kb / mr + ir) * mr * cg..].as_ptr();
                            for jr in 0..tbpad / nr {
                                let bp = vb[jr * nr * cg..].as_ptr();
                                let cp = m[xi * kpad * tbpad + ir * mr * tbpad + jr * nr..].as_mut_ptr();
                                // SAFETY: panels of cg·mr and cg·nr values; the tile lies in m.
                                unsafe { (kern.f)(cg, ap, bp, cp, tbpad, false) };
                            }
                        }
                    }
                    write_tiles(g, &out, m, kpad, tbpad, group * kg + kbi * kb, krows, t0, tlive);
                });
            });
        });
    });
}

/// Output transform of a finished chunk: for each filter row and each run of tiles of one tile
/// row, two output rows go through `write_span`.
#[allow(clippy::too_many_arguments)]
fn write_tiles(g: &Geom, out: &OutTensor, m: &[f32], kpad: usize, tbpad: usize, k0: usize, krows: usize, t0: usize, tlive: usize) {
    let [_, oh_n, ow_n] = g.output;
    let (th_n, tw_n) = (oh_n.div_ceil(2), ow_n.div_ceil(2));
    let mut rows = [vec![0f32; 2 * tw_n], vec![0f32; 2 * tw_n]];
    for kl in 0..krows {
        let mut tl = 0;
        while tl < tlive {
            let t = t0 + tl;
            let (n, th, tw0) = (t / (th_n * tw_n), (t / tw_n) % th_n, t % tw_n);
            let len = (tw_n - tw0).min(tlive - tl);
            for i in 0..len {
                let mut mv = [0f32; 16];
                for (xi, e) in mv.iter_mut().enumerate() {
                    *e = m[xi * kpad * tbpad + kl * tbpad + tl + i];
                }
                let y = output_transform(&mv);
                rows[0][2 * i..2 * i + 2].copy_from_slice(&y[..2]);
                rows[1][2 * i..2 * i + 2].copy_from_slice(&y[2..]);
            }
            let ow0 = 2 * tw0;
            let wlen = (2 * len).min(ow_n - ow0);
            for (r, row) in rows.iter_mut().enumerate() {
                let oh = 2 * th + r;
                if oh < oh_n {
                    // SAFETY: this task owns these (n, filter, tile) outputs.
                    unsafe { out.write_span(&mut row[..wlen], n, k0 + kl, oh * ow_n + ow0) };
                }
            }
            tl += len;
        }
    }
}
