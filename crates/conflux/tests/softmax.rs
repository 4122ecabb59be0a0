//! Softmax forward and backward on every device against the f64 reference: every algorithm and
//! mode, 2-D to 5-D tensors, NCHW / NHWC / gapped strides, f32 / f16 / bf16, α/β, poisoned
//! outputs; refused calls leave outputs untouched.

mod support;

use conflux::ops::{softmax_backward, softmax_forward};
use conflux::reference::{self, tolerance, Fill};
use conflux::softmax::{SoftmaxAlgorithm, SoftmaxMode};
use conflux::{DataType, DevPtr, Handle, Status, TensorDesc};
use support::*;

fn check(h: &Handle, algo: SoftmaxAlgorithm, mode: SoftmaxMode, x: &TensorDesc, y: &TensorDesc, seed: u64) {
    let what = format!("{algo:?} {mode:?} x {} y {}", x.key(), y.key());
    let dt = x.dtype();
    let tol = tolerance(dt);
    // Fast does not subtract the maximum: keep exponents moderate (as its users must).
    let xd = random(h, x, Fill::Uniform(-4.0, 4.0), seed);
    let yd = poisoned(h, y);
    softmax_forward(h, algo, mode, (1.0, 0.0), x, xd.ptr(), y, yd.ptr()).unwrap_or_else(|e| panic!("{what}: {e}"));
    let mut want = yd.host.clone();
    reference::softmax_forward(algo, mode, (1.0, 0.0), x, &xd.host, y, &mut want).unwrap();
    let got = download(h, &yd);
    assert_gaps_untouched(&what, y, &got);
    assert_close(&format!("forward {what}"), &logical(y, &got), &logical(y, &want), tol);

    let old = upload(h, y, &got);
    softmax_forward(h, algo, mode, (0.5, 0.25), x, xd.ptr(), y, old.ptr()).unwrap();
    let mut want2 = old.host.clone();
    reference::softmax_forward(algo, mode, (0.5, 0.25), x, &xd.host, y, &mut want2).unwrap();
    assert_close(&format!("forward α/β {what}"), &logical(y, &download(h, &old)), &logical(y, &want2), tol);

    // Backward from the device's own forward output (as stored), dy through x's layout.
    let yv = upload(h, y, &got);
    let dy = random(h, x, Fill::Uniform(-1.0, 1.0), seed + 1);
    let dx = poisoned(h, y);
    softmax_backward(h, algo, mode, (1.0, 0.0), y, yv.ptr(), x, dy.ptr(), y, dx.ptr()).unwrap_or_else(|e| panic!("backward {what}: {e}"));
    let mut want_dx = dx.host.clone();
    reference::softmax_backward(algo, mode, (1.0, 0.0), y, &yv.host, x, &dy.host, y, &mut want_dx).unwrap();
    let got_dx = download(h, &dx);
    assert_gaps_untouched(&format!("backward {what}"), y, &got_dx);
    // The gradient cancels (Σ dx = 0 per group): compare with an absolute floor.
    let scale = logical(y, &want_dx).iter().map(|v| v * v).sum::<f64>().sqrt().max(1e-3);
    let err = logical(y, &got_dx).iter().zip(logical(y, &want_dx)).map(|(a, b)| (a - b) * (a - b)).sum::<f64>().sqrt();
    assert!(err.is_finite() && err <= tol * scale.max(1.0), "backward {what}: error {err:.3e}, gradient norm {scale:.3e}");
    let old_dx = upload(h, y, &got_dx);
    softmax_backward(h, algo, mode, (2.0, -1.0), y, yv.ptr(), x, dy.ptr(), y, old_dx.ptr()).unwrap();
    let mut want_dx2 = old_dx.host.clone();
    reference::softmax_backward(algo, mode, (2.0, -1.0), y, &yv.host, x, &dy.host, y, &mut want_dx2).unwrap();
    let err2 = logical(y, &download(h, &old_dx)).iter().zip(logical(y, &want_dx2)).map(|(a, b)| (a - b) * (a - b)).sum::<f64>().sqrt();
    assert!(err2.is_finite() && err2 <= 4.0 * tol * scale.max(1.0), "backward α/β {what}: error {err2:.3e}");
}

