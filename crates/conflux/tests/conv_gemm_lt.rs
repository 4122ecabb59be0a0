//! 1×1 channels-last convolutions through cuBLASLt (`CudaConvGemmLt`): every epilogue it
//! takes (none, bias, ReLU, bias + ReLU) in f16, bf16 and f32 with TF32 allowed, with α/β,
//! against the f64 reference (exactly on small integers in f16); plans it must refuse, with
//! the reason; pointers it cannot take (the invoker falls back to conflux's kernels). On the
//! CPU the same plans run on the CPU solvers.

mod support;

use conflux::reference::compare::{tolerance, TF32_TOLERANCE};
use conflux::reference::{activation, bias, conv as rconv, fill::Fill};
use conflux::solver::cuda::gemm_lt::CudaConvGemmLt;
use conflux::solver::Solver;
use conflux::types::ConvAttrib;
use conflux::{ActivationDesc, ActivationMode, ConvDesc, ConvMode, DataType, FusionDirection, FusionPlan, Handle, OpArg, OpArgs, TensorDesc};
use support::*;

const LT: &str = "CudaConvGemmLt";

#[derive(Clone, Copy, Debug, PartialEq)]
enum Epi {
    None,
    Bias,
    Relu,
    BiasRelu,
}

impl Epi {
    const ALL: [Epi; 4] = [Epi::None, Epi::Bias, Epi::Relu, Epi::BiasRelu];
    fn bias(self) -> bool { matches!(self, Epi::Bias | Epi::BiasRelu) }
    fn relu(self) -> bool { matches!(self, Epi::Relu | Epi::BiasRelu) }
}

struct Case {
    dt: DataType,
    conv: ConvDesc,
    x: TensorDesc,
    w: TensorDesc,
    y: TensorDesc,
    b: TensorDesc,
    epi: Epi,
}

/// A 1×1 convolution of x [n, c, h, w] (channels-last) into k channels; f32 allows TF32.
fn case(dt: DataType, lx: [usize; 4], k: usize, w_lay: Lay, epi: Epi) -> Case {
    let mut conv = ConvDesc::new(ConvMode::Convolution, &[0, 0], &[1, 1], &[1, 1]).unwrap();
    if dt == DataType::Float {
        conv.set_attribute(ConvAttrib::AllowTf32, 1).unwrap();
    }
    let x = desc(dt, &lx, Lay::ChannelsLast);
    let w = desc(dt, &[k, lx[1], 1, 1], w_lay);
    let y = conv.output_desc(&x, &w).unwrap();
    let b = TensorDesc::new(dt, &[1, k, 1, 1]).unwrap();
    Case { dt, conv, x, w, y, b, epi }
}

fn plan_for(c: &Case) -> FusionPlan {
    let mut plan = FusionPlan::new(FusionDirection::Vertical, c.x.clone());
    plan.add_conv_forward(&c.conv, &c.w).unwrap();
    if c.epi.bias() {
        plan.add_bias(&c.b).unwrap();
    }
    if c.epi.relu() {
        plan.add_activation(ActivationMode::Relu).unwrap();
    }
    plan
}

fn what(c: &Case, h: &Handle) -> String {
    format!("{} x {} w {} {:?} on {}", c.dt.short(), c.x.key(), c.w.key(), c.epi, h.device().name())
}

