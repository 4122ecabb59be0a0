//! `conv::bias::forward_bias` / `backward_bias` against the f64 reference on every device:
//! f32/f16/bf16, NCHW/NHWC/gapped, 2-D and 3-D, several (α, β); bad input leaves outputs
//! untouched.

mod support;

use conflux::conv::bias::{backward_bias, forward_bias};
use conflux::reference::{self as r, compare::tolerance, fill::Fill};
use conflux::{DataType, DevPtr, Handle, Status, TensorDesc};
use support::*;

const F32: DataType = DataType::Float;

/// 1×C×1×1(×1) of `dt` for a tensor of `lens`.
fn per_channel(dt: DataType, lens: &[usize]) -> TensorDesc {
    let mut b = vec![1; lens.len()];
    b[1] = lens[1];
    TensorDesc::new(dt, &b).unwrap()
}

// The last is big enough for many vectors per thread pass and a ragged tail.
const SHAPES: [&[usize]; 4] = [&[2, 3, 4, 5], &[1, 5, 3, 2, 4], &[3, 2, 7, 3], &[2, 37, 9, 7]];
const AB: [(f64, f64); 3] = [(1.0, 0.0), (0.5, -2.0), (-1.0, 1.5)];

device_tests!(forward_bias_matches_reference, |h: &Handle| {
    let mut seed = 1;
    for (dt, fill, tol) in [
        (F32, Fill::Normal, tolerance(F32)),
        (F32, Fill::SmallInt(-4, 4), 0.0),
        (DataType::Half, Fill::Normal, tolerance(DataType::Half)),
        (DataType::BFloat16, Fill::Normal, tolerance(DataType::BFloat16)),
    ] {
        for (i, lens) in SHAPES.iter().enumerate() {
            for lay in [Lay::Packed, Lay::ChannelsLast, Lay::Gapped] {
                let (alpha, beta) = AB[(i + seed as usize) % AB.len()];
                let yd = desc(dt, lens, lay);
                let bd = per_channel(dt, lens);
                let b = random(h, &bd, fill, seed);
                let y = random(h, &yd, fill, seed + 1);
                seed += 2;
                forward_bias(h, alpha, &bd, b.ptr(), beta, &yd, y.ptr()).unwrap();
                // MIOpen's formula: y ← α·(y + b) + β·y.
                let mut plus = y.host.clone();
                r::bias_forward(&yd, &mut plus, &bd, &b.host).unwrap();
                let want: Vec<f64> = plus.iter().zip(&y.host).map(|(p, old)| alpha * p + beta * old).collect();
                let got = download(h, &y);
                let label = format!("forward bias α={alpha} β={beta} {} on {}", yd.key(), h.device().name());
                assert_close(&label, &logical(&yd, &got), &logical(&yd, &want), tol);
                assert_gaps_untouched(&label, &yd, &got);
                assert_unchanged(&format!("{label}: b"), h, &b);
            }
        }
    }
});

device_tests!(backward_bias_matches_reference, |h: &Handle| {
    let mut seed = 100;
    for (dt, fill, tol) in [
        (F32, Fill::Normal, tolerance(F32)),
        (F32, Fill::SmallInt(-4, 4), 0.0),
        (DataType::Half, Fill::Normal, tolerance(DataType::Half)),
        (DataType::BFloat16, Fill::Normal, tolerance(DataType::BFloat16)),
    ] {
        for (i, lens) in SHAPES.iter().enumerate() {
            for lay in [Lay::Packed, Lay::ChannelsLast, Lay::GappedChannelsLast] {
                let (alpha, beta) = AB[(i + seed as usize) % AB.len()];
                let dyd = desc(dt, lens, lay);
                let dbd = per_channel(dt, lens);
                let dy = random(h, &dyd, fill, seed);
                // β = 0 must not read db: poison it then.
                let db = if beta == 0.0 { poisoned(h, &dbd) } else { random(h, &dbd, Fill::SmallInt(-3, 3), seed + 1) };
                seed += 2;
                backward_bias(h, alpha, &dyd, dy.ptr(), beta, &dbd, db.ptr()).unwrap();
                let mut sum = vec![0.0; dbd.element_space()];
                r::bias_backward(&dyd, &dy.host, &dbd, &mut sum).unwrap();
                let want: Vec<f64> = sum.iter().zip(&db.host).map(|(s, old)| alpha * s + if beta == 0.0 { 0.0 } else { beta * old }).collect();
                let label = format!("backward bias α={alpha} β={beta} {} on {}", dyd.key(), h.device().name());
                assert_close(&label, &download(h, &db), &want, tol);
                assert_unchanged(&format!("{label}: dy"), h, &dy);
            }
        }
    }
});

