//! Comparison helpers and seeded fillers.

mod support;

use support::layouts::{channels_last, gapped, packed};
use conflux::reference::*;
use conflux::DataType;

#[test]
fn exact_match_passes_and_errors_are_measured() {
    let b = [1.0, -2.0, 3.0];
    assert_eq!(check(&b, &b, 0.0), Ok(()));
    let c = Comparison::new(&b, &b);
    assert_eq!((c.rel_l2, c.max_abs, c.non_finite), (0.0, 0.0, false));
    // a − b = (0, 0, 0.3); ‖b‖ = √14 → rel = 0.3/√14 ≈ 0.0802.
    let a = [1.0, -2.0, 3.3];
    let rel = rel_l2_error(&a, &b);
    assert!((rel - 0.3 / 14f64.sqrt()).abs() < 1e-12);
    assert!((max_abs_error(&a, &b) - 0.3).abs() < 1e-12);
    assert!(check(&a, &b, 0.09).is_ok());
    let e = check(&a, &b, 0.08).unwrap_err();
    assert!(e.contains("relative L2"), "{e}");
}

#[test]
fn huge_finite_values_do_not_overflow_the_norms() {
    // (1e300)² overflows; the scaled norms still give the true relative error 1e-7.
    let b = [1e300, -2e300];
    let a = [1e300 * (1.0 + 1e-7), -2e300 * (1.0 + 1e-7)];
    assert!((rel_l2_error(&a, &b) - 1e-7).abs() < 1e-12);
    assert!(check(&a, &b, 1e-6).is_ok());
    assert!(check(&[-1e300, 2e300], &b, 1.0).is_err());
    assert_eq!(rel_l2_error(&[1e-300, 0.0], &[0.0, 0.0]), 1e-300);
}

#[test]
fn zero_reference_uses_absolute_norm() {
    let b = [0.0; 4];
    assert_eq!(rel_l2_error(&[0.0; 4], &b), 0.0);
    // ‖a − 0‖ = √(9 + 16) = 5, not a division by zero.
    assert_eq!(rel_l2_error(&[3.0, 4.0, 0.0, 0.0], &b), 5.0);
    assert!(check(&[1e-13, 0.0, 0.0, 0.0], &b, 1e-12).is_ok());
    assert!(check(&[1e-3, 0.0, 0.0, 0.0], &b, 1e-5).is_err());
}

#[test]
fn nan_never_passes() {
    let b = [1.0, 2.0, 3.0];
    let e = check(&[1.0, f64::NAN, 3.0], &b, f64::INFINITY).unwrap_err();
    assert!(e.contains("non-finite") && e.contains("at 1"), "{e}");
    assert!(Comparison::new(&[1.0, f64::NAN, 3.0], &b).non_finite);
    // Not even against a NaN reference.
    assert!(check(&[f64::NAN], &[f64::NAN], f64::INFINITY).is_err());
    // And the raw metrics propagate it instead of hiding it.
    assert!(rel_l2_error(&[f64::NAN], &[1.0]).is_nan());
    assert!(max_abs_error(&[1.0, f64::NAN], &[1.0, 1.0]).is_nan());
    assert!(has_non_finite(&[0.0, f64::NAN]) && !has_non_finite(&[0.0, 1e308]));
}

#[test]
fn infinity_fails_unless_the_reference_has_it() {
    let b = [1.0, 2.0];
    assert!(check(&[1.0, f64::INFINITY], &b, f64::INFINITY).is_err());
    assert!(check(&[f64::NEG_INFINITY, 2.0], &b, 1.0).is_err());
    assert!(has_non_finite(&[f64::INFINITY]));
    // The same infinity where the reference has one (e.g. BN with ε = 0, σ̂² = 0) passes
    // and is left out of the norms; the opposite sign or a finite value fails.
    assert!(check(&[1.0, f64::INFINITY], &[1.0, f64::INFINITY], 0.0).is_ok());
    assert!(check(&[1.0, f64::NEG_INFINITY], &[1.0, f64::INFINITY], 1.0).is_err());
    assert!(check(&[1.0, 5.0], &[1.0, f64::INFINITY], 1.0).is_err());
    assert!(check(&[1.0], &[1.0, 2.0], 1.0).unwrap_err().contains("length"));
}

#[test]
fn tolerances_per_dtype() {
    assert_eq!(tolerance(DataType::Double), 1e-12);
    assert_eq!(tolerance(DataType::Float), 1e-5);
    assert_eq!(tolerance(DataType::Half), 1e-2);
    assert_eq!(tolerance(DataType::BFloat16), 2e-2);
    // The narrow tolerances still catch a one-element indexing bug in a modest tensor:
    // swapping two of 100 unit-scale values gives a relative error of order 1e-1.
    let b = fill_normal(3, 100);
    let mut a = b.clone();
    a.swap(10, 11);
    assert!(rel_l2_error(&a, &b) > 4.0 * tolerance(DataType::BFloat16));
}

#[test]
fn fillers_are_seeded_and_shaped() {
    assert_eq!(fill_normal(5, 50), fill_normal(5, 50));
    assert_ne!(fill_normal(5, 50), fill_normal(6, 50));
    // SplitMix64's first output for seed 0 (reference value of the published algorithm).
    assert_eq!(SplitMix64::new(0).next_u64(), 0xE220_A839_7B1D_CDAF);
    let n = fill_normal(1, 20_000);
    let mean = n.iter().sum::<f64>() / n.len() as f64;
    let var = n.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n.len() as f64;
    assert!(mean.abs() < 0.03 && (var - 1.0).abs() < 0.05, "{mean} {var}");
    let u = fill_uniform(2, 1000, -1.0, 3.0);
    assert!(u.iter().all(|&v| (-1.0..3.0).contains(&v)));
    let k = fill_small_int(3, 1000, -2, 2);
    assert!(k.iter().all(|&v| v.fract() == 0.0 && (-2.0..=2.0).contains(&v)));
    for v in -2..=2 {
        assert!(k.contains(&(v as f64)), "value {v} never drawn");
    }
    assert_eq!(exact_integer_limit(DataType::Half), 2048.0);
    assert_eq!(exact_integer_limit(DataType::BFloat16), 256.0);
}

#[test]
fn fill_for_poisons_the_gaps() {
    for d in [packed(&[2, 3, 4, 5]), channels_last(&[2, 3, 4, 5]), gapped(&[2, 3, 4, 5]), gapped(&[1, 2, 2, 2, 3])] {
        let v = fill_for(&d, Fill::SmallInt(-2, 2), 1);
        assert_eq!(v.len(), d.element_space());
        let nan = v.iter().filter(|x| x.is_nan()).count();
        assert_eq!(nan, d.element_space() - d.element_count(), "{}", d.key());
        assert!(!has_non_finite(&gather(&d, &v)));
        // The same logical values whatever the layout.
        assert_eq!(gather(&d, &v), fill_small_int(1, d.element_count(), -2, 2));
    }
    assert!(poisoned(&packed(&[2, 2])).iter().all(|v| v.is_nan()));
}
