//! Fused convolution + bias + leaky-ReLU cases shared by the tensor-core test files: the
//! case, its inputs with the f64 reference output, and the fusion plan that runs it.

use super::conv_case::{grouped_case, Dir, GroupedSpec};
use super::{assert_close, download, logical, poisoned, random, Dev};
use conflux::reference::compare::tolerance;
use conflux::reference::{activation, bias, conv as rconv, fill::Fill};
use conflux::{ActivationDesc, ActivationMode, ConvDesc, DataType, FusionDirection, FusionPlan, Handle, OpArg, OpArgs, TensorDesc};

// A power of two keeps the exact-data case exact.
pub const LEAKY: f64 = 0.25;

pub struct Case {
    pub dt: DataType,
    pub conv: ConvDesc,
    pub x: TensorDesc,
    pub w: TensorDesc,
    pub y: TensorDesc,
    pub b: TensorDesc,
}

/// Data for one case and the reference output act(α·conv + β·y0 + bias).
pub struct Data {
    pub x: Dev,
    pub w: Dev,
    pub b: Dev,
    /// y's prior contents (element-space layout), read through β.
    pub y0: Vec<f64>,
    pub want: Vec<f64>,
}

/// Random-normal inputs, or small integers when `exact` (every path must then match exactly).
pub fn data(h: &Handle, c: &Case, seed: u64, exact: bool, alpha: f64, beta: f64) -> Data {
    let fill = if exact { Fill::SmallInt(-2, 2) } else { Fill::Normal };
    let x = random(h, &c.x, fill, seed);
    let w = random(h, &c.w, fill, seed + 1);
    let b = random(h, &c.b, fill, seed + 2);
    let packed = TensorDesc::new(c.dt, c.y.lens()).unwrap();
    let mut conv = vec![0.0; packed.element_space()];
    rconv::conv_forward(&c.conv, &c.x, &x.host, &c.w, &w.host, &packed, &mut conv).unwrap();
    let y0: Vec<f64> = conflux::reference::fill::fill_for(&c.y, Fill::SmallInt(-3, 3), seed + 3);
    let y0_logical = logical(&c.y, &y0);
    let mut pre: Vec<f64> = conv.iter().zip(&y0_logical).map(|(v, old)| alpha * v + beta * old).collect();
    bias::bias_forward(&packed, &mut pre, &c.b, &b.host).unwrap();
    let mut want = vec![0.0; pre.len()];
    let act = ActivationDesc::new(ActivationMode::LeakyRelu, LEAKY, 0.0, 0.0);
    activation::activation_forward(&act, &packed, &pre, &packed, &mut want).unwrap();
    Data { x, w, b, y0, want }
}

pub fn plan_for(c: &Case) -> FusionPlan {
    let mut plan = FusionPlan::new(FusionDirection::Vertical, c.x.clone());
    plan.add_conv_forward(&c.conv, &c.w).unwrap();
    plan.add_bias(&c.b).unwrap();
    plan.add_activation(ActivationMode::LeakyRelu).unwrap();
    plan
}

/// Run a compiled `plan_for(c)` with α = 1, β = 0 into a poisoned y, which it returns.
pub fn execute(h: &Handle, c: &Case, d: &Data, plan: &FusionPlan) -> Dev {
    let mut args = OpArgs::new();
    args.set(0, OpArg::Conv { w: d.w.ptr(), alpha: 1.0, beta: 0.0 });
    args.set(1, OpArg::Bias { b: d.b.ptr() });
    args.set(2, OpArg::Activation { alpha: LEAKY, beta: 0.0, gamma: 0.0 });
    let y = poisoned(h, &c.y);
    plan.execute(h, &c.x, d.x.ptr(), &c.y, y.ptr(), &args).unwrap();
    y
}

/// Each spec in immediate mode chooses solver `name`, and its fused conv + bias + activation
/// plan (`plan_for`) compiles to `name` and matches the reference: bit for bit on exact f16
/// data, within the type's tolerance otherwise (seeds from `seed`).
pub fn check_chosen_fused_plans(h: &Handle, specs: &[&GroupedSpec], name: &str, seed: u64) {
    for (i, spec) in specs.iter().enumerate() {
        let cc = grouped_case(spec);
        let chosen = conflux::search::choose(h, &cc.fused(Dir::Forward), conflux::conv::Choice::Auto, 0).unwrap();
        assert_eq!(chosen.name(), name, "{cc:?}");
        let b = TensorDesc::new(spec.0, &[1, cc.y.c(), 1, 1]).unwrap();
        let c = Case { dt: spec.0, conv: cc.conv.clone(), x: cc.x.clone(), w: cc.w.clone(), y: cc.y.clone(), b };
        for exact in [true, false] {
            let d = data(h, &c, seed + i as u64, exact, 1.0, 0.0);
            let mut plan = plan_for(&c);
            plan.compile(h).unwrap();
            assert_eq!(plan.solver_name(), Some(name));
            let y = execute(h, &c, &d, &plan);
            let got = logical(&c.y, &download(h, &y));
            let tol = if exact && spec.0 == DataType::Half { 0.0 } else { tolerance(spec.0) };
            assert_close(&format!("fused {name} {i} exact={exact}"), &got, &d.want, tol);
        }
    }
}