device_tests!(every_algorithm_mode_and_layout_matches_the_reference, |h: &Handle| {
    let mut r = SplitMix64::new(0x50f7);
    let shapes: [&[usize]; 6] = [&[2, 10, 3, 5], &[3, 1000, 1, 1], &[1, 4, 2, 3, 7], &[4, 33], &[2, 3, 17, 9], &[1, 64, 8, 8]];
    let mut seed = 1;
    for lens in shapes {
        for algo in SoftmaxAlgorithm::ALL.iter().copied() {
            for mode in SoftmaxMode::ALL.iter().copied() {
                let dt = r.pick(&[DataType::Float, DataType::Half, DataType::BFloat16]);
                let lays: &[Lay] = if lens.len() >= 4 { &[Lay::Packed, Lay::ChannelsLast, Lay::Gapped] } else { &[Lay::Packed] };
                let (lx, ly) = (r.pick(lays), r.pick(lays));
                check(h, algo, mode, &desc(dt, lens, lx), &desc(dt, lens, ly), seed);
                seed += 1;
            }
        }
    }
});

device_tests!(accurate_survives_large_inputs_where_fast_would_overflow, |h: &Handle| {
    // exp(200) overflows f32; subtracting the maximum keeps the result exact-ish.
    let d = TensorDesc::new(DataType::Float, &[1, 3, 1, 1]).unwrap();
    let x = upload(h, &d, &[200.0, 200.0 + 2f64.ln(), 200.0 + 5f64.ln()]);
    let y = poisoned(h, &d);
    softmax_forward(h, SoftmaxAlgorithm::Accurate, SoftmaxMode::Channel, (1.0, 0.0), &d, x.ptr(), &d, y.ptr()).unwrap();
    assert_close("accurate at 200", &download(h, &y), &[0.125, 0.25, 0.625], 1e-6);
    softmax_forward(h, SoftmaxAlgorithm::Log, SoftmaxMode::Instance, (1.0, 0.0), &d, x.ptr(), &d, y.ptr()).unwrap();
    assert_close("log at 200", &download(h, &y), &[0.125f64.ln(), 0.25f64.ln(), 0.625f64.ln()], 1e-6);
});

device_tests!(refused_calls_leave_outputs_untouched, |h: &Handle| {
    let x = desc(DataType::Float, &[2, 4, 3, 3], Lay::Packed);
    let xd = random(h, &x, Fill::Normal, 1);
    let yd = sentinel(h, &x, 9.0);
    let (a, m) = (SoftmaxAlgorithm::Accurate, SoftmaxMode::Channel);
    let other = desc(DataType::Float, &[2, 4, 3, 4], Lay::Packed);
    expect_err("lengths", softmax_forward(h, a, m, (1.0, 0.0), &x, xd.ptr(), &other, yd.ptr()), Status::BadParm, &["softmax forward", "lengths"]);
    let half = desc(DataType::Half, &[2, 4, 3, 3], Lay::Packed);
    expect_err("types", softmax_forward(h, a, m, (1.0, 0.0), &x, xd.ptr(), &half, yd.ptr()), Status::BadParm, &["type"]);
    expect_err("NULL x", softmax_forward(h, a, m, (1.0, 0.0), &x, DevPtr::NULL, &x, yd.ptr()), Status::BadParm, &["x pointer is NULL"]);
    let one = TensorDesc::new(DataType::Float, &[8]).unwrap();
    expect_err("1-D", softmax_forward(h, a, m, (1.0, 0.0), &one, xd.ptr(), &one, yd.ptr()), Status::BadParm, &["1-D"]);
    expect_err("backward NULL y", softmax_backward(h, a, m, (1.0, 0.0), &x, DevPtr::NULL, &x, xd.ptr(), &x, yd.ptr()), Status::BadParm, &["y pointer is NULL"]);
    expect_err("backward dx lengths", softmax_backward(h, a, m, (1.0, 0.0), &x, xd.ptr(), &x, xd.ptr(), &other, yd.ptr()), Status::BadParm, &["dx"]);
    assert_unchanged("y", h, &yd);
});
