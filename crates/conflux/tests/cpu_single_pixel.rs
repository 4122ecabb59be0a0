//! The single-output-pixel CPU solver (1×1 filters, one output pixel per image: squeeze-and-
//! excitation and fully connected layers): NCHW, NHWC and gapped tensors, groups, a strided
//! 1×1 over a larger image, channel counts that do not fill a vector (at least 8 per group), through `check_solver`
//! (f64 reference, poisoned output, bit-identical rerun, gaps untouched) with exact and α/β
//! data; fused bias + leaky ReLU plans; immediate choice takes it; refusals name the cause.

mod support;

use conflux::reference::compare::tolerance;
use conflux::reference::{activation, bias, conv as rconv, fill::Fill};
use conflux::{ActivationDesc, ActivationMode, DataType, FusionDirection, FusionPlan, Handle, OpArg, OpArgs, TensorDesc};
use support::*;

const SOLVER: &str = "CpuConvSinglePixel";

const CASES: [GroupedSpec; 8] = [
    (DataType::Float, &[1, 96, 1, 1], &[4, 96, 1, 1], 1, 0, 1, 1, Lay::Packed),
    (DataType::Float, &[3, 40, 1, 1], &[10, 40, 1, 1], 1, 0, 1, 1, Lay::ChannelsLast),
    (DataType::Float, &[2, 37, 1, 1], &[19, 37, 1, 1], 1, 0, 1, 1, Lay::Gapped),
    (DataType::Float, &[2, 128, 1, 1], &[16, 32, 1, 1], 4, 0, 1, 1, Lay::Packed),
    // A 1×1 at stride 7 over a 7×7 image reads its first pixel.
    (DataType::Float, &[2, 40, 7, 7], &[8, 40, 1, 1], 1, 0, 7, 1, Lay::Packed),
    (DataType::Float, &[1, 600, 1, 1], &[70, 600, 1, 1], 1, 0, 1, 1, Lay::GappedChannelsLast),
    // The expand side of squeeze-and-excitation: few channels to many (20 → 480 in EfficientNet).
    (DataType::Float, &[1, 20, 1, 1], &[480, 20, 1, 1], 1, 0, 1, 1, Lay::Packed),
    (DataType::Float, &[2, 8, 1, 1], &[40, 8, 1, 1], 1, 0, 1, 1, Lay::ChannelsLast),
];

#[test]
fn every_case() {
    check_chosen_cases(&Handle::cpu(), &CASES, Dir::Forward, SOLVER, 6000);
}

#[test]
fn fused_bias_leaky_relu() {
    let h = Handle::cpu();
    let c = grouped_case(&CASES[0]);
    let mut plan = FusionPlan::new(FusionDirection::Vertical, c.x.clone());
    plan.add_conv_forward(&c.conv, &c.w).unwrap();
    let bd = TensorDesc::new(DataType::Float, &[1, 4, 1, 1]).unwrap();
    plan.add_bias(&bd).unwrap();
    plan.add_activation(ActivationMode::LeakyRelu).unwrap();
    plan.compile(&h).unwrap();
    assert_eq!(plan.solver_name(), Some(SOLVER));
    let (x, w, b) = (random(&h, &c.x, Fill::Normal, 1), random(&h, &c.w, Fill::Normal, 2), random(&h, &bd, Fill::Normal, 3));
    let y = poisoned(&h, &c.y);
    let mut args = OpArgs::new();
    args.set(0, OpArg::Conv { w: w.ptr(), alpha: 1.0, beta: 0.0 });
    args.set(1, OpArg::Bias { b: b.ptr() });
    args.set(2, OpArg::Activation { alpha: 0.1, beta: 0.0, gamma: 0.0 });
    plan.execute(&h, &c.x, x.ptr(), &c.y, y.ptr(), &args).unwrap();
    let mut want = vec![0.0; c.y.element_space()];
    rconv::conv_forward(&c.conv, &c.x, &x.host, &c.w, &w.host, &c.y, &mut want).unwrap();
    bias::bias_forward(&c.y, &mut want, &bd, &b.host).unwrap();
    let pre = want.clone();
    activation::activation_forward(&ActivationDesc::new(ActivationMode::LeakyRelu, 0.1, 0.0, 0.0), &c.y, &pre, &c.y, &mut want).unwrap();
    assert_close("single pixel + bias + leaky ReLU", &download(&h, &y), &want, tolerance(DataType::Float));
}

#[test]
fn refusals_name_the_cause() {
    let h = Handle::cpu();
    let s = solver(SOLVER);
    let check = |spec: &GroupedSpec, d: Dir| s.check(&grouped_case(spec).fused(d), h.device().info()).unwrap_err();
    assert!(check(&(DataType::Float, &[1, 8, 2, 2], &[4, 8, 1, 1], 1, 0, 1, 1, Lay::Packed), Dir::Forward).contains("output pixels"));
    assert!(check(&(DataType::Float, &[1, 8, 3, 3], &[4, 8, 3, 3], 1, 0, 1, 1, Lay::Packed), Dir::Forward).contains("filter taps"));
    assert!(check(&(DataType::Half, &[1, 8, 1, 1], &[4, 8, 1, 1], 1, 0, 1, 1, Lay::Packed), Dir::Forward).contains("f32 only"));
    assert!(check(&CASES[0], Dir::BackwardData).contains("forward only"));
    assert!(check(&(DataType::Float, &[1, 6, 1, 1], &[480, 6, 1, 1], 1, 0, 1, 1, Lay::Packed), Dir::Forward).contains("input channels per group"));
}
