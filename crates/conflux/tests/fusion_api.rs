//! Behaviour of the Fusion API and of `conv::api` beyond the numbers: refusals with the exact
//! status and a reason that names the op and the cause, argument checks at execute that
//! leave the output untouched, the invoker cache (new arguments never rebuild, recompiling
//! builds nothing), and one compiled plan executed from many threads at once.

mod support;

use conflux::conv::api::{self, Choice, Workspace};
use conflux::fusion::FusionOpKind;
use conflux::reference::{self as r, compare::tolerance, fill::Fill};
use conflux::{
    ActivationDesc, ActivationMode, BnMode, ConvAlgorithm, ConvDesc, ConvMode, DataType, DevPtr, FusionDirection, FusionPlan, Handle,
    OpArg, OpArgs, Status, TensorDesc,
};
use support::*;

const F32: DataType = DataType::Float;

fn t(lens: &[usize]) -> TensorDesc {
    TensorDesc::new(F32, lens).unwrap()
}

fn conv3x3() -> ConvDesc {
    ConvDesc::new(ConvMode::Convolution, &[1, 1], &[1, 1], &[1, 1]).unwrap()
}

fn plan(x: &TensorDesc) -> FusionPlan {
    FusionPlan::new(FusionDirection::Vertical, x.clone())
}

// ---------------------------------------------------------------------------------------
// Op creation (no device needed)

#[test]
fn op_creation_checks_shapes_with_bad_parm() {
    let x = t(&[2, 4, 5, 5]);
    let mut p = plan(&x);
    // Bias: 1×C×1×1 of the op's input.
    expect_err("bias C=3 for C=4", p.add_bias(&t(&[1, 3, 1, 1])), Status::BadParm, &["op 0", "bias", "[1, 3, 1, 1]"]);
    expect_err("bias of rank 3", p.add_bias(&t(&[1, 4, 1])), Status::BadParm, &["op 0", "bias"]);
    expect_err("bias with H = 5", p.add_bias(&t(&[1, 4, 5, 1])), Status::BadParm, &["op 0", "bias"]);
    expect_err(
        "bias of Int32",
        p.add_bias(&TensorDesc::new(DataType::Int32, &[1, 4, 1, 1]).unwrap()),
        Status::BadParm,
        &["op 0", "bias", "Int32"],
    );
    assert_eq!(p.ops().len(), 0, "a refused op must not be added");
    assert_eq!(p.add_activation(ActivationMode::Relu).unwrap(), 0);
    // BN inference: packed parameters of the derived shape of the mode.
    expect_err(
        "spatial BN with per-activation params",
        p.add_bn_inference(BnMode::Spatial, &t(&[1, 4, 5, 5])),
        Status::BadParm,
        &["op 1", "batch-norm inference", "[1, 4, 5, 5]"],
    );
    expect_err(
        "per-activation BN with spatial params",
        p.add_bn_inference(BnMode::PerActivation, &t(&[1, 4, 1, 1])),
        Status::BadParm,
        &["op 1", "batch-norm inference"],
    );
    expect_err(
        "BN params with gaps",
        p.add_bn_inference(BnMode::Spatial, &desc(F32, &[1, 4, 1, 1], Lay::Gapped)),
        Status::BadParm,
        &["op 1", "packed"],
    );
    // Tensor add: z must have the op input's lengths and type (strides may differ).
    expect_err("z of other lengths", p.add_tensor_add(&t(&[2, 4, 5, 4])), Status::BadParm, &["op 1", "tensor add"]);
    expect_err(
        "z of other type",
        p.add_tensor_add(&TensorDesc::new(DataType::Half, &[2, 4, 5, 5]).unwrap()),
        Status::BadParm,
        &["op 1", "tensor add"],
    );
    assert_eq!(p.add_tensor_add(&desc(F32, &[2, 4, 5, 5], Lay::ChannelsLast)).unwrap(), 1);
    assert_eq!(p.ops().len(), 2);
    assert_eq!(p.output_desc(), &x);

    // After a convolution the op input is the conv output (K = 6 channels, 3×3 with pad 1).
    let mut p = plan(&x);
    expect_err(
        "conv with wrong filter channels",
        p.add_conv_forward(&conv3x3(), &t(&[6, 3, 3, 3])),
        Status::BadParm,
        &["op 0", "convolution forward"],
    );
    assert_eq!(p.ops().len(), 0);
    p.add_conv_forward(&conv3x3(), &t(&[6, 4, 3, 3])).unwrap();
    assert_eq!(p.output_desc().lens(), &[2, 6, 5, 5]);
    expect_err("bias of the conv input's C", p.add_bias(&t(&[1, 4, 1, 1])), Status::BadParm, &["op 1", "bias"]);
    expect_err("BN params of the conv input's C", p.add_bn_inference(BnMode::Spatial, &t(&[1, 4, 1, 1])), Status::BadParm, &["op 1"]);
    expect_err("z of the conv input's shape", p.add_tensor_add(&x), Status::BadParm, &["op 1", "tensor add"]);
    p.add_bias(&t(&[1, 6, 1, 1])).unwrap();
    p.add_bn_inference(BnMode::PerActivation, &t(&[1, 6, 5, 5])).unwrap();
    assert_eq!(p.ops().len(), 3);

    // Batch norm needs a 4-D or 5-D input.
    let mut p = plan(&t(&[2, 4, 5]));
    expect_err("BN training on 3-D", p.add_bn_forward(BnMode::Spatial, true), Status::BadParm, &["op 0", "batch-norm forward training"]);
    expect_err("BN backward on 3-D", p.add_bn_backward(BnMode::Spatial), Status::BadParm, &["op 0", "batch-norm backward"]);
    assert_eq!(p.ops().len(), 0);
}

