//! Winograd F(4×4, 3×3) transforms (points 0, ±1, ±2, ∞), and F(2×2, 3×3) in `f2`, on lanes:
//! every value is an array of `L` independent problems (tiles, filters or output channels), so
//! the loops vectorize.
//!
//! The textbook filter matrix G has entries 1/4, 1/6, 1/12, 1/24, which would make
//! small-integer data inexact. We use the scaled G' = diag(4, 6, 6, 24, 24, 1)·G (integer), and
//! undo the scaling in the output transform: with A'' = diag(6, 4, 4, 1, 1, 24)·A (integer),
//! Y = A''ᵀ (U' ⊙ V) A'' / 576. Integer data then stays exact up to the final division,
//! which is correctly rounded for exact quotients (`div576`).

pub const L: usize = 16;
pub type Lanes = [f32; L];

/// G' applied to one column (a, b, c) of a 3×3 filter: six rows.
#[inline(always)]
fn g_rows(a: &Lanes, b: &Lanes, c: &Lanes) -> [Lanes; 6] {
    let mut r = [[0f32; L]; 6];
    for l in 0..L {
        let (a, b, c) = (a[l], b[l], c[l]);
        let (ac, b2) = (a + c, 2.0 * b);
        r[0][l] = a;
        r[1][l] = -(ac + b);
        r[2][l] = b - ac;
        r[3][l] = (a + 4.0 * c) + b2;
        r[4][l] = (a + 4.0 * c) - b2;
        r[5][l] = c;
    }
    r
}

/// U' = G' g G'ᵀ (6×6, row-major) of 3×3 filters g (row-major).
#[inline(always)]
pub fn filter(g: &[Lanes; 9]) -> [Lanes; 36] {
    let mut t = [[[0f32; L]; 3]; 6]; // t[i][col] = (G' g)[i][col]
    for col in 0..3 {
        let r = g_rows(&g[col], &g[3 + col], &g[6 + col]);
        for i in 0..6 {
            t[i][col] = r[i];
        }
    }
    let mut u = [[0f32; L]; 36];
    for i in 0..6 {
        let r = g_rows(&t[i][0], &t[i][1], &t[i][2]);
        u[6 * i..6 * i + 6].copy_from_slice(&r);
    }
    u
}

/// Bᵀ applied to six values d0..d5.
#[inline(always)]
fn b_rows(d: [&Lanes; 6]) -> [Lanes; 6] {
    let mut r = [[0f32; L]; 6];
    for l in 0..L {
        let [d0, d1, d2, d3, d4, d5] = d.map(|v| v[l]);
        r[0][l] = (4.0 * d0 - 5.0 * d2) + d4;
        r[1][l] = (d3 + d4) - 4.0 * (d1 + d2);
        r[2][l] = (d4 - d3) + 4.0 * (d1 - d2);
        r[3][l] = (d4 - d2) + 2.0 * (d3 - d1);
        r[4][l] = (d4 - d2) - 2.0 * (d3 - d1);
        r[5][l] = (4.0 * d1 - 5.0 * d3) + d5;
    }
    r
}

/// V = Bᵀ d B of 6×6 input tiles d (row-major).
#[inline(always)]
pub fn input(d: &[Lanes; 36]) -> [Lanes; 36] {
    let mut t = [[[0f32; L]; 6]; 6]; // t[i][col] = (Bᵀ d)[i][col]
    for col in 0..6 {
        let r = b_rows([&d[col], &d[6 + col], &d[12 + col], &d[18 + col], &d[24 + col], &d[30 + col]]);
        for i in 0..6 {
            t[i][col] = r[i];
        }
    }
    let mut v = [[0f32; L]; 36];
    for i in 0..6 {
        let c = &t[i];
        let r = b_rows([&c[0], &c[1], &c[2], &c[3], &c[4], &c[5]]);
        v[6 * i..6 * i + 6].copy_from_slice(&r);
    }
    v
}