/// Run the plan with α, β into y holding y0 (NaN when β = 0: it must not be read) and
/// compare with relu?(α·conv + β·y0 + b?).
fn run(h: &Handle, c: &Case, seed: u64, exact: bool, alpha: f64, beta: f64) {
    let fill = if exact { Fill::SmallInt(-2, 2) } else { Fill::Normal };
    let x = random(h, &c.x, fill, seed);
    let w = random(h, &c.w, fill, seed + 1);
    let b = random(h, &c.b, fill, seed + 2);
    let y0: Vec<f64> = if beta == 0.0 { vec![f64::NAN; c.y.element_space()] } else { conflux::reference::fill::fill_for(&c.y, Fill::SmallInt(-3, 3), seed + 3) };
    let packed = TensorDesc::new(c.dt, c.y.lens()).unwrap();
    let mut conv = vec![0.0; packed.element_space()];
    rconv::conv_forward(&c.conv, &c.x, &x.host, &c.w, &w.host, &packed, &mut conv).unwrap();
    let old = logical(&c.y, &y0);
    let mut want: Vec<f64> = conv.iter().zip(&old).map(|(v, o)| alpha * v + if beta == 0.0 { 0.0 } else { beta * o }).collect();
    if c.epi.bias() {
        bias::bias_forward(&packed, &mut want, &c.b, &b.host).unwrap();
    }
    if c.epi.relu() {
        let pre = want.clone();
        activation::activation_forward(&ActivationDesc::new(ActivationMode::Relu, 0.0, 0.0, 0.0), &packed, &pre, &packed, &mut want).unwrap();
    }

    let mut plan = plan_for(c);
    plan.compile(h).unwrap_or_else(|e| panic!("{}: compile: {e}", what(c, h)));
    if h.device_kind() == conflux::handle::DeviceKind::Cuda {
        assert_eq!(plan.solver_name(), Some(LT), "{}", what(c, h));
    }
    let mut args = OpArgs::new();
    args.set(0, OpArg::Conv { w: w.ptr(), alpha, beta });
    let mut i = 1;
    if c.epi.bias() {
        args.set(i, OpArg::Bias { b: b.ptr() });
        i += 1;
    }
    if c.epi.relu() {
        args.set(i, OpArg::Activation { alpha: 0.0, beta: 0.0, gamma: 0.0 });
    }
    let y = upload(h, &c.y, &y0);
    plan.execute(h, &c.x, x.ptr(), &c.y, y.ptr(), &args).unwrap_or_else(|e| panic!("{}: execute: {e}", what(c, h)));
    let got = logical(&c.y, &download(h, &y));
    let tol = match (exact, c.dt) {
        (true, _) => 0.0,
        (false, DataType::Float) => TF32_TOLERANCE,
        (false, dt) => tolerance(dt),
    };
    assert_close(&format!("{} α={alpha} β={beta}", what(c, h)), &got, &want, tol);
}

device_tests!(every_epilogue_and_type, |h: &Handle| {
    let mut seed = 300;
    for dt in [DataType::Half, DataType::BFloat16, DataType::Float] {
        for (i, epi) in Epi::ALL.into_iter().enumerate() {
            // A pixel count that no tile divides; K a few columns past a multiple of 8; a KCRS
            // filter (a 1×1 KCRS filter is a dense K × C matrix too).
            let shapes: [([usize; 4], usize, Lay); 3] =
                [([2, 16, 5, 7], 24, Lay::ChannelsLast), ([3, 64, 7, 7], 136, Lay::Packed), ([1, 32, 3, 11], 8, Lay::ChannelsLast)];
            for (lx, k, w_lay) in shapes {
                let c = case(dt, lx, k, w_lay, epi);
                let exact = dt == DataType::Half && i % 2 == 0;
                run(h, &c, seed, exact, 1.0, 0.0);
                run(h, &c, seed + 10, exact, 0.75, 0.5);
                seed += 20;
            }
        }
    }
});