#[test]
fn plan_op_index_out_of_range_is_bad_parm() {
    let mut p = plan(&t(&[1, 2, 3, 3]));
    expect_err("op(0) of an empty plan", p.op(0), Status::BadParm, &["out of range"]);
    p.add_bias(&t(&[1, 2, 1, 1])).unwrap();
    p.add_activation(ActivationMode::Elu).unwrap();
    for bad in [-1, 2, 3, i64::MIN, i64::MAX] {
        expect_err(&format!("op({bad})"), p.op(bad), Status::BadParm, &["out of range", &bad.to_string()]);
    }
    assert!(matches!(p.op(0).unwrap().kind, FusionOpKind::BiasForward { .. }));
    assert_eq!(p.op(1).unwrap().kind, FusionOpKind::ActivationForward { mode: ActivationMode::Elu });
    assert_eq!(p.op(1).unwrap().output, t(&[1, 2, 3, 3]));
}

// ---------------------------------------------------------------------------------------
// Compile refusals

#[track_caller]
fn refused(h: &Handle, what: &str, mut p: FusionPlan, status: Status, needles: &[&str]) {
    expect_err(&format!("{what}: problem()"), p.problem(), status, needles);
    expect_err(&format!("{what}: compile"), p.compile(h), status, needles);
    assert!(!p.is_compiled(), "{what}: refused plan reports compiled");
    // A refused plan cannot run.
    let x = p.input_desc().clone();
    let y = p.output_desc().clone();
    let xb = sentinel(h, &x, 1.0);
    let yb = sentinel(h, &y, 7.0);
    expect_err(&format!("{what}: execute"), p.execute(h, &x, xb.ptr(), &y, yb.ptr(), &OpArgs::new()), Status::BadParm, &["compile"]);
    assert_unchanged(what, h, &yb);
}

device_tests!(compile_refusals_name_the_op, |h: &Handle| {
    use ActivationMode::*;
    let x = t(&[1, 4, 5, 5]);
    let w = t(&[4, 4, 3, 3]);
    let un = Status::UnsupportedOp;

    refused(h, "empty plan", plan(&x), Status::UnknownError, &["no operators"]);

    let mut p = FusionPlan::new(FusionDirection::Horizontal, x.clone());
    p.add_activation(Relu).unwrap();
    refused(h, "horizontal", p, un, &["horizontal"]);

    let mut p = plan(&x);
    p.add_conv_forward(&conv3x3(), &w).unwrap();
    p.add_conv_forward(&conv3x3(), &w).unwrap();
    refused(h, "two convolutions", p, un, &["op 1", "convolution"]);

    // (Pointwise ops before the convolution are a prologue: fusion_prologue.rs.)
    let mut p = plan(&x);
    p.add_bn_forward(BnMode::Spatial, true).unwrap();
    p.add_conv_forward(&conv3x3(), &w).unwrap();
    refused(h, "conv after batch-norm training", p, un, &["op 0", "batch-norm forward training", "precede a convolution"]);

    let mut p = plan(&x);
    p.add_bias(&t(&[1, 4, 1, 1])).unwrap();
    p.add_activation_backward(Relu).unwrap();
    p.add_conv_forward(&conv3x3(), &w).unwrap();
    refused(h, "activation backward in a prologue", p, un, &["op 1", "activation backward", "precede a convolution"]);

    // (BN training right after the convolution runs: fusion_conv_bn_training.rs.)
    let mut p = plan(&x);
    p.add_conv_forward(&conv3x3(), &w).unwrap();
    p.add_bias(&t(&[1, 4, 1, 1])).unwrap();
    p.add_bn_forward(BnMode::Spatial, true).unwrap();
    refused(h, "BN training after conv and bias", p, un, &["op 2", "batch-norm forward training"]);

    let mut p = plan(&x);
    p.add_conv_forward(&conv3x3(), &w).unwrap();
    p.add_bias(&t(&[1, 4, 1, 1])).unwrap();
    p.add_bn_backward(BnMode::Spatial).unwrap();
    refused(h, "BN backward after conv", p, un, &["op 2", "batch-norm backward"]);

    let mut p = plan(&x);
    p.add_conv_forward(&conv3x3(), &w).unwrap();
    p.add_activation_backward(Relu).unwrap();
    refused(h, "activation backward after conv", p, un, &["op 1", "activation backward"]);

    let mut p = plan(&x);
    p.add_activation(Relu).unwrap();
    p.add_activation_backward(Relu).unwrap();
    refused(h, "activation backward after activation", p, un, &["op 1", "activation backward"]);

    let mut p = plan(&x);
    p.add_bias(&t(&[1, 4, 1, 1])).unwrap();
    p.add_bn_forward(BnMode::PerActivation, false).unwrap();
    refused(h, "BN training after bias", p, un, &["op 1", "batch-norm"]);

    let mut p = plan(&x);
    p.add_bn_forward(BnMode::Spatial, true).unwrap();
    p.add_bias(&t(&[1, 4, 1, 1])).unwrap();
    refused(h, "bias after BN training", p, un, &["op 1", "bias"]);

    let mut p = plan(&x);
    p.add_bn_forward(BnMode::Spatial, true).unwrap();
    p.add_activation(Relu).unwrap();
    p.add_activation(Relu).unwrap();
    refused(h, "BN training + two activations", p, un, &["op 2"]);

    let mut p = plan(&x);
    p.add_bn_backward(BnMode::Spatial).unwrap();
    p.add_activation(Relu).unwrap();
    refused(h, "BN backward + activation forward", p, un, &["op 1", "activation forward"]);

    let mut p = plan(&x);
    p.add_bn_backward(BnMode::Spatial).unwrap();
    p.add_activation_backward(Relu).unwrap();
    p.add_activation_backward(Relu).unwrap();
    refused(h, "BN backward + two activation backwards", p, un, &["op 2"]);

    let mut p = plan(&x);
    p.add_activation_backward(Relu).unwrap();
    p.add_activation_backward(Relu).unwrap();
    refused(h, "two activation backwards", p, un, &["op 1", "activation backward"]);

    // More than eight ops, with and without a convolution.
    let mut p = plan(&x);
    for _ in 0..9 {
        p.add_activation(Relu).unwrap();
    }
    refused(h, "nine activations", p, un, &["9 ops", "8"]);
    let mut p = plan(&x);
    p.add_conv_forward(&conv3x3(), &w).unwrap();
    for _ in 0..8 {
        p.add_bias(&t(&[1, 4, 1, 1])).unwrap();
    }
    refused(h, "conv + eight biases", p, un, &["9 ops", "8"]);

    // Eight ops are fine.
    let mut p = plan(&x);
    p.add_conv_forward(&conv3x3(), &w).unwrap();
    for _ in 0..7 {
        p.add_activation(LeakyRelu).unwrap();
    }
    p.compile(h).unwrap();
    assert!(p.is_compiled());
});

