//! Moving data in and out of the channels-last depthwise kernels (`depthwise_nhwc`): rows of
//! results stored through any strides with α/β and the fused epilogue, and channels-last copies
//! of channels-first operands.

use crate::backend::cpu::gemm::scratch::{with_scratch, Slot};
use crate::backend::cpu::pointwise::epilogue::CpuEpilogue;
use rayon::prelude::*;

/// Where a row of results goes: pixels `width` of row (n, h) of a channels-last tensor.
pub(super) struct RowOut<'a> {
    pub ptr: u64,
    pub strides: [usize; 5],
    pub dims: [usize; 3],
    pub alpha: f32,
    pub beta: f32,
    pub epi: &'a CpuEpilogue,
}

impl RowOut<'_> {
    /// out[n, :, h, w] = epi(α·v + β·out_old) for every pixel w of the row; β = 0 never reads
    /// the old value.
    ///
    /// # Safety
    /// Row (n, h) must be inside the tensor and written by no other thread.
    pub unsafe fn write(&self, v: &[f32], n: usize, h: usize) {
        let (cn, width, cs) = (v.len() / self.dims[2], self.dims[2], self.strides[1]);
        let fast = (self.alpha == 1.0 && self.beta == 0.0).then(|| self.epi.bias_relu_all()).flatten();
        let row = (self.ptr as *mut f32).add(n * self.strides[0] + h * self.strides[3]);
        // Channels-first rows of unit pixel stride, 8 pixels or more: the first multiple-of-8
        // channels move as 8 × 8 register transposes (a row's pixels per channel, one store
        // each). Shorter rows measured slower that way than element by element.
        let mut c_done = 0;
        if fast.is_none() && cs == 1 {
            // Channels-last rows: the chain over each pixel's channels at once, so activations
            // such as SiLU run vectorized instead of one element at a time.
            with_scratch(Slot::Task2, cn, |px| self.write_pixels(v, row, cn, n, h, px));
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if let Some((bias, relu)) = fast {
            if cs > 1 && self.strides[4] == 1 && cn >= 8 && width >= 8 && std::is_x86_feature_detected!("avx") {
                c_done = cn / 8 * 8;
                // SAFETY: AVX is present; the row's pixels 0..width of channels 0..c_done are
                // inside the tensor (the caller's promise), v holds width × cn values.
                store_planar8(v, cn, c_done, width, row, cs, bias, relu);
            }
        }
        if let (Some((bias, relu)), 1) = (fast, cs) {
            // Channels-last rows: each pixel's channels as one contiguous run (vectorized).
            for w in 0..width {
                let src = &v[w * cn..(w + 1) * cn];
                let dst = std::slice::from_raw_parts_mut(row.add(w * self.strides[4]), cn);
                match bias {
                    Some(b) => dst.iter_mut().zip(src).zip(b).for_each(|((d, &x), &bc)| *d = relu.apply_branch_free(x + bc)),
                    None => dst.iter_mut().zip(src).for_each(|(d, &x)| *d = relu.apply_branch_free(x)),
                }
            }
            return;
        }
        for w in 0..width {
            let src = &v[w * cn..(w + 1) * cn];
            // Channel c of the pixel; channels-first tensors (cs > 1) take strided stores.
            let dst = row.add(w * self.strides[4]);
            match fast {
                Some((bias, relu)) => {
                    for c in c_done..cn {
                        let x = src[c] + bias.map_or(0.0, |b| b[c]);
                        *dst.add(c * cs) = relu.apply(x);
                    }
                }
                None => {
                    let sp = h * width + w;
                    for c in 0..cn {
                        let at = dst.add(c * cs);
                        let mut x = self.alpha * src[c];
                        if self.beta != 0.0 {
                            x += self.beta * *at;
                        }
                        *at = self.epi.apply(x, n, c, [0, h, w], sp, self.dims[1] * width);
                    }
                }
            }
        }
    }
}

