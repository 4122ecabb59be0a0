//! Descriptor rules (reference doc §1b, §1c, §1e, §2.5, §6): conv output shapes, every
//! invalid parameter with its status and a reason naming the cause, tensor sizes and
//! layouts, BN descriptor derivation; property tests over shapes.

use conflux::batchnorm::{derive_bn_desc, param_index, reduction_size};
use conflux::types::{BnMode, ConvAttrib, ConvMode, DataType, Direction, Layout};
use conflux::{ConvDesc, ConvProblem, Error, Status, TensorDesc};
use proptest::prelude::*;

fn t(lens: &[usize]) -> TensorDesc {
    TensorDesc::new(DataType::Float, lens).unwrap()
}

fn conv(mode: ConvMode, pads: &[i64], strides: &[i64], dils: &[i64]) -> ConvDesc {
    ConvDesc::new(mode, pads, strides, dils).unwrap()
}

/// The error has `status` and its reason mentions `word`.
fn expect_err<T: std::fmt::Debug>(r: Result<T, Error>, status: Status, word: &str) {
    let e = r.expect_err("expected an error");
    assert_eq!(e.status, status, "{e}");
    assert!(e.reason.to_lowercase().contains(&word.to_lowercase()), "reason {:?} does not name {word:?}", e.reason);
}

// ---------------------------------------------------------------- conv output shapes

#[test]
fn conv_output_shapes() {
    // 32 + 2·1 − 3 = 31, /1 + 1 = 32.
    let c = conv(ConvMode::Convolution, &[1, 1], &[1, 1], &[1, 1]);
    assert_eq!(c.output_lens(&t(&[1, 3, 32, 32]), &t(&[8, 3, 3, 3])).unwrap(), [1, 8, 32, 32]);
    // Input 2, filter 5, pad 0: (2 − 5)/1 + 1 = −2 → clamped to 1, not an error.
    let c = conv(ConvMode::Convolution, &[0, 0], &[1, 1], &[1, 1]);
    assert_eq!(c.output_lens(&t(&[1, 1, 2, 2]), &t(&[1, 1, 5, 5])).unwrap(), [1, 1, 1, 1]);
    // Dilation 3 makes a 3-tap filter 7 wide: (4 − 7)/1 + 1 → 1.
    let c = conv(ConvMode::Convolution, &[0, 0], &[1, 1], &[3, 1]);
    assert_eq!(c.output_lens(&t(&[1, 1, 4, 4]), &t(&[1, 1, 3, 3])).unwrap(), [1, 1, 1, 2]);
    // Truncating division: (6 − 3)/2 + 1 = 1 + 1 = 2; (7 − 3)/2 + 1 = 3.
    let c = conv(ConvMode::Convolution, &[0, 0], &[2, 2], &[1, 1]);
    assert_eq!(c.output_lens(&t(&[1, 1, 6, 7]), &t(&[1, 1, 3, 3])).unwrap(), [1, 1, 2, 3]);
    // 3-D: D (5+2−3)/1+1 = 5; H (6+0−3)/2+1 = 2; W extent 2·2+1 = 5, (7+4−5)/3+1 = 3.
    let c = conv(ConvMode::Convolution, &[1, 0, 2], &[1, 2, 3], &[1, 1, 2]);
    assert_eq!(c.output_lens(&t(&[2, 4, 5, 6, 7]), &t(&[8, 4, 3, 3, 3])).unwrap(), [2, 8, 5, 2, 3]);
    // Groups: C = 6, G = 3, w = 9×2 → 9 channels; depthwise C = G = 4 with multiplier 2.
    let mut c = conv(ConvMode::Convolution, &[0, 0], &[1, 1], &[1, 1]);
    c.set_groups(3).unwrap();
    assert_eq!(c.output_lens(&t(&[1, 6, 4, 4]), &t(&[9, 2, 1, 1])).unwrap(), [1, 9, 4, 4]);
    c.set_groups(4).unwrap();
    assert_eq!(c.output_lens(&t(&[1, 4, 4, 4]), &t(&[8, 1, 1, 1])).unwrap(), [1, 8, 4, 4]);
}

