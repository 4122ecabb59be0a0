//! Power-of-two FFTs on lanes (every value an array of `L` independent problems: tiles or
//! filters), for the FFT convolution (`fft_conv.rs`): an n-point complex FFT, and the 2-D
//! real FFT of an s×s block (s·(s/2 + 1) bins) with its inverse, which returns only the rows
//! and columns the convolution keeps.
//!
//! Real data goes two rows per complex FFT: z = a + i·b gives A[k] = (Z[k] + conj Z[n−k])/2
//! and B[k] = (Z[k] − conj Z[n−k])/(2i); the inverse packs two Hermitian rows the same way.

pub use crate::backend::cpu::winograd::math::{Lanes, L};

/// The constants of an n-point FFT (n a power of two, 2 ≤ n ≤ 64).
pub struct Fft {
    n: usize,
    /// Bit-reversed index of each position.
    rev: Vec<usize>,
    /// exp(−2πi·j/n) for j < n/2, computed in f64 and rounded once.
    wr: Vec<f32>,
    wi: Vec<f32>,
}

/// A block of complex lanes: `re[i]`, `im[i]`.
pub struct Complex<'a> {
    pub re: &'a mut [Lanes],
    pub im: &'a mut [Lanes],
}

impl Fft {
    pub fn new(n: usize) -> Fft {
        assert!(n.is_power_of_two() && (2..=64).contains(&n), "fft: size {n}");
        let bits = n.trailing_zeros();
        let rev = (0..n).map(|i| i.reverse_bits() >> (usize::BITS - bits)).collect();
        let angle = |j: usize| -2.0 * std::f64::consts::PI * j as f64 / n as f64;
        Fft { n, rev, wr: (0..n / 2).map(|j| angle(j).cos() as f32).collect(), wi: (0..n / 2).map(|j| angle(j).sin() as f32).collect() }
    }

    pub fn n(&self) -> usize { self.n }

    /// In place: element i of the sequence is at `off + i·stride`. Forward is Σ x·e^{−2πi·jk/n};
    /// inverse uses e^{+…} and is not divided by n.
    #[inline(always)]
    pub fn run(&self, z: &mut Complex, off: usize, stride: usize, inverse: bool) {
        let n = self.n;
        let at = |i: usize| off + i * stride;
        for i in 0..n {
            let j = self.rev[i];
            if j > i {
                // By value, not `slice::swap`: that went through memmove calls of 64 bytes.
                let (p, q) = (at(i), at(j));
                let (r, m) = (z.re[p], z.im[p]);
                z.re[p] = z.re[q];
                z.im[p] = z.im[q];
                z.re[q] = r;
                z.im[q] = m;
            }
        }
        let sign = if inverse { -1.0 } else { 1.0 };
        let mut half = 1;
        while half < n {
            let step = n / (2 * half);
            for j in 0..half {
                let (wr, wi) = (self.wr[j * step], sign * self.wi[j * step]);
                for start in (0..n).step_by(2 * half) {
                    butterfly(z, at(start + j), at(start + j + half), wr, wi);
                }
            }
            half *= 2;
        }
    }
}

/// (z[p], z[q]) ← (z[p] + w·z[q], z[p] − w·z[q]). Whole lane arrays in and out, so the lane
/// loop vectorizes (element-wise updates of the slices stayed scalar).
#[inline(always)]
fn butterfly(z: &mut Complex, p: usize, q: usize, wr: f32, wi: f32) {
    let (ar, ai, br, bi) = (z.re[p], z.im[p], z.re[q], z.im[q]);
    let (mut pr, mut pi, mut qr, mut qi) = ([0f32; L], [0f32; L], [0f32; L], [0f32; L]);
    for l in 0..L {
        let tr = br[l] * wr - bi[l] * wi;
        let ti = br[l] * wi + bi[l] * wr;
        pr[l] = ar[l] + tr;
        pi[l] = ai[l] + ti;
        qr[l] = ar[l] - tr;
        qi[l] = ai[l] - ti;
    }
    z.re[p] = pr;
    z.im[p] = pi;
    z.re[q] = qr;
    z.im[q] = qi;
}

/// Bins per row of an s×s real block: s/2 + 1.
pub fn half(s: usize) -> usize { s / 2 + 1 }

/// The 2-D FFT of the real s×s block `a` (row-major; rows from `rows` on are zero and not
/// read) into `out`: bin (u, v), u < s, v ≤ s/2, at u·(s/2 + 1) + v. `row` is scratch of 2·s
/// lanes.
#[inline(always)]
pub fn forward_2d(f: &Fft, a: &[Lanes], rows: usize, out: &mut Complex, row: &mut Complex) {
    let (s, h) = (f.n(), half(f.n()));
    // Rows, two at a time: z = a[r] + i·a[r + 1].
    for r in (0..s).step_by(2) {
        if r >= rows {
            for v in 0..h {
                out.re[r * h + v] = [0.0; L];
                out.im[r * h + v] = [0.0; L];
                out.re[(r + 1) * h + v] = [0.0; L];
                out.im[(r + 1) * h + v] = [0.0; L];
            }
            continue;
        }
        row.re[..s].copy_from_slice(&a[r * s..(r + 1) * s]);
        if r + 1 < rows {
            row.im[..s].copy_from_slice(&a[(r + 1) * s..(r + 2) * s]);
        } else {
            row.im[..s].iter_mut().for_each(|v| *v = [0.0; L]);
        }
        f.run(row, 0, 1, false);
        for v in 0..h {
            let w = (s - v) % s;
            let (zr, zi, cr, ci) = (row.re[v], row.im[v], row.re[w], row.im[w]);
            let (mut ar, mut ai, mut br, mut bi) = ([0f32; L], [0f32; L], [0f32; L], [0f32; L]);
            for l in 0..L {
                // A = (Z[v] + conj Z[w]) / 2, B = (Z[v] − conj Z[w]) / (2i).
                ar[l] = 0.5 * (zr[l] + cr[l]);
                ai[l] = 0.5 * (zi[l] - ci[l]);
                br[l] = 0.5 * (zi[l] + ci[l]);
                bi[l] = 0.5 * (cr[l] - zr[l]);
            }
            out.re[r * h + v] = ar;
            out.im[r * h + v] = ai;
            out.re[(r + 1) * h + v] = br;
            out.im[(r + 1) * h + v] = bi;
        }
    }
    // Columns.
    for v in 0..h {
        f.run(out, v, h, false);
    }
}

