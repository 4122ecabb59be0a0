//! Horizontal fusion plans: every convolution starts a branch over the plan's input, the
//! pointwise ops after it are the branch's, and the output is the branches concatenated along
//! channels. Branches of different filter sizes, strides, groups and epilogues, NCHW and
//! NHWC, f32 and f16, against per-branch f64 reference chains (exact small-integer data and
//! normal data); refusals name the op; nothing is written when execute refuses.

mod support;

use conflux::reference::compare::tolerance;
use conflux::reference::{activation, bias, conv as rconv, fill::Fill};
use conflux::{ActivationDesc, ActivationMode, BnMode, ConvDesc, ConvMode, DataType, DevPtr, FusionDirection, FusionPlan, Handle, OpArg, OpArgs, Status, TensorDesc};
use support::*;

/// One branch: output channels, filter size, padding, stride, groups, bias, activation.
struct BranchSpec {
    k: usize,
    f: usize,
    pad: i64,
    stride: i64,
    groups: usize,
    bias: bool,
    act: Option<ActivationMode>,
}

const fn br(k: usize, f: usize, pad: i64, stride: i64, groups: usize, bias: bool, act: Option<ActivationMode>) -> BranchSpec {
    BranchSpec { k, f, pad, stride, groups, bias, act }
}

/// Inception-like: 1×1 + bias + ReLU, 3×3 + bias, 5×5 alone, grouped 3×3 + ReLU.
const INCEPTION: [BranchSpec; 4] = [
    br(8, 1, 0, 1, 1, true, Some(ActivationMode::Relu)),
    br(12, 3, 1, 1, 1, true, None),
    br(4, 5, 2, 1, 1, false, None),
    br(8, 3, 1, 1, 4, false, Some(ActivationMode::Relu)),
];

/// Inception's 1×1 branches over one x: the first three merge into one convolution over their
/// concatenated filters and biases; the 3×3 between runs on its own, as does the last 1×1
/// (no bias: another chain).
const MERGING: [BranchSpec; 6] = [
    br(8, 1, 0, 1, 1, true, Some(ActivationMode::Relu)),
    br(4, 1, 0, 1, 1, true, Some(ActivationMode::Relu)),
    br(12, 1, 0, 1, 1, true, Some(ActivationMode::Relu)),
    br(8, 3, 1, 1, 1, true, Some(ActivationMode::Relu)),
    br(8, 1, 0, 1, 1, false, Some(ActivationMode::Relu)),
    br(4, 1, 0, 1, 1, false, Some(ActivationMode::Relu)),
];

/// Stride-2 downsampling branches of one output size (ResNet's 1×1 s2 beside a 3×3 s2).
const STRIDED: [BranchSpec; 2] = [br(16, 1, 0, 2, 1, true, Some(ActivationMode::Relu)), br(8, 3, 1, 2, 1, true, Some(ActivationMode::Relu))];

struct Built {
    plan: FusionPlan,
    convs: Vec<ConvDesc>,
    ws: Vec<TensorDesc>,
    bs: Vec<TensorDesc>,
}

fn build(dt: DataType, x: &TensorDesc, specs: &[BranchSpec], lay: Lay) -> Built {
    let mut plan = FusionPlan::new(FusionDirection::Horizontal, x.clone());
    let (mut convs, mut ws, mut bs) = (Vec::new(), Vec::new(), Vec::new());
    for s in specs {
        let mut conv = ConvDesc::new(ConvMode::Convolution, &[s.pad, s.pad], &[s.stride, s.stride], &[1, 1]).unwrap();
        conv.set_groups(s.groups as i64).unwrap();
        let w = desc(dt, &[s.k, x.c() / s.groups, s.f, s.f], lay);
        plan.add_conv_forward(&conv, &w).unwrap();
        let b = TensorDesc::new(dt, &[1, s.k, 1, 1]).unwrap();
        if s.bias {
            plan.add_bias(&b).unwrap();
        }
        if let Some(mode) = s.act {
            plan.add_activation(mode).unwrap();
        }
        convs.push(conv);
        ws.push(w);
        bs.push(b);
    }
    Built { plan, convs, ws, bs }
}

/// Runs a horizontal plan and checks it against the branches' reference chains concatenated;
/// `alpha(i)` is branch i's convolution α.
fn check(h: &Handle, dt: DataType, lx: &[usize], specs: &[BranchSpec], lay: Lay, exact: bool, seed: u64) { check_scaled(h, dt, lx, specs, lay, exact, seed, |_| 1.0) }

