//! Input and filter transforms of the Winograd driver: padded planes of x, the input
//! transform into V panels and the filter transform into U panels (lane code and dispatch).

use super::*;


/// U' of filters kp·nr.. (lanes) and channels c0..c1; element (ξ, c, lane) goes to
/// dst + ξ·xi_stride + (c − c0)·nr + lane.
pub(super) fn filter_panel(cx: &Ctx, group: usize, kp: usize, c0: usize, c1: usize, dst: Shared, xi_stride: usize) {
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
                    let f = if cx.v == Variant::F4 { crate::backend::cpu::x86::winograd::filter16 } else { crate::backend::cpu::x86::winograd::filter16_f2 };
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
pub(super) fn input_panel(cx: &Ctx, planes: &[f32], group: usize, tp: usize, c0: usize, c1: usize, vp: Shared, vlen: usize) {
    input_panel_to(cx, planes, group, tp, c0, c1, Shared(vp.0.wrapping_add(group * vlen + tp * cx.kern.mr * cx.cg)), cx.vx)
}

/// `input_panel` with V's panel at `dst` (channel c's rows at dst + c·mr) and the ξ slabs
/// `vx` apart.
#[allow(clippy::too_many_arguments)]
pub(super) fn input_panel_to(cx: &Ctx, planes: &[f32], group: usize, tp: usize, c0: usize, c1: usize, dst: Shared, vx: usize) {
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
                    let f = if cx.v == Variant::F4 { crate::backend::cpu::x86::winograd::input16_masked } else { crate::backend::cpu::x86::winograd::input16_masked_f2 };
                    f(p, idx, rows, cols, rs, cs, store_mask, dst, vx);
                }
            }
            return;
        }
    }
    input_panel_lanes(cx, planes, group, tp, c0, c1, dst, vx)
}
/// Every (n, c) plane of x as f32, zero-padded: row r, column s hold x[.., r − pad, s − pad].
pub(super) fn pad_planes(cx: &Ctx, planes: &mut [f32]) {
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
pub(super) fn zero_borders(cx: &Ctx, pln: &mut [f32]) {
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
pub(super) fn pad_planes_channels_last(cx: &Ctx, planes: &mut [f32]) {
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

simd!(pub(super) input_panel_lanes(cx: &Ctx, planes: &[f32], group: usize, tp: usize, c0: usize, c1: usize, dst: Shared, vx: usize) {
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

simd!(pub(super) filter_panel_lanes(cx: &Ctx, group: usize, kp: usize, c0: usize, c1: usize, dst: Shared, xi_stride: usize) {
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
pub(super) const FILTER_CHUNK: usize = 16;
