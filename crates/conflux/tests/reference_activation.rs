//! The reference activations: every mode forward and backward at hand-computed points
//! (MIOpen's quirks included), and backward against central finite differences.

mod support;

use support::layouts::{channels_last, gapped, packed};
use conflux::reference::*;
use conflux::types::ActivationMode::{self, *};
use conflux::{ActivationDesc, Status, TensorDesc};

/// Runs forward and backward on a 1×1×1×n row through three different layouts, returning
/// logical (y, dx).
fn run(desc: &ActivationDesc, x: &[f64], dy: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let n = x.len();
    let (xd, yd, dyd, dxd) = (gapped(&[1, 1, 1, n]), channels_last(&[1, 1, 1, n]), packed(&[1, 1, 1, n]), gapped(&[1, 1, 1, n]));
    let xb = scatter(&xd, x);
    let mut yb = poisoned(&yd);
    activation_forward(desc, &xd, &xb, &yd, &mut yb).unwrap();
    let mut dxb = poisoned(&dxd);
    activation_backward(desc, &yd, &yb, &dyd, &scatter(&dyd, dy), &xd, &xb, &dxd, &mut dxb).unwrap();
    (gather(&yd, &yb), gather(&dxd, &dxb))
}

fn close(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() <= 1e-12 * (1.0 + y.abs()))
}

fn hand(mode: ActivationMode, (a, b, g): (f64, f64, f64), x: &[f64], y: &[f64], dy: &[f64], dx: &[f64]) {
    let (gy, gdx) = run(&ActivationDesc::new(mode, a, b, g), x, dy);
    assert!(close(&gy, y), "{mode:?} forward: {gy:?} != {y:?}");
    assert!(close(&gdx, dx), "{mode:?} backward: {gdx:?} != {dx:?}");
}

#[test]
fn every_mode_by_hand() {
    let e = std::f64::consts::E;
    // PASTHRU: y = x, dx = dy.
    hand(PassThru, (0.0, 0.0, 0.0), &[-1.5, 0.0, 2.0], &[-1.5, 0.0, 2.0], &[1.0, 2.0, 3.0], &[1.0, 2.0, 3.0]);
    // LOGISTIC: σ(0) = 1/2, σ(ln 3) = 1/(1 + 1/3) = 3/4; dx = dy·y(1−y) = 1/4, 3/16.
    hand(Logistic, (0.0, 0.0, 0.0), &[0.0, 3f64.ln()], &[0.5, 0.75], &[1.0, 1.0], &[0.25, 0.1875]);
    // TANH α=2, β=3: y = 3·tanh(2x); dx = dy·α·(β − y²/β): at 0 → 1·2·3 = 6;
    // at 0.5, y = 3·tanh 1 ≈ 2.28478, dx = 2·2·(3 − y²/3) ≈ 5.03969.
    let t = 3.0 * 1f64.tanh();
    hand(Tanh, (2.0, 3.0, 0.0), &[0.0, 0.5], &[0.0, t], &[1.0, 2.0], &[6.0, 4.0 * (3.0 - t * t / 3.0)]);
    // TANH with β = 0: y = 0 and the kernel returns dx = 0 (|β| ≤ ε) instead of dividing.
    hand(Tanh, (1.0, 0.0, 0.0), &[0.7], &[0.0], &[5.0], &[0.0]);
    // RELU: dx = dy only for x > 0 (x = 0 gives 0).
    hand(Relu, (0.0, 0.0, 0.0), &[-1.0, 0.0, 2.0], &[0.0, 0.0, 2.0], &[5.0; 3], &[0.0, 0.0, 5.0]);
    // SOFTRELU: y(0) = ln 2, dx(0) = e⁰/(e⁰+1) = 1/2; x = 100 → y ≈ 100 and the backward
    // clamps m = 50: e⁵⁰/(e⁵⁰+1); x = −100 → y = ln(1+e⁻¹⁰⁰), dx = e⁻¹⁰⁰/(e⁻¹⁰⁰+1).
    let (e50, em100) = (50f64.exp(), (-100f64).exp());
    hand(
        SoftRelu,
        (0.0, 0.0, 0.0),
        &[0.0, 100.0, -100.0],
        &[2f64.ln(), 100.0, em100.ln_1p()],
        &[1.0; 3],
        &[0.5, e50 / (e50 + 1.0), em100 / (em100 + 1.0)],
    );
    // ABS: dx = dy·(+1 if x > 0 else −1), so x = 0 gives −dy.
    hand(Abs, (0.0, 0.0, 0.0), &[-3.0, 0.0, 2.0], &[3.0, 0.0, 2.0], &[1.0; 3], &[-1.0, -1.0, 1.0]);
    // POWER α=1, β=2, γ=3: v = 1 + 2x = 2, 0, 3 → y = 8, 0 (v ≤ ε), 27;
    // dx = γ·β·y/v = 3·2·8/2 = 24, 0, 3·2·27/3 = 54 — dy (= 7) is NOT multiplied in.
    hand(Power, (1.0, 2.0, 3.0), &[0.5, -0.5, 1.0], &[8.0, 0.0, 27.0], &[7.0; 3], &[24.0, 0.0, 54.0]);
    // CLIPPEDRELU α=1: y = min(1, max(0, x)); dx = dy for 0 < x ≤ α (x = α passes).
    hand(
        ClippedRelu,
        (1.0, 0.0, 0.0),
        &[-1.0, 0.0, 0.5, 1.0, 1.5],
        &[0.0, 0.0, 0.5, 1.0, 1.0],
        &[2.0; 5],
        &[0.0, 0.0, 2.0, 2.0, 0.0],
    );
    // LEAKYRELU α=0.1: y = 0.1·x for x ≤ 0; dx = dy·0.1 there (x = 0 included).
    hand(LeakyRelu, (0.1, 0.0, 0.0), &[-2.0, 0.0, 3.0], &[-0.2, 0.0, 3.0], &[1.0; 3], &[0.1, 0.1, 1.0]);
    // ELU α=0.5: y = 0.5·(eˣ − 1) for x ≤ 0; dx = dy·(y + α) there: at −1, 0.5/e; at 0, 0.5.
    hand(Elu, (0.5, 0.0, 0.0), &[-1.0, 0.0, 2.0], &[0.5 * (1.0 / e - 1.0), 0.0, 2.0], &[1.0; 3], &[0.5 / e, 0.5, 1.0]);
}