#[allow(clippy::too_many_arguments)]
fn check_scaled(h: &Handle, dt: DataType, lx: &[usize], specs: &[BranchSpec], lay: Lay, exact: bool, seed: u64, alpha: impl Fn(usize) -> f64) {
    let x = desc(dt, lx, lay);
    let mut b = build(dt, &x, specs, lay);
    b.plan.compile(h).unwrap_or_else(|e| panic!("compile {lay:?} {dt:?}: {e}"));
    let y = b.plan.output_desc().clone();
    let fill = if exact { Fill::SmallInt(-2, 2) } else { Fill::Normal };
    let xd = random(h, &x, fill, seed);
    let mut args = OpArgs::new();
    let mut keep = Vec::new();
    let mut want = vec![0.0; y.element_count()];
    let (n, ktot, plane) = (y.n(), y.c(), y.spatial().iter().product::<usize>());
    let (mut op, mut k0) = (0, 0);
    for (i, s) in specs.iter().enumerate() {
        let wd = random(h, &b.ws[i], fill, seed + 10 + i as u64);
        let bd = random(h, &b.bs[i], fill, seed + 20 + i as u64);
        args.set(op, OpArg::Conv { w: wd.ptr(), alpha: alpha(i), beta: 0.0 });
        op += 1;
        // The branch's reference: conv, bias, activation on a packed NCHW output.
        let mut lens = y.lens().to_vec();
        lens[1] = s.k;
        let packed = TensorDesc::new(dt, &lens).unwrap();
        let mut v = vec![0.0; packed.element_space()];
        rconv::conv_forward(&b.convs[i], &x, &xd.host, &b.ws[i], &wd.host, &packed, &mut v).unwrap();
        v.iter_mut().for_each(|e| *e *= alpha(i));
        if s.bias {
            bias::bias_forward(&packed, &mut v, &b.bs[i], &bd.host).unwrap();
            args.set(op, OpArg::Bias { b: bd.ptr() });
            op += 1;
        }
        if let Some(mode) = s.act {
            let pre = v.clone();
            activation::activation_forward(&ActivationDesc::new(mode, 0.0, 0.0, 0.0), &packed, &pre, &packed, &mut v).unwrap();
            args.set(op, OpArg::Activation { alpha: 0.0, beta: 0.0, gamma: 0.0 });
            op += 1;
        }
        for ni in 0..n {
            for k in 0..s.k {
                let src = &v[(ni * s.k + k) * plane..][..plane];
                want[(ni * ktot + k0 + k) * plane..][..plane].copy_from_slice(src);
            }
        }
        k0 += s.k;
        keep.push((wd, bd));
    }
    let yd = poisoned(h, &y);
    b.plan.execute(h, &x, xd.ptr(), &y, yd.ptr(), &args).unwrap_or_else(|e| panic!("execute {lay:?} {dt:?}: {e}"));
    let tol = if exact { 0.0 } else { tolerance(dt) };
    assert_close(&format!("horizontal {lay:?} {dt:?} exact={exact} on {}", h.device().name()), &logical(&y, &download(h, &yd)), &want, tol);
}

device_tests!(branches_concatenate_along_channels, |h: &Handle| {
    for (i, lay) in [Lay::Packed, Lay::ChannelsLast].into_iter().enumerate() {
        for dt in [DataType::Float, DataType::Half] {
            for exact in [true, false] {
                let seed = 100 * i as u64 + exact as u64;
                check(h, dt, &[2, 16, 9, 9], &INCEPTION, lay, exact, seed);
                check(h, dt, &[1, 8, 10, 11], &STRIDED, lay, exact, seed + 50);
            }
        }
    }
});

// On the CPU, equal branches merge into one convolution over their concatenated filters.
device_tests!(equal_branches_merge_into_one_convolution, |h: &Handle| {
    for (i, lay) in [Lay::Packed, Lay::ChannelsLast].into_iter().enumerate() {
        let x = desc(DataType::Float, &[2, 16, 7, 9], lay);
        let mut b = build(DataType::Float, &x, &MERGING, lay);
        b.plan.compile(h).unwrap();
        // Chains on the CPU: the merged 1×1s, the 3×3, the last two 1×1s merged; the GPU runs
        // every branch on its own.
        let chains = if h.device_kind() == conflux::handle::DeviceKind::Cpu { 3 } else { MERGING.len() };
        assert_eq!(b.plan.solver_names().len(), chains, "{lay:?}");
        for dt in [DataType::Float, DataType::Half] {
            for exact in [true, false] {
                check(h, dt, &[2, 16, 7, 9], &MERGING, lay, exact, 300 + 10 * i as u64 + exact as u64);
            }
        }
        // Branches whose α differ run one by one (same results).
        check_scaled(h, DataType::Float, &[2, 16, 7, 9], &MERGING, lay, true, 400 + i as u64, |j| if j == 1 { 0.5 } else { 1.0 });
    }
});