#[test]
fn transpose_output_shapes() {
    // s·(in−1) + e − 2p + a = 2·2 + 3 − 2 + 1 = 6; channels w.C·G = 2·2 = 4.
    let mut c = conv(ConvMode::Transpose, &[1, 1], &[2, 2], &[1, 1]);
    c.set_groups(2).unwrap();
    c.set_out_pads(&[1, 0]).unwrap();
    assert_eq!(c.output_lens(&t(&[1, 4, 3, 3]), &t(&[4, 2, 3, 3])).unwrap(), [1, 4, 6, 5]);
    // Clamped to 1: 1·0 + 1 − 2·3 = −5.
    let c = conv(ConvMode::Transpose, &[3, 0], &[1, 1], &[1, 1]);
    assert_eq!(c.output_lens(&t(&[1, 2, 1, 1]), &t(&[2, 5, 1, 1])).unwrap(), [1, 5, 1, 1]);
    // 3-D transpose with dilation: 3·(2−1) + (2·(2−1)+1) − 0 + 2 = 8.
    let mut c = conv(ConvMode::Transpose, &[0, 0, 0], &[3, 1, 1], &[2, 1, 1]);
    c.set_out_pads(&[2, 0, 0]).unwrap();
    assert_eq!(c.output_lens(&t(&[1, 3, 2, 2, 2]), &t(&[3, 1, 2, 1, 1])).unwrap(), [1, 1, 8, 2, 2]);
}

// ---------------------------------------------------------------- invalid conv parameters

#[test]
fn invalid_conv_parameters() {
    let m = ConvMode::Convolution;
    expect_err(ConvDesc::new(m, &[-1, 0], &[1, 1], &[1, 1]), Status::BadParm, "pad");
    expect_err(ConvDesc::new(m, &[0, 0], &[1, 0], &[1, 1]), Status::BadParm, "stride");
    expect_err(ConvDesc::new(m, &[0, 0], &[1, 1], &[0, 1]), Status::BadParm, "dilation");
    expect_err(ConvDesc::new(m, &[0, 0], &[1, 1, 1], &[1, 1]), Status::BadParm, "strides");
    expect_err(ConvDesc::new(m, &[0], &[1], &[1]), Status::BadParm, "spatial dimensions");
    expect_err(ConvDesc::new(m, &[0; 4], &[1; 4], &[1; 4]), Status::BadParm, "spatial dimensions");

    let c = conv(m, &[0, 0], &[1, 1], &[1, 1]);
    expect_err(c.output_lens(&t(&[1, 3, 4, 4]), &t(&[2, 4, 1, 1])), Status::BadParm, "channels");
    expect_err(c.output_lens(&t(&[1, 3, 4, 4, 4]), &t(&[2, 3, 1, 1])), Status::BadParm, "dim");
    let half_w = TensorDesc::new(DataType::Half, &[2, 3, 1, 1]).unwrap();
    expect_err(c.output_lens(&t(&[1, 3, 4, 4]), &half_w), Status::BadParm, "type");

    let mut g = c.clone();
    g.set_groups(4).unwrap();
    expect_err(g.output_lens(&t(&[1, 6, 4, 4]), &t(&[4, 1, 1, 1])), Status::BadParm, "group");
    g.set_groups(3).unwrap();
    expect_err(g.output_lens(&t(&[1, 6, 4, 4]), &t(&[4, 2, 1, 1])), Status::BadParm, "group"); // K % G
    expect_err(g.output_lens(&t(&[1, 6, 4, 4]), &t(&[6, 1, 1, 1])), Status::BadParm, "filter channel"); // C/G ≠ w.C
    expect_err(g.set_groups(0), Status::BadParm, "group count");

    let mut tr = conv(ConvMode::Transpose, &[0, 0], &[2, 2], &[1, 1]);
    expect_err(tr.output_lens(&t(&[1, 3, 4, 4]), &t(&[4, 2, 1, 1])), Status::BadParm, "filter K");
    tr.set_out_pads(&[2, 0]).unwrap(); // accepted here, checked at use (as MIOpen)
    expect_err(tr.output_lens(&t(&[1, 4, 4, 4]), &t(&[4, 2, 1, 1])), Status::BadParm, "output padding");
    tr.set_groups(3).unwrap();
    tr.set_out_pads(&[0, 0]).unwrap();
    expect_err(tr.output_lens(&t(&[1, 4, 4, 4]), &t(&[4, 2, 1, 1])), Status::BadParm, "group");
    expect_err(tr.set_out_pads(&[1]), Status::UnknownError, "output paddings");
    expect_err(tr.set_out_pads(&[-1, 0]), Status::BadParm, "negative");
}