device_tests!(convolution_algos_are_the_compilable_ones, |h: &Handle| {
    let x = t(&[1, 3, 6, 6]);
    let build = || {
        let mut p = plan(&x);
        p.add_conv_forward(&conv3x3(), &t(&[4, 3, 3, 3])).unwrap();
        p.add_activation(ActivationMode::Relu).unwrap();
        p
    };
    let algos = build().convolution_algos(h).unwrap();
    assert!(!algos.is_empty(), "a plain C+A plan must have an algorithm");
    for (i, a) in algos.iter().enumerate() {
        assert!(!algos[..i].contains(a), "duplicate algorithm {a:?} in {algos:?}");
    }
    // Exactly the listed algorithms compile when requested; the others are refused.
    for &a in ConvAlgorithm::ALL {
        let mut p = build();
        p.set_algo(a);
        match p.compile(h) {
            Ok(()) => assert!(algos.contains(&a), "{a:?} compiles but is not listed in {algos:?}"),
            Err(e) => {
                assert!(!algos.contains(&a), "{a:?} is listed in {algos:?} but compile refuses: {e}");
                assert_eq!(e.status, Status::UnsupportedOp, "{a:?}: {e}");
                assert!(e.reason.contains("not requested"), "{a:?}: {}", e.reason);
            }
        }
    }
    // Plans without a convolution ignore the requested algorithm.
    let mut p = plan(&x);
    p.add_activation(ActivationMode::Relu).unwrap();
    assert!(!p.convolution_algos(h).unwrap().is_empty());
    p.set_algo(ConvAlgorithm::Winograd);
    p.compile(h).unwrap();
    // A plan that does not lower has no algorithms.
    let mut p = plan(&x);
    p.add_bn_forward(BnMode::Spatial, true).unwrap();
    p.add_conv_forward(&conv3x3(), &t(&[4, 3, 3, 3])).unwrap();
    expect_err("algos of a refused plan", p.convolution_algos(h), Status::UnsupportedOp, &["op 0"]);
});

// ---------------------------------------------------------------------------------------
// Execute checks

/// A compiled-ready C+B+A plan over Float x 2×3×6×5, filter 4×3×3×3 (pad 1), with its
/// tensors on the device.
struct Cba {
    plan: FusionPlan,
    conv: ConvDesc,
    x: Dev,
    w: Dev,
    b: Dev,
}

fn cba(h: &Handle, mode: ActivationMode, seed: u64) -> Cba {
    let xd = t(&[2, 3, 6, 5]);
    let wd = t(&[4, 3, 3, 3]);
    let bd = t(&[1, 4, 1, 1]);
    let conv = conv3x3();
    let mut p = plan(&xd);
    p.add_conv_forward(&conv, &wd).unwrap();
    p.add_bias(&bd).unwrap();
    p.add_activation(mode).unwrap();
    Cba {
        plan: p,
        conv,
        x: random(h, &xd, Fill::Normal, seed),
        w: random(h, &wd, Fill::Normal, seed + 1),
        b: random(h, &bd, Fill::Normal, seed + 2),
    }
}

/// act(conv(x, w) + b) in f64, packed logical order.
fn cba_reference(c: &Cba, x: &Dev, w: &Dev, b: &Dev, act: &ActivationDesc) -> Vec<f64> {
    let yd = c.plan.output_desc().clone();
    let mut y = vec![0.0; yd.element_space()];
    r::conv_forward(&c.conv, &x.desc, &x.host, &w.desc, &w.host, &yd, &mut y).unwrap();
    r::bias_forward(&yd, &mut y, &b.desc, &b.host).unwrap();
    let mut out = vec![0.0; yd.element_space()];
    r::activation_forward(act, &yd, &y, &yd, &mut out).unwrap();
    logical(&yd, &out)
}

fn cba_args(w: DevPtr, b: DevPtr, alpha: f64) -> OpArgs {
    let mut a = OpArgs::new();
    a.set(0, OpArg::Conv { w, alpha: 1.0, beta: 0.0 });
    a.set(1, OpArg::Bias { b });
    a.set(2, OpArg::Activation { alpha, beta: 0.0, gamma: 0.0 });
    a
}

