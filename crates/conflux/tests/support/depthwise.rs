//! Depthwise fused plans shared by the CPU depthwise suites: conv + bias + activation through a
//! fusion plan, checked against the f64 reference; returns the solver the plan ran on.

use super::{assert_close, download, logical, poisoned, random, ConvCase};
use conflux::activation::ActivationDesc;
use conflux::reference::fill::Fill;
use conflux::{ActivationMode, DataType, FusionDirection, FusionPlan, Handle, OpArg, OpArgs, TensorDesc};

/// Whether solver `name` (one that needs AVX-512) takes `c` on this CPU; where it does not, its
/// reason must name AVX-512.
pub fn avx512_solver_runs(h: &Handle, name: &str, c: &ConvCase) -> bool {
    match super::solver(name).check(&c.fused(super::Dir::Forward), h.device().info()) {
        Ok(()) => true,
        Err(why) => {
            assert!(why.contains("AVX-512"), "{name}: {why}");
            false
        }
    }
}

/// α of each mode in these plans: ReLU6 for CLIPPEDRELU, a slope of one half for LEAKYRELU.
fn alpha_of(mode: ActivationMode) -> f64 {
    match mode {
        ActivationMode::ClippedRelu => 6.0,
        ActivationMode::LeakyRelu => 0.5,
        _ => 0.0,
    }
}

/// Runs `c` (f32, a plan's output: packed in x's order) as conv + bias + `mode` on small-integer
/// data and compares with the reference; SiLU and the like get a relative tolerance.
pub fn bias_act_plan(h: &Handle, c: &ConvCase, mode: ActivationMode, seed: u64) -> &'static str {
    let k = c.w.lens()[0];
    let b = TensorDesc::new(DataType::Float, &[1, k, 1, 1]).unwrap();
    let fill = Fill::SmallInt(-2, 2);
    let (x, w, bias) = (random(h, &c.x, fill, seed), random(h, &c.w, fill, seed + 1), random(h, &b, fill, seed + 2));
    let packed = TensorDesc::new(DataType::Float, c.y.lens()).unwrap();
    let mut want = vec![0.0; packed.element_space()];
    conflux::reference::conv::conv_forward(&c.conv, &c.x, &x.host, &c.w, &w.host, &packed, &mut want).unwrap();
    let plane = packed.element_space() / (c.y.lens()[0] * k);
    let act = ActivationDesc::new(mode, alpha_of(mode), 0.0, 0.0);
    for (i, v) in want.iter_mut().enumerate() {
        *v = act.forward(*v + bias.host[(i / plane) % k]);
    }
    let mut plan = FusionPlan::new(FusionDirection::Vertical, c.x.clone());
    plan.add_conv_forward(&c.conv, &c.w).unwrap();
    plan.add_bias(&b).unwrap();
    plan.add_activation(mode).unwrap();
    plan.compile(h).unwrap();
    let mut args = OpArgs::new();
    args.set(0, OpArg::Conv { w: w.ptr(), alpha: 1.0, beta: 0.0 });
    args.set(1, OpArg::Bias { b: bias.ptr() });
    args.set(2, OpArg::Activation { alpha: alpha_of(mode), beta: 0.0, gamma: 0.0 });
    let y = poisoned(h, &c.y);
    plan.execute(h, &c.x, x.ptr(), &c.y, y.ptr(), &args).unwrap();
    let name = plan.solver_name().unwrap();
    let tol = if matches!(mode, ActivationMode::ClippedRelu | ActivationMode::LeakyRelu | ActivationMode::Relu) { 0.0 } else { 1e-5 };
    assert_close(&format!("{name} {:?} + bias + {mode:?}", c.x.lens()), &logical(&c.y, &download(h, &y)), &want, tol);
    name
}