#[test]
fn extension_modes_by_hand() {
    let (ln2, ln3) = (2f64.ln(), 3f64.ln());
    // SILU: σ(0) = 1/2, σ(±ln 3) = 3/4, 1/4; dx = dy·σ·(1 + x·(1 − σ)).
    hand(
        Silu,
        (0.0, 0.0, 0.0),
        &[0.0, ln3, -ln3],
        &[0.0, 0.75 * ln3, -0.25 * ln3],
        &[2.0; 3],
        &[1.0, 2.0 * 0.75 * (1.0 + 0.25 * ln3), 2.0 * 0.25 * (1.0 - 0.75 * ln3)],
    );
    // HARDSWISH: 0 below −3, x above 3, x(x+3)/6 between; dx = x/3 + 1/2 on [−3, 3] (PyTorch:
    // −1/2 at −3, 3/2 at 3), 0 below, dy above. α/β/γ are ignored.
    hand(
        HardSwish,
        (7.0, -2.0, 5.0),
        &[-4.0, -3.0, 0.0, 1.0, 3.0, 5.0],
        &[0.0, 0.0, 0.0, 2.0 / 3.0, 3.0, 5.0],
        &[1.0; 6],
        &[0.0, -0.5, 0.5, 5.0 / 6.0, 1.5, 1.0],
    );
    // HARDSIGMOID: (x+3)/6 clamped to [0, 1]; dx = dy/6 strictly inside (−3, 3).
    hand(
        HardSigmoid,
        (0.0, 0.0, 0.0),
        &[-4.0, -3.0, 0.0, 1.5, 3.0, 5.0],
        &[0.0, 0.0, 0.5, 0.75, 1.0, 1.0],
        &[6.0; 6],
        &[0.0, 0.0, 1.0, 1.0, 0.0, 0.0],
    );
    // GELU = x·Φ(x); dx = Φ(x) + x·φ(x): Φ(1) = 0.8413447460685429, φ(1) = 0.24197072451914337.
    let (cdf1, pdf1) = (0.841_344_746_068_542_9, 0.241_970_724_519_143_37);
    hand(
        Gelu,
        (0.0, 0.0, 0.0),
        &[0.0, 1.0, -1.0],
        &[0.0, cdf1, -(1.0 - cdf1)],
        &[1.0; 3],
        &[0.5, cdf1 + pdf1, (1.0 - cdf1) - pdf1],
    );
    // GELU_TANH from the textbook formula with tanh (the implementation uses 2σ(2u)).
    let k0 = (2.0 / std::f64::consts::PI).sqrt();
    let gt = |x: f64| 0.5 * x * (1.0 + (k0 * (x + 0.044715 * x * x * x)).tanh());
    let gtd = |x: f64| {
        let t = (k0 * (x + 0.044715 * x * x * x)).tanh();
        0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k0 * (1.0 + 3.0 * 0.044715 * x * x)
    };
    let xs = [0.0, 1.0, -1.0, 2.5];
    hand(GeluTanh, (0.0, 0.0, 0.0), &xs, &xs.map(gt), &[1.0; 4], &xs.map(gtd));
    // MISH: softplus(0) = ln 2, tanh(ln 2) = 3/5; at ln 2, tanh(ln 3) = 4/5; at −ln 2,
    // tanh(ln 1.5) = 5/13. dx = t + x·(1 − t²)·σ(x). Above 20 it is x (PyTorch's threshold).
    hand(
        Mish,
        (0.0, 0.0, 0.0),
        &[0.0, ln2, -ln2, 30.0],
        &[0.0, 0.8 * ln2, -ln2 * 5.0 / 13.0, 30.0],
        &[1.0; 4],
        &[0.6, 0.8 + ln2 * 0.36 * (2.0 / 3.0), 5.0 / 13.0 - ln2 * (144.0 / 169.0) / 3.0, 1.0],
    );
}

