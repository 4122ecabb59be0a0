//! The reference batch normalization: hand-computed inference/training/backward, statistics
//! outputs with MIOpen's rules, and backward against finite differences of Σ dy·y.

mod support;

use support::layouts::{channels_last, gapped, packed};
use conflux::batchnorm::derive_bn_desc;
use conflux::reference::*;
use conflux::types::BnMode;
use conflux::TensorDesc;

fn close(a: &[f64], b: &[f64], tol: f64) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() <= tol * (1.0 + y.abs()))
}

// Spatial, x = 2×2×1×2 (n,c,h,w). Channel 0 holds 1,2 (n0) and 3,4 (n1): M = 4,
// μ = 2.5, σ² = (2.25+0.25+0.25+2.25)/4 = 1.25, invStd = 1/√1.25 = 2/√5; with γ=2, β=1 and
// ε = 0: y = 1 + (4/√5)(x − 2.5) = 1 ∓ 6/√5, 1 ∓ 2/√5.
// Channel 1 holds 10,20,30,40: μ = 25, σ² = 125, γ=1, β=0 → y = (−15,−5,5,15)/√125.
// Running stats from rm = 0, rv = 1 with f = 0.5: rm = 0.5·μ; rv = 0.5·1 + 0.5·σ²·4/3
// → channel 0: 1.25 and 0.5 + 5/6 = 4/3; channel 1: 12.5 and 0.5 + 0.5·500/3.
#[test]
fn spatial_training_by_hand() {
    let xd = packed(&[2, 2, 1, 2]);
    let x = [1.0, 2.0, 10.0, 20.0, 3.0, 4.0, 30.0, 40.0];
    let (s5, s125) = (5f64.sqrt(), 125f64.sqrt());
    let mut y = poisoned(&xd);
    let (mut rm, mut rv, mut sm, mut si) = (vec![0.0; 2], vec![1.0; 2], vec![f64::NAN; 2], vec![f64::NAN; 2]);
    bn_forward_training(
        BnMode::Spatial, &xd, &x, &xd, &mut y, &[2.0, 1.0], &[1.0, 0.0], 0.5, 0.0,
        Some(&mut rm), Some(&mut rv), Some(&mut sm), Some(&mut si),
    )
    .unwrap();
    let want = [1.0 - 6.0 / s5, 1.0 - 2.0 / s5, -15.0 / s125, -5.0 / s125, 1.0 + 2.0 / s5, 1.0 + 6.0 / s5, 5.0 / s125, 15.0 / s125];
    assert!(close(&y, &want, 1e-14), "{y:?}");
    assert!(close(&sm, &[2.5, 25.0], 1e-15));
    assert!(close(&si, &[2.0 / s5, 1.0 / s125], 1e-15), "saved is the inverse std, not the variance");
    assert!(close(&rm, &[1.25, 12.5], 1e-15));
    assert!(close(&rv, &[4.0 / 3.0, 0.5 + 250.0 / 3.0], 1e-14), "running variance uses M/(M−1): {rv:?}");
}

// Per-activation, x = 2×1×1×2: column w0 holds 1 (n0), 3 (n1): μ = 2, σ² = 1; column w1
// holds 2, 5: μ = 3.5, σ² = 2.25. γ = 1, β = 0, ε = 0 → y = [−1, −1, 1, 1].
// M = N = 2, so with f = 1 the running variance becomes σ²·2 = [2, 4.5].
#[test]
fn per_activation_training_by_hand() {
    let xd = packed(&[2, 1, 1, 2]);
    let mut y = poisoned(&xd);
    let (mut rm, mut rv) = (vec![9.0; 2], vec![9.0; 2]);
    bn_forward_training(
        BnMode::PerActivation, &xd, &[1.0, 2.0, 3.0, 5.0], &xd, &mut y, &[1.0; 2], &[0.0; 2], 1.0, 0.0,
        Some(&mut rm), Some(&mut rv), None, None,
    )
    .unwrap();
    assert_eq!(y, [-1.0, -1.0, 1.0, 1.0]);
    assert_eq!(rm, [2.0, 3.5]);
    assert_eq!(rv, [2.0, 4.5]);
}