device_tests!(execute_checks_leave_the_output_untouched, |h: &Handle| {
    let mut c = cba(h, ActivationMode::LeakyRelu, 1);
    let xd = c.x.desc.clone();
    let yd = c.plan.output_desc().clone();
    let y = sentinel(h, &yd, 7.0);
    let good = cba_args(c.w.ptr(), c.b.ptr(), 0.1);
    let bad = |what: &str, r: conflux::Result<()>, needles: &[&str]| {
        expect_err(what, r, Status::BadParm, needles);
        assert_unchanged(what, h, &y);
    };

    bad("execute before compile", c.plan.execute(h, &xd, c.x.ptr(), &yd, y.ptr(), &good), &["compile"]);
    c.plan.compile(h).unwrap();
    let p = &c.plan;

    // Descriptors must equal the plan's (type, lengths and strides).
    let x_nhwc = desc(F32, xd.lens(), Lay::ChannelsLast);
    bad("input with other strides", p.execute(h, &x_nhwc, c.x.ptr(), &yd, y.ptr(), &good), &["input descriptor"]);
    let x_half = xd.with_dtype(DataType::Half).unwrap();
    bad("input of other type", p.execute(h, &x_half, c.x.ptr(), &yd, y.ptr(), &good), &["input descriptor"]);
    bad("output with the input's shape", p.execute(h, &xd, c.x.ptr(), &xd, y.ptr(), &good), &["output descriptor"]);
    let y_gapped = desc(F32, yd.lens(), Lay::Gapped);
    bad("output with gaps", p.execute(h, &xd, c.x.ptr(), &y_gapped, y.ptr(), &good), &["output descriptor"]);
    let y_nhwc = desc(F32, yd.lens(), Lay::ChannelsLast);
    bad("output NHWC", p.execute(h, &xd, c.x.ptr(), &y_nhwc, y.ptr(), &good), &["output descriptor"]);

    // Every op needs arguments of its own kind.
    bad("no arguments", p.execute(h, &xd, c.x.ptr(), &yd, y.ptr(), &OpArgs::new()), &["op 0", "no arguments"]);
    let mut partial = OpArgs::new();
    partial.set(0, OpArg::Conv { w: c.w.ptr(), alpha: 1.0, beta: 0.0 });
    bad("bias arguments missing", p.execute(h, &xd, c.x.ptr(), &yd, y.ptr(), &partial), &["op 1", "bias forward", "no arguments"]);
    partial.set(1, OpArg::Bias { b: c.b.ptr() });
    bad("activation arguments missing", p.execute(h, &xd, c.x.ptr(), &yd, y.ptr(), &partial), &["op 2", "activation forward"]);
    let mut wrong = good.clone();
    wrong.set(2, OpArg::Bias { b: c.b.ptr() });
    bad("bias args for the activation", p.execute(h, &xd, c.x.ptr(), &yd, y.ptr(), &wrong), &["op 2", "activation forward", "bias forward"]);
    let mut wrong = good.clone();
    wrong.set(0, OpArg::Activation { alpha: 0.0, beta: 0.0, gamma: 0.0 });
    bad("activation args for the conv", p.execute(h, &xd, c.x.ptr(), &yd, y.ptr(), &wrong), &["op 0", "convolution forward"]);
    let mut wrong = good.clone();
    wrong.set(1, OpArg::AddTensor { z: c.b.ptr(), alpha: 1.0 });
    bad("tensor-add args for the bias", p.execute(h, &xd, c.x.ptr(), &yd, y.ptr(), &wrong), &["op 1", "bias forward", "tensor add"]);

    // NULL pointers.
    bad("x NULL", p.execute(h, &xd, DevPtr::NULL, &yd, y.ptr(), &good), &["input pointer"]);
    let ynull = p.execute(h, &xd, c.x.ptr(), &yd, DevPtr::NULL, &good);
    expect_err("y NULL", ynull, Status::BadParm, &["output pointer"]);
    bad("weights NULL", p.execute(h, &xd, c.x.ptr(), &yd, y.ptr(), &cba_args(DevPtr::NULL, c.b.ptr(), 0.1)), &["op 0", "weights"]);
    bad("bias NULL", p.execute(h, &xd, c.x.ptr(), &yd, y.ptr(), &cba_args(c.w.ptr(), DevPtr::NULL, 0.1)), &["op 1", "bias"]);

    // The same plan still runs with good arguments.
    p.execute(h, &xd, c.x.ptr(), &yd, y.ptr(), &good).unwrap();
    let want = cba_reference(&c, &c.x, &c.w, &c.b, &ActivationDesc::new(ActivationMode::LeakyRelu, 0.1, 0.0, 0.0));
    assert_close("after the refusals", &logical(&yd, &download(h, &y)), &want, tolerance(F32));

    // Changing the plan drops its compiled state.
    c.plan.add_activation(ActivationMode::Relu).unwrap();
    assert!(!c.plan.is_compiled());
    let y2 = sentinel(h, &yd, 7.0);
    let mut more = good.clone();
    more.set(3, OpArg::Activation { alpha: 0.0, beta: 0.0, gamma: 0.0 });
    expect_err("execute after adding an op", c.plan.execute(h, &xd, c.x.ptr(), &yd, y2.ptr(), &more), Status::BadParm, &["compile"]);
    assert_unchanged("execute after adding an op", h, &y2);
});

