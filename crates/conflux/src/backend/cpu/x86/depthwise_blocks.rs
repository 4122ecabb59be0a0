//! Depthwise forward kernels on AVX-512 for one block of 16 channels: a band of input rows is
//! staged channels-last with its column padding stored as zeros ([row][padded column][16]), so
//! a chunk of up to eight outputs of a row is a run of vector FMAs per tap, its sums in zmm
//! registers, with no tap table and no branch; filter rows that fall in the padding are
//! skipped. Channels-first planes come in and go out through 16 × 16 register transposes.

use super::transpose::transpose16;
use std::arch::x86_64::*;

/// Channels per block: one zmm register of f32.
pub const LANES: usize = 16;

/// Outputs per register chunk at most: eight sums and the filter vector.
const CHUNK: usize = 8;

/// Filter rows at most (the valid rows of one output row live in a fixed array).
pub const MAX_FILTER_ROWS: usize = 16;

/// The staged band as the kernels read it: `buf` holds input rows `first..first + rows` of one
/// image and channel block, `pitch` padded columns each (input column 0 sits after the
/// convolution's left padding, so output column ox reads padded column ox·stride + tap·dilation).
#[derive(Clone, Copy)]
pub struct Staged {
    pub buf: *const f32,
    pub first: usize,
    pub rows: usize,
    pub pitch: usize,
}

/// What a chunk's sums become before they are stored: + the block's bias (`bias`: its 16
/// floats, lanes past `mask` not read; null for none), then the clamp when `on` (max with 0,
/// NaN → 0, then min with `hi`). Raw sums for a general epilogue: null bias, `on` false.
#[derive(Clone, Copy)]
pub struct Store {
    pub bias: *const f32,
    pub mask: __mmask16,
    pub on: bool,
    pub hi: f32,
}

/// `Store` as registers.
#[derive(Clone, Copy)]
struct StoreRegs {
    bias: __m512,
    on: bool,
    hi: __m512,
}

/// Where a band's outputs go: pixel `ox` of output row `oy` at `ptr + (oy − first row)·row_step
/// + ox·step` (floats), channels `mask` of the block.
#[derive(Clone, Copy)]
pub struct RowDst {
    pub ptr: *mut f32,
    pub step: usize,
    pub row_step: usize,
    pub mask: __mmask16,
}

/// Geometry of the convolution the kernels need, in one place.
#[derive(Clone, Copy)]
pub struct Taps {
    pub filter: [usize; 2],
    pub stride: [usize; 2],
    pub dilation: [usize; 2],
    pub pad_top: usize,
    pub in_rows: usize,
    pub out_cols: usize,
    /// The row's chunks: `chunks` of them, the first `wider` one output wider than the rest.
    pub chunks: usize,
    pub wider: usize,
}

impl Taps {
    /// Chunks of nearly equal width (14 outputs as 7 + 7, not 8 + 6): every chunk keeps as
    /// many independent sums as the widest allows.
    pub fn chunked(mut self) -> Taps {
        self.chunks = self.out_cols.div_ceil(CHUNK);
        self.wider = self.out_cols % self.chunks;
        self
    }
}