// With one sample per statistic (per-activation, N = 1) σ² = 0 and MIOpen keeps σ² rather
// than dividing by M − 1 = 0: rv = (1 − f)·rv = 0.75·2 = 1.5, no NaN; y = β.
#[test]
fn single_sample_running_variance() {
    let xd = packed(&[1, 2, 1, 1]);
    let mut y = poisoned(&xd);
    let mut rv = vec![2.0; 2];
    bn_forward_training(
        BnMode::PerActivation, &xd, &[3.0, -7.0], &xd, &mut y, &[5.0; 2], &[0.25, 0.5], 0.25, 1e-5,
        None, Some(&mut rv), None, None,
    )
    .unwrap();
    assert_eq!(rv, [1.5, 1.5]);
    assert_eq!(y, [0.25, 0.5]);
}

// Inference, spatial 1×2×1×2: channel 0 x = 1,3 with μ̂ = 1, σ̂² = 4 → (x−1)/2 = 0, 1;
// channel 1 x = −1,0 with μ̂ = −1, σ̂² = 0.25, γ = 2, β = 10 → 2·(x+1)/0.5 + 10 = 10, 14.
#[test]
fn inference_by_hand() {
    let xd = packed(&[1, 2, 1, 2]);
    let yd = gapped(&[1, 2, 1, 2]);
    let mut y = poisoned(&yd);
    bn_inference(BnMode::Spatial, &xd, &[1.0, 3.0, -1.0, 0.0], &yd, &mut y, &[1.0, 2.0], &[0.0, 10.0], &[1.0, -1.0], &[4.0, 0.25], 0.0)
        .unwrap();
    assert_eq!(gather(&yd, &y), [0.0, 1.0, 10.0, 14.0]);
    // ε = 0 with σ̂² = 0 gives ±inf/NaN, as documented (not an error).
    let mut y = poisoned(&xd);
    bn_inference(BnMode::Spatial, &xd, &[1.0, 3.0, -1.0, 0.0], &xd, &mut y, &[1.0; 2], &[0.0; 2], &[1.0; 2], &[0.0; 2], 0.0).unwrap();
    assert!(y[0].is_nan() && y[1] == f64::INFINITY);
}

// Backward, spatial, one channel, x = 1,2,3,4, dy = 1,0,0,0, γ = 1, ε = 0:
// μ = 2.5, invStd = 2/√5, x̂ = (−3,−1,1,3)/√5; dβ = Σdy = 1; dγ = Σdy·x̂ = −3/√5.
// dx = (invStd/4)·(4·dy − 1 + x̂·3/√5) = (1/(2√5))·(1.2, −1.6, −0.4, 0.8)
//    = (0.6, −0.8, −0.2, 0.4)/√5.
#[test]
fn backward_by_hand() {
    let xd = packed(&[2, 1, 1, 2]);
    let s5 = 5f64.sqrt();
    let mut dx = poisoned(&xd);
    let (mut ds, mut db) = (vec![f64::NAN], vec![f64::NAN]);
    bn_backward(BnMode::Spatial, &xd, &[1.0, 2.0, 3.0, 4.0], &xd, &[1.0, 0.0, 0.0, 0.0], &xd, &mut dx, &[1.0], &mut ds, &mut db, 0.0, None)
        .unwrap();
    assert!(close(&dx, &[0.6 / s5, -0.8 / s5, -0.2 / s5, 0.4 / s5], 1e-15), "{dx:?}");
    assert!(close(&ds, &[-3.0 / s5], 1e-15));
    assert_eq!(db, [1.0]);
}

