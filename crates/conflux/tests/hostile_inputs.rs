//! Regression tests for what a random C-API call generator found (issue 33): valid requests
//! that aborted the process, panicked, or returned Success with elements left unwritten. Each
//! must now compute the right answer or return an error with a reason.

mod support;

use conflux::conv::api::{self, Choice, Workspace};
use conflux::reference::{conv as rconv, fill::Fill};
use conflux::{ActivationDesc, ActivationMode, ConvDesc, ConvMode, DataType, FusionDirection, FusionPlan, Handle, Status, TensorDesc};
use support::*;

// Pad and stride 2³⁰ on a 9×11 input (output 3×11): the planar direct solvers would copy a
// padded plane of ~10¹⁰ elements per task. Every direction must run on another solver.
device_tests!(huge_padding_and_stride, |h: &Handle| {
    let big = 1i64 << 30;
    let conv = ConvDesc::new(ConvMode::Convolution, &[big, 0], &[big, 1], &[1, 1]).unwrap();
    let x = TensorDesc::new(DataType::Float, &[1, 1, 9, 11]).unwrap();
    let w = TensorDesc::new(DataType::Float, &[1, 1, 5, 1]).unwrap();
    let y = conv.output_desc(&x, &w).unwrap();
    assert_eq!(y.lens(), &[1, 1, 3, 11]);
    let (xd, wd) = (random(h, &x, Fill::SmallInt(-2, 2), 1), random(h, &w, Fill::SmallInt(-2, 2), 2));
    let yd = poisoned(h, &y);
    api::forward(h, &conv, &x, xd.ptr(), &w, wd.ptr(), &y, yd.ptr(), 1.0, 0.0, Choice::Auto, Workspace::default()).unwrap();
    let mut want = vec![0.0; y.element_space()];
    rconv::conv_forward(&conv, &x, &xd.host, &w, &wd.host, &y, &mut want).unwrap();
    assert_close("huge-padding forward", &download(h, &yd), &want, 0.0);
    let dx = poisoned(h, &x);
    let dyd = random(h, &y, Fill::SmallInt(-2, 2), 3);
    api::backward_data(h, &conv, &y, dyd.ptr(), &w, wd.ptr(), &x, dx.ptr(), 1.0, 0.0, Choice::Auto, Workspace::default()).unwrap();
    let mut want = vec![0.0; x.element_space()];
    rconv::conv_backward_data(&conv, &y, &dyd.host, &w, &wd.host, &x, &mut want).unwrap();
    assert_close("huge-padding backward-data", &download(h, &dx), &want, 0.0);
});

// Activation forward and backward on tensors of rank 1 to 8, packed and with merged strided
// trailing dimensions: every element computed (ReLU against the f64 formula); a rank-7
// layout whose spatial dimensions cannot merge is refused, not half computed.
device_tests!(activation_on_every_rank, |h: &Handle| {
    let act = ActivationDesc::new(ActivationMode::Relu, 0.0, 0.0, 0.0);
    let shapes: [&[usize]; 8] = [&[7], &[3, 5], &[2, 3, 4], &[2, 3, 2, 2], &[1, 2, 2, 3, 2], &[2, 2, 2, 2, 2, 2], &[1, 2, 3, 1, 2, 2, 2], &[2, 1, 2, 2, 1, 2, 2, 2]];
    for lens in shapes {
        let d = TensorDesc::new(DataType::Float, lens).unwrap();
        let x = random(h, &d, Fill::Normal, lens.len() as u64);
        let y = poisoned(h, &d);
        conflux::ops::activation_forward(h, &act, &d, x.ptr(), &d, y.ptr()).unwrap();
        let want: Vec<f64> = x.host.iter().map(|&v| if v > 0.0 { v } else { 0.0 }).collect();
        assert_close(&format!("ReLU on {lens:?}"), &download(h, &y), &want, tolerance_f32());
        // Backward: dx = dy where x > 0.
        let dy = random(h, &d, Fill::Normal, 100 + lens.len() as u64);
        let dx = poisoned(h, &d);
        conflux::ops::activation_backward(h, &act, &d, y.ptr(), &d, dy.ptr(), &d, x.ptr(), &d, dx.ptr()).unwrap();
        let want: Vec<f64> = x.host.iter().zip(&dy.host).map(|(&xv, &g)| if xv > 0.0 { g } else { 0.0 }).collect();
        assert_close(&format!("ReLU backward on {lens:?}"), &download(h, &dx), &want, tolerance_f32());
    }
    // Rank 6 with a gap after every row of every dimension: dims 2.. do not merge into three.
    let lens = [1, 2, 2, 2, 2, 2];
    let strides = [63, 31, 15, 7, 3, 1];
    let gapped = TensorDesc::with_strides(DataType::Float, &lens, &strides).unwrap();
    let buf = poisoned(h, &gapped);
    let e = conflux::ops::activation_forward(h, &act, &gapped, buf.ptr(), &gapped, buf.ptr()).unwrap_err();
    assert_eq!(e.status, Status::BadParm, "{e}");
    assert!(e.reason.contains("merge"), "{e}");
});

