//! The reference bias and the fused reference chains of §2.6.

mod support;

use support::layouts::{channels_last, gapped, packed};
use conflux::batchnorm::derive_bn_desc;
use conflux::reference::*;
use conflux::types::{ActivationMode, BnMode, ConvMode};
use conflux::{ActivationDesc, ConvDesc, Status, TensorDesc};

// y = 1×2×2×1 with c0 = 1,2 and c1 = 3,4 (stored NHWC), b = 1×2×1×1 = [10, 100]
// → y + b = 11,12,103,104.
#[test]
fn bias_forward_by_hand() {
    let yd = channels_last(&[1, 2, 2, 1]);
    let mut y = scatter(&yd, &[1.0, 2.0, 3.0, 4.0]);
    bias_forward(&yd, &mut y, &packed(&[1, 2, 1, 1]), &[10.0, 100.0]).unwrap();
    assert_eq!(gather(&yd, &y), [11.0, 12.0, 103.0, 104.0]);
    // Any dim of b may be 1 or equal: b = 1×1×2×1 adds per row h.
    let mut y = scatter(&yd, &[1.0, 2.0, 3.0, 4.0]);
    bias_forward(&yd, &mut y, &gapped(&[1, 1, 2, 1]), &scatter(&gapped(&[1, 1, 2, 1]), &[10.0, 100.0])).unwrap();
    assert_eq!(gather(&yd, &y), [11.0, 102.0, 13.0, 104.0]);
    let e = bias_forward(&yd, &mut y, &packed(&[1, 3, 1, 1]), &[0.0; 3]).unwrap_err();
    assert_eq!(e.status, Status::BadParm);
    assert!(e.reason.contains("neither 1 nor"), "{}", e.reason);
}

// dy = 2×2×1×2 = 1..8 in n,c,h,w order: channel 0 holds 1,2 (n0) and 5,6 (n1) → 14;
// channel 1 holds 3,4 and 7,8 → 22.
#[test]
fn bias_backward_by_hand_and_adjoint() {
    let dyd = gapped(&[2, 2, 1, 2]);
    let dy_vals: Vec<f64> = (1..=8).map(f64::from).collect();
    let dy = scatter(&dyd, &dy_vals);
    let dbd = packed(&[1, 2, 1, 1]);
    let mut db = vec![f64::NAN; 2];
    bias_backward(&dyd, &dy, &dbd, &mut db).unwrap();
    assert_eq!(db, [14.0, 22.0]);
    // Adjoint: <y + b − y, dy> = <b, db> for the broadcast.
    let b = [0.5, -3.0];
    let mut y = scatter(&dyd, &[0.0; 8]);
    bias_forward(&dyd, &mut y, &dbd, &b).unwrap();
    assert_eq!(dot(&dyd, &y, &dyd, &dy), b[0] * db[0] + b[1] * db[1]);
}

// 1×1 conv with w = 2 on x = −2,0,1 → −4,0,2; ·α1 = 0.5 → −2,0,1; + α2·z = 3·1 → 1,3,4;
// + b = −2 → −1,1,2; relu → 0,1,2.
#[test]
fn conv_z_bias_relu_by_hand() {
    let conv = ConvDesc::new_2d(ConvMode::Convolution, [0, 0], [1, 1], [1, 1]).unwrap();
    let (xd, wd, yd, bd) = (packed(&[1, 1, 1, 3]), packed(&[1, 1, 1, 1]), gapped(&[1, 1, 1, 3]), packed(&[1, 1, 1, 1]));
    let mut y = poisoned(&yd);
    let zd = channels_last(&[1, 1, 1, 3]);
    let z = scatter(&zd, &[1.0; 3]);
    conv_bias_act_forward(0.5, &conv, &xd, &[-2.0, 0.0, 1.0], &wd, &[2.0], 3.0, Some((&zd, &z)), Some((&bd, &[-2.0])), &ActivationDesc::relu(), &yd, &mut y)
        .unwrap();
    assert_eq!(gather(&yd, &y), [0.0, 1.0, 2.0]);
}