device_tests!(bias_bad_input_leaves_outputs_untouched, |h: &Handle| {
    let yd = desc(F32, &[2, 3, 4, 4], Lay::Packed);
    let bd = per_channel(F32, yd.lens());
    let b = random(h, &bd, Fill::Normal, 1);
    let y = sentinel(h, &yd, 4.0);
    let db = sentinel(h, &bd, 4.0);
    let bp = Status::BadParm;
    let fwd = |what: &str, r: conflux::Result<()>, status: Status, needles: &[&str]| {
        expect_err(what, r, status, needles);
        assert_unchanged(what, h, &y);
    };
    let b4 = per_channel(F32, &[2, 4, 4, 4]);
    fwd("b channels", forward_bias(h, 1.0, &b4, b.ptr(), 0.0, &yd, y.ptr()), bp, &["forward bias", "dim 1"]);
    let b_half = bd.with_dtype(DataType::Half).unwrap();
    fwd("b type", forward_bias(h, 1.0, &b_half, b.ptr(), 0.0, &yd, y.ptr()), bp, &["forward bias", "types differ"]);
    let b3 = TensorDesc::new(F32, &[1, 3, 1]).unwrap();
    fwd("b rank", forward_bias(h, 1.0, &b3, b.ptr(), 0.0, &yd, y.ptr()), bp, &["forward bias", "dims"]);
    fwd("b NULL", forward_bias(h, 1.0, &bd, DevPtr::NULL, 0.0, &yd, y.ptr()), bp, &["forward bias", "b pointer"]);
    expect_err("y NULL", forward_bias(h, 1.0, &bd, b.ptr(), 0.0, &yd, DevPtr::NULL), bp, &["y pointer"]);
    let yd64 = yd.with_dtype(DataType::Double).unwrap();
    let bd64 = bd.with_dtype(DataType::Double).unwrap();
    let y64 = sentinel(h, &yd64, 4.0);
    expect_err("double", forward_bias(h, 1.0, &bd64, b.ptr(), 0.0, &yd64, y64.ptr()), Status::NotImplemented, &["Double"]);
    assert_unchanged("double y", h, &y64);

    let dy = random(h, &yd, Fill::Normal, 2);
    let bwd = |what: &str, r: conflux::Result<()>, needles: &[&str]| {
        expect_err(what, r, Status::BadParm, needles);
        assert_unchanged(what, h, &db);
    };
    let db_full = TensorDesc::new(F32, &[1, 3, 4, 1]).unwrap();
    bwd("db not per channel", backward_bias(h, 1.0, &yd, dy.ptr(), 0.0, &db_full, db.ptr()), &["backward bias", "1×3×1"]);
    bwd("db channels", backward_bias(h, 1.0, &yd, dy.ptr(), 0.0, &b4, db.ptr()), &["backward bias", "db lengths"]);
    bwd("db type", backward_bias(h, 1.0, &yd, dy.ptr(), 0.0, &b_half, db.ptr()), &["backward bias", "types differ"]);
    bwd("dy NULL", backward_bias(h, 1.0, &yd, DevPtr::NULL, 0.0, &bd, db.ptr()), &["backward bias", "dy pointer"]);
    expect_err("db NULL", backward_bias(h, 1.0, &yd, dy.ptr(), 0.0, &bd, DevPtr::NULL), bp, &["db pointer"]);
});