device_tests!(bad_plans_are_refused_naming_the_op, |h: &Handle| {
    let dt = DataType::Float;
    let x = TensorDesc::new(dt, &[1, 8, 6, 6]).unwrap();
    let conv = |pad: i64| ConvDesc::new(ConvMode::Convolution, &[pad, pad], &[1, 1], &[1, 1]).unwrap();
    let w = |k: usize, f: usize| TensorDesc::new(dt, &[k, 8, f, f]).unwrap();

    // A branch whose output differs in size: refused when it is added, the plan unchanged.
    let mut p = FusionPlan::new(FusionDirection::Horizontal, x.clone());
    p.add_conv_forward(&conv(0), &w(4, 1)).unwrap();
    p.add_activation(ActivationMode::Relu).unwrap();
    let e = p.add_conv_forward(&conv(0), &w(4, 3)).unwrap_err();
    assert_eq!(e.status, Status::BadParm);
    assert!(e.reason.contains("op 2") && e.reason.contains("horizontal"), "{}", e.reason);
    assert_eq!(p.ops().len(), 2);
    assert_eq!(p.output_desc().lens(), &[1, 4, 6, 6]);

    // A pointwise op before the first convolution.
    let mut p = FusionPlan::new(FusionDirection::Horizontal, x.clone());
    p.add_bias(&TensorDesc::new(dt, &[1, 8, 1, 1]).unwrap()).unwrap();
    p.add_conv_forward(&conv(0), &w(4, 1)).unwrap();
    let e = p.compile(h).unwrap_err();
    assert_eq!(e.status, Status::UnsupportedOp);
    assert!(e.reason.contains("op 0") && e.reason.contains("horizontal"), "{}", e.reason);

    // Batch-norm training inside a branch: the refusal names the plan's op index.
    let mut p = FusionPlan::new(FusionDirection::Horizontal, x.clone());
    p.add_conv_forward(&conv(0), &w(4, 1)).unwrap();
    p.add_conv_forward(&conv(1), &w(4, 3)).unwrap();
    p.add_bn_forward(BnMode::Spatial, false).unwrap();
    let e = p.compile(h).unwrap_err();
    assert_eq!(e.status, Status::UnsupportedOp);
    assert!(e.reason.contains("op 2"), "{}", e.reason);

    // Missing and mismatched arguments: BadParm naming the op, y untouched.
    let mut p = FusionPlan::new(FusionDirection::Horizontal, x.clone());
    p.add_conv_forward(&conv(0), &w(4, 1)).unwrap();
    p.add_conv_forward(&conv(1), &w(4, 3)).unwrap();
    p.add_activation(ActivationMode::Relu).unwrap();
    p.compile(h).unwrap();
    assert_eq!(p.output_desc().lens(), &[1, 8, 6, 6]);
    let y = p.output_desc().clone();
    let xd = random(h, &x, Fill::SmallInt(-2, 2), 1);
    let (w0, w1) = (random(h, &w(4, 1), Fill::SmallInt(-2, 2), 2), random(h, &w(4, 3), Fill::SmallInt(-2, 2), 3));
    let yd = poisoned(h, &y);
    let before = download(h, &yd);
    let unchanged = |what: &str| assert!(download(h, &yd).iter().zip(&before).all(|(a, b)| a.to_bits() == b.to_bits()), "{what}: y written");
    let mut args = OpArgs::new();
    args.set(0, OpArg::Conv { w: w0.ptr(), alpha: 1.0, beta: 0.0 });
    args.set(1, OpArg::Conv { w: w1.ptr(), alpha: 1.0, beta: 0.0 });
    let e = p.execute(h, &x, xd.ptr(), &y, yd.ptr(), &args).unwrap_err();
    assert!(e.status == Status::BadParm && e.reason.contains("op 2"), "{}", e.reason);
    unchanged("missing args");
    args.set(2, OpArg::Conv { w: w1.ptr(), alpha: 1.0, beta: 0.0 });
    let e = p.execute(h, &x, xd.ptr(), &y, yd.ptr(), &args).unwrap_err();
    assert!(e.status == Status::BadParm && e.reason.contains("op 2"), "{}", e.reason);
    unchanged("mismatched args");
    args.set(1, OpArg::Conv { w: DevPtr::NULL, alpha: 1.0, beta: 0.0 });
    args.set(2, OpArg::Activation { alpha: 0.0, beta: 0.0, gamma: 0.0 });
    let e = p.execute(h, &x, xd.ptr(), &y, yd.ptr(), &args).unwrap_err();
    assert!(e.status == Status::BadParm && e.reason.contains("op 1"), "{}", e.reason);
    unchanged("null weights");
    // One branch's output descriptor is not the plan's.
    let e = p.execute(h, &x, xd.ptr(), &TensorDesc::new(dt, &[1, 4, 6, 6]).unwrap(), yd.ptr(), &args).unwrap_err();
    assert_eq!(e.status, Status::BadParm);
    unchanged("output descriptor");
});