/// The tensors the finite-difference tests run on: both modes, 4-D and 5-D, strided.
fn shapes() -> Vec<(BnMode, TensorDesc, TensorDesc)> {
    vec![
        (BnMode::Spatial, gapped(&[2, 3, 2, 2]), channels_last(&[2, 3, 2, 2])),
        (BnMode::Spatial, channels_last(&[2, 2, 2, 1, 2]), packed(&[2, 2, 2, 1, 2])),
        (BnMode::PerActivation, packed(&[3, 2, 2, 1]), gapped(&[3, 2, 2, 1])),
        (BnMode::PerActivation, gapped(&[2, 2, 1, 2, 2]), channels_last(&[2, 2, 1, 2, 2])),
    ]
}

#[test]
fn backward_matches_finite_differences() {
    let eps = 1e-3;
    let h = 1e-5;
    for (case, (mode, xd, yd)) in shapes().into_iter().enumerate() {
        let np = derive_bn_desc(&xd, mode).unwrap().element_count();
        let seed = 10 * case as u64;
        let x = fill_for(&xd, Fill::Normal, seed);
        let dy = fill_for(&yd, Fill::Normal, seed + 1); // dy shares y's layout
        let scale = fill_uniform(seed + 2, np, 0.5, 2.0);
        let bias = fill_normal(seed + 3, np);
        // L(x, γ, β) = Σ dy·y(x), y normalized with the batch statistics of x.
        let loss = |x: &[f64], scale: &[f64], bias: &[f64]| {
            let mut y = poisoned(&yd);
            bn_forward_training(mode, &xd, x, &yd, &mut y, scale, bias, 0.0, eps, None, None, None, None).unwrap();
            dot(&yd, &dy, &yd, &y)
        };
        let (mut dx, mut ds, mut db) = (poisoned(&xd), vec![f64::NAN; np], vec![f64::NAN; np]);
        bn_backward(mode, &xd, &x, &yd, &dy, &xd, &mut dx, &scale, &mut ds, &mut db, eps, None).unwrap();
        let check = |what: &str, got: f64, fd: f64| {
            assert!((got - fd).abs() <= 1e-6 * (1.0 + fd.abs()), "{mode:?} {} {what}: {got} vs fd {fd}", xd.key());
        };
        for o in offsets(&xd) {
            let (mut xp, mut xm) = (x.clone(), x.clone());
            xp[o] += h;
            xm[o] -= h;
            check("dx", dx[o], (loss(&xp, &scale, &bias) - loss(&xm, &scale, &bias)) / (2.0 * h));
        }
        for p in 0..np {
            let (mut sp, mut sm) = (scale.clone(), scale.clone());
            sp[p] += h;
            sm[p] -= h;
            check("dscale", ds[p], (loss(&x, &sp, &bias) - loss(&x, &sm, &bias)) / (2.0 * h));
            let (mut bp, mut bm) = (bias.clone(), bias.clone());
            bp[p] += h;
            bm[p] -= h;
            check("dbias", db[p], (loss(&x, &scale, &bp) - loss(&x, &scale, &bm)) / (2.0 * h));
        }
        // Saved statistics from the forward pass give the same gradients as recomputing.
        let (mut sm, mut si) = (vec![0.0; np], vec![0.0; np]);
        let mut y = poisoned(&yd);
        bn_forward_training(mode, &xd, &x, &yd, &mut y, &scale, &bias, 0.0, eps, None, None, Some(&mut sm), Some(&mut si)).unwrap();
        let (mut dx2, mut ds2, mut db2) = (poisoned(&xd), vec![0.0; np], vec![0.0; np]);
        bn_backward(mode, &xd, &x, &yd, &dy, &xd, &mut dx2, &scale, &mut ds2, &mut db2, 123.0, Some((&sm, &si))).unwrap();
        assert!(close(&gather(&xd, &dx2), &gather(&xd, &dx), 1e-13) && close(&ds2, &ds, 1e-13) && close(&db2, &db, 1e-13));
    }
}