#[test]
fn huge_geometry_is_bad_parm_not_a_panic() {
    // Transpose output 2^62·7 + … overflows what conflux accepts.
    let c = conv(ConvMode::Transpose, &[0, 0], &[1 << 62, 1], &[1, 1]);
    expect_err(c.output_lens(&t(&[1, 1, 8, 1]), &t(&[1, 1, 1, 1])), Status::BadParm, "overflow");
    let c = conv(ConvMode::Convolution, &[i64::MAX, 0], &[1, 1], &[1, 1]);
    expect_err(c.output_lens(&t(&[1, 1, 8, 1]), &t(&[1, 1, 1, 1])), Status::BadParm, "overflow");
    // Huge dilations only make the filter wider: clamped to 1.
    let c = conv(ConvMode::Convolution, &[0, 0], &[1, 1], &[i64::MAX, 1]);
    assert_eq!(c.output_lens(&t(&[1, 1, 8, 1]), &t(&[1, 1, 3, 1])).unwrap(), [1, 1, 1, 1]);
}

#[test]
fn init_resets_groups_and_output_padding() {
    let mut c = conv(ConvMode::Transpose, &[1, 1], &[2, 2], &[1, 1]);
    c.set_groups(4).unwrap();
    c.set_out_pads(&[1, 1]).unwrap();
    c.set_attribute(ConvAttrib::Deterministic, 1).unwrap();
    c.init(ConvMode::Transpose, &[0, 0, 0], &[3, 3, 3], &[1, 1, 1]).unwrap();
    assert_eq!(c.groups(), 1);
    assert_eq!(c.out_pads(), [0, 0, 0]);
    assert_eq!(c.spatial_dims(), 3);
    assert!(c.is_deterministic(), "attributes survive Init");
    // Deprecated modes map to Convolution.
    for m in [ConvMode::GroupConv, ConvMode::Depthwise] {
        assert_eq!(conv(m, &[0, 0], &[1, 1], &[1, 1]).mode(), ConvMode::Convolution);
    }
    let d = ConvDesc::default();
    assert_eq!((d.spatial_dims(), d.groups(), d.pads(), d.strides()), (2, 1, &[0usize, 0][..], &[1usize, 1][..]));
}

#[test]
fn attribute_ranges() {
    let mut c = ConvDesc::default();
    assert_eq!(c.attribute(ConvAttrib::Fp16AltImpl), -1);
    assert_eq!(c.attribute(ConvAttrib::Deterministic), 0);
    assert_eq!(c.attribute(ConvAttrib::Fp8RoundingMode), 1);
    for (a, lo, hi) in [(ConvAttrib::Fp16AltImpl, -1, 1), (ConvAttrib::Deterministic, 0, 1), (ConvAttrib::Fp8RoundingMode, 0, 1)] {
        for v in lo..=hi {
            c.set_attribute(a, v).unwrap();
            assert_eq!(c.attribute(a), v as i32);
        }
        let name = format!("{a:?}").to_uppercase();
        let word = if name.starts_with("FP16") { "FP16_ALT_IMPL" } else if name.starts_with("DET") { "DETERMINISTIC" } else { "FP8_ROUNDING_MODE" };
        expect_err(c.set_attribute(a, lo - 1), Status::BadParm, word);
        expect_err(c.set_attribute(a, hi + 1), Status::BadParm, word);
        assert_eq!(c.attribute(a), hi as i32, "a refused value leaves the attribute unchanged");
    }
}

