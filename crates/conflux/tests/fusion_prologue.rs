//! Prologue plans: per-channel ops before the convolution of a vertical plan (BN inference →
//! ReLU → conv as pre-activation ResNet and DenseNet compute it; bias → ReLU → a strided,
//! grouped conv), then an epilogue; the convolution's padding is zeros of the transformed
//! tensor. Against the f64 reference (transform x, then convolve), NCHW and NHWC, f32 and
//! f16, exact small-integer data where the math allows; refusals name the op.

mod support;

use conflux::reference::compare::tolerance;
use conflux::reference::{activation, batchnorm, bias, conv as rconv, fill::Fill};
use conflux::{ActivationDesc, ActivationMode, BnMode, ConvDesc, ConvMode, DataType, FusionDirection, FusionPlan, Handle, OpArg, OpArgs, Status, TensorDesc};
use support::*;

fn relu(d: &TensorDesc, v: &mut Vec<f64>) {
    let pre = v.clone();
    activation::activation_forward(&ActivationDesc::new(ActivationMode::Relu, 0.0, 0.0, 0.0), d, &pre, d, v).unwrap();
}

/// BN inference → ReLU → 3×3 conv (padding 1) → bias → ReLU, normal data.
fn bn_relu_conv(h: &Handle, dt: DataType, lay: Lay, seed: u64) {
    let x = desc(dt, &[2, 8, 9, 10], lay);
    let w = desc(dt, &[6, 8, 3, 3], lay);
    let p = TensorDesc::new(dt, &[1, 8, 1, 1]).unwrap();
    let b = TensorDesc::new(dt, &[1, 6, 1, 1]).unwrap();
    let conv = ConvDesc::new(ConvMode::Convolution, &[1, 1], &[1, 1], &[1, 1]).unwrap();
    let mut plan = FusionPlan::new(FusionDirection::Vertical, x.clone());
    plan.add_bn_inference(BnMode::Spatial, &p).unwrap();
    plan.add_activation(ActivationMode::Relu).unwrap();
    plan.add_conv_forward(&conv, &w).unwrap();
    plan.add_bias(&b).unwrap();
    plan.add_activation(ActivationMode::Relu).unwrap();
    plan.compile(h).unwrap_or_else(|e| panic!("compile {dt:?} {lay:?}: {e}"));
    let y = plan.output_desc().clone();

    let xd = random(h, &x, Fill::Normal, seed);
    let wd = random(h, &w, Fill::Normal, seed + 1);
    let bd = random(h, &b, Fill::Normal, seed + 2);
    let (scale, shift, mean) = (random(h, &p, Fill::Normal, seed + 3), random(h, &p, Fill::Normal, seed + 4), random(h, &p, Fill::Normal, seed + 5));
    let var_host: Vec<f64> = (0..8).map(|c| 0.5 + 0.25 * c as f64).collect();
    let var = upload(h, &p, &var_host);
    let eps = 1e-5;

    // Reference: x transformed (packed NCHW), then the convolution and its epilogue.
    let t = TensorDesc::new(dt, x.lens()).unwrap();
    let mut tv = vec![0.0; t.element_space()];
    batchnorm::bn_inference(BnMode::Spatial, &x, &xd.host, &t, &mut tv, &scale.host, &shift.host, &mean.host, &var_host, eps).unwrap();
    relu(&t, &mut tv);
    let packed = TensorDesc::new(dt, y.lens()).unwrap();
    let mut want = vec![0.0; packed.element_space()];
    rconv::conv_forward(&conv, &t, &tv, &w, &wd.host, &packed, &mut want).unwrap();
    bias::bias_forward(&packed, &mut want, &b, &bd.host).unwrap();
    relu(&packed, &mut want);

    let mut args = OpArgs::new();
    args.set(0, OpArg::BnInference { scale: scale.ptr(), bias: shift.ptr(), mean: mean.ptr(), var: var.ptr(), eps });
    args.set(1, OpArg::Activation { alpha: 0.0, beta: 0.0, gamma: 0.0 });
    args.set(2, OpArg::Conv { w: wd.ptr(), alpha: 1.0, beta: 0.0 });
    args.set(3, OpArg::Bias { b: bd.ptr() });
    args.set(4, OpArg::Activation { alpha: 0.0, beta: 0.0, gamma: 0.0 });
    let yd = poisoned(h, &y);
    plan.execute(h, &x, xd.ptr(), &y, yd.ptr(), &args).unwrap();
    // Two roundings to the data type (t, then y) for 16-bit data.
    let tol = if dt == DataType::Float { tolerance(dt) } else { 2.0 * tolerance(dt) };
    assert_close(&format!("BN→ReLU→conv→bias→ReLU {dt:?} {lay:?} on {}", h.device().name()), &logical(&y, &download(h, &yd)), &want, tol);
}

