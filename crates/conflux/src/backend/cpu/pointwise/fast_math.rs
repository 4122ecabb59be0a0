//! Branch-free f32 exp and erfc for the CPU activations (SiLU, logistic, GELU):
//! plain arithmetic, fused multiply-adds, selects and bit casts that the compiler turns into
//! vector code inside a `simd!` function, where a libm call per element cost several times the
//! convolution's own store. Polynomials are evaluated with `mul_add`: one rounding per step and
//! half the operations where the CPU has FMA (without it, a libm `fmaf`, still exactly
//! rounded). So every path that evaluates these in a `simd!` function — whole vectors and single
//! elements alike (`activation::forward_one`) — gives the same bits on a given CPU.
//!
//! Accuracy (measured by the tests below against f64 over dense sweeps): exp within 2·10⁻⁷
//! relative, erfc within 6·10⁻⁷, GELU within 8·10⁻⁷ for x ≥ 0 and
//! 8·10⁻⁷ + 10⁻⁷·x² below (rounding x/√2 shifts erfc's argument; at x = −4, GELU is −1.3·10⁻⁴).

/// e^x. Inputs are clamped to [−87.34, 88.38] (results 1.2·10⁻³⁸ to 2.4·10³⁸: no infinities or
/// subnormals, which the callers below never need); NaN stays NaN.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // ln 2 split so that n·LN2_HI is exact for the n this range produces.
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    let x = x.clamp(-87.336_54, 88.376_26);
    let n = x.mul_add(LOG2E, 0.5).floor();
    let r = (-n).mul_add(LN2_LO, (-n).mul_add(LN2_HI, x));
    // e^r on |r| ≤ ln2/2 (Cephes' minimax coefficients).
    let p = 1.987_569_1e-4f32.mul_add(r, 1.398_199_9e-3).mul_add(r, 8.333_452e-3).mul_add(r, 4.166_579_6e-2).mul_add(r, 1.666_666_5e-1).mul_add(r, 5.000_000_1e-1);
    let e = (p * r).mul_add(r, r) + 1.0;
    // 2^n by its exponent bits, without a float-to-int conversion (Rust's saturating `as`
    // does not vectorize): n + 127 + 2²³ holds n + 127 in its low mantissa bits, and shifting
    // the bits left by 23 drops the rest. A NaN gives 0 here and its NaN carries through `e`.
    let biased = (n + (127.0 + 8_388_608.0)).to_bits();
    e * f32::from_bits(biased.wrapping_shl(23))
}

/// erfc z for z ≥ 0: a Chebyshev fit of erfc(z)·e^(z²) in t = 1/(1 + z/2) (Numerical Recipes'
/// `erfcc`, 1.2·10⁻⁷ in exact arithmetic), e^(−z²) taken in two factors so that its rounding
/// does not grow with z².
#[inline(always)]
pub fn erfc_nonneg(z: f32) -> f32 {
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = 0.170_872_77f32
        .mul_add(t, -0.822_152_23)
        .mul_add(t, 1.488_515_9)
        .mul_add(t, -1.135_203_9)
        .mul_add(t, 0.278_868_07)
        .mul_add(t, -0.186_288_06)
        .mul_add(t, 0.096_784_18)
        .mul_add(t, 0.374_091_96)
        .mul_add(t, 1.000_023_7)
        .mul_add(t, -1.265_512_2);
    // −z² in two parts: zh (z cut to 12 significant bits) squares exactly, and the rest is
    // small, so the exponent's rounding does not grow with z².
    let zh = f32::from_bits(z.to_bits() & 0xffff_f000);
    t * exp(-zh * zh) * exp((zh - z) * (zh + z) + poly)
}

/// GELU with erf: x·Φ(x) = ½x·erfc(−x/√2), computed without cancellation on either side.
#[inline(always)]
pub fn gelu(x: f32) -> f32 {
    let c = erfc_nonneg(x.abs() * std::f32::consts::FRAC_1_SQRT_2);
    let phi2 = if x < 0.0 { c } else { 2.0 - c };
    0.5 * x * phi2
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sweep(lo: f32, hi: f32, n: usize) -> impl Iterator<Item = f32> {
        (0..=n).map(move |i| lo + (hi - lo) * i as f32 / n as f32)
    }

    fn rel(got: f32, want: f64) -> f64 {
        (got as f64 - want).abs() / want.abs().max(f64::MIN_POSITIVE)
    }

    #[test]
    fn exp_is_within_2e_7_relative_and_keeps_nan() {
        let worst = sweep(-87.0, 88.0, 200_000).map(|x| rel(exp(x), (x as f64).exp())).fold(0.0, f64::max);
        assert!(worst < 2e-7, "exp: worst relative error {worst:e}");
        assert!(exp(f32::NAN).is_nan());
        assert_eq!(exp(0.0), 1.0);
        assert!(exp(f32::INFINITY).is_finite() && exp(f32::NEG_INFINITY) >= 0.0);
    }

    /// erfc in f64 by its continued fraction (large z) and series (small z): a reference that
    /// needs no libm erfc.
    fn erfc64(z: f64) -> f64 {
        if z < 0.0 {
            return 2.0 - erfc64(-z);
        }
        if z < 2.0 {
            // erf by its Maclaurin series.
            let mut sum = 0.0;
            let mut term = z;
            for n in 0..200 {
                sum += term / (2 * n + 1) as f64;
                term *= -z * z / (n + 1) as f64;
            }
            1.0 - sum * 2.0 / std::f64::consts::PI.sqrt()
        } else {
            let mut f = 0.0;
            for k in (1..200).rev() {
                f = (k as f64 / 2.0) / (z + f);
            }
            (-z * z).exp() / (z + f) / std::f64::consts::PI.sqrt()
        }
    }

    #[test]
    fn erfc_and_gelu_are_accurate_on_both_sides() {
        for z in sweep(0.0, 9.0, 50_000) {
            let bound = 6e-7;
            assert!(rel(erfc_nonneg(z), erfc64(z as f64)) < bound, "erfc({z}) = {} vs {}", erfc_nonneg(z), erfc64(z as f64));
        }
        for x in sweep(-12.0, 9.0, 20_000).filter(|x| *x != 0.0) {
            let z = x as f64 / std::f64::consts::SQRT_2;
            let want = 0.5 * x as f64 * erfc64(-z);
            // x/√2 is rounded: about 2·z²·6·10⁻⁸ more on the negative side.
            let bound = 8e-7 + if x < 0.0 { 2e-7 * z * z } else { 0.0 };
            assert!(rel(gelu(x), want) < bound, "gelu({x}) = {} vs {want}", gelu(x));
        }
        assert!(gelu(f32::NAN).is_nan());
    }
}
