//! Forward convolutions whose output is one pixel per image, with a 1×1 filter and no padding
//! (squeeze-and-excitation layers on pooled 1×1 images, fully connected layers written as
//! convolutions): y[n, k] = Σ_c w[k, c]·x[n, c] per group, a matrix-vector product per image.
//! The GEMM paths pack panels and fill micro-tiles for a single column, which costs more than
//! the products on these layers; here each output is one dot product.

use crate::backend::cpu::direct::naive::ConvPtrs;
use crate::backend::cpu::pointwise::epilogue::CpuEpilogue;
use crate::problem::Geom;
use rayon::prelude::*;

/// Products above which the output channels are split across the pool.
const PARALLEL_PRODUCTS: usize = 1 << 18;
/// Accumulators of a contiguous dot product (whole vectors on AVX-512 and AVX2).
const LANES: usize = 16;

/// Σ a[i]·b[i] over contiguous slices in LANES partial sums, added pairwise in a fixed order:
/// a sequential sum of the partials is a chain of LANES dependent adds, longer than the
/// products of the 32–64-channel dots of squeeze-and-excitation layers.
#[inline(always)]
fn dot_contiguous(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; LANES];
    let (ac, bc) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let (ar, br) = (ac.remainder(), bc.remainder());
    for (x, y) in ac.zip(bc) {
        for l in 0..LANES {
            acc[l] = x[l].mul_add(y[l], acc[l]);
        }
    }
    let mut w = LANES;
    while w > 1 {
        w /= 2;
        for l in 0..w {
            acc[l] += acc[l + w];
        }
    }
    let mut s = acc[0];
    for (x, y) in ar.iter().zip(br) {
        s = x.mul_add(*y, s);
    }
    s
}

// out[k] for k in `ks` of image n: the dot products of w's rows with x's channels.
simd!(dots(x: *const f32, w: *const f32, g: &Geom, n: usize, k0: usize, out: &mut [f32]) {
    let (cg, kg, xs, ws) = (g.cg(), g.kg(), g.x_strides, g.w_strides);
    for (i, o) in out.iter_mut().enumerate() {
        let k = k0 + i;
        let (xb, wb) = (n * xs[0] + (k / kg) * cg * xs[1], k * ws[0]);
        *o = if xs[1] == 1 && ws[1] == 1 {
            // SAFETY: channels g·CG.. of pixel 0 of image n and row k of w are contiguous runs
            // of CG elements inside the validated tensors.
            let (xr, wr) = unsafe { (std::slice::from_raw_parts(x.add(xb), cg), std::slice::from_raw_parts(w.add(wb), cg)) };
            dot_contiguous(xr, wr)
        } else {
            // SAFETY: as above, element by element through the strides.
            (0..cg).fold(0f32, |s, c| unsafe { (*x.add(xb + c * xs[1])).mul_add(*w.add(wb + c * ws[1]), s) })
        };
    }
});

/// Does `forward` run on the calling thread alone for this geometry?
pub fn single_threaded(g: &Geom) -> bool {
    g.n * g.k * g.cg() <= PARALLEL_PRODUCTS
}

/// y = epilogue(α·conv(x, w) + β·y).
pub fn forward(g: &Geom, p: ConvPtrs, alpha: f32, beta: f32, epi: &CpuEpilogue) {
    let chunk = if !single_threaded(g) { g.k.div_ceil(rayon::current_num_threads() * 4).max(1) } else { g.k };
    // α = 1, β = 0 with none / bias / ReLU(6): stored straight, without the generic chain.
    let fused = (alpha == 1.0 && beta == 0.0).then(|| epi.bias_relu_all()).flatten();
    let store = |n: usize, k0: usize, sums: &[f32]| {
        if fused.is_none() && k0 == 0 && sums.len() == g.k {
            // Every channel of the image at once: the chain runs vectorized across them
            // (sigmoid / SiLU after squeeze-and-excitation layers) instead of per element.
            let mut vals: Vec<f32> = sums.iter().map(|v| alpha * v).collect();
            // SAFETY: (n, k) for every k is an element of the validated y, written by this task only.
            let at = |k: usize| unsafe { (p.y as *mut f32).add(n * g.y_strides[0] + k * g.y_strides[1]) };
            if beta != 0.0 {
                // SAFETY: as above.
                vals.iter_mut().enumerate().for_each(|(k, v)| *v += beta * unsafe { *at(k) });
            }
            epi.apply_pixel(&mut vals, n, [0, 0, 0], 0, 1);
            // SAFETY: as above.
            vals.iter().enumerate().for_each(|(k, v)| unsafe { *at(k) = *v });
            return;
        }
        for (i, v) in sums.iter().enumerate() {
            let k = k0 + i;
            // SAFETY: (n, k) is an element of the validated y, written by this task only.
            unsafe {
                let at = (p.y as *mut f32).add(n * g.y_strides[0] + k * g.y_strides[1]);
                if let Some((bias, act)) = fused {
                    *at = act.apply(v + bias.map_or(0.0, |b| b[k]));
                    continue;
                }
                let mut val = alpha * v;
                if beta != 0.0 {
                    val += beta * *at;
                }
                *at = epi.apply(val, n, k, [0, 0, 0], 0, 1);
            }
        }
    };
    let task = |(n, k0): (usize, usize)| {
        let mut sums = vec![0f32; chunk.min(g.k - k0)];
        dots(p.x as *const f32, p.w as *const f32, g, n, k0, &mut sums);
        store(n, k0, &sums);
    };
    let tasks: Vec<(usize, usize)> = (0..g.n).flat_map(|n| (0..g.k).step_by(chunk).map(move |k0| (n, k0))).collect();
    if chunk == g.k {
        tasks.into_iter().for_each(task);
    } else {
        tasks.into_par_iter().for_each(task);
    }
}
