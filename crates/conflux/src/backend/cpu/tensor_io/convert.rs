//! Chunk loads and stores: a run of packed elements of a compute type to and from an f32
//! buffer, one dtype dispatch per chunk instead of per element. Results are bit-identical to
//! `access::{load, store}` (same rounding as `half`'s scalar conversions).

use crate::types::DataType;
use half::slice::HalfFloatSliceExt;
use half::f16;

/// Whether the chunk functions handle `dt` (the compute types).
pub fn supported(dt: DataType) -> bool {
    dt.is_compute_type()
}

/// dst[i] = element `off + i` of type `dt` at host address `base`, as f32.
///
/// # Safety
/// Elements `off..off + dst.len()` at `base` must be readable values of type `dt`.
#[inline]
pub unsafe fn load(dt: DataType, base: u64, off: usize, dst: &mut [f32]) {
    let n = dst.len();
    match dt {
        DataType::Float => dst.copy_from_slice(std::slice::from_raw_parts((base as *const f32).add(off), n)),
        DataType::Half => {
            let src = (base as *const f16).add(off);
            #[cfg(target_arch = "x86_64")]
            if crate::backend::cpu::x86::convert::available() {
                // SAFETY: feature checked; the caller guarantees the elements.
                return crate::backend::cpu::x86::convert::f16_to_f32(src, dst);
            }
            std::slice::from_raw_parts(src, n).convert_to_f32_slice(dst)
        }
        DataType::BFloat16 => {
            let src = std::slice::from_raw_parts((base as *const u16).add(off), n);
            dst.iter_mut().zip(src).for_each(|(d, &s)| *d = bf16_to_f32(s));
        }
        _ => unreachable!("convert::load: {dt:?} is not a compute type"),
    }
}

/// Elements `off + i` of type `dt` at host address `base` = src[i], rounded to `dt`.
///
/// # Safety
/// Elements `off..off + src.len()` at `base` must be writable as type `dt`, and no other
/// thread may access them meanwhile.
#[inline]
pub unsafe fn store(dt: DataType, base: u64, off: usize, src: &[f32]) {
    let n = src.len();
    match dt {
        DataType::Float => std::slice::from_raw_parts_mut((base as *mut f32).add(off), n).copy_from_slice(src),
        DataType::Half => {
            let dst = (base as *mut f16).add(off);
            #[cfg(target_arch = "x86_64")]
            if crate::backend::cpu::x86::convert::available() {
                // SAFETY: feature checked; the caller guarantees the elements.
                return crate::backend::cpu::x86::convert::f32_to_f16(src, dst);
            }
            std::slice::from_raw_parts_mut(dst, n).convert_from_f32_slice(src)
        }
        DataType::BFloat16 => {
            let dst = std::slice::from_raw_parts_mut((base as *mut u16).add(off), n);
            dst.iter_mut().zip(src).for_each(|(d, &s)| *d = f32_to_bf16(s));
        }
        _ => unreachable!("convert::store: {dt:?} is not a compute type"),
    }
}

/// `bf16::to_f32` without branches, so the loop vectorizes: NaNs get the quiet bit set.
#[inline(always)]
fn bf16_to_f32(i: u16) -> f32 {
    let q = if i & 0x7fff > 0x7f80 { i | 0x0040 } else { i };
    f32::from_bits((q as u32) << 16)
}

/// `bf16::from_f32` without branches: round to nearest even, NaNs quieted (as `half`).
#[inline(always)]
fn f32_to_bf16(v: f32) -> u16 {
    let x = v.to_bits();
    let round_up = (x & 0x8000 != 0) & (x & 0x17fff != 0);
    let r = (x >> 16) + round_up as u32;
    let nan = x & 0x7fff_ffff > 0x7f80_0000;
    (if nan { (x >> 16) | 0x0040 } else { r }) as u16
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::bf16;

    /// The chunk f16 conversions equal `half`'s scalar ones on every f16 and on f32 values
    /// around every rounding boundary (chunks of 13: vector body and scalar tail).
    #[test]
    fn f16_matches_half() {
        let bits: Vec<u16> = (0..=u16::MAX).collect();
        let mut back = vec![0f32; bits.len()];
        // SAFETY: the slice holds `back.len()` u16 values, which are valid f16 bit patterns.
        unsafe { load(DataType::Half, bits.as_ptr() as u64, 0, &mut back) };
        for (&b, &v) in bits.iter().zip(&back) {
            let want = f16::from_bits(b).to_f32();
            assert!(v.to_bits() == want.to_bits() || (v.is_nan() && want.is_nan()), "{b:#x}");
        }
        let probes: Vec<f32> = back.iter().flat_map(|v| [0u32, 1, 0xfff, 0x1000, 0x1001, 0x1fff].map(|d| f32::from_bits(v.to_bits() + d))).collect();
        for chunk in probes.chunks(13) {
            let mut out = vec![0u16; chunk.len()];
            // SAFETY: `out` holds `chunk.len()` writable u16 values.
            unsafe { store(DataType::Half, out.as_mut_ptr() as u64, 0, chunk) };
            for (&o, &v) in out.iter().zip(chunk) {
                let want = f16::from_f32(v);
                assert!(o == want.to_bits() || (want.is_nan() && f16::from_bits(o).is_nan()), "{:#x}", v.to_bits());
            }
        }
    }

    /// The branch-free bf16 conversions equal `half`'s on every bf16 and on f32 values
    /// around every rounding boundary.
    #[test]
    fn bf16_matches_half() {
        for i in 0..=u16::MAX {
            let a = bf16_to_f32(i);
            let b = bf16::from_bits(i).to_f32();
            assert!(a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()), "{i:#x}");
            for low in [0u32, 1, 0x7fff, 0x8000, 0x8001, 0xffff] {
                let v = f32::from_bits(((i as u32) << 16) | low);
                assert_eq!(f32_to_bf16(v), bf16::from_f32(v).to_bits(), "{:#x}", v.to_bits());
            }
        }
    }
}