impl RowOut<'_> {
    /// `write`'s channels-last path with a general epilogue: each pixel's channels through α,
    /// β and the chain at once (`px`: cn floats of scratch).
    ///
    /// # Safety
    /// As `write`, with `row` the start of row (n, h).
    unsafe fn write_pixels(&self, v: &[f32], row: *mut f32, cn: usize, n: usize, h: usize, px: &mut [f32]) {
        let width = self.dims[2];
        for w in 0..width {
            for (p, &x) in px.iter_mut().zip(&v[w * cn..(w + 1) * cn]) {
                *p = self.alpha * x;
            }
            let dst = std::slice::from_raw_parts_mut(row.add(w * self.strides[4]), cn);
            if self.beta != 0.0 {
                px.iter_mut().zip(dst.iter()).for_each(|(p, &old)| *p += self.beta * old);
            }
            self.epi.apply_pixel(px, n, [0, h, w], h * width + w, self.dims[1] * width);
            dst.copy_from_slice(px);
        }
    }
}

impl RowOut<'_> {
    /// Whether `write_planes` takes this output: channels-first with dense planes of ≥ 8 pixels
    /// but rows under 8 (whose per-row planar stores go element by element), ≥ 8 channels, and
    /// a store that is bias and clamp at α = 1, β = 0.
    pub fn planes_apply(&self, cn: usize) -> bool {
        let ([_, h, w], s) = (self.dims, self.strides);
        #[cfg(target_arch = "x86_64")]
        let avx = std::is_x86_feature_detected!("avx");
        #[cfg(not(target_arch = "x86_64"))]
        let avx = false;
        avx && s[1] > 1 && s[4] == 1 && s[3] == w && w < 8 && h * w >= 8 && cn >= 8 && self.alpha == 1.0 && self.beta == 0.0 && self.epi.bias_relu_all().is_some()
    }

    /// Every image's plane of the output from the channels-last results `v` (n × H·W pixels × cn
    /// channels) with bias and clamp, in tasks of `PLANE_SEGMENT` pixels through 8 × 8
    /// transposes across row ends. Only where `planes_apply` holds.
    ///
    /// # Safety
    /// The output tensor holds `n` images of `cn` channels as `self` describes.
    #[cfg(target_arch = "x86_64")]
    pub unsafe fn write_planes(&self, v: &[f32], n: usize, cn: usize) {
        let Some((bias, relu)) = self.epi.bias_relu_all() else { return };
        let hw = self.dims[1] * self.dims[2];
        let (segs, c8, cs) = ((hw / PLANE_SEGMENT).max(1), cn / 8 * 8, self.strides[1]);
        debug_assert!(v.len() >= n * hw * cn);
        let y = self.ptr as usize;
        (0..n * segs).into_par_iter().for_each(|t| {
            let (ni, si) = (t / segs, t % segs);
            let p0 = si * PLANE_SEGMENT;
            let p1 = if si + 1 == segs { hw } else { p0 + PLANE_SEGMENT };
            let src = &v[(ni * hw + p0) * cn..(ni * hw + p1) * cn];
            let dst = (y as *mut f32).add(ni * self.strides[0] + p0);
            // SAFETY: AVX is present (`planes_apply`); tasks write disjoint pixel ranges of
            // the caller's output, whose planes are dense.
            store_planar8(src, cn, c8, p1 - p0, dst, cs, bias, relu);
            for p in 0..p1 - p0 {
                for c in c8..cn {
                    *dst.add(c * cs + p) = relu.apply(src[p * cn + c] + bias.map_or(0.0, |b| b[c]));
                }
            }
        });
    }
}

/// Blocks of 8 pixels covering a row of `width` ≥ 8: (first pixel, 8). A row that is not a
/// multiple of 8 ends in a block overlapping the one before (its pixels are written twice with
/// the same values) rather than a partial one: masked stores are microcoded on AMD CPUs.
#[cfg(target_arch = "x86_64")]
fn blocks_of_8(width: usize) -> impl Iterator<Item = (usize, usize)> {
    debug_assert!(width >= 8);
    let whole = (0..width / 8).map(|b| (8 * b, 8));
    let last = (width % 8 != 0).then(|| (width - 8, 8));
    whole.chain(last)
}