device_tests!(pointwise_execute_checks, |h: &Handle| {
    let xd = t(&[2, 3, 4, 4]);
    let pd = t(&[1, 3, 1, 1]);
    let x = random(h, &xd, Fill::Normal, 1);
    let params: Vec<Dev> = (0..4).map(|i| random(h, &pd, Fill::Uniform(0.5, 1.5), 10 + i)).collect();
    let y = sentinel(h, &xd, 7.0);
    let bad = |what: &str, r: conflux::Result<()>, needles: &[&str], untouched: &[&Dev]| {
        expect_err(what, r, Status::BadParm, needles);
        assert_unchanged(what, h, &y);
        for (i, d) in untouched.iter().enumerate() {
            assert_unchanged(&format!("{what}: buffer {i}"), h, d);
        }
    };

    // N + Z: NULL parameter pointers name their op.
    let mut p = plan(&xd);
    p.add_bn_inference(BnMode::Spatial, &pd).unwrap();
    p.add_tensor_add(&xd).unwrap();
    p.compile(h).unwrap();
    let bn = |mean: DevPtr| OpArg::BnInference { scale: params[0].ptr(), bias: params[1].ptr(), mean, var: params[3].ptr(), eps: 1e-5 };
    let mut a = OpArgs::new();
    a.set(0, bn(DevPtr::NULL));
    a.set(1, OpArg::AddTensor { z: x.ptr(), alpha: 1.0 });
    bad("BN mean NULL", p.execute(h, &xd, x.ptr(), &xd, y.ptr(), &a), &["op 0", "mean"], &[]);
    a.set(0, bn(params[2].ptr()));
    a.set(1, OpArg::AddTensor { z: DevPtr::NULL, alpha: 1.0 });
    bad("z NULL", p.execute(h, &xd, x.ptr(), &xd, y.ptr(), &a), &["op 1", "NULL"], &[]);

    // Activation backward: modes whose derivative reads x need it; y and x cannot both be NULL.
    let mut p = plan(&xd);
    p.add_activation_backward(ActivationMode::Relu).unwrap();
    p.compile(h).unwrap();
    let mut a = OpArgs::new();
    a.set(0, OpArg::ActivationBackward { y: x.ptr(), x: DevPtr::NULL, alpha: 0.0, beta: 0.0, gamma: 0.0 });
    bad("ReLU backward without x", p.execute(h, &xd, x.ptr(), &xd, y.ptr(), &a), &["op 0", "forward input x"], &[]);
    let mut p = plan(&xd);
    p.add_activation_backward(ActivationMode::Logistic).unwrap();
    p.compile(h).unwrap();
    a.set(0, OpArg::ActivationBackward { y: DevPtr::NULL, x: DevPtr::NULL, alpha: 0.0, beta: 0.0, gamma: 0.0 });
    bad("logistic backward without x and y", p.execute(h, &xd, x.ptr(), &xd, y.ptr(), &a), &["op 0", "forward output y"], &[]);

    // BN forward training created with running = true needs the running pointers.
    let sm = sentinel(h, &pd, 5.0);
    let si = sentinel(h, &pd, 5.0);
    let rm = sentinel(h, &pd, 5.0);
    let mut p = plan(&xd);
    p.add_bn_forward(BnMode::Spatial, true).unwrap();
    p.add_activation(ActivationMode::Relu).unwrap();
    p.compile(h).unwrap();
    let train = |scale: DevPtr, rv: DevPtr| OpArg::BnForward {
        scale,
        bias: params[1].ptr(),
        saved_mean: sm.ptr(),
        saved_inv_var: si.ptr(),
        running_mean: rm.ptr(),
        running_var: rv,
        exp_avg_factor: 0.5,
        eps: 1e-5,
    };
    let mut a = OpArgs::new();
    a.set(0, train(params[0].ptr(), DevPtr::NULL));
    a.set(1, OpArg::Activation { alpha: 0.0, beta: 0.0, gamma: 0.0 });
    bad("running variance NULL", p.execute(h, &xd, x.ptr(), &xd, y.ptr(), &a), &["op 0", "running"], &[&sm, &si, &rm]);
    let rv = sentinel(h, &pd, 5.0);
    a.set(0, train(DevPtr::NULL, rv.ptr()));
    bad("BN scale NULL", p.execute(h, &xd, x.ptr(), &xd, y.ptr(), &a), &["op 0", "scale"], &[&sm, &si, &rm, &rv]);
    let mut missing = OpArgs::new();
    missing.set(0, train(params[0].ptr(), rv.ptr()));
    bad("activation args missing", p.execute(h, &xd, x.ptr(), &xd, y.ptr(), &missing), &["op 1"], &[&sm, &si, &rm, &rv]);

    // BN backward: x and scale are required; with a fused activation the bias too.
    let ds = sentinel(h, &pd, 5.0);
    let db = sentinel(h, &pd, 5.0);
    let bwd = |xp: DevPtr, scale: DevPtr, bias: DevPtr| OpArg::BnBackward {
        x: xp,
        scale,
        bias,
        dscale: ds.ptr(),
        dbias: db.ptr(),
        saved_mean: DevPtr::NULL,
        saved_inv_var: DevPtr::NULL,
        eps: 1e-5,
    };
    let mut p = plan(&xd);
    p.add_bn_backward(BnMode::Spatial).unwrap();
    p.compile(h).unwrap();
    let mut a = OpArgs::new();
    a.set(0, bwd(DevPtr::NULL, params[0].ptr(), params[1].ptr()));
    bad("BN backward x NULL", p.execute(h, &xd, x.ptr(), &xd, y.ptr(), &a), &["op 0", "x"], &[&ds, &db]);
    a.set(0, bwd(x.ptr(), DevPtr::NULL, params[1].ptr()));
    bad("BN backward scale NULL", p.execute(h, &xd, x.ptr(), &xd, y.ptr(), &a), &["op 0", "scale"], &[&ds, &db]);
    let mut p = plan(&xd);
    p.add_bn_backward(BnMode::Spatial).unwrap();
    p.add_activation_backward(ActivationMode::Elu).unwrap();
    p.compile(h).unwrap();
    a.set(0, bwd(x.ptr(), params[0].ptr(), DevPtr::NULL));
    a.set(1, OpArg::ActivationBackward { y: DevPtr::NULL, x: DevPtr::NULL, alpha: 1.0, beta: 0.0, gamma: 0.0 });
    bad("BN+A backward bias NULL", p.execute(h, &xd, x.ptr(), &xd, y.ptr(), &a), &["op 0", "bias"], &[&ds, &db]);
});

// ---------------------------------------------------------------------------------------
// Invoker reuse and concurrency