fn tolerance_f32() -> f64 { conflux::reference::compare::tolerance(DataType::Float) }

// A fusion plan over a 1-D tensor: a reasoned BadParm, not a panic inside compile.
device_tests!(fusion_plan_on_a_1d_tensor, |h: &Handle| {
    let x = TensorDesc::new(DataType::Float, &[16]).unwrap();
    let mut plan = FusionPlan::new(FusionDirection::Vertical, x);
    plan.add_activation(ActivationMode::Relu).unwrap();
    let e = plan.compile(h).unwrap_err();
    assert_eq!(e.status, Status::BadParm, "{e}");
    assert!(e.reason.contains("1-dim"), "{e}");
});

// A 3-D grouped convolution whose depth dilation is near INT_MAX (effective filter extent
// 2³¹ − 1, padding 2³⁰): the direct path's plane sizes used to overflow ("capacity overflow"
// panic) and take Find down with them. Immediate mode and Find must both give the reference
// result.
device_tests!(dilation_near_int_max, |h: &Handle| {
    let dil = (1i64 << 31) - 2;
    let mut conv = ConvDesc::new(ConvMode::Convolution, &[1 << 30, 0, 0], &[1, 1, 1], &[dil, 1, 1]).unwrap();
    conv.set_groups(2).unwrap();
    let x = TensorDesc::new(DataType::Float, &[1, 2, 3, 3, 3]).unwrap();
    let w = TensorDesc::new(DataType::Float, &[2, 1, 2, 1, 1]).unwrap();
    let y = conv.output_desc(&x, &w).unwrap();
    let (xd, wd) = (random(h, &x, Fill::SmallInt(-2, 2), 5), random(h, &w, Fill::SmallInt(-2, 2), 6));
    let mut want = vec![0.0; y.element_space()];
    rconv::conv_forward(&conv, &x, &xd.host, &w, &wd.host, &y, &mut want).unwrap();
    let yd = poisoned(h, &y);
    api::forward(h, &conv, &x, xd.ptr(), &w, wd.ptr(), &y, yd.ptr(), 1.0, 0.0, Choice::Auto, Workspace::default()).unwrap();
    assert_close("near-INT_MAX dilation, immediate", &download(h, &yd), &want, 0.0);
    let yd = poisoned(h, &y);
    let perf = conflux::conv::find_forward(h, &conv, &x, xd.ptr(), &w, wd.ptr(), &y, yd.ptr(), 4, false, Workspace::default()).unwrap();
    assert!(!perf.is_empty());
    assert_close("near-INT_MAX dilation, Find", &download(h, &yd), &want, 0.0);
});