#[test]
fn problem_maps_transpose_directions() {
    let mut c = conv(ConvMode::Transpose, &[0, 0], &[2, 2], &[1, 1]);
    c.set_out_pads(&[1, 1]).unwrap();
    let (x, w) = (t(&[1, 4, 3, 3]), t(&[4, 2, 3, 3]));
    let y = c.output_desc(&x, &w).unwrap();
    assert_eq!(y.lens(), [1, 2, 8, 8]);
    let p = ConvProblem::forward(&c, &x, &w, &y).unwrap();
    assert_eq!((p.direction, &p.x, &p.y, p.conv.mode()), (Direction::BackwardData, &y, &x, ConvMode::Convolution));
    assert_eq!(p.conv.out_pads(), [0, 0]);
    let p = ConvProblem::backward_data(&c, &y, &w, &x).unwrap();
    assert_eq!((p.direction, &p.x, &p.y), (Direction::Forward, &y, &x));
    let p = ConvProblem::backward_weights(&c, &y, &x, &w).unwrap();
    assert_eq!((p.direction, &p.x, &p.y), (Direction::BackwardWeights, &y, &x));
    expect_err(ConvProblem::forward(&c, &x, &w, &t(&[1, 2, 7, 8])), Status::BadParm, "do not match");
    let d = |l: &[usize]| TensorDesc::new(DataType::Double, l).unwrap();
    expect_err(ConvProblem::forward(&c, &d(&[1, 4, 3, 3]), &d(&[4, 2, 3, 3]), &d(&[1, 2, 8, 8])), Status::NotImplemented, "Double");
}

// ---------------------------------------------------------------- tensors

#[test]
fn invalid_tensors() {
    let f = DataType::Float;
    expect_err(TensorDesc::new(f, &[2, 0, 3]), Status::BadParm, "length of dimension 1 is 0");
    expect_err(TensorDesc::new(f, &[]), Status::BadParm, "dimensions");
    expect_err(TensorDesc::new(f, &[1; 9]), Status::BadParm, "dimensions");
    assert!(TensorDesc::new(f, &[1; 8]).is_ok());
    expect_err(TensorDesc::with_strides(f, &[2, 3], &[3, 0]), Status::BadParm, "stride of dimension 1 is 0");
    expect_err(TensorDesc::with_strides(f, &[2, 3], &[3]), Status::BadParm, "strides");
    expect_err(TensorDesc::with_layout(f, Layout::NHWC, &[1, 2, 3, 4, 5]), Status::BadParm, "NHWC");
    expect_err(TensorDesc::with_layout(f, Layout::NCDHW, &[1, 2, 3, 4]), Status::BadParm, "NCDHW");
    expect_err(TensorDesc::with_layout(f, Layout::NCHWc4, &[1, 3, 2, 2]), Status::BadParm, "divisible by 4");
    expect_err(TensorDesc::with_layout(f, Layout::NCHWc8, &[1, 8, 2, 2]), Status::NotImplemented, "NCHWc8");
}

#[test]
fn overflowing_sizes_are_bad_parm() {
    let f = DataType::Float;
    let big = 1usize << 32;
    expect_err(TensorDesc::new(f, &[big, big, 2]), Status::BadParm, "overflow");
    expect_err(TensorDesc::with_layout(f, Layout::NHWC, &[big, 2, big, 2]), Status::BadParm, "overflow");
    expect_err(TensorDesc::with_strides(f, &[3, 2], &[usize::MAX / 2, 1]), Status::BadParm, "overflow");
    // Element count overflows even though the span would not (aliasing strides).
    expect_err(TensorDesc::with_strides(f, &[big, big, big], &[1, 1, 1]), Status::BadParm, "overflow");
    // Elements fit, bytes do not: 2^62 doubles.
    expect_err(TensorDesc::new(DataType::Double, &[1 << 62]), Status::BadParm, "overflow");
    let ok = TensorDesc::new(DataType::Int8, &[1 << 61]).unwrap(); // 2^61 bytes fit, 2^64 do not
    expect_err(ok.with_dtype(DataType::Double), Status::BadParm, "overflow");
}

