//! AVX-512 register transposes shared by the CPU kernels (Winograd output transform, the 1×1
//! convolution's W packing and tile stores).

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
