//! Code written once on lane arrays (`[f32; L]`, L independent problems side by side) and
//! compiled for the widest vector extension this CPU has: `simd!` defines a function whose
//! body is built for AVX-512, AVX2 and the baseline, picked at run time by `level`. Used by
//! the Winograd and FFT transforms.

use super::winograd::math::Lanes;

/// The widest vector extension, detected once: 2 AVX-512 + FMA, 1 AVX2 + FMA, 0 neither.
pub fn level() -> u8 {
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
    ($vis:vis $name:ident($($a:ident: $t:ty),*) $body:block) => {
        #[allow(clippy::too_many_arguments)]
        $vis fn $name($($a: $t),*) {
            // Index loops mirror the lane and matrix formulas.
            #[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
            #[inline(always)]
            fn inner($($a: $t),*) $body
            #[cfg(target_arch = "x86_64")]
            {
                #[allow(clippy::too_many_arguments)]
                #[target_feature(enable = "avx512f,fma")]
                unsafe fn v512($($a: $t),*) { inner($($a),*) }
                #[allow(clippy::too_many_arguments)]
                #[target_feature(enable = "avx2,fma")]
                unsafe fn v256($($a: $t),*) { inner($($a),*) }
                match $crate::backend::cpu::lanes::level() {
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


/// dst[..n] = src[..n] with fixed-size copies for the usual widths (a memmove call per row
/// was 13 % of a layer).
///
/// # Safety
/// dst must be valid for n ≤ L writes.
#[inline(always)]
pub unsafe fn copy_lanes(src: &Lanes, dst: *mut f32, n: usize) {
    #[inline(always)]
    unsafe fn fixed<const W: usize>(src: &Lanes, dst: *mut f32) {
        (dst as *mut [f32; W]).write_unaligned(*(src.as_ptr() as *const [f32; W]));
    }
    match n {
        16 => fixed::<16>(src, dst),
        12 => fixed::<12>(src, dst),
        8 => fixed::<8>(src, dst),
        6 => fixed::<6>(src, dst),
        4 => fixed::<4>(src, dst),
        _ => std::ptr::copy_nonoverlapping(src.as_ptr(), dst, n),
    }
}

/// dst[i] = src[i·s]; stride 2 (most strided layers) and 4 as fixed-stride loops.
pub fn strided_copy(src: &[f32], s: usize, dst: &mut [f32]) {
    #[inline(always)]
    fn fixed<const S: usize>(src: &[f32], dst: &mut [f32]) {
        let (last, body) = dst.split_last_mut().expect("a non-empty run");
        for (d, c) in body.iter_mut().zip(src.chunks_exact(S)) {
            *d = c[0];
        }
        *last = src[body.len() * S];
    }
    match s {
        2 => fixed::<2>(src, dst),
        4 => fixed::<4>(src, dst),
        _ => {
            for (i, d) in dst.iter_mut().enumerate() {
                *d = src[i * s];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::strided_copy;

    #[test]
    fn strided_copy_takes_every_sth_element() {
        for s in 2..=5 {
            for n in 1..40 {
                let src: Vec<f32> = (0..(n - 1) * s + 1).map(|i| i as f32).collect();
                let mut dst = vec![f32::NAN; n];
                strided_copy(&src, s, &mut dst);
                assert!(dst.iter().enumerate().all(|(i, &v)| v == (i * s) as f32), "stride {s}, {n} elements");
            }
        }
    }
}