/// C+B+N+A through `forward_chain` equals the ops run one by one, and C+Z+B+A equals its
/// composition, with strided inputs and outputs.
#[test]
fn chains_equal_their_compositions() {
    let mut conv = ConvDesc::new_2d(ConvMode::Convolution, [1, 0], [1, 2], [1, 1]).unwrap();
    conv.set_groups(2).unwrap();
    let (xd, wd) = (gapped(&[2, 4, 5, 6]), channels_last(&[6, 2, 3, 2]));
    let ylens = conv.output_lens(&xd, &wd).unwrap();
    let (yd, bd) = (channels_last(&ylens), packed(&[1, 6, 1, 1]));
    let x = fill_for(&xd, Fill::Normal, 1);
    let w = fill_for(&wd, Fill::Normal, 2);
    let b = fill_normal(3, 6);
    let bn = derive_bn_desc(&yd, BnMode::Spatial).unwrap();
    let (scale, shift, mean, var) = (fill_uniform(4, 6, 0.5, 2.0), fill_normal(5, 6), fill_normal(6, 6), fill_uniform(7, 6, 0.5, 3.0));
    let act = ActivationDesc::new(ActivationMode::Elu, 0.7, 0.0, 0.0);
    assert_eq!(bn.element_count(), 6);

    // Step by step, each into a fresh packed buffer.
    let pd = packed(&ylens);
    let mut t = poisoned(&pd);
    conv_forward(&conv, &xd, &x, &wd, &w, &pd, &mut t).unwrap();
    bias_forward(&pd, &mut t, &bd, &b).unwrap();
    let mut u = poisoned(&pd);
    bn_inference(BnMode::Spatial, &pd, &t, &pd, &mut u, &scale, &shift, &mean, &var, 1e-5).unwrap();
    let mut want = poisoned(&yd);
    activation_forward(&act, &pd, &u, &yd, &mut want).unwrap();

    let mut ops = [
        ChainOp::Conv { conv: &conv, w_desc: &wd, w: &w },
        ChainOp::Bias { b_desc: &bd, b: &b },
        ChainOp::BnInference { mode: BnMode::Spatial, scale: &scale, bias: &shift, mean: &mean, var: &var, eps: 1e-5 },
        ChainOp::Activation(act),
    ];
    let mut got = poisoned(&yd);
    forward_chain(&xd, &x, &mut ops, &yd, &mut got).unwrap();
    assert_eq!(gather(&yd, &got), gather(&yd, &want));

    // C+Z+B+A: relu(α1·conv + α2·z + b).
    let z = fill_for(&yd, Fill::Normal, 8);
    let mut cz = poisoned(&pd);
    conv_forward(&conv, &xd, &x, &wd, &w, &pd, &mut cz).unwrap();
    let zl = gather(&yd, &z);
    let mut comb: Vec<f64> = cz.iter().zip(&zl).map(|(c, z)| 1.5 * c - 0.5 * z).collect();
    bias_forward(&pd, &mut comb, &bd, &b).unwrap();
    let want: Vec<f64> = comb.iter().map(|v| v.max(0.0)).collect();
    let mut y = poisoned(&yd);
    conv_bias_act_forward(1.5, &conv, &xd, &x, &wd, &w, -0.5, Some((&yd, &z)), Some((&bd, &b)), &ActivationDesc::relu(), &yd, &mut y).unwrap();
    assert_eq!(gather(&yd, &y), want);
}

/// N(train)+A chain writes the statistics like the unfused op.
#[test]
fn bn_training_chain_writes_statistics() {
    let xd = gapped(&[3, 2, 2, 2]);
    let x = fill_for(&xd, Fill::Normal, 9);
    let (scale, bias) = (vec![1.5, 0.5], vec![0.1, -0.2]);
    let (mut sm, mut si, mut rm, mut rv) = (vec![0.0; 2], vec![0.0; 2], vec![0.0; 2], vec![1.0; 2]);
    let yd = packed(&[3, 2, 2, 2]);
    let mut y = poisoned(&yd);
    let mut ops = [
        ChainOp::BnTraining {
            mode: BnMode::Spatial,
            scale: &scale,
            bias: &bias,
            exp_avg_factor: 0.1,
            eps: 1e-5,
            running_mean: Some(&mut rm),
            running_var: Some(&mut rv),
            saved_mean: Some(&mut sm),
            saved_inv_std: Some(&mut si),
        },
        ChainOp::Activation(ActivationDesc::relu()),
    ];
    forward_chain(&xd, &x, &mut ops, &yd, &mut y).unwrap();
    let (mut sm2, mut si2, mut rm2, mut rv2) = (vec![0.0; 2], vec![0.0; 2], vec![0.0; 2], vec![1.0; 2]);
    let mut y2 = poisoned(&yd);
    bn_forward_training(BnMode::Spatial, &xd, &x, &yd, &mut y2, &scale, &bias, 0.1, 1e-5, Some(&mut rm2), Some(&mut rv2), Some(&mut sm2), Some(&mut si2))
        .unwrap();
    assert_eq!((sm, si, rm, rv), (sm2, si2, rm2, rv2));
    assert_eq!(y, y2.iter().map(|v| v.max(0.0)).collect::<Vec<_>>());
}