device_tests!(refusals_name_the_cause, |h: &Handle| {
    let problem = |c: &Case| plan_for(c).problem().unwrap();
    let refuse = |p: conflux::fusion::FusedProblem, needle: &str| {
        let why = CudaConvGemmLt.check(&p, h.device().info()).expect_err("must refuse");
        assert!(why.contains(needle), "reason {why:?} lacks {needle:?}");
    };
    let half = |epi| case(DataType::Half, [1, 16, 4, 4], 8, Lay::ChannelsLast, epi);
    // Epilogues cuBLASLt does not have.
    let mut leaky = plan_for(&half(Epi::Bias));
    leaky.add_activation(ActivationMode::LeakyRelu).unwrap();
    refuse(leaky.problem().unwrap(), "epilogues are bias");
    let mut relu_then_bias = FusionPlan::new(FusionDirection::Vertical, half(Epi::None).x);
    relu_then_bias.add_conv_forward(&half(Epi::None).conv, &half(Epi::None).w).unwrap();
    relu_then_bias.add_activation(ActivationMode::Relu).unwrap();
    relu_then_bias.add_bias(&half(Epi::None).b).unwrap();
    refuse(relu_then_bias.problem().unwrap(), "this plan has AB");
    // A Float bias with 16-bit data.
    let mut f32_bias = FusionPlan::new(FusionDirection::Vertical, half(Epi::None).x);
    f32_bias.add_conv_forward(&half(Epi::None).conv, &half(Epi::None).w).unwrap();
    f32_bias.add_bias(&TensorDesc::new(DataType::Float, &[1, 8, 1, 1]).unwrap()).unwrap();
    refuse(f32_bias.problem().unwrap(), "of the data type");
    // Strict f32, 3×3, padding, NCHW x, groups.
    let mut strict = case(DataType::Float, [1, 16, 4, 4], 8, Lay::ChannelsLast, Epi::None);
    strict.conv.set_attribute(ConvAttrib::AllowTf32, 0).unwrap();
    refuse(problem(&strict), "strict f32");
    let three = ConvDesc::new(ConvMode::Convolution, &[1, 1], &[1, 1], &[1, 1]).unwrap();
    let mut p3 = FusionPlan::new(FusionDirection::Vertical, half(Epi::None).x);
    p3.add_conv_forward(&three, &desc(DataType::Half, &[8, 16, 3, 3], Lay::ChannelsLast)).unwrap();
    refuse(p3.problem().unwrap(), "1×1");
    let padded = ConvDesc::new(ConvMode::Convolution, &[1, 1], &[1, 1], &[1, 1]).unwrap();
    let mut pp = FusionPlan::new(FusionDirection::Vertical, half(Epi::None).x);
    pp.add_conv_forward(&padded, &half(Epi::None).w).unwrap();
    refuse(pp.problem().unwrap(), "1×1");
    let mut nchw = FusionPlan::new(FusionDirection::Vertical, desc(DataType::Half, &[1, 16, 4, 4], Lay::Packed));
    nchw.add_conv_forward(&half(Epi::None).conv, &half(Epi::None).w).unwrap();
    refuse(nchw.problem().unwrap(), "1×1, unpadded");
    let mut grouped = half(Epi::None).conv;
    grouped.set_groups(2).unwrap();
    let mut pg = FusionPlan::new(FusionDirection::Vertical, half(Epi::None).x);
    pg.add_conv_forward(&grouped, &desc(DataType::Half, &[8, 8, 1, 1], Lay::ChannelsLast)).unwrap();
    refuse(pg.problem().unwrap(), "one group");
    // 12 channels of f16: 24-byte pixel rows.
    refuse(problem(&case(DataType::Half, [1, 12, 4, 4], 8, Lay::ChannelsLast, Epi::None)), "16-byte boundaries");
});

cuda_tests!(misaligned_pointers_fall_back, |h: &Handle| {
    // x two bytes past a 16-byte boundary, and then the bias: the invoker falls back to
    // conflux's own kernels and must still be right.
    let problem = |c: &Case| plan_for(c).problem().unwrap();
    let c = case(DataType::Half, [2, 32, 5, 5], 40, Lay::ChannelsLast, Epi::BiasRelu);
    let p = problem(&c);
    let inv = CudaConvGemmLt.build(&p, h.device()).unwrap();
    let x = random(h, &c.x, Fill::SmallInt(-2, 2), 77);
    let w = random(h, &c.w, Fill::SmallInt(-2, 2), 78);
    let b = random(h, &c.b, Fill::SmallInt(-2, 2), 79);
    let packed = TensorDesc::new(c.dt, c.y.lens()).unwrap();
    let mut want = vec![0.0; packed.element_space()];
    rconv::conv_forward(&c.conv, &c.x, &x.host, &c.w, &w.host, &packed, &mut want).unwrap();
    bias::bias_forward(&packed, &mut want, &c.b, &b.host).unwrap();
    want.iter_mut().for_each(|v| *v = v.max(0.0));
    let ((_xs, x_off), (_bs, b_off)) = (misaligned_copy(h, &x), misaligned_copy(h, &b));
    for (label, xp, bp) in [("x", x_off, b.ptr()), ("bias", x.ptr(), b_off)] {
        let y = poisoned(h, &c.y);
        let ops = [OpArg::Bias { b: bp }, OpArg::Activation { alpha: 0.0, beta: 0.0, gamma: 0.0 }];
        let args = conflux::solver::RunArgs { x: xp, w: w.ptr(), y: y.ptr(), alpha: 1.0, beta: 0.0, workspace: conflux::DevPtr::NULL, workspace_bytes: 0, ops: &ops };
        inv.run(h, &args).unwrap();
        assert_close(&format!("misaligned {label}"), &logical(&c.y, &download(h, &y)), &want, 0.0);
    }
});