#[test]
fn num_bytes_packed_and_layouts() {
    // Half, strides 100,30,6,1: space = 1·100 + 2·30 + 3·6 + 4·1 + 1 = 183 → 366 bytes.
    let d = TensorDesc::with_strides(DataType::Half, &[2, 3, 4, 5], &[100, 30, 6, 1]).unwrap();
    assert_eq!((d.element_space(), d.num_bytes(), d.element_count()), (183, 366, 120));
    assert!(!d.is_packed());
    let p = TensorDesc::new(DataType::Double, &[2, 3, 4, 5]).unwrap();
    assert_eq!((p.strides(), p.num_bytes(), p.is_packed()), (&[60usize, 20, 5, 1][..], 960, true));
    // Aliasing strides: 4 elements in a space of 3 → not packed either.
    let a = TensorDesc::with_strides(DataType::Float, &[2, 2], &[1, 1]).unwrap();
    assert_eq!((a.element_count(), a.element_space(), a.is_packed()), (4, 3, false));
    // Layouts change strides only; lens stay N,C,(D,)H,W.
    let f = DataType::Float;
    let nhwc = TensorDesc::with_layout(f, Layout::NHWC, &[2, 3, 4, 5]).unwrap();
    assert_eq!((nhwc.lens(), nhwc.strides()), (&[2usize, 3, 4, 5][..], &[60usize, 1, 15, 3][..]));
    assert!(nhwc.is_packed() && nhwc.is_channels_last());
    assert_eq!(nhwc.packed_layout(), Some(Layout::NHWC));
    let ndhwc = TensorDesc::with_layout(f, Layout::NDHWC, &[2, 3, 4, 5, 6]).unwrap();
    assert_eq!(ndhwc.strides(), [360, 1, 90, 18, 3]);
    let chwn = TensorDesc::with_layout(f, Layout::CHWN, &[2, 3, 4, 5]).unwrap();
    assert_eq!(chwn.strides(), [1, 40, 10, 2]);
    assert_eq!(chwn.packed_layout(), Some(Layout::CHWN));
    assert_eq!(TensorDesc::with_layout(f, Layout::NCHW, &[2, 3, 4, 5]).unwrap(), t(&[2, 3, 4, 5]));
    assert_eq!(d.packed_layout(), None);
    assert_eq!(d.key(), "FP16 2x3x4x5 s100x30x6x1");
    // Equality covers type, lens and strides.
    assert_ne!(t(&[2, 3]), TensorDesc::new(DataType::Half, &[2, 3]).unwrap());
    // The forward output keeps x's layout family.
    let c = conv(ConvMode::Convolution, &[1, 1], &[1, 1], &[1, 1]);
    let y = c.output_desc(&nhwc, &TensorDesc::with_layout(f, Layout::NHWC, &[7, 3, 3, 3]).unwrap()).unwrap();
    assert_eq!((y.lens(), y.packed_layout()), (&[2usize, 7, 4, 5][..], Some(Layout::NHWC)));
}

#[test]
fn bn_descriptor_derivation() {
    for dt in [DataType::Half, DataType::BFloat16, DataType::Float, DataType::Double] {
        let x = TensorDesc::new(dt, &[2, 3, 4, 5]).unwrap();
        let s = derive_bn_desc(&x, BnMode::Spatial).unwrap();
        assert_eq!((s.dtype(), s.lens()), (DataType::Float, &[1usize, 3, 1, 1][..]), "always Float");
        let p = derive_bn_desc(&x, BnMode::PerActivation).unwrap();
        assert_eq!((p.dtype(), p.lens()), (DataType::Float, &[1usize, 3, 4, 5][..]));
    }
    let x5 = TensorDesc::with_layout(DataType::Half, Layout::NDHWC, &[2, 3, 4, 5, 6]).unwrap();
    assert_eq!(derive_bn_desc(&x5, BnMode::Spatial).unwrap().lens(), [1, 3, 1, 1, 1]);
    assert_eq!(derive_bn_desc(&x5, BnMode::PerActivation).unwrap().lens(), [1, 3, 4, 5, 6]);
    assert_eq!(reduction_size(&x5, BnMode::Spatial), 2 * 4 * 5 * 6);
    assert_eq!(reduction_size(&x5, BnMode::PerActivation), 2);
    expect_err(derive_bn_desc(&t(&[2, 3, 4]), BnMode::Spatial), Status::BadParm, "4-D or 5-D");
    // param_index is the packed offset in the derived shape.
    let p = derive_bn_desc(&x5, BnMode::PerActivation).unwrap();
    assert_eq!(param_index(x5.lens(), &[1, 2, 3, 4, 5], BnMode::PerActivation), p.offset(&[0, 2, 3, 4, 5]));
    assert_eq!(param_index(x5.lens(), &[1, 2, 3, 4, 5], BnMode::Spatial), 2);
}

// ---------------------------------------------------------------- property tests