/// Points within 1e-3 of a kink (or, for POWER, where the base v is near ε) are skipped.
fn near_kink(d: &ActivationDesc, x: f64) -> bool {
    let near = |k: f64| (x - k).abs() < 1e-3;
    match d.mode {
        Relu | Abs | LeakyRelu | Elu => near(0.0),
        ClippedRelu => near(0.0) || near(d.alpha),
        HardSwish | HardSigmoid => near(-3.0) || near(3.0),
        Power => (d.alpha + d.beta * x) < 1e-3,
        _ => false,
    }
}

#[test]
fn backward_matches_finite_differences() {
    let descs = [
        ActivationDesc::new(PassThru, 0.0, 0.0, 0.0),
        ActivationDesc::new(Logistic, 0.0, 0.0, 0.0),
        ActivationDesc::new(Tanh, 1.5, 0.7, 0.0),
        ActivationDesc::new(Tanh, 0.3, -2.0, 0.0),
        ActivationDesc::new(Relu, 0.0, 0.0, 0.0),
        ActivationDesc::new(SoftRelu, 0.0, 0.0, 0.0),
        ActivationDesc::new(Abs, 0.0, 0.0, 0.0),
        ActivationDesc::new(Power, 0.5, 1.5, 2.5),
        ActivationDesc::new(Power, 4.0, -1.0, 0.5),
        ActivationDesc::new(ClippedRelu, 1.2, 0.0, 0.0),
        ActivationDesc::new(LeakyRelu, 0.05, 0.0, 0.0),
        ActivationDesc::new(Elu, 1.3, 0.0, 0.0),
        ActivationDesc::new(Silu, 0.0, 0.0, 0.0),
        ActivationDesc::new(HardSwish, 0.0, 0.0, 0.0),
        ActivationDesc::new(HardSigmoid, 0.0, 0.0, 0.0),
        ActivationDesc::new(Gelu, 0.0, 0.0, 0.0),
        ActivationDesc::new(GeluTanh, 0.0, 0.0, 0.0),
        ActivationDesc::new(Mish, 0.0, 0.0, 0.0),
    ];
    // Every mode is covered (a new mode must be added above).
    for m in ActivationMode::ALL {
        assert!(descs.iter().any(|d| d.mode == *m), "{m:?} has no finite-difference case");
    }
    // x and dx gapped, y channels-last, dy packed: 2×3×2×2 elements matched logically.
    let lens = [2, 3, 2, 2];
    let (xd, yd, dyd, dxd) = (gapped(&lens), channels_last(&lens), packed(&lens), gapped(&lens));
    let h = 1e-6;
    for (i, d) in descs.iter().enumerate() {
        let x = fill_for(&xd, Fill::Uniform(-3.0, 3.0), 100 + i as u64);
        let dy = fill_for(&dyd, Fill::Normal, 200 + i as u64);
        let fwd = |xb: &[f64]| {
            let mut y = poisoned(&yd);
            activation_forward(d, &xd, xb, &yd, &mut y).unwrap();
            y
        };
        let y = fwd(&x);
        let mut dx = poisoned(&dxd);
        activation_backward(d, &yd, &y, &dyd, &dy, &xd, &x, &dxd, &mut dx).unwrap();
        let shift = |s: f64| x.iter().map(|v| v + s).collect::<Vec<_>>(); // NaN gaps stay NaN
        let (yp, ym) = (gather(&yd, &fwd(&shift(h))), gather(&yd, &fwd(&shift(-h))));
        let (gx, gdy, gdx) = (gather(&xd, &x), gather(&dyd, &dy), gather(&dxd, &dx));
        let mut tested = 0;
        for j in 0..gx.len() {
            if near_kink(d, gx[j]) {
                continue;
            }
            let deriv = (yp[j] - ym[j]) / (2.0 * h);
            // POWER's backward is the derivative itself: MIOpen does not multiply by dy.
            let want = if d.mode == Power { deriv } else { gdy[j] * deriv };
            assert!((gdx[j] - want).abs() <= 1e-6 * (1.0 + want.abs()), "{d:?} at x={}: dx {} vs fd {want}", gx[j], gdx[j]);
            tested += 1;
        }
        assert!(tested >= 8, "{d:?}: only {tested} points away from kinks");
    }
}