device_tests!(new_arguments_never_rebuild, |h: &Handle| {
    let mut c = cba(h, ActivationMode::LeakyRelu, 100);
    let yd = c.plan.output_desc().clone();
    assert_eq!(h.build_count(), 0);
    c.plan.compile(h).unwrap();
    let built = h.build_count();
    assert!(built >= 1, "the first compile builds an invoker");
    for round in 0..3u64 {
        // New input, weights, bias and activation slope each round.
        let x = random(h, &c.x.desc, Fill::Normal, 200 + round);
        let w = random(h, &c.w.desc, Fill::Normal, 300 + round);
        let b = random(h, &c.b.desc, Fill::Normal, 400 + round);
        let slope = [0.1, 0.3, 0.02][round as usize];
        let y = poisoned(h, &yd);
        c.plan.execute(h, &x.desc, x.ptr(), &yd, y.ptr(), &cba_args(w.ptr(), b.ptr(), slope)).unwrap();
        let want = cba_reference(&c, &x, &w, &b, &ActivationDesc::new(ActivationMode::LeakyRelu, slope, 0.0, 0.0));
        assert_close(&format!("round {round} on {}", h.device().name()), &logical(&yd, &download(h, &y)), &want, tolerance(F32));
        assert_eq!(h.build_count(), built, "round {round}: new arguments rebuilt the invoker");
    }
    // Compiling again, or compiling an identical plan, reuses the handle's invoker.
    c.plan.compile(h).unwrap();
    assert_eq!(h.build_count(), built, "recompiling the same plan built again");
    let mut same = cba(h, ActivationMode::LeakyRelu, 100);
    same.plan.compile(h).unwrap();
    assert_eq!(h.build_count(), built, "an identical plan built again");
    // A different activation mode is a different kernel: the counter does move.
    let mut other = cba(h, ActivationMode::Elu, 100);
    other.plan.compile(h).unwrap();
    assert_eq!(h.build_count(), built + 1, "a different plan must build its own invoker");

    // The same for a pointwise plan (N + A): new parameters and ε, no new build.
    let xd = t(&[2, 3, 4, 4]);
    let pd = t(&[1, 3, 4, 4]);
    let mut p = plan(&xd);
    p.add_bn_inference(BnMode::PerActivation, &pd).unwrap();
    p.add_activation(ActivationMode::Tanh).unwrap();
    p.compile(h).unwrap();
    let built = h.build_count();
    for round in 0..2u64 {
        let x = random(h, &xd, Fill::Normal, 500 + round);
        let ps: Vec<Dev> = (0..4).map(|i| random(h, &pd, Fill::Uniform(0.5, 1.5), 600 + 10 * round + i)).collect();
        let (eps, ta, tb) = [(1e-5, 0.8, 1.3), (0.5, 1.1, 0.7)][round as usize];
        let mut a = OpArgs::new();
        a.set(0, OpArg::BnInference { scale: ps[0].ptr(), bias: ps[1].ptr(), mean: ps[2].ptr(), var: ps[3].ptr(), eps });
        a.set(1, OpArg::Activation { alpha: ta, beta: tb, gamma: 0.0 });
        let y = poisoned(h, &xd);
        p.execute(h, &xd, x.ptr(), &xd, y.ptr(), &a).unwrap();
        let mut want = vec![0.0; xd.element_space()];
        r::bn_inference(BnMode::PerActivation, &xd, &x.host, &xd, &mut want, &ps[0].host, &ps[1].host, &ps[2].host, &ps[3].host, eps).unwrap();
        let prev = want.clone();
        r::activation_forward(&ActivationDesc::new(ActivationMode::Tanh, ta, tb, 0.0), &xd, &prev, &xd, &mut want).unwrap();
        assert_close(&format!("N+A round {round}"), &download(h, &y), &want, tolerance(F32));
    }
    p.compile(h).unwrap();
    assert_eq!(h.build_count(), built, "N+A: new arguments or recompiling built again");
});

device_tests!(concurrent_executes_match_serial, |h: &Handle| {
    const THREADS: usize = 8;
    let mut c = cba(h, ActivationMode::Elu, 900);
    c.plan.compile(h).unwrap();
    let yd = c.plan.output_desc().clone();
    let xd = c.x.desc.clone();
    // A pointwise plan too (B + A), run by the same threads.
    let pxd = t(&[2, 8, 4, 4]);
    let mut pw = plan(&pxd);
    pw.add_bias(&t(&[1, 8, 1, 1])).unwrap();
    pw.add_activation(ActivationMode::Tanh).unwrap();
    pw.compile(h).unwrap();
    let built = h.build_count();

    // Per thread: its own input, weights, bias, activation parameter and outputs.
    struct Job {
        x: Dev,
        w: Dev,
        b: Dev,
        alpha: f64,
        px: Dev,
        pb: Dev,
    }
    let jobs: Vec<Job> = (0..THREADS as u64)
        .map(|i| Job {
            x: random(h, &xd, Fill::Normal, 1000 + 10 * i),
            w: random(h, &c.w.desc, Fill::Normal, 1001 + 10 * i),
            b: random(h, &c.b.desc, Fill::Normal, 1002 + 10 * i),
            alpha: 0.2 + 0.1 * i as f64,
            px: random(h, &pxd, Fill::Normal, 1003 + 10 * i),
            pb: random(h, &t(&[1, 8, 1, 1]), Fill::Normal, 1004 + 10 * i),
        })
        .collect();
    let pw_args = |j: &Job| {
        let mut a = OpArgs::new();
        a.set(0, OpArg::Bias { b: j.pb.ptr() });
        a.set(1, OpArg::Activation { alpha: j.alpha, beta: 1.0 + j.alpha, gamma: 0.0 });
        a
    };
    let run = |j: &Job| -> (Vec<f64>, Vec<f64>) {
        let y = poisoned(h, &yd);
        c.plan.execute(h, &xd, j.x.ptr(), &yd, y.ptr(), &cba_args(j.w.ptr(), j.b.ptr(), j.alpha)).unwrap();
        let py = poisoned(h, &pxd);
        pw.execute(h, &pxd, j.px.ptr(), &pxd, py.ptr(), &pw_args(j)).unwrap();
        (download(h, &y), download(h, &py))
    };
    // Serial results, each checked against the reference.
    let serial: Vec<(Vec<f64>, Vec<f64>)> = jobs.iter().map(run).collect();
    for (i, (j, (y, _))) in jobs.iter().zip(&serial).enumerate() {
        let want = cba_reference(&c, &j.x, &j.w, &j.b, &ActivationDesc::new(ActivationMode::Elu, j.alpha, 0.0, 0.0));
        assert_close(&format!("serial job {i}"), &logical(&yd, y), &want, tolerance(F32));
    }
    let same = |a: &[f64], b: &[f64]| a.len() == b.len() && a.iter().zip(b).all(|(p, q)| p.to_bits() == q.to_bits());
    std::thread::scope(|s| {
        for (i, j) in jobs.iter().enumerate() {
            let (run, serial) = (&run, &serial);
            s.spawn(move || {
                for it in 0..3 {
                    let (y, py) = run(j);
                    assert!(same(&y, &serial[i].0), "thread {i} iteration {it}: C+B+A differs from its serial result");
                    assert!(same(&py, &serial[i].1), "thread {i} iteration {it}: B+A differs from its serial result");
                }
            });
        }
    });
    assert_eq!(h.build_count(), built, "concurrent executes built invokers");
});