/// A''ᵀ applied to six values m0..m5: four rows.
#[inline(always)]
fn a_rows(m: [&Lanes; 6]) -> [Lanes; 4] {
    let mut r = [[0f32; L]; 4];
    for l in 0..L {
        let [m0, m1, m2, m3, m4, m5] = m.map(|v| v[l]);
        let (s12, d12, s34, d34) = (m1 + m2, m1 - m2, m3 + m4, m3 - m4);
        r[0][l] = (6.0 * m0 + 4.0 * s12) + s34;
        r[1][l] = 4.0 * d12 + 2.0 * d34;
        r[2][l] = 4.0 * s12 + 4.0 * s34;
        r[3][l] = (4.0 * d12 + 8.0 * d34) + 24.0 * m5;
    }
    r
}

/// x / 9, correctly rounded whenever the quotient is exact in f32 (one Newton correction with
/// an exact FMA residual); a division instruction would cost ~10 % of a small layer.
#[inline(always)]
fn div9(x: f32) -> f32 {
    const R: f32 = 1.0 / 9.0;
    let q = x * R;
    let r = (-9.0f32).mul_add(q, x);
    r.mul_add(R, q)
}

/// Y = A''ᵀ m A'' / 576: the 4×4 outputs (row-major) of the 36 GEMM results m (6×6).
#[inline(always)]
pub fn output(m: &[Lanes; 36]) -> [Lanes; 16] {
    let mut t = [[[0f32; L]; 6]; 4]; // t[i][col] = (A''ᵀ m)[i][col]
    for col in 0..6 {
        let r = a_rows([&m[col], &m[6 + col], &m[12 + col], &m[18 + col], &m[24 + col], &m[30 + col]]);
        for i in 0..4 {
            t[i][col] = r[i];
        }
    }
    let mut y = [[0f32; L]; 16];
    for i in 0..4 {
        let c = &t[i];
        let r = a_rows([&c[0], &c[1], &c[2], &c[3], &c[4], &c[5]]);
        for (j, row) in r.iter().enumerate() {
            // 576 = 64·9: the 1/64 is exact.
            y[4 * i + j] = row.map(|v| div9(v * (1.0 / 64.0)));
        }
    }
    y
}

/// Winograd F(2×2, 3×3) (points 0, ±1, ∞) on lanes, in the first 16 entries of the same
/// 36-entry arrays (row-major 4×4). The textbook G has entries ½; G' = diag(1, 2, 2, 1)·G is
/// integer, undone by A'' = diag(2, 1, 1, 2)·A: Y = A''ᵀ (U' ⊙ V) A'' / 4, exact for
/// small-integer data.
pub mod f2 {
    use super::{Lanes, L};

    /// G' applied to one column (a, b, c) of a 3×3 filter: four rows.
    #[inline(always)]
    fn g_rows(a: &Lanes, b: &Lanes, c: &Lanes) -> [Lanes; 4] {
        let mut r = [[0f32; L]; 4];
        for l in 0..L {
            let (a, b, c) = (a[l], b[l], c[l]);
            r[0][l] = a;
            r[1][l] = (a + c) + b;
            r[2][l] = (a + c) - b;
            r[3][l] = c;
        }
        r
    }

    /// U' = G' g G'ᵀ (4×4 in the first 16 entries) of 3×3 filters g (row-major).
    #[inline(always)]
    pub fn filter(g: &[Lanes; 9]) -> [Lanes; 36] {
        let mut t = [[[0f32; L]; 3]; 4]; // t[i][col] = (G' g)[i][col]
        for col in 0..3 {
            let r = g_rows(&g[col], &g[3 + col], &g[6 + col]);
            for i in 0..4 {
                t[i][col] = r[i];
            }
        }
        let mut u = [[0f32; L]; 36];
        for i in 0..4 {
            let r = g_rows(&t[i][0], &t[i][1], &t[i][2]);
            u[4 * i..4 * i + 4].copy_from_slice(&r);
        }
        u
    }

    /// Bᵀ applied to four values.
    #[inline(always)]
    fn b_rows(d: [&Lanes; 4]) -> [Lanes; 4] {
        let mut r = [[0f32; L]; 4];
        for l in 0..L {
            let [d0, d1, d2, d3] = d.map(|v| v[l]);
            r[0][l] = d0 - d2;
            r[1][l] = d1 + d2;
            r[2][l] = d2 - d1;
            r[3][l] = d1 - d3;
        }
        r
    }