/// The inverse of `forward_2d` times s², for the first `rows` rows and `cols` columns only,
/// into `a` (row-major, s per row). `y` (bins as `forward_2d` writes them) is overwritten;
/// the imaginary parts of the v = 0 and v = s/2 columns after the column pass are taken as
/// zero (they are for a Hermitian spectrum). `row` is scratch of 2·s lanes.
#[inline(always)]
pub fn inverse_2d(f: &Fft, y: &mut Complex, rows: usize, cols: usize, a: &mut [Lanes], row: &mut Complex) {
    let (s, h) = (f.n(), half(f.n()));
    for v in 0..h {
        f.run(y, v, h, true);
    }
    // Rows, two at a time: z[v] = X[v] + i·Y[v] over the whole row, X and Y extended by
    // X[s − v] = conj X[v].
    for r in (0..rows).step_by(2) {
        let r2 = (r + 1).min(s - 1);
        for v in 0..s {
            let (xr, xi, yr, yi) = if v < h {
                let (o, o2) = (r * h + v, r2 * h + v);
                let edge = v == 0 || v == s / 2;
                let xi = if edge { [0.0; L] } else { y.im[o] };
                let yi = if edge { [0.0; L] } else { y.im[o2] };
                (y.re[o], xi, y.re[o2], yi)
            } else {
                let (o, o2) = (r * h + s - v, r2 * h + s - v);
                let (mut xi, mut yi) = (y.im[o], y.im[o2]);
                for l in 0..L {
                    xi[l] = -xi[l];
                    yi[l] = -yi[l];
                }
                (y.re[o], xi, y.re[o2], yi)
            };
            let (mut zr, mut zi) = ([0f32; L], [0f32; L]);
            for l in 0..L {
                zr[l] = xr[l] - yi[l];
                zi[l] = xi[l] + yr[l];
            }
            row.re[v] = zr;
            row.im[v] = zi;
        }
        f.run(row, 0, 1, true);
        a[r * s..r * s + cols].copy_from_slice(&row.re[..cols]);
        if r + 1 < rows {
            a[(r + 1) * s..(r + 1) * s + cols].copy_from_slice(&row.im[..cols]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 2-D DFT in f64 of lane 0.
    fn dft2(a: &[Lanes], s: usize) -> Vec<(f64, f64)> {
        let mut out = vec![];
        for u in 0..s {
            for v in 0..half(s) {
                let (mut re, mut im) = (0.0, 0.0);
                for r in 0..s {
                    for c in 0..s {
                        let t = -2.0 * std::f64::consts::PI * ((u * r + v * c) % s) as f64 / s as f64;
                        re += a[r * s + c][0] as f64 * t.cos();
                        im += a[r * s + c][0] as f64 * t.sin();
                    }
                }
                out.push((re, im));
            }
        }
        out
    }

    #[test]
    fn forward_matches_the_dft_and_inverse_undoes_it() {
        for s in [2, 4, 8, 16, 32] {
            let f = Fft::new(s);
            let mut seed = 7u32;
            let mut a = vec![[0f32; L]; s * s];
            let rows = (s - 1).max(1);
            for (i, v) in a.iter_mut().enumerate().take(rows * s) {
                for (l, x) in v.iter_mut().enumerate() {
                    seed = seed.wrapping_mul(1664525).wrapping_add(1013904223);
                    *x = ((seed >> 9) as f32 / (1u32 << 23) as f32 - 0.5) * (1 + l + i % 3) as f32;
                }
            }
            let bins = s * half(s);
            let (mut re, mut im) = (vec![[0f32; L]; bins], vec![[0f32; L]; bins]);
            let (mut rr, mut ri) = (vec![[0f32; L]; s], vec![[0f32; L]; s]);
            forward_2d(&f, &a, rows, &mut Complex { re: &mut re, im: &mut im }, &mut Complex { re: &mut rr, im: &mut ri });
            for (b, (wr, wi)) in dft2(&a, s).into_iter().enumerate() {
                assert!((re[b][0] as f64 - wr).abs() < 1e-4 * s as f64 && (im[b][0] as f64 - wi).abs() < 1e-4 * s as f64, "s={s} bin {b}: {} {} vs {wr} {wi}", re[b][0], im[b][0]);
            }
            let mut back = vec![[f32::NAN; L]; s * s];
            let (keep_r, keep_c) = (s - 1, s.div_ceil(2));
            inverse_2d(&f, &mut Complex { re: &mut re, im: &mut im }, keep_r.max(1), keep_c, &mut back, &mut Complex { re: &mut rr, im: &mut ri });
            for r in 0..keep_r.max(1) {
                for c in 0..keep_c {
                    for l in 0..L {
                        let (got, want) = (back[r * s + c][l] / (s * s) as f32, a[r * s + c][l]);
                        assert!((got - want).abs() < 1e-5 * (1 + l) as f32, "s={s} ({r},{c}) lane {l}: {got} vs {want}");
                    }
                }
            }
        }
    }
}