/// Statistics outputs checked against sums written out directly for the spatial case.
#[test]
fn training_statistics_follow_miopen_rules() {
    for (mode, xd, yd) in shapes() {
        let np = derive_bn_desc(&xd, mode).unwrap().element_count();
        let x = fill_for(&xd, Fill::Normal, 77);
        let (eps, f) = (1e-2, 0.3);
        let (mut rm, mut rv) = (fill_normal(1, np), fill_uniform(2, np, 0.5, 1.5));
        let (rm0, rv0) = (rm.clone(), rv.clone());
        let (mut sm, mut si) = (vec![0.0; np], vec![0.0; np]);
        let (scale, bias) = (vec![1.0; np], vec![0.0; np]);
        let mut y = poisoned(&yd);
        bn_forward_training(mode, &xd, &x, &yd, &mut y, &scale, &bias, f, eps, Some(&mut rm), Some(&mut rv), Some(&mut sm), Some(&mut si))
            .unwrap();
        // Independent statistics: bucket the logical values by parameter.
        let lens = xd.lens().to_vec();
        let mut buckets = vec![Vec::new(); np];
        conflux::tensor::for_each_index(&lens, |idx| {
            let p = match mode {
                BnMode::Spatial => idx[1],
                BnMode::PerActivation => idx[1..].iter().zip(&lens[1..]).fold(0, |a, (&i, &l)| a * l + i),
            };
            buckets[p].push(x[xd.offset(idx)]);
        });
        for p in 0..np {
            let b = &buckets[p];
            let m = b.len() as f64;
            let mean = b.iter().sum::<f64>() / m;
            let var = b.iter().map(|v| v * v).sum::<f64>() / m - mean * mean; // E[x²] − μ²
            assert!((sm[p] - mean).abs() < 1e-12);
            assert!((si[p] - 1.0 / (var + eps).sqrt()).abs() < 1e-10);
            assert!((rm[p] - ((1.0 - f) * rm0[p] + f * mean)).abs() < 1e-12);
            assert!((rv[p] - ((1.0 - f) * rv0[p] + f * var * m / (m - 1.0))).abs() < 1e-10);
        }
        // Inference with the batch statistics reproduces the training output.
        let var: Vec<f64> = si.iter().map(|s| 1.0 / (s * s) - eps).collect();
        let mut yi = poisoned(&yd);
        bn_inference(mode, &xd, &x, &yd, &mut yi, &scale, &bias, &sm, &var, eps).unwrap();
        assert!(close(&gather(&yd, &yi), &gather(&yd, &y), 1e-10));
    }
}

#[test]
fn bad_shapes_are_refused() {
    let xd = packed(&[2, 3, 2, 2]);
    let x = vec![0.0; 24];
    let mut y = vec![0.0; 24];
    // Spatial parameters need C = 3 entries.
    let e = bn_inference(BnMode::Spatial, &xd, &x, &xd, &mut y, &[1.0; 2], &[0.0; 3], &[0.0; 3], &[1.0; 3], 1e-5).unwrap_err();
    assert_eq!(e.status, conflux::Status::BadParm);
    assert!(e.reason.contains("scale"), "{}", e.reason);
    // x and y lengths must agree.
    let yd = packed(&[2, 3, 4, 1]);
    let e = bn_inference(BnMode::Spatial, &xd, &x, &yd, &mut y, &[1.0; 3], &[0.0; 3], &[0.0; 3], &[1.0; 3], 1e-5).unwrap_err();
    assert!(e.reason.contains("lengths"), "{}", e.reason);
    // 3-D x is not a batch-norm input.
    let x3 = packed(&[2, 3, 4]);
    let e = bn_inference(BnMode::Spatial, &x3, &x, &x3, &mut y, &[1.0; 3], &[0.0; 3], &[0.0; 3], &[1.0; 3], 1e-5).unwrap_err();
    assert!(e.reason.contains("4-D or 5-D"), "{}", e.reason);
}