/// Output rows `rows` of the block: every chunk over the staged rows it reads, through `st`
/// into `dst`. `wt` is the block's filter as [tap][16].
///
/// # Safety
/// The CPU has AVX-512F; `s` stages every input row of the image that these rows read (rows in
/// the padding are skipped) with enough padded columns for every output; `wt` holds
/// taps × 16 floats; `dst` has `out_cols` pixels of every row for the masked channels.
#[target_feature(enable = "avx512f")]
pub unsafe fn output_rows(t: &Taps, s: &Staged, rows: std::ops::Range<usize>, wt: *const f32, st: Store, dst: RowDst) {
    let bias = if st.bias.is_null() { _mm512_setzero_ps() } else { _mm512_maskz_loadu_ps(st.mask, st.bias) };
    let st = StoreRegs { bias, on: st.on, hi: _mm512_set1_ps(st.hi) };
    let base = (t.out_cols - t.wider) / t.chunks;
    let first = rows.start;
    for oy in rows {
        // The filter rows whose input row lies in the image: (staged row offset, filter offset).
        let mut taps = [(0usize, 0usize); MAX_FILTER_ROWS];
        let mut nr = 0;
        for r in 0..t.filter[0] {
            let iy = (oy * t.stride[0] + r * t.dilation[0]) as isize - t.pad_top as isize;
            if iy < 0 || iy as usize >= t.in_rows {
                continue;
            }
            debug_assert!((iy as usize) >= s.first && (iy as usize) < s.first + s.rows);
            taps[nr] = ((iy as usize - s.first) * s.pitch * LANES, r * t.filter[1] * LANES);
            nr += 1;
        }
        let taps = &taps[..nr];
        let row = dst.ptr.add((oy - first) * dst.row_step);
        let mut ox = 0;
        for i in 0..t.chunks {
            let cw = base + usize::from(i < t.wider);
            let x0 = s.buf.add(ox * t.stride[1] * LANES);
            let d = RowDst { ptr: row.add(ox * dst.step), ..dst };
            // Unit stride and dilation with a 3-, 5- or 7-tap row: each input vector loaded once
            // for every output of the chunk it feeds (`chunk_unit`).
            let unit = t.stride[1] == 1 && t.dilation[1] == 1;
            match (cw, if unit { t.filter[1] } else { 0 }) {
                (8, 3) => chunk_unit::<8, 3>(x0, taps, wt, st, d),
                (7, 3) => chunk_unit::<7, 3>(x0, taps, wt, st, d),
                (8, 5) => chunk_unit::<8, 5>(x0, taps, wt, st, d),
                (7, 5) => chunk_unit::<7, 5>(x0, taps, wt, st, d),
                (8, 7) => chunk_unit::<8, 7>(x0, taps, wt, st, d),
                (7, 7) => chunk_unit::<7, 7>(x0, taps, wt, st, d),
                (8, _) => chunk::<8>(x0, taps, wt, t, st, d),
                (7, _) => chunk::<7>(x0, taps, wt, t, st, d),
                (6, _) => chunk::<6>(x0, taps, wt, t, st, d),
                (5, _) => chunk::<5>(x0, taps, wt, t, st, d),
                (4, _) => chunk::<4>(x0, taps, wt, t, st, d),
                (3, _) => chunk::<3>(x0, taps, wt, t, st, d),
                (2, _) => chunk::<2>(x0, taps, wt, t, st, d),
                _ => chunk::<1>(x0, taps, wt, t, st, d),
            }
            ox += cw;
        }
    }
}

/// W consecutive outputs from padded column x0: Σ over the valid rows and every tap.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn chunk<const W: usize>(x0: *const f32, rows: &[(usize, usize)], wt: *const f32, t: &Taps, st: StoreRegs, d: RowDst) {
    let mut a = [_mm512_setzero_ps(); W];
    let (xstep, tstep) = (t.stride[1] * LANES, t.dilation[1] * LANES);
    for &(roff, woff) in rows {
        let (xr, wr) = (x0.add(roff), wt.add(woff));
        for s in 0..t.filter[1] {
            let w = _mm512_loadu_ps(wr.add(s * LANES));
            let xs = xr.add(s * tstep);
            for (j, aj) in a.iter_mut().enumerate() {
                *aj = _mm512_fmadd_ps(_mm512_loadu_ps(xs.add(j * xstep)), w, *aj);
            }
        }
    }
    store_chunk(&a, st, d);
}

/// `chunk` at unit stride and dilation with FW taps per row: the row's FW filter vectors stay in
/// registers and each of the W + FW − 1 input vectors is loaded once for the (up to FW) outputs
/// it feeds, so the loads no longer bound the FMAs (one per FMA in `chunk`).
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn chunk_unit<const W: usize, const FW: usize>(x0: *const f32, rows: &[(usize, usize)], wt: *const f32, st: StoreRegs, d: RowDst) {
    let mut a = [_mm512_setzero_ps(); W];
    for &(roff, woff) in rows {
        let (xr, wr) = (x0.add(roff), wt.add(woff));
        let w: [__m512; FW] = std::array::from_fn(|s| _mm512_loadu_ps(wr.add(s * LANES)));
        for c in 0..W + FW - 1 {
            let xv = _mm512_loadu_ps(xr.add(c * LANES));
            for (s, ws) in w.iter().enumerate() {
                if c >= s && c - s < W {
                    a[c - s] = _mm512_fmadd_ps(xv, *ws, a[c - s]);
                }
            }
        }
    }
    store_chunk(&a, st, d);
}