fn lens_strategy() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(1usize..6, 1..=6)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Element space is one past the offset of the last index; bytes scale it; packed means
    /// count == space; a packed descriptor's offsets are exactly 0..count.
    #[test]
    fn tensor_sizes_are_consistent(lens in lens_strategy(), extra in prop::collection::vec(0usize..4, 6), mode in 0u8..3) {
        let rank = lens.len();
        let (d, packed_by_construction) = match mode {
            0 => (TensorDesc::new(DataType::Half, &lens).unwrap(), true),
            1 if rank == 4 || rank == 5 => {
                let l = if rank == 4 { Layout::NHWC } else { Layout::NDHWC };
                (TensorDesc::with_layout(DataType::Half, l, &lens).unwrap(), true)
            }
            _ => {
                // Random positive strides (gaps and aliasing both possible).
                let strides: Vec<usize> = (0..rank).map(|i| 1 + extra[i] * (i + 1)).collect();
                (TensorDesc::with_strides(DataType::Half, &lens, &strides).unwrap(), false)
            }
        };
        let last: Vec<usize> = lens.iter().map(|l| l - 1).collect();
        prop_assert_eq!(d.element_space(), d.offset(&last) + 1);
        prop_assert_eq!(d.num_bytes(), 2 * d.element_space());
        prop_assert_eq!(d.element_count(), lens.iter().product::<usize>());
        prop_assert_eq!(d.is_packed(), d.element_count() == d.element_space());
        if packed_by_construction {
            prop_assert!(d.is_packed());
            let mut seen = vec![false; d.element_count()];
            conflux::tensor::for_each_index(&lens, |i| seen[d.offset(i)] = true);
            prop_assert!(seen.iter().all(|&s| s));
        }
    }

    /// Normal conv: o is the number of window positions that fit, characterized without
    /// the formula: (o−1)·s + e ≤ in + 2p < o·s + e when the window fits at least once,
    /// else o = 1 (clamped).
    #[test]
    fn conv_output_counts_window_positions(
        inp in 1usize..20, k in 1usize..6, p in 0i64..4, s in 1i64..4, d in 1i64..3, nd3 in any::<bool>(),
    ) {
        let nd = if nd3 { 3 } else { 2 };
        let c = conv(ConvMode::Convolution, &vec![p; nd], &vec![s; nd], &vec![d; nd]);
        let mut xl = vec![1, 2];
        xl.extend(std::iter::repeat_n(inp, nd));
        let mut wl = vec![3, 2];
        wl.extend(std::iter::repeat_n(k, nd));
        let out = c.output_lens(&t(&xl), &t(&wl)).unwrap();
        let (o, e, span) = (out[2] as i64, d * (k as i64 - 1) + 1, inp as i64 + 2 * p);
        prop_assert!(out[2..].iter().all(|&v| v == out[2]));
        if e <= span {
            prop_assert!((o - 1) * s + e <= span && o * s + e > span, "o={} e={} span={}", o, e, span);
        } else {
            prop_assert_eq!(o, 1);
        }
    }

    /// Transpose: unless clamped, the normal conv of the transpose output gives back the
    /// transpose input, for every output padding < stride.
    #[test]
    fn transpose_inverts_normal_shape(inp in 1usize..10, k in 1usize..5, p in 0i64..3, s in 1i64..4, d in 1i64..3, a in 0i64..3) {
        let a = a % s;
        let mut c = conv(ConvMode::Transpose, &[p, 0], &[s, 1], &[d, 1]);
        c.set_out_pads(&[a, 0]).unwrap();
        let out = c.output_lens(&t(&[1, 2, inp, 1]), &t(&[2, 3, k, 1])).unwrap();
        let raw = s * (inp as i64 - 1) + d * (k as i64 - 1) + 1 - 2 * p + a;
        prop_assert_eq!(out[1], 3);
        if raw >= 1 {
            prop_assert_eq!(out[2] as i64, raw);
            let n = conv(ConvMode::Convolution, &[p, 0], &[s, 1], &[d, 1]);
            let back = n.output_lens(&t(&[1, 3, out[2], 1]), &t(&[2, 3, k, 1])).unwrap();
            prop_assert_eq!(back[2], inp);
        } else {
            prop_assert_eq!(out[2], 1);
        }
    }
}
