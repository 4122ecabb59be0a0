use super::*;

fn canonical(f: Fp8, code: u8) -> u8 {
    if f.decode(code).is_nan() { (code & 0x80) | f.nan_code() } else { code }
}

#[test]
fn every_code_round_trips() {
    for f in [Fp8::E4M3, Fp8::E5M2] {
        for code in 0..=255u8 {
            let v = f.decode(code);
            assert_eq!(f.encode(v, Rounding::Nearest), canonical(f, code), "{f:?} code {code:#04x} value {v}");
            // An exact value never moves under stochastic rounding, whatever the bits.
            for bits in [0, 1, 0x7f_ffff, 0xff_ffff] {
                assert_eq!(f.encode(v, Rounding::Stochastic(bits)), canonical(f, code), "{f:?} code {code:#04x} stochastic");
            }
        }
    }
}

#[test]
fn known_values() {
    let e = Fp8::E4M3;
    assert_eq!(e.decode(0x7e), 448.0);
    assert_eq!(e.decode(0x01), 2f32.powi(-9));
    assert_eq!(e.decode(0x08), 2f32.powi(-6));
    assert_eq!(e.decode(0x38), 1.0);
    assert!(e.decode(0x7f).is_nan() && e.decode(0xff).is_nan());
    assert_eq!(e.decode(0xfe), -448.0);
    let b = Fp8::E5M2;
    assert_eq!(b.decode(0x7b), 57344.0);
    assert_eq!(b.decode(0x3c), 1.0);
    assert_eq!(b.decode(0x01), 2f32.powi(-16));
    assert_eq!(b.decode(0x7c), f32::INFINITY);
    assert_eq!(b.decode(0xfc), f32::NEG_INFINITY);
    assert!((0x7d..=0x7f).all(|c| b.decode(c).is_nan()));
    // The 126 finite positive e4m3 values and 123 e5m2 values, strictly increasing.
    for (f, last) in [(e, 0x7e), (b, 0x7b)] {
        for c in 0..last {
            assert!(f.decode(c) < f.decode(c + 1), "{f:?} {c:#x}");
        }
    }
}

#[test]
fn ties_go_to_the_even_code() {
    for (f, last) in [(Fp8::E4M3, 0x7eu8), (Fp8::E5M2, 0x7b)] {
        for c in 0..last {
            let (lo, hi) = (f.decode(c) as f64, f.decode(c + 1) as f64);
            let mid = ((lo + hi) / 2.0) as f32;
            assert_eq!(mid as f64, (lo + hi) / 2.0, "midpoint representable in f32");
            let even = if c % 2 == 0 { c } else { c + 1 };
            assert_eq!(f.encode(mid, Rounding::Nearest), even, "{f:?} between {c:#x} and {:#x}", c + 1);
            assert_eq!(f.encode(-mid, Rounding::Nearest), 0x80 | even);
            // Just off the midpoint rounds to the nearer code.
            assert_eq!(f.encode(next_down(mid), Rounding::Nearest), c);
            assert_eq!(f.encode(next_up(mid), Rounding::Nearest), c + 1);
        }
    }
}

fn next_up(v: f32) -> f32 { f32::from_bits(v.to_bits() + 1) }
fn next_down(v: f32) -> f32 { if v == 0.0 { -0.0 } else { f32::from_bits(v.to_bits() - 1) } }