// Tensor ops on ranks 1 to 8 (issue 33 item 3): op-tensor with a broadcast B, set, scale and
// transform compute every element; batch norm, defined on 4-D and 5-D tensors, refuses the
// other ranks with BadParm and writes nothing.
device_tests!(tensor_ops_and_batch_norm_on_every_rank, |h: &Handle| {
    use conflux::ops::{bn_forward_inference, op_tensor, scale_tensor, set_tensor, transform_tensor, BnInferenceArgs};
    use conflux::{BnMode, TensorOp};
    let shapes: [&[usize]; 8] = [&[7], &[3, 5], &[2, 3, 4], &[2, 3, 2, 2], &[1, 2, 2, 3, 2], &[2, 2, 2, 2, 2, 2], &[1, 2, 3, 1, 2, 2, 2], &[2, 1, 2, 2, 1, 2, 2, 2]];
    for lens in shapes {
        let d = TensorDesc::new(DataType::Float, lens).unwrap();
        // B broadcasts along every dimension but the last.
        let mut bl = vec![1; lens.len()];
        bl[lens.len() - 1] = lens[lens.len() - 1];
        let bd = TensorDesc::new(DataType::Float, &bl).unwrap();
        let (a, b) = (random(h, &d, Fill::SmallInt(-3, 3), 1), random(h, &bd, Fill::SmallInt(-3, 3), 2));
        let c = poisoned(h, &d);
        op_tensor(h, TensorOp::Add, 2.0, &d, a.ptr(), 1.0, &bd, b.ptr(), 0.0, &d, c.ptr()).unwrap();
        let last = lens[lens.len() - 1];
        let want: Vec<f64> = a.host.iter().enumerate().map(|(i, &v)| 2.0 * v + b.host[i % last]).collect();
        assert_close(&format!("op tensor on {lens:?}"), &download(h, &c), &want, 0.0);
        scale_tensor(h, &d, c.ptr(), 0.5).unwrap();
        let half: Vec<f64> = want.iter().map(|v| 0.5 * v).collect();
        assert_close(&format!("scale tensor on {lens:?}"), &download(h, &c), &half, 0.0);
        let y = poisoned(h, &d);
        transform_tensor(h, 1.0, &d, c.ptr(), 0.0, &d, y.ptr()).unwrap();
        assert_close(&format!("transform tensor on {lens:?}"), &download(h, &y), &half, 0.0);
        set_tensor(h, &d, y.ptr(), 3.0).unwrap();
        assert_close(&format!("set tensor on {lens:?}"), &download(h, &y), &vec![3.0; d.element_count()], 0.0);

        // Batch-norm inference: parameters 1×C×1… of the tensor's rank.
        let mut pl = vec![1; lens.len()];
        if lens.len() > 1 {
            pl[1] = lens[1];
        }
        let pd = TensorDesc::new(DataType::Float, &pl).unwrap();
        let p = random(h, &pd, Fill::Uniform(0.5, 1.5), 3);
        let out = poisoned(h, &d);
        let before = download(h, &out);
        let args = BnInferenceArgs { scale: p.ptr(), bias: p.ptr(), mean: p.ptr(), var: p.ptr(), eps: 1e-5 };
        let r = bn_forward_inference(h, BnMode::Spatial, &d, a.ptr(), &d, out.ptr(), &[&pd, &pd, &pd, &pd], &args);
        if lens.len() == 4 || lens.len() == 5 {
            r.unwrap_or_else(|e| panic!("BN inference on {lens:?}: {e}"));
        } else {
            let e = r.unwrap_err();
            assert_eq!(e.status, Status::BadParm, "BN inference on {lens:?}: {e}");
            assert!(e.reason.contains("4-D or 5-D"), "{e}");
            assert!(download(h, &out).iter().zip(&before).all(|(x, y)| x.to_bits() == y.to_bits()), "BN inference on {lens:?} wrote y");
        }
    }
});

