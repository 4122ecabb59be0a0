//! Register transposes shared by the CPU kernels: AVX-512 16 × 16 (Winograd output transform,
//! the 1×1 convolution's W packing and tile stores) and AVX 8 × 8 (channels-last copies of
//! channels-first tensors).

use std::arch::x86_64::*;

/// In-register transpose of 16 rows of 16 floats: out[j][i] = rows[i][j].
#[inline]
#[target_feature(enable = "avx512f")]
pub unsafe fn transpose16(r: [__m512; 16]) -> [__m512; 16] {
    let a: [__m512; 16] = std::array::from_fn(|i| {
        let (x, y) = (r[i & !1], r[i | 1]);
        if i % 2 == 0 { _mm512_unpacklo_ps(x, y) } else { _mm512_unpackhi_ps(x, y) }
    });
    // b[4i + j], 128-bit lane q: column 4q + j of rows 4i..4i+3.
    let b: [__m512; 16] = std::array::from_fn(|n| {
        let (i, j) = (n / 4, n % 4);
        let (x, y) = (a[4 * i + j / 2], a[4 * i + 2 + j / 2]);
        if j % 2 == 0 { _mm512_shuffle_ps::<0x44>(x, y) } else { _mm512_shuffle_ps::<0xEE>(x, y) }
    });
    // c[8h + 4k + j]: rows 8h..8h+7; k = 0 holds columns j and 8 + j, k = 1 columns 4 + j, 12 + j.
    let c: [__m512; 16] = std::array::from_fn(|n| {
        let (h, k, j) = (n / 8, (n / 4) % 2, n % 4);
        let (x, y) = (b[8 * h + j], b[8 * h + 4 + j]);
        if k == 0 { _mm512_shuffle_f32x4::<0x88>(x, y) } else { _mm512_shuffle_f32x4::<0xDD>(x, y) }
    });
    std::array::from_fn(|col| {
        let (hi, k, j) = (col / 8, (col / 4) % 2, col % 4);
        let (x, y) = (c[4 * k + j], c[8 + 4 * k + j]);
        if hi == 0 { _mm512_shuffle_f32x4::<0x88>(x, y) } else { _mm512_shuffle_f32x4::<0xDD>(x, y) }
    })
}

/// In-register transpose of 8 rows of 8 floats: out[j][i] = rows[i][j].
#[inline]
#[target_feature(enable = "avx")]
pub unsafe fn transpose8(r: [__m256; 8]) -> [__m256; 8] {
    // Per 128-bit lane: a[2i] = (r2i[0], r2i+1[0], r2i[1], r2i+1[1]), a[2i + 1] the same of
    // elements 2 and 3.
    let a: [__m256; 8] = std::array::from_fn(|i| {
        let (x, y) = (r[i & !1], r[i | 1]);
        if i % 2 == 0 { _mm256_unpacklo_ps(x, y) } else { _mm256_unpackhi_ps(x, y) }
    });
    // b[4h + j], per lane: element j (of the lane's four) of rows 4h..4h+3.
    let b: [__m256; 8] = std::array::from_fn(|n| {
        let (h, j) = (n / 4, n % 4);
        let (x, y) = (a[4 * h + j / 2], a[4 * h + 2 + j / 2]);
        if j % 2 == 0 { _mm256_shuffle_ps::<0x44>(x, y) } else { _mm256_shuffle_ps::<0xEE>(x, y) }
    });
    // Column j < 4 joins the low lanes of b[j] and b[4 + j]; column 4 + j their high lanes.
    std::array::from_fn(|col| {
        let (x, y) = (b[col % 4], b[4 + col % 4]);
        if col < 4 { _mm256_permute2f128_ps::<0x20>(x, y) } else { _mm256_permute2f128_ps::<0x31>(x, y) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transpose8_swaps_rows_and_columns() {
        if !std::is_x86_feature_detected!("avx") {
            return;
        }
        let m: Vec<f32> = (0..64).map(|v| v as f32).collect();
        // SAFETY: AVX is present; every load and store is of 8 in-bounds floats.
        unsafe {
            let rows: [__m256; 8] = std::array::from_fn(|i| _mm256_loadu_ps(m[8 * i..].as_ptr()));
            let cols = transpose8(rows);
            let mut out = [0f32; 64];
            for (j, c) in cols.iter().enumerate() {
                _mm256_storeu_ps(out[8 * j..].as_mut_ptr(), *c);
            }
            for (i, j) in (0..8).flat_map(|i| (0..8).map(move |j| (i, j))) {
                assert_eq!(out[8 * j + i], m[8 * i + j], "({i}, {j})");
            }
        }
    }
}
