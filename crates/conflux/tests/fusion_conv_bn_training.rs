//! Convolution → batch-norm training (→ activation) plans: the convolution's whole output feeds
//! the batch statistics, so the plan runs as the convolution into scratch, then BN training of
//! it (saved mean / inverse deviation, running statistics). Against the f64 reference (the
//! convolution, then the reference BN training, then the activation), NCHW and NHWC, f32 and
//! f16; an op after the activation is refused naming it.

mod support;

use conflux::batchnorm::derive_bn_desc;
use conflux::reference::compare::tolerance;
use conflux::reference::{activation, batchnorm, conv as rconv, fill::Fill};
use conflux::{ActivationDesc, ActivationMode, BnMode, ConvDesc, ConvMode, DataType, FusionDirection, FusionPlan, Handle, OpArg, OpArgs, Status, TensorDesc};
use support::*;

fn case(h: &Handle, dt: DataType, lay: Lay, mode: BnMode, act: Option<ActivationMode>, seed: u64) {
    // Per-activation statistics average over the batch alone: with two images a variance can
    // come out near zero, where 1/sqrt(var + eps) magnifies the convolution's f32 rounding past
    // any fixed tolerance (a solver summing in another order then fails). Eight images keep
    // every variance well away from zero.
    let n = if mode == BnMode::PerActivation { 8 } else { 2 };
    let x = desc(dt, &[n, 6, 8, 9], lay);
    let w = desc(dt, &[5, 6, 3, 3], lay);
    let conv = ConvDesc::new(ConvMode::Convolution, &[1, 1], &[1, 1], &[1, 1]).unwrap();
    let mut plan = FusionPlan::new(FusionDirection::Vertical, x.clone());
    plan.add_conv_forward(&conv, &w).unwrap();
    plan.add_bn_forward(mode, true).unwrap();
    if let Some(m) = act {
        plan.add_activation(m).unwrap();
    }
    let label = format!("conv → BN training {mode:?} {act:?} {dt:?} {lay:?} on {}", h.device().name());
    plan.compile(h).unwrap_or_else(|e| panic!("compile {label}: {e}"));
    let y = plan.output_desc().clone();
    let pd = derive_bn_desc(&y, mode).unwrap();

    let xd = random(h, &x, Fill::Uniform(-1.0, 3.0), seed);
    let wd = random(h, &w, Fill::Normal, seed + 1);
    let scale = random(h, &pd, Fill::Uniform(0.5, 1.5), seed + 2);
    let bias = random(h, &pd, Fill::Normal, seed + 3);
    let rm = random(h, &pd, Fill::Uniform(-1.0, 1.0), seed + 4);
    let rv = random(h, &pd, Fill::Uniform(0.5, 2.0), seed + 5);
    let (sm, si) = (poisoned(h, &pd), poisoned(h, &pd));
    let (eps, factor) = (1e-5, 0.25);
    let mut args = OpArgs::new();
    args.set(0, OpArg::Conv { w: wd.ptr(), alpha: 1.0, beta: 0.0 });
    args.set(1, OpArg::BnForward { scale: scale.ptr(), bias: bias.ptr(), saved_mean: sm.ptr(), saved_inv_var: si.ptr(), running_mean: rm.ptr(), running_var: rv.ptr(), exp_avg_factor: factor, eps });
    if act.is_some() {
        args.set(2, OpArg::Activation { alpha: 0.0, beta: 0.0, gamma: 0.0 });
    }
    let yd = poisoned(h, &y);
    plan.execute(h, &x, xd.ptr(), &y, yd.ptr(), &args).unwrap_or_else(|e| panic!("execute {label}: {e}"));

    // Reference: the convolution (rounded to the data type, as the scratch holds it), BN
    // training with every statistic, the activation.
    let packed = TensorDesc::new(dt, y.lens()).unwrap();
    let mut t = vec![0.0; packed.element_space()];
    rconv::conv_forward(&conv, &x, &xd.host, &w, &wd.host, &packed, &mut t).unwrap();
    let t: Vec<f64> = t.iter().map(|&v| conflux::element::round_to(dt, v)).collect();
    let np = pd.element_count();
    let (mut want_rm, mut want_rv, mut want_sm, mut want_si) = (rm.host.clone(), rv.host.clone(), vec![0.0; np], vec![0.0; np]);
    let mut want = vec![0.0; packed.element_space()];
    batchnorm::bn_forward_training(mode, &packed, &t, &packed, &mut want, &scale.host, &bias.host, factor, eps, Some(&mut want_rm), Some(&mut want_rv), Some(&mut want_sm), Some(&mut want_si)).unwrap();
    if let Some(m) = act {
        let pre = want.clone();
        activation::activation_forward(&ActivationDesc::new(m, 0.0, 0.0, 0.0), &packed, &pre, &packed, &mut want).unwrap();
    }
    let tol = if dt == DataType::Float { 1e-4 } else { 2.0 * tolerance(dt) };
    assert_close(&format!("{label}: y"), &logical(&y, &download(h, &yd)), &want, tol);
    assert_close(&format!("{label}: saved mean"), &download(h, &sm), &want_sm, 1e-4);
    assert_close(&format!("{label}: saved inverse deviation"), &download(h, &si), &want_si, 1e-4);
    assert_close(&format!("{label}: running mean"), &download(h, &rm), &want_rm, 1e-4);
    assert_close(&format!("{label}: running variance"), &download(h, &rv), &want_rv, 1e-4);
}

device_tests!(convolution_then_batch_norm_training, |h: &Handle| {
    for (i, lay) in [Lay::Packed, Lay::ChannelsLast].into_iter().enumerate() {
        for dt in [DataType::Float, DataType::Half] {
            case(h, dt, lay, BnMode::Spatial, Some(ActivationMode::Relu), 10 * i as u64);
            case(h, dt, lay, BnMode::PerActivation, None, 10 * i as u64 + 5);
        }
    }
});

device_tests!(ops_after_the_activation_are_refused, |h: &Handle| {
    let dt = DataType::Float;
    let x = TensorDesc::new(dt, &[1, 4, 6, 6]).unwrap();
    let conv = ConvDesc::new(ConvMode::Convolution, &[1, 1], &[1, 1], &[1, 1]).unwrap();
    let mut p = FusionPlan::new(FusionDirection::Vertical, x);
    p.add_conv_forward(&conv, &TensorDesc::new(dt, &[4, 4, 3, 3]).unwrap()).unwrap();
    p.add_bn_forward(BnMode::Spatial, false).unwrap();
    p.add_activation(ActivationMode::Relu).unwrap();
    p.add_bias(&TensorDesc::new(dt, &[1, 4, 1, 1]).unwrap()).unwrap();
    let e = p.compile(h).unwrap_err();
    assert_eq!(e.status, Status::UnsupportedOp);
    assert!(e.reason.contains("op 3"), "{}", e.reason);
});