#[test]
fn saturation_nan_and_infinity() {
    let e = Fp8::E4M3;
    for v in [448.0, 449.0, 464.0, 480.0, 1e30, f32::INFINITY, f32::MAX] {
        assert_eq!(e.encode(v, Rounding::Nearest), 0x7e, "{v}");
        assert_eq!(e.encode(-v, Rounding::Nearest), 0xfe, "{v}");
        assert_eq!(e.encode(v, Rounding::Stochastic(0)), 0x7e, "{v}");
    }
    assert_eq!(e.encode(f32::NAN, Rounding::Nearest), 0x7f);
    assert_eq!(e.encode(-f32::NAN, Rounding::Nearest), 0xff);
    let b = Fp8::E5M2;
    for v in [57344.0, 61440.0, 1e30, f32::MAX] {
        assert_eq!(b.encode(v, Rounding::Nearest), 0x7b, "{v}");
        assert_eq!(b.encode(-v, Rounding::Nearest), 0xfb, "{v}");
    }
    assert_eq!(b.encode(f32::INFINITY, Rounding::Nearest), 0x7c);
    assert_eq!(b.encode(f32::NEG_INFINITY, Rounding::Nearest), 0xfc);
    assert_eq!(b.encode(f32::NAN, Rounding::Nearest), 0x7e);
    // Below half the smallest subnormal: ±0, sign kept.
    assert_eq!(e.encode(2f32.powi(-11), Rounding::Nearest), 0x00);
    assert_eq!(e.encode(-2f32.powi(-11), Rounding::Nearest), 0x80);
    assert_eq!(e.encode(1e-30, Rounding::Nearest), 0x00);
}

#[test]
fn stochastic_rounding_is_unbiased_and_reproducible() {
    let f = Fp8::E4M3;
    // 1.0 + a quarter of the spacing (1/8) between 1.0 and 1.125.
    let v = 1.0 + 0.125 / 4.0;
    let ups = (0..100_000u64).filter(|&i| f.encode(v, Rounding::Stochastic(stochastic_bits(i))) == 0x39).count();
    assert!((23_500..26_500).contains(&ups), "{ups} of 100000 rounded up");
    assert_eq!(stochastic_bits(12345), stochastic_bits(12345));
    assert_ne!(stochastic_bits(1), stochastic_bits(2));
    // Never further than one code from the value.
    for i in 0..1000 {
        let c = f.encode(v, Rounding::Stochastic(stochastic_bits(i)));
        assert!(c == 0x38 || c == 0x39);
    }
}

#[test]
fn int_conversions_round_half_even_and_saturate() {
    for (v, want) in [(0.5, 0), (1.5, 2), (2.5, 2), (-2.5, -2), (-0.5, 0), (126.5, 126), (127.49, 127), (127.5, 127), (1e9, 127), (-128.5, -128), (-1e9, -128), (f32::NAN, 0), (f32::INFINITY, 127), (f32::NEG_INFINITY, -128)] {
        assert_eq!(to_i8(v), want, "{v}");
    }
    for (v, want) in [(2.5f32, 2), (3.5, 4), (-3.5, -4), (3e9, i32::MAX), (-3e9, i32::MIN), (f32::NAN, 0)] {
        assert_eq!(to_i32(v), want, "{v}");
    }
}

#[test]
fn type_rules() {
    let t = |dt| TensorDesc::new(dt, &[1, 4, 5, 5]).unwrap();
    use DataType::*;
    let f = Direction::Forward;
    assert_eq!(conv_types("c", f, &t(Float), &t(Float), &t(Float)).unwrap(), None);
    for y in INT8_OUTPUTS {
        assert_eq!(conv_types("c", f, &t(Int8), &t(Int8), &t(*y)).unwrap(), Some(Quant::Int8));
    }
    for y in FP8_OUTPUTS {
        assert_eq!(conv_types("c", f, &t(Float8), &t(BFloat8), &t(*y)).unwrap(), Some(Quant::Fp8 { x: Fp8::E4M3, w: Fp8::E5M2 }));
    }
    let err = conv_types("c", f, &t(Int8), &t(Half), &t(Float)).unwrap_err();
    assert!(err.reason.contains("filter type Half"), "{}", err.reason);
    assert!(conv_types("c", f, &t(Int8), &t(Int8), &t(Float8)).is_err());
    assert!(conv_types("c", f, &t(Float8), &t(Float8), &t(Int32)).is_err());
    assert!(conv_types("c", f, &t(Float), &t(Float), &t(Int32)).is_err());
    let err = conv_types("c", Direction::BackwardWeights, &t(Int8), &t(Int8), &t(Int8)).unwrap_err();
    assert!(err.reason.contains("backward-weights"), "{}", err.reason);
    assert!(conv_types("c", Direction::BackwardData, &t(Int8), &t(Int8), &t(Int32)).is_err());
}