// Fuzzer finding (C API fuzzer, seed 2, scenario 19760): a grouped 1×3 filter with a width
// dilation of 2³⁰ over a 4×4 image. Every solver must either run it with a bounded workspace
// or refuse it; Find 2.0 (which allocates the workspace it times with) must not abort.
device_tests!(dilation_of_2_pow_30_with_groups, |h: &Handle| {
    let mut conv = ConvDesc::new(ConvMode::Convolution, &[1, 1], &[1, 2], &[1, 1 << 30]).unwrap();
    conv.set_groups(2).unwrap();
    let x = TensorDesc::new(DataType::Float, &[1, 2, 4, 4]).unwrap();
    let w = TensorDesc::new(DataType::Float, &[2, 1, 1, 3]).unwrap();
    let y = conv.output_desc(&x, &w).unwrap();
    let problem = conflux::ConvProblem::forward(&conv, &x, &w, &y).unwrap();
    for s in conflux::conv::solutions(h, &problem, 64).unwrap() {
        assert!(s.workspace_bytes < 1 << 30, "solution {} asks for {} workspace bytes", s.solution_id, s.workspace_bytes);
    }
    let (xd, wd) = (random(h, &x, Fill::SmallInt(-2, 2), 7), random(h, &w, Fill::SmallInt(-2, 2), 8));
    let mut want = vec![0.0; y.element_space()];
    rconv::conv_forward(&conv, &x, &xd.host, &w, &wd.host, &y, &mut want).unwrap();
    let mut p = conflux::find2::Problem::new(conflux::find2::Operator::Conv(conv.clone()), conflux::find2::ProblemDirection::Forward).unwrap();
    p.set_tensor(conflux::find2::arg::CONV_X, x.clone()).unwrap();
    p.set_tensor(conflux::find2::arg::CONV_W, w.clone()).unwrap();
    let found = conflux::find2::find_solutions(h, &p, &Default::default(), 8).unwrap();
    let yd = poisoned(h, &y);
    let mut args = conflux::find2::RunTensors::default();
    for (id, d) in [(conflux::find2::arg::CONV_X, &xd), (conflux::find2::arg::CONV_W, &wd), (conflux::find2::arg::CONV_Y, &yd)] {
        args.tensors.insert(id, (None, d.ptr()));
    }
    // Whichever solver Find timed fastest runs, with the workspace its solution asks for.
    let ws_bytes = found[0].workspace_bytes;
    let wsb = h.alloc(ws_bytes.max(1)).unwrap();
    conflux::find2::run(h, &found[0], &args, Workspace { ptr: wsb.ptr(), bytes: ws_bytes }).unwrap();
    assert_close("dilation 2^30, Find 2.0", &download(h, &yd), &want, 0.0);
});

// Fuzzer finding (C API fuzzer with pooling, seed 1): a padding of at least the window puts
// whole windows in the padding; the CPU kernel's window length underflowed (a caught panic).
// Such a window's max is -inf and its average 0, on every device, as the reference defines.
device_tests!(pooling_windows_wholly_in_the_padding, |h: &Handle| {
    use conflux::pooling::{PoolingDesc, PoolingMode};
    let x = TensorDesc::new(DataType::Float, &[1, 3, 2, 3]).unwrap();
    for mode in [PoolingMode::Max, PoolingMode::Average, PoolingMode::AverageInclusive] {
        let p = PoolingDesc::new(mode, &[1, 2], &[2, 2], &[1, 1]).unwrap();
        let y = TensorDesc::new(DataType::Float, &p.output_lens(&x).unwrap()).unwrap();
        let xd = random(h, &x, Fill::SmallInt(-4, 4), 9);
        let yd = poisoned(h, &y);
        let none = conflux::ops::PoolWorkspace { ptr: conflux::DevPtr::NULL, bytes: 0 };
        conflux::ops::pooling_forward(h, &p, (1.0, 0.0), &x, xd.ptr(), &y, yd.ptr(), false, none).unwrap_or_else(|e| panic!("{mode:?}: {e}"));
        let mut want = vec![f64::NAN; y.element_space()];
        conflux::reference::pooling_forward(&p, (1.0, 0.0), &x, &xd.host, &y, &mut want).unwrap();
        assert!(want.iter().any(|v| v.is_infinite() || *v == 0.0), "{mode:?}: no window lies in the padding");
        let got = download(h, &yd);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(g == w || (g - w).abs() <= 1e-6 * w.abs().max(1.0), "{mode:?} element {i}: {g} vs {w}");
        }
    }
});