/// The N(bwd)+A(bwd) chain against finite differences of L = Σ dy·act(bn_train(x)), whose
/// gradient it is when the saved statistics are x's own batch statistics.
#[test]
fn bn_act_backward_matches_finite_differences() {
    let acts = [
        ActivationDesc::new(ActivationMode::Logistic, 0.0, 0.0, 0.0),
        ActivationDesc::new(ActivationMode::Tanh, 1.2, 0.8, 0.0),
        ActivationDesc::new(ActivationMode::SoftRelu, 0.0, 0.0, 0.0),
        ActivationDesc::new(ActivationMode::Elu, 1.0, 0.0, 0.0), // α = 1: smooth at 0
    ];
    let cases: [(BnMode, TensorDesc); 2] = [(BnMode::Spatial, gapped(&[2, 2, 2, 3])), (BnMode::PerActivation, channels_last(&[3, 2, 1, 2, 2]))];
    let (eps, h) = (1e-3, 1e-5);
    for (mode, xd) in cases {
        let np = derive_bn_desc(&xd, mode).unwrap().element_count();
        let yd = packed(xd.lens());
        for (i, act) in acts.iter().enumerate() {
            let x = fill_for(&xd, Fill::Normal, 30 + i as u64);
            let dy = fill_for(&yd, Fill::Normal, 40 + i as u64);
            let (scale, bias) = (fill_uniform(50, np, 0.5, 2.0), fill_normal(51, np));
            let forward = |x: &[f64], scale: &[f64], bias: &[f64], sm: Option<&mut [f64]>, si: Option<&mut [f64]>| {
                let mut y = poisoned(&yd);
                let mut ops = [
                    ChainOp::BnTraining { mode, scale, bias, exp_avg_factor: 0.0, eps, running_mean: None, running_var: None, saved_mean: sm, saved_inv_std: si },
                    ChainOp::Activation(*act),
                ];
                forward_chain(&xd, x, &mut ops, &yd, &mut y).unwrap();
                y
            };
            let loss = |x: &[f64], s: &[f64], b: &[f64]| dot(&yd, &dy, &yd, &forward(x, s, b, None, None));
            let (mut sm, mut si) = (vec![0.0; np], vec![0.0; np]);
            let act_y = forward(&x, &scale, &bias, Some(&mut sm), Some(&mut si));
            let (mut dx, mut ds, mut db) = (poisoned(&xd), vec![f64::NAN; np], vec![f64::NAN; np]);
            bn_bwd_act_backward(mode, act, &xd, &x, &yd, &act_y, &yd, &dy, &xd, &mut dx, &scale, &bias, &mut ds, &mut db, &sm, &si).unwrap();
            let check = |what: &str, got: f64, fd: f64| {
                assert!((got - fd).abs() <= 1e-6 * (1.0 + fd.abs()), "{mode:?} {act:?} {what}: {got} vs fd {fd}");
            };
            for o in offsets(&xd) {
                let (mut xp, mut xm) = (x.clone(), x.clone());
                xp[o] += h;
                xm[o] -= h;
                check("dx", dx[o], (loss(&xp, &scale, &bias) - loss(&xm, &scale, &bias)) / (2.0 * h));
            }
            for p in 0..np {
                let (mut sp, mut sn) = (scale.clone(), scale.clone());
                sp[p] += h;
                sn[p] -= h;
                check("dscale", ds[p], (loss(&x, &sp, &bias) - loss(&x, &sn, &bias)) / (2.0 * h));
                let (mut bp, mut bn) = (bias.clone(), bias.clone());
                bp[p] += h;
                bn[p] -= h;
                check("dbias", db[p], (loss(&x, &scale, &bp) - loss(&x, &scale, &bn)) / (2.0 * h));
            }
        }
    }
}

// RELU as the activation: dy' = dy where ŷ > 0, else 0; the rest is plain BN backward.
#[test]
fn bn_relu_backward_masks_dy() {
    let xd = packed(&[2, 1, 1, 2]);
    let x = [1.0, 2.0, 3.0, 4.0];
    // Saved stats of x: μ = 2.5, invStd = 2/√5 (ε = 0); γ = 1, β = 0 → ŷ ≤ 0 for x = 1, 2.
    let (sm, si) = ([2.5], [2.0 / 5f64.sqrt()]);
    let act_y: Vec<f64> = x.iter().map(|v| ((v - 2.5) * si[0]).max(0.0)).collect();
    let dy = [1.0, 1.0, 1.0, 1.0];
    let (mut dx, mut ds, mut db) = (vec![0.0; 4], vec![0.0], vec![0.0]);
    bn_bwd_act_backward(BnMode::Spatial, &ActivationDesc::relu(), &xd, &x, &xd, &act_y, &xd, &dy, &xd, &mut dx, &[1.0], &[0.0], &mut ds, &mut db, &sm, &si).unwrap();
    let (mut dx2, mut ds2, mut db2) = (vec![0.0; 4], vec![0.0], vec![0.0]);
    bn_backward(BnMode::Spatial, &xd, &x, &xd, &[0.0, 0.0, 1.0, 1.0], &xd, &mut dx2, &[1.0], &mut ds2, &mut db2, 0.0, Some((&sm, &si))).unwrap();
    assert_eq!(db2, [2.0]); // Σ dy' = 2
    assert_eq!((dx, ds, db), (dx2, ds2, db2));
}