    /// V = Bᵀ d B of 4×4 input tiles d (the first 16 entries, row-major).
    #[inline(always)]
    pub fn input(d: &[Lanes; 36]) -> [Lanes; 36] {
        let mut t = [[[0f32; L]; 4]; 4]; // t[i][col] = (Bᵀ d)[i][col]
        for col in 0..4 {
            let r = b_rows([&d[col], &d[4 + col], &d[8 + col], &d[12 + col]]);
            for i in 0..4 {
                t[i][col] = r[i];
            }
        }
        let mut v = [[0f32; L]; 36];
        for i in 0..4 {
            let c = &t[i];
            let r = b_rows([&c[0], &c[1], &c[2], &c[3]]);
            v[4 * i..4 * i + 4].copy_from_slice(&r);
        }
        v
    }

    /// A''ᵀ applied to four values: two rows.
    #[inline(always)]
    fn a_rows(m: [&Lanes; 4]) -> [Lanes; 2] {
        let mut r = [[0f32; L]; 2];
        for l in 0..L {
            let [m0, m1, m2, m3] = m.map(|v| v[l]);
            r[0][l] = (2.0 * m0 + m1) + m2;
            r[1][l] = (m1 - m2) - 2.0 * m3;
        }
        r
    }

    /// Y = A''ᵀ m A'' / 4: the 2×2 outputs (row-major, the first 4 entries) of the 16 GEMM
    /// results m (4×4).
    #[inline(always)]
    pub fn output(m: &[Lanes; 36]) -> [Lanes; 16] {
        let mut t = [[[0f32; L]; 4]; 2]; // t[i][col] = (A''ᵀ m)[i][col]
        for col in 0..4 {
            let r = a_rows([&m[col], &m[4 + col], &m[8 + col], &m[12 + col]]);
            for i in 0..2 {
                t[i][col] = r[i];
            }
        }
        let mut y = [[0f32; L]; 16];
        for i in 0..2 {
            let c = &t[i];
            let r = a_rows([&c[0], &c[1], &c[2], &c[3]]);
            for (j, row) in r.iter().enumerate() {
                y[2 * i + j] = row.map(|v| v * 0.25);
            }
        }
        y
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One 4×4 tile and one filter through the F(2×2) transforms equals the direct 2×2
    /// correlation.
    #[test]
    fn f2_transforms_compute_the_correlation() {
        let mut s = 11u64;
        let mut rnd = || {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 33) % 7) as f32 - 3.0
        };
        let mut d = [[0f32; L]; 36];
        for e in d.iter_mut().take(16) {
            *e = std::array::from_fn(|_| rnd());
        }
        let g: [Lanes; 9] = std::array::from_fn(|_| std::array::from_fn(|_| rnd()));
        let (u, v) = (f2::filter(&g), f2::input(&d));
        let m: [Lanes; 36] = std::array::from_fn(|x| std::array::from_fn(|l| u[x][l] * v[x][l]));
        let y = f2::output(&m);
        for l in 0..L {
            for i in 0..2 {
                for j in 0..2 {
                    let want: f32 = (0..9).map(|r| d[(i + r / 3) * 4 + j + r % 3][l] * g[r][l]).sum();
                    assert_eq!(y[2 * i + j][l], want, "lane {l} output ({i}, {j})");
                }
            }
        }
    }

    /// One 6×6 tile and one filter through the transforms equals the direct 4×4 correlation.
    #[test]
    fn transforms_compute_the_correlation() {
        let mut s = 7u64;
        let mut rnd = || {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 33) % 5) as f32 - 2.0
        };
        let d: [Lanes; 36] = std::array::from_fn(|_| std::array::from_fn(|_| rnd()));
        let g: [Lanes; 9] = std::array::from_fn(|_| std::array::from_fn(|_| rnd()));
        let (u, v) = (filter(&g), input(&d));
        let m: [Lanes; 36] = std::array::from_fn(|x| std::array::from_fn(|l| u[x][l] * v[x][l]));
        let y = output(&m);
        for l in 0..L {
            for i in 0..4 {
                for j in 0..4 {
                    let want: f32 = (0..9).map(|r| d[(i + r / 3) * 6 + j + r % 3][l] * g[r][l]).sum();
                    assert_eq!(y[4 * i + j][l], want, "lane {l} output ({i}, {j})");
                }
            }
        }
    }
}