device_tests!(concurrent_compiles_build_once, |h: &Handle| {
    // Eight threads compile identical plans on one handle at the same time: the handle's
    // invoker cache builds the invoker once, and every plan runs correctly.
    let x = random(h, &t(&[1, 3, 6, 6]), Fill::Normal, 1);
    let w = random(h, &t(&[4, 3, 3, 3]), Fill::Normal, 2);
    let b = random(h, &t(&[1, 4, 1, 1]), Fill::Normal, 3);
    let build = || {
        let mut p = plan(&x.desc);
        p.add_conv_forward(&conv3x3(), &w.desc).unwrap();
        p.add_bias(&b.desc).unwrap();
        p.add_activation(ActivationMode::Relu).unwrap();
        p
    };
    let yd = build().output_desc().clone();
    let mut want = vec![0.0; yd.element_space()];
    r::conv_forward(&conv3x3(), &x.desc, &x.host, &w.desc, &w.host, &yd, &mut want).unwrap();
    r::bias_forward(&yd, &mut want, &b.desc, &b.host).unwrap();
    let want: Vec<f64> = want.iter().map(|v| v.max(0.0)).collect();
    let before = h.build_count();
    std::thread::scope(|s| {
        for i in 0..8 {
            let (build, want, yd, x, w, b) = (&build, &want, &yd, &x, &w, &b);
            s.spawn(move || {
                let mut p = build();
                p.compile(h).unwrap();
                let y = poisoned(h, yd);
                p.execute(h, &x.desc, x.ptr(), yd, y.ptr(), &cba_args(w.ptr(), b.ptr(), 0.0)).unwrap();
                assert_close(&format!("thread {i}"), &download(h, &y), want, tolerance(F32));
            });
        }
    });
    assert_eq!(h.build_count(), before + 1, "racing compiles of one plan must build one invoker");
});

device_tests!(concurrent_compiles_of_distinct_plans, |h: &Handle| {
    // Eight threads compile eight different plans on one handle at once (as the Python
    // package's fuse(example_input=) does): each problem's invoker is built once, builds of
    // different problems do not wait on one another's lock, and every plan computes its own
    // reference result.
    let h = &fresh(h);
    let cases: Vec<(TensorDesc, TensorDesc)> = (0..8).map(|i| (t(&[1 + i % 2, 2 + i, 5 + i, 6]), t(&[3 + i, 2 + i, 3, 3]))).collect();
    let before = h.build_count();
    std::thread::scope(|s| {
        for (i, (xd, wd)) in cases.iter().enumerate() {
            s.spawn(move || {
                let x = random(h, xd, Fill::Normal, 10 + i as u64);
                let w = random(h, wd, Fill::Normal, 20 + i as u64);
                let b = random(h, &t(&[1, wd.n(), 1, 1]), Fill::Normal, 30 + i as u64);
                let mut p = plan(xd);
                p.add_conv_forward(&conv3x3(), wd).unwrap();
                p.add_bias(&b.desc).unwrap();
                p.add_activation(ActivationMode::Relu).unwrap();
                p.compile(h).unwrap();
                let yd = p.output_desc().clone();
                let y = poisoned(h, &yd);
                p.execute(h, xd, x.ptr(), &yd, y.ptr(), &cba_args(w.ptr(), b.ptr(), 0.0)).unwrap();
                let mut want = vec![0.0; yd.element_space()];
                r::conv_forward(&conv3x3(), xd, &x.host, wd, &w.host, &yd, &mut want).unwrap();
                r::bias_forward(&yd, &mut want, &b.desc, &b.host).unwrap();
                let want: Vec<f64> = want.iter().map(|v| v.max(0.0)).collect();
                assert_close(&format!("plan {i}"), &download(h, &y), &logical(&yd, &want), tolerance(F32));
            });
        }
    });
    assert_eq!(h.build_count(), before + 8, "eight distinct plans build eight invokers");
});

// ---------------------------------------------------------------------------------------
// conv::api argument checks