#[test]
fn element_counts_must_match_but_shapes_may_differ() {
    let d = ActivationDesc::relu();
    let (xd, yd) = (packed(&[1, 2, 3, 4]), packed(&[2, 3, 4, 1]));
    let x = fill_for(&xd, Fill::Normal, 1);
    let mut y = poisoned(&yd);
    activation_forward(&d, &xd, &x, &yd, &mut y).unwrap();
    // Matched by row-major position, not by multi-index.
    let want: Vec<f64> = x.iter().map(|v| v.max(0.0)).collect();
    assert_eq!(y, want);
    let bad = TensorDesc::new(conflux::DataType::Float, &[1, 2, 3, 5]).unwrap();
    let mut yb = poisoned(&bad);
    let e = activation_forward(&d, &xd, &x, &bad, &mut yb).unwrap_err();
    assert_eq!(e.status, Status::BadParm);
    assert!(e.reason.contains("elements"), "{}", e.reason);
}

/// The extension modes in f32 (the formulas the CPU runs) against f64, over inputs from tiny
/// to f32::MAX: finite everywhere (SiLU at large negative x, Mish's softplus at large
/// positive x) and accurate to a few f32 roundings times the mode's condition number, so that
/// a formula that cancels (1 + erf, 1 + tanh at negative x) or overflows fails.
#[test]
fn extension_modes_in_f32_are_finite_and_accurate() {
    let mags = [0.0, 1e-20, 1e-3, 0.5, 1.0, 2.0, 3.5, 5.0, 7.5, 10.0, 13.0, 15.0, 19.5, 20.5, 25.0, 50.0, 88.0, 100.0, 1e4, 1e10, 1e20, 1e30, f32::MAX as f64];
    for &mode in &[Silu, HardSwish, HardSigmoid, Gelu, GeluTanh, Mish] {
        let d = ActivationDesc::new(mode, 0.0, 0.0, 0.0);
        for &m in &mags {
            for x in [m, -m] {
                let xf = x as f32;
                let x = xf as f64;
                // Relative condition number of the mode at x (capped where results are 0 or x).
                let ax = x.abs().min(20.0);
                let kappa = match mode {
                    Gelu => 1.0 + ax * ax,
                    GeluTanh => 1.0 + 0.2 * ax * ax * ax,
                    _ => 1.0 + ax,
                };
                let tol = |want: f64| 16.0 * f32::EPSILON as f64 * kappa * want.abs() + 1e-37;
                let (yf, y) = (d.forward(xf) as f64, d.forward(x));
                assert!(yf.is_finite() && (yf - y).abs() <= tol(y), "{mode:?} forward at {x}: f32 {yf} vs f64 {y}");
                let (gf, g) = (d.backward(1.0f32, xf, yf as f32) as f64, d.backward(1.0, x, y));
                assert!(gf.is_finite() && (gf - g).abs() <= tol(g), "{mode:?} backward at {x}: f32 {gf} vs f64 {g}");
            }
        }
    }
}