/// Channels 0..c8 of a channels-last row `v` (`cn` channels per pixel, `width` pixels) stored
/// to the channels-first row at `row` (channel planes `cs` apart, pixels consecutive) with the
/// bias and clamp: 8 pixels × 8 channels per register transpose; `width` ≥ 8.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
#[allow(clippy::too_many_arguments)]
unsafe fn store_planar8(v: &[f32], cn: usize, c8: usize, width: usize, row: *mut f32, cs: usize, bias: Option<&[f32]>, relu: crate::backend::cpu::clamp::Clamp) {
    use crate::backend::cpu::x86::transpose::transpose8;
    use std::arch::x86_64::*;
    debug_assert!(width >= 8 && v.len() >= width * cn && c8 <= cn);
    let (zero, hi) = (_mm256_setzero_ps(), _mm256_set1_ps(relu.hi));
    for (w0, _) in blocks_of_8(width) {
        for c0 in (0..c8).step_by(8) {
            let px: [__m256; 8] = std::array::from_fn(|i| _mm256_loadu_ps(v.as_ptr().add((w0 + i) * cn + c0)));
            for (l, col) in transpose8(px).into_iter().enumerate() {
                let c = c0 + l;
                let x = match bias {
                    Some(b) => _mm256_add_ps(col, _mm256_set1_ps(b[c])),
                    None => col,
                };
                // x first: a NaN x gives 0, as `Clamp::apply`.
                let x = if relu.on { _mm256_min_ps(_mm256_max_ps(x, zero), hi) } else { x };
                _mm256_storeu_ps(row.add(c * cs + w0), x);
            }
        }
    }
}

/// out ← a packed channels-last copy of a 2-D tensor (n × c × dims, `strides` N, C, D, H, W)
/// whose channels are not contiguous; returns the copy's strides. The kernels read a pixel's
/// channels as vectors.
fn channels_last_into(out: &mut [f32], ptr: u64, n: usize, c: usize, dims: [usize; 3], strides: [usize; 5]) -> [usize; 5] {
    let [_, h, w] = dims;
    #[cfg(target_arch = "x86_64")]
    if strides[4] == 1 && strides[3] == w && h * w >= 8 && c >= 8 && std::is_x86_feature_detected!("avx") {
        // Dense planes: each image's plane is one run of H·W pixels, transposed in 8 × 8 blocks
        // across row ends too (rows under 8 pixels, 7 × 7 planes, would go element by element).
        planes_channels_last(out, ptr, n, c, h * w, strides);
        return [h * w * c, 1, 0, w * c, c];
    }
    // Planar rows (unit W stride) of 8 pixels or more move as 8 × 8 blocks through an AVX
    // register transpose.
    #[cfg(target_arch = "x86_64")]
    let (c8, w_done) = if strides[4] == 1 && w >= 8 && std::is_x86_feature_detected!("avx") { (c / 8 * 8, w) } else { (0, 0) };
    #[cfg(not(target_arch = "x86_64"))]
    let (c8, w_done) = (0, 0);
    out[..n * h * w * c].par_chunks_mut((w * c).max(1)).enumerate().for_each(|(row, dst)| {
        let (ni, hi) = (row / h, row % h);
        let src = (ptr as *const f32).wrapping_add(ni * strides[0] + hi * strides[3]);
        #[cfg(target_arch = "x86_64")]
        if c8 > 0 && w_done > 0 {
            // SAFETY: AVX is present; blocks lie inside the validated tensor and the row.
            unsafe { blocks8(dst, src, c, c8, w_done, strides[1]) };
        }
        // The rest element by element, 16 channels at a time: each pixel's values are one
        // contiguous run, read from planes streamed side by side.
        let mut rest = |cr: std::ops::Range<usize>, wr: std::ops::Range<usize>| {
            for c0 in cr.clone().step_by(16) {
                let cs = 16.min(cr.end - c0);
                for wi in wr.clone() {
                    for (j, v) in dst[wi * c + c0..][..cs].iter_mut().enumerate() {
                        // SAFETY: (ni, c0 + j, hi, wi) is an element of the caller's validated tensor.
                        *v = unsafe { *src.add((c0 + j) * strides[1] + wi * strides[4]) };
                    }
                }
            }
        };
        rest(0..c8, w_done..w);
        rest(c8..c, 0..w);
    });
    [h * w * c, 1, 0, w * c, c]
}

