//! int8 dot products on AVX-512 VNNI: 16 filter rows × 4 patch rows per call, each `vpdpbusd`
//! multiplying 4 bytes of one patch row (broadcast) with 4 bytes of each of 16 filter rows and
//! adding into 16 i32 sums.
//!
//! `vpdpbusd` multiplies unsigned by signed bytes, so patches arrive as x + 128 (u8) and each
//! filter row's 128·Σw is subtracted afterwards. The instruction wraps rather than saturates,
//! and so does the subtraction: the result is Σ x·w modulo 2³², which is Σ x·w itself, since
//! the problem is refused where that could leave i32 (`quant.rs`: at most 2¹⁷ products).

/// Filter rows grouped by 16, as `block4` reads them: for block b and 4-element step s, the
/// 16 rows' 4 bytes each (one i32 lane per row), and each row's 128·Σw.
pub struct Filters {
    steps: usize,
    lanes: Vec<i32>,
    comp: Vec<i32>,
}

/// Whether this CPU has AVX-512 VNNI.
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *ON.get_or_init(|| is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512vnni"))
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

impl Filters {
    /// `rows` filter rows of `len` int8 elements each (len a multiple of 4), rows past the last
    /// zero.
    pub fn pack(w: &[i8], rows: usize, len: usize) -> Filters {
        debug_assert!(w.len() >= rows * len);
        Filters::pack_with(rows, len, |k, row| row.copy_from_slice(&w[k * len..(k + 1) * len]))
    }

    /// As `pack`, with `fill(k, row)` writing filter row k (len elements) into `row`: callers
    /// read the filter tensor straight into the blocks, with no packed copy in between.
    pub fn pack_with(rows: usize, len: usize, fill: impl Fn(usize, &mut [i8]) + Sync) -> Filters {
        use rayon::prelude::*;
        debug_assert!(len.is_multiple_of(4));
        let (blocks, steps) = (rows.div_ceil(16), len / 4);
        let mut lanes = vec![0i32; blocks * steps * 16];
        let mut comp = vec![0i32; blocks * 16];
        // Blocks in parallel: a layer's filter is megabytes at batch 1.
        lanes.par_chunks_mut(steps * 16).zip(comp.par_chunks_mut(16)).enumerate().for_each(|(b, (lanes, comp))| {
            let mut row = vec![0i8; len];
            for l in 0..16.min(rows - b * 16) {
                fill(b * 16 + l, &mut row);
                for (s, q) in row.chunks_exact(4).enumerate() {
                    lanes[s * 16 + l] = i32::from_le_bytes([q[0] as u8, q[1] as u8, q[2] as u8, q[3] as u8]);
                }
                comp[l] = 128 * row.iter().map(|&v| v as i32).sum::<i32>();
            }
        });
        Filters { steps, lanes, comp }
    }

    /// Σ w·x of filter rows 16·block .. 16·block + 16 with four patch rows given as x + 128:
    /// out[j][l] for patch j and row l. Call only where `available()`.
    pub fn block4(&self, block: usize, p: [&[u8]; 4]) -> [[i32; 16]; 4] {
        debug_assert!(available() && p.iter().all(|r| r.len() >= 4 * self.steps));
        // SAFETY: the caller checked `available()`; each patch row holds 4·steps bytes and the
        // block's lanes 16·steps values.
        #[cfg(target_arch = "x86_64")]
        return unsafe { self.block4_avx512(block, p) };
        #[cfg(not(target_arch = "x86_64"))]
        unreachable!("AVX-512 VNNI is x86-64 only")
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512vnni")]
    unsafe fn block4_avx512(&self, block: usize, p: [&[u8]; 4]) -> [[i32; 16]; 4] {
        use std::arch::x86_64::*;
        let lanes = self.lanes[block * self.steps * 16..].as_ptr();
        let mut acc = [_mm512_setzero_si512(); 4];
        for s in 0..self.steps {
            let wv = _mm512_loadu_si512(lanes.add(s * 16) as *const __m512i);
            for (j, a) in acc.iter_mut().enumerate() {
                let xv = _mm512_set1_epi32((p[j].as_ptr().add(4 * s) as *const i32).read_unaligned());
                *a = _mm512_dpbusd_epi32(*a, xv, wv);
            }
        }
        let comp = _mm512_loadu_si512(self.comp[block * 16..].as_ptr() as *const __m512i);
        let mut out = [[0i32; 16]; 4];
        for (o, a) in out.iter_mut().zip(acc) {
            _mm512_storeu_si512(o.as_mut_ptr() as *mut __m512i, _mm512_sub_epi32(a, comp));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Extremes and random bytes against i32 sums, with a row count that is not a multiple
    /// of 16 and a patch of all −128 (the largest products after the shift).
    #[test]
    fn blocks_equal_exact_sums() {
        if !available() {
            return;
        }
        let (rows, len) = (21, 40);
        let mut s = 7u64;
        let mut next = || {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (s >> 56) as u8 as i8
        };
        let mut w: Vec<i8> = (0..rows * len).map(|_| next()).collect();
        w[..len].fill(-128);
        w[len..2 * len].fill(127);
        let mut patches: Vec<Vec<i8>> = (0..4).map(|_| (0..len).map(|_| next()).collect()).collect();
        patches[0].fill(-128);
        patches[1].fill(127);
        let shifted: Vec<Vec<u8>> = patches.iter().map(|r| r.iter().map(|&v| (v as u8) ^ 0x80).collect()).collect();
        let f = Filters::pack(&w, rows, len);
        for block in 0..rows.div_ceil(16) {
            let got = f.block4(block, [&shifted[0], &shifted[1], &shifted[2], &shifted[3]]);
            for (j, p) in patches.iter().enumerate() {
                for l in 0..16 {
                    let k = block * 16 + l;
                    let want: i32 = if k < rows { w[k * len..(k + 1) * len].iter().zip(p).map(|(&a, &b)| a as i32 * b as i32).sum() } else { 0 };
                    assert_eq!(got[j][l], want, "row {k}, patch {j}");
                }
            }
        }
    }
}
