//! Output transform of the Winograd driver: M's tiles into y with α/β and the epilogue, stored
//! straight from the transform where the AVX-512 path applies.

use super::*;


/// Output transform of a task's M (`cx.xi` slabs of `ms` holding rows × cols; rows = tiles
/// from t0, cols = filters from k0) into y: per run of tiles in one tile row, m output rows
/// per filter.
#[allow(clippy::too_many_arguments)]
pub(super) fn write_block(cx: &Ctx, out: &OutTensor, m: &[f32], ms: usize, cols: usize, group: usize, t0: usize, tlive: usize, k0: usize, klive: usize) {
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
                        unsafe { crate::backend::cpu::x86::winograd::output16(m[(tl + i) * cols + l0..].as_ptr(), ms, stage[l0 * 4 * span + 4 * i..].as_mut_ptr(), span) };
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
pub(super) fn write_block_direct(cx: &Ctx, out: &OutTensor, m: &[f32], ms: usize, cols: usize, group: usize, t0: usize, tlive: usize, k0: usize, klive: usize) -> bool {
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
                use crate::backend::cpu::x86::winograd as x86;
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

simd!(pub(super) transform_run(v: Variant, m: &[f32], ms: usize, cols: usize, tl: usize, len: usize, klive: usize, span: usize, stage: &mut [f32]) {
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