/// out[p·c + ch] ← the value p of run ch, for `c` runs of `hw` values (consecutive; runs `cs`
/// apart) at `ptr`: a KCRS depthwise filter's taps per channel laid out [tap][C]. Through 8 × 8
/// transposes where AVX is present and hw, c ≥ 8; returns whether it did the copy.
pub(super) fn runs_transposed(out: &mut [f32], ptr: u64, c: usize, hw: usize, cs: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    if hw >= 8 && c >= 8 && std::is_x86_feature_detected!("avx") {
        planes_channels_last(out, ptr, 1, c, hw, [0, cs, 0, 0, 1]);
        return true;
    }
    let _ = (out, ptr, c, hw, cs);
    false
}

/// Pixels per task of `planes_channels_last`.
#[cfg(target_arch = "x86_64")]
const PLANE_SEGMENT: usize = 64;

/// `channels_last_into` for tensors whose planes are dense runs of `hw` ≥ 8 pixels: tasks of
/// `PLANE_SEGMENT` pixels of one image (the last one longer), 8 × 8 transposes for the first
/// multiple-of-8 channels, the rest element by element.
#[cfg(target_arch = "x86_64")]
fn planes_channels_last(out: &mut [f32], ptr: u64, n: usize, c: usize, hw: usize, strides: [usize; 5]) {
    let (segs, c8, cs) = ((hw / PLANE_SEGMENT).max(1), c / 8 * 8, strides[1]);
    assert!(out.len() >= n * hw * c);
    let base = out.as_mut_ptr() as usize;
    (0..n * segs).into_par_iter().for_each(|t| {
        let (ni, si) = (t / segs, t % segs);
        let p0 = si * PLANE_SEGMENT;
        let p1 = if si + 1 == segs { hw } else { p0 + PLANE_SEGMENT };
        let src = (ptr as *const f32).wrapping_add(ni * strides[0] + p0);
        // SAFETY: tasks write disjoint pixel ranges [p0, p1) of image ni inside `out`
        // (asserted long enough); the source pixels are elements of the caller's tensor, whose
        // planes are dense; AVX is present (checked by the caller).
        unsafe {
            let dst = std::slice::from_raw_parts_mut((base as *mut f32).add((ni * hw + p0) * c), (p1 - p0) * c);
            blocks8(dst, src, c, c8, p1 - p0, cs);
            for p in 0..p1 - p0 {
                for ch in c8..c {
                    dst[p * c + ch] = *src.add(ch * cs + p);
                }
            }
        }
    });
}

/// Channels 0..c8 of pixels 0..w (w ≥ 8) of one planar row (`src`, channel planes `cs` apart)
/// into the channels-last row `dst` (`c` channels per pixel), 8 × 8 blocks at a time.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn blocks8(dst: &mut [f32], src: *const f32, c: usize, c8: usize, w: usize, cs: usize) {
    use crate::backend::cpu::x86::transpose::transpose8;
    use std::arch::x86_64::{_mm256_loadu_ps, _mm256_storeu_ps};
    debug_assert!(w >= 8 && dst.len() >= (w - 1) * c + c8);
    for (w0, _) in blocks_of_8(w) {
        for c0 in (0..c8).step_by(8) {
            let rows = std::array::from_fn(|j| _mm256_loadu_ps(src.add((c0 + j) * cs + w0)));
            for (i, px) in transpose8(rows).into_iter().enumerate() {
                _mm256_storeu_ps(dst.as_mut_ptr().add((w0 + i) * c + c0), px);
            }
        }
    }
}

/// `f(ptr, strides)` with the tensor at `ptr` as the kernels read it: itself when its channels
/// are contiguous, else a channels-last copy in this thread's scratch `slot` (reused across
/// calls: a fresh buffer per call cost page faults and zeroing).
pub(super) fn with_readable<R>(slot: Slot, ptr: u64, n: usize, c: usize, dims: [usize; 3], strides: [usize; 5], f: impl FnOnce(u64, [usize; 5]) -> R) -> R {
    if strides[1] == 1 {
        return f(ptr, strides);
    }
    with_scratch(slot, n * dims[1] * dims[2] * c, |buf| {
        let s = channels_last_into(buf, ptr, n, c, dims, strides);
        f(buf.as_ptr() as u64, s)
    })
}