device_tests!(conv_api_mismatches_are_bad_parm, |h: &Handle| {
    let conv = conv3x3();
    let (xd, wd, yd) = (t(&[2, 3, 5, 5]), t(&[4, 3, 3, 3]), t(&[2, 4, 5, 5]));
    let x = random(h, &xd, Fill::Normal, 1);
    let w = random(h, &wd, Fill::Normal, 2);
    let dy = random(h, &yd, Fill::Normal, 3);
    let ws = Workspace::default();
    let check = |what: &str, r: conflux::Result<()>, status: Status, needles: &[&str], out: &Dev| {
        expect_err(what, r, status, needles);
        assert_unchanged(what, h, out);
        for (name, d) in [("x", &x), ("w", &w), ("dy", &dy)] {
            assert_unchanged(&format!("{what}: {name}"), h, d);
        }
    };
    let bp = Status::BadParm;

    // Forward.
    let bad_y = t(&[2, 4, 4, 5]);
    let y = sentinel(h, &bad_y, 7.0);
    check("y of wrong lengths", api::forward(h, &conv, &xd, x.ptr(), &wd, w.ptr(), &bad_y, y.ptr(), 1.0, 0.0, Choice::Auto, ws), bp, &["y", "[2, 4, 5, 5]"], &y);
    let y_half = yd.with_dtype(DataType::Half).unwrap();
    let y = sentinel(h, &y_half, 7.0);
    check("y of another type", api::forward(h, &conv, &xd, x.ptr(), &wd, w.ptr(), &y_half, y.ptr(), 1.0, 0.0, Choice::Auto, ws), bp, &["type"], &y);
    let y = sentinel(h, &yd, 7.0);
    let w5 = t(&[4, 5, 3, 3]);
    check("filter channels", api::forward(h, &conv, &xd, x.ptr(), &w5, w.ptr(), &yd, y.ptr(), 1.0, 0.0, Choice::Auto, ws), bp, &["channels"], &y);
    check("x NULL", api::forward(h, &conv, &xd, DevPtr::NULL, &wd, w.ptr(), &yd, y.ptr(), 1.0, 0.0, Choice::Auto, ws), bp, &["x pointer"], &y);
    check("w NULL", api::forward(h, &conv, &xd, x.ptr(), &wd, DevPtr::NULL, &yd, y.ptr(), 1.0, 0.0, Choice::Auto, ws), bp, &["w pointer"], &y);
    expect_err("y NULL", api::forward(h, &conv, &xd, x.ptr(), &wd, w.ptr(), &yd, DevPtr::NULL, 1.0, 0.0, Choice::Auto, ws), bp, &["y pointer"]);
    // An id no solver has: the literal is the thing tested (MIOpen's BadParm for it).
    check(
        "unknown solution",
        api::forward(h, &conv, &xd, x.ptr(), &wd, w.ptr(), &yd, y.ptr(), 1.0, 0.0, Choice::Solution(999_999), ws),
        bp,
        &["999999", "does not exist"],
        &y,
    );
    // The naive convolution of the other device, and this device's pointwise solver.
    let (other_device, pointwise) = match h.device_kind() {
        conflux::handle::DeviceKind::Cpu => (solution_id("CudaConvDirect"), solution_id("CpuPointwise")),
        conflux::handle::DeviceKind::Cuda => (solution_id("CpuConvNaive"), solution_id("CudaPointwise")),
    };
    check(
        "solution of another device",
        api::forward(h, &conv, &xd, x.ptr(), &wd, w.ptr(), &yd, y.ptr(), 1.0, 0.0, Choice::Solution(other_device), ws),
        bp,
        &["another device"],
        &y,
    );
    check(
        "solution that does not apply",
        api::forward(h, &conv, &xd, x.ptr(), &wd, w.ptr(), &yd, y.ptr(), 1.0, 0.0, Choice::Solution(pointwise), ws),
        bp,
        &["does not apply"],
        &y,
    );
    let xd64 = xd.with_dtype(DataType::Double).unwrap();
    let wd64 = wd.with_dtype(DataType::Double).unwrap();
    let yd64 = yd.with_dtype(DataType::Double).unwrap();
    let y64 = sentinel(h, &yd64, 7.0);
    let x64 = random(h, &xd64, Fill::Normal, 4);
    let w64 = random(h, &wd64, Fill::Normal, 5);
    check(
        "double precision",
        api::forward(h, &conv, &xd64, x64.ptr(), &wd64, w64.ptr(), &yd64, y64.ptr(), 1.0, 0.0, Choice::Auto, ws),
        Status::NotImplemented,
        &["Double"],
        &y64,
    );

    // Backward data: dx must have the forward input's lengths.
    let bad_dx = t(&[2, 3, 5, 6]);
    let dx = sentinel(h, &bad_dx, 7.0);
    check("dx of wrong lengths", api::backward_data(h, &conv, &yd, dy.ptr(), &wd, w.ptr(), &bad_dx, dx.ptr(), 1.0, 0.0, Choice::Auto, ws), bp, &["dy"], &dx);
    let dx = sentinel(h, &xd, 7.0);
    check("dy NULL", api::backward_data(h, &conv, &yd, DevPtr::NULL, &wd, w.ptr(), &xd, dx.ptr(), 1.0, 0.0, Choice::Auto, ws), bp, &["NULL"], &dx);
    let dy_bad = t(&[3, 4, 5, 5]);
    check("dy batch differs", api::backward_data(h, &conv, &dy_bad, dy.ptr(), &wd, w.ptr(), &xd, dx.ptr(), 1.0, 0.0, Choice::Auto, ws), bp, &["dy"], &dx);

    // Backward weights: dw must have the filter's lengths.
    let bad_dw = t(&[4, 3, 3, 2]);
    let dw = sentinel(h, &bad_dw, 7.0);
    check("dw of wrong lengths", api::backward_weights(h, &conv, &yd, dy.ptr(), &xd, x.ptr(), &bad_dw, dw.ptr(), 1.0, 0.0, Choice::Auto, ws), bp, &["dy"], &dw);
    let dw = sentinel(h, &wd, 7.0);
    check("dw NULL", api::backward_weights(h, &conv, &yd, dy.ptr(), &xd, x.ptr(), &wd, DevPtr::NULL, 1.0, 0.0, Choice::Auto, ws), bp, &["NULL"], &dw);
    let x_nhwc_half = desc(DataType::Half, xd.lens(), Lay::ChannelsLast);
    check(
        "x of another type",
        api::backward_weights(h, &conv, &yd, dy.ptr(), &x_nhwc_half, x.ptr(), &wd, dw.ptr(), 1.0, 0.0, Choice::Auto, ws),
        bp,
        &["type"],
        &dw,
    );

    // And the valid calls work on the same buffers.
    let y = poisoned(h, &yd);
    api::forward(h, &conv, &xd, x.ptr(), &wd, w.ptr(), &yd, y.ptr(), 1.0, 0.0, Choice::Auto, ws).unwrap();
    let mut want = vec![0.0; yd.element_space()];
    r::conv_forward(&conv, &xd, &x.host, &wd, &w.host, &yd, &mut want).unwrap();
    assert_close("valid forward", &download(h, &y), &want, tolerance(F32));
});
