//! Comparing a result with the reference: relative L2 error, max absolute error, and a
//! strict rule for non-finite values (a NaN never passes; an infinity passes only where
//! the reference has the same infinity).

use crate::types::DataType;

/// ‖a − b‖₂ / ‖b‖₂ over all elements; when ‖b‖ = 0 the absolute ‖a − b‖₂ is returned, so an
/// all-zero reference still demands a (near-)zero result. NaN anywhere gives NaN.
pub fn rel_l2_error(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len(), "rel_l2_error: lengths differ");
    // Norms of values divided by the largest magnitude, so squares of huge (finite) values
    // do not overflow to inf/inf = NaN. (`f64::max` skips NaN; a NaN still reaches `diff`.)
    let s = a.iter().chain(b).fold(0.0f64, |m, v| m.max(v.abs()));
    let s = if s > 0.0 && s.is_finite() { s } else { 1.0 };
    let diff: f64 = a.iter().zip(b).map(|(x, y)| (x / s - y / s).powi(2)).sum::<f64>().sqrt();
    let norm: f64 = b.iter().map(|y| (y / s).powi(2)).sum::<f64>().sqrt();
    if norm == 0.0 { diff * s } else { diff / norm }
}

/// max |a − b| (NaN anywhere gives NaN, unlike `f64::max`, which would drop it).
pub fn max_abs_error(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len(), "max_abs_error: lengths differ");
    let mut m = 0.0f64;
    for (x, y) in a.iter().zip(b) {
        let d = (x - y).abs();
        if d.is_nan() {
            return f64::NAN;
        }
        m = m.max(d);
    }
    m
}

/// True when any value is NaN or ±∞.
pub fn has_non_finite(a: &[f64]) -> bool {
    a.iter().any(|v| !v.is_finite())
}

/// The outcome of comparing a result `a` with a reference `b`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Comparison {
    /// Relative L2 error over the positions where both are finite.
    pub rel_l2: f64,
    /// Max absolute error over the same positions.
    pub max_abs: f64,
    /// Some position is non-finite in `a` or `b` without being the same infinity in both
    /// (NaN never counts as matching, not even NaN against NaN).
    pub non_finite: bool,
}

/// The first position where a and b disagree on finiteness, if any.
fn first_non_finite_mismatch(a: &[f64], b: &[f64]) -> Option<usize> {
    a.iter().zip(b).position(|(&x, &y)| {
        let both_same_inf = x.is_infinite() && x == y;
        (!x.is_finite() || !y.is_finite()) && !both_same_inf
    })
}

impl Comparison {
    pub fn new(a: &[f64], b: &[f64]) -> Comparison {
        assert_eq!(a.len(), b.len(), "Comparison: lengths differ");
        let (fa, fb): (Vec<f64>, Vec<f64>) =
            a.iter().zip(b).filter(|(x, y)| x.is_finite() && y.is_finite()).map(|(x, y)| (*x, *y)).unzip();
        Comparison {
            rel_l2: rel_l2_error(&fa, &fb),
            max_abs: max_abs_error(&fa, &fb),
            non_finite: first_non_finite_mismatch(a, b).is_some(),
        }
    }

    /// Ok when lengths match, no non-finite mismatch exists and rel_l2 ≤ tol; the error
    /// text says which rule failed and where.
    pub fn check(a: &[f64], b: &[f64], tol: f64) -> Result<(), String> {
        if a.len() != b.len() {
            return Err(format!("length mismatch: result has {}, reference has {}", a.len(), b.len()));
        }
        if let Some(i) = first_non_finite_mismatch(a, b) {
            let count = a.iter().zip(b).filter(|(x, y)| !(x.is_finite() && y.is_finite() || x.is_infinite() && x == y)).count();
            return Err(format!("non-finite mismatch at {count} positions; first at {i}: result {} vs reference {}", a[i], b[i]));
        }
        let c = Comparison::new(a, b);
        // A NaN error (possible only from non-finite inputs) must not pass.
        if c.rel_l2.is_nan() || c.rel_l2 > tol {
            let worst = a.iter().zip(b).enumerate().max_by(|(_, p), (_, q)| (p.0 - p.1).abs().total_cmp(&(q.0 - q.1).abs())).map(|(i, _)| i).unwrap_or(0);
            return Err(format!(
                "relative L2 error {:.3e} > tolerance {tol:.1e} (max abs {:.3e} at {worst}: result {} vs reference {})",
                c.rel_l2, c.max_abs, a[worst], b[worst]
            ));
        }
        Ok(())
    }
}

/// `Comparison::check` as a free function.
pub fn check(a: &[f64], b: &[f64], tol: f64) -> Result<(), String> {
    Comparison::check(a, b, tol)
}

/// Relative-L2 tolerance for results computed in `dtype` against the f64 reference on the
/// same (already rounded) inputs. Unit roundoffs u: f64 2^-53, f32 2^-24, f16 2^-11 ≈ 4.9e-4,
/// bf16 2^-8 ≈ 3.9e-3.
/// - Double 1e-12: summation-order differences only.
/// - Float 1e-5: f32 accumulation over reductions of up to ~10^4 terms.
/// - Half 1e-2: ~20·u; storing the output alone costs ~u/√3 rms, chained ops and
///   cancellation in sums multiply that, still well inside.
/// - BFloat16 2e-2: bf16's u is 8× f16's, so 1e-2 would be only ~2.5·u and chained ops
///   (conv → bias → activation, each stored in bf16) with cancellation exceed it
///   for correct kernels; 2e-2 (~5·u) keeps a margin while an indexing bug (error ~1) still
///   fails by far.
/// - Float8 (e4m3, u = 2^-4) 1e-1, BFloat8 (e5m2, u = 2^-3) 2e-1, integer types exact.
/// Relative-L2 tolerance for f32 convolutions on TF32 tensor cores: the multiplier inputs
/// keep 10 mantissa bits (the hardware drops the other 13, so each product is off by up to
/// 2^-9 relative and biased toward zero), sums stay f32. Measured errors are ~1e-3.
pub const TF32_TOLERANCE: f64 = 5e-3;

pub fn tolerance(dtype: DataType) -> f64 {
    match dtype {
        DataType::Double => 1e-12,
        DataType::Float => 1e-5,
        DataType::Half => 1e-2,
        DataType::BFloat16 => 2e-2,
        DataType::Float8 => 1e-1,
        DataType::BFloat8 => 2e-1,
        DataType::Int8 | DataType::Int32 | DataType::Int64 => 0.0,
    }
}