/// bias → ReLU → 3×3 conv, stride 2, padding 1, 2 groups: small integers, exact. A bias that
/// leaves the border positive shows the padding is zeros of the transformed tensor.
fn bias_relu_strided_grouped(h: &Handle, dt: DataType, lay: Lay, seed: u64) {
    let x = desc(dt, &[2, 8, 9, 8], lay);
    let w = desc(dt, &[8, 4, 3, 3], lay);
    let b = TensorDesc::new(dt, &[1, 8, 1, 1]).unwrap();
    let mut conv = ConvDesc::new(ConvMode::Convolution, &[1, 1], &[2, 2], &[1, 1]).unwrap();
    conv.set_groups(2).unwrap();
    let mut plan = FusionPlan::new(FusionDirection::Vertical, x.clone());
    plan.add_bias(&b).unwrap();
    plan.add_activation(ActivationMode::Relu).unwrap();
    plan.add_conv_forward(&conv, &w).unwrap();
    plan.compile(h).unwrap_or_else(|e| panic!("compile {dt:?} {lay:?}: {e}"));
    let y = plan.output_desc().clone();
    let fill = Fill::SmallInt(-2, 2);
    let (xd, wd) = (random(h, &x, fill, seed), random(h, &w, fill, seed + 1));
    let bias_host: Vec<f64> = (0..8).map(|c| [2.0, 1.0, 3.0, -1.0][c % 4]).collect();
    let bd = upload(h, &b, &bias_host);
    let t = TensorDesc::new(dt, x.lens()).unwrap();
    let mut tv = logical(&x, &xd.host);
    bias::bias_forward(&t, &mut tv, &b, &bias_host).unwrap();
    relu(&t, &mut tv);
    let packed = TensorDesc::new(dt, y.lens()).unwrap();
    let mut want = vec![0.0; packed.element_space()];
    rconv::conv_forward(&conv, &t, &tv, &w, &wd.host, &packed, &mut want).unwrap();
    let mut args = OpArgs::new();
    args.set(0, OpArg::Bias { b: bd.ptr() });
    args.set(1, OpArg::Activation { alpha: 0.0, beta: 0.0, gamma: 0.0 });
    args.set(2, OpArg::Conv { w: wd.ptr(), alpha: 1.0, beta: 0.0 });
    let yd = poisoned(h, &y);
    plan.execute(h, &x, xd.ptr(), &y, yd.ptr(), &args).unwrap();
    assert_close(&format!("bias→ReLU→grouped s2 conv {dt:?} {lay:?} on {}", h.device().name()), &logical(&y, &download(h, &yd)), &want, 0.0);
}

device_tests!(prologue_then_convolution, |h: &Handle| {
    for (i, lay) in [Lay::Packed, Lay::ChannelsLast].into_iter().enumerate() {
        for dt in [DataType::Float, DataType::Half] {
            bn_relu_conv(h, dt, lay, 10 * i as u64);
            bias_relu_strided_grouped(h, dt, lay, 10 * i as u64 + 5);
        }
    }
});

device_tests!(prologue_refusals_name_the_op, |h: &Handle| {
    let dt = DataType::Float;
    let x = TensorDesc::new(dt, &[1, 4, 6, 6]).unwrap();
    let conv = ConvDesc::new(ConvMode::Convolution, &[1, 1], &[1, 1], &[1, 1]).unwrap();
    let w = TensorDesc::new(dt, &[4, 4, 3, 3]).unwrap();
    let mut p = FusionPlan::new(FusionDirection::Vertical, x.clone());
    p.add_activation(ActivationMode::Relu).unwrap();
    p.add_bn_forward(BnMode::Spatial, false).unwrap();
    p.add_conv_forward(&conv, &w).unwrap();
    let e = p.compile(h).unwrap_err();
    assert_eq!(e.status, Status::UnsupportedOp);
    assert!(e.reason.contains("op 1") && e.reason.contains("precede a convolution"), "{}", e.reason);
    // An op after the convolution that no epilogue takes names the plan's index.
    let mut p = FusionPlan::new(FusionDirection::Vertical, x.clone());
    p.add_activation(ActivationMode::Relu).unwrap();
    p.add_conv_forward(&conv, &w).unwrap();
    p.add_bn_forward(BnMode::Spatial, false).unwrap();
    let e = p.compile(h).unwrap_err();
    assert_eq!(e.status, Status::UnsupportedOp);
    assert!(e.reason.contains("op 2"), "{}", e.reason);
    // Missing prologue arguments: BadParm naming the op, nothing written.
    let mut p = FusionPlan::new(FusionDirection::Vertical, x.clone());
    p.add_activation(ActivationMode::Relu).unwrap();
    p.add_conv_forward(&conv, &w).unwrap();
    p.compile(h).unwrap();
    let y = p.output_desc().clone();
    let (xd, wd) = (random(h, &x, Fill::Normal, 1), random(h, &w, Fill::Normal, 2));
    let yd = poisoned(h, &y);
    let before = download(h, &yd);
    let mut args = OpArgs::new();
    args.set(1, OpArg::Conv { w: wd.ptr(), alpha: 1.0, beta: 0.0 });
    let e = p.execute(h, &x, xd.ptr(), &y, yd.ptr(), &args).unwrap_err();
    assert!(e.status == Status::BadParm && e.reason.contains("op 0"), "{}", e.reason);
    assert!(download(h, &yd).iter().zip(&before).all(|(a, b)| a.to_bits() == b.to_bits()), "y written");
});