/// A chunk's sums + bias, clamped when asked, into its W outputs.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn store_chunk<const W: usize>(a: &[__m512; W], st: StoreRegs, d: RowDst) {
    for (j, aj) in a.iter().enumerate() {
        let mut v = _mm512_add_ps(*aj, st.bias);
        if st.on {
            v = _mm512_min_ps(_mm512_max_ps(v, _mm512_setzero_ps()), st.hi);
        }
        let p = d.ptr.add(j * d.step);
        if d.mask == 0xffff {
            _mm512_storeu_ps(p, v);
        } else {
            _mm512_mask_storeu_ps(p, d.mask, v);
        }
    }
}

/// Zeros in padded columns [0, pad_l) and [pad_l + width, pitch) of `rows` staged rows.
///
/// # Safety
/// The CPU has AVX-512F; `buf` holds rows × pitch × 16 floats.
#[target_feature(enable = "avx512f")]
pub unsafe fn zero_padding(buf: *mut f32, rows: usize, pitch: usize, pad_l: usize, width: usize) {
    let z = _mm512_setzero_ps();
    for r in 0..rows {
        let row = buf.add(r * pitch * LANES);
        for col in (0..pad_l).chain(pad_l + width..pitch) {
            _mm512_storeu_ps(row.add(col * LANES), z);
        }
    }
}

/// Stage input rows `rows` (of `width` pixels) of a channels-last image at `x` (pixel stride
/// `px`, row stride `rs`, channel c0 first) into `buf` at padded column `pad_l`; lanes past
/// `mask` are zeros.
///
/// # Safety
/// The CPU has AVX-512F; the masked channels of every pixel read are inside x; `buf` holds
/// the rows at `pitch` padded columns.
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn stage_channels_last(x: *const f32, px: usize, rs: usize, rows: std::ops::Range<usize>, width: usize, mask: __mmask16, buf: *mut f32, pitch: usize, pad_l: usize) {
    for (i, iy) in rows.enumerate() {
        let src = x.add(iy * rs);
        let dst = buf.add((i * pitch + pad_l) * LANES);
        for ix in 0..width {
            _mm512_storeu_ps(dst.add(ix * LANES), _mm512_maskz_loadu_ps(mask, src.add(ix * px)));
        }
    }
}

/// Stage pixels [f0, f1) (flat, row-major, rows of `width`) of `cb` ≤ 16 dense channel planes
/// (plane c at `x + c·cs`) into `buf` channels-last at padded column `pad_l`, staged row 0
/// being input row f0 / width; lanes of channels ≥ cb are zeros.
///
/// # Safety
/// The CPU has AVX-512F; the planes hold pixels f0..f1; `buf` holds the rows at `pitch`
/// padded columns.
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn stage_planes(x: *const f32, cs: usize, cb: usize, f0: usize, f1: usize, width: usize, buf: *mut f32, pitch: usize, pad_l: usize) {
    let row0 = f0 / width;
    let mut f = f0;
    while f < f1 {
        let n = (f1 - f).min(LANES);
        let m: __mmask16 = if n == LANES { 0xffff } else { (1u16 << n) - 1 };
        let rows: [__m512; LANES] = std::array::from_fn(|c| if c < cb { _mm512_maskz_loadu_ps(m, x.add(c * cs + f)) } else { _mm512_setzero_ps() });
        let px = transpose16(rows);
        let (mut r, mut col) = (f / width - row0, f % width);
        for v in px.iter().take(n) {
            _mm512_storeu_ps(buf.add((r * pitch + pad_l + col) * LANES), *v);
            col += 1;
            if col == width {
                col = 0;
                r += 1;
            }
        }
        f += n;
    }
}

/// The inverse for outputs: `p` channels-last pixels of `blk` ([pixel][16]) to `cb` dense
/// planes (plane c at `y + c·cs`, pixels consecutive).
///
/// # Safety
/// The CPU has AVX-512F; `blk` holds p × 16 floats; each plane has p pixels from `y`.
#[target_feature(enable = "avx512f")]
pub unsafe fn store_planes(blk: *const f32, p: usize, cb: usize, y: *mut f32, cs: usize) {
    let mut f = 0;
    while f < p {
        let n = (p - f).min(LANES);
        let px: [__m512; LANES] = std::array::from_fn(|i| if i < n { _mm512_loadu_ps(blk.add((f + i) * LANES)) } else { _mm512_setzero_ps() });
        let planes = transpose16(px);
        for (c, v) in planes.iter().enumerate().take(cb) {
            let dst = y.add(c * cs + f);
            if n == LANES {
                _mm512_storeu_ps(dst, *v);
            } else {
                _mm512_mask_storeu_ps(dst, (1u16 << n) - 1, *v);
            }
        }
        f += n;
    }
}
