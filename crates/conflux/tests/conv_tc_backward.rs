//! Backward-data on tensor cores (stride 1: dx = forward convolution of dy with the flipped
//! filter): 16-bit and f32 problems (strict f32 as split TF32 products, TF32 when the
//! descriptor allows it) in both layouts, padding, dilation, groups, 2-D and 3-D, against
//! the f64 reference through the convolution API on every device; on CUDA the test also
//! checks that the tensor-core solver (for 1×1 layers the cuBLASLt GEMM) is chosen and runs every configuration of the kernel
//! it feeds, with α/β.

mod support;

use conflux::conv::{api, Choice, ConvProblem, Workspace};
use conflux::fusion::FusedProblem;
use conflux::reference::{self as r, compare::tolerance, fill::Fill};
use conflux::solver::cuda::bwd_data_gemm_lt::CudaConvBwdDataGemmLt;
use conflux::solver::cuda::bwd_data_tc::{reads_filter_in_place, CudaConvBwdDataTc};
use conflux::solver::{RunArgs, Solver};
use conflux::{ConvDesc, ConvMode, DataType, DevPtr, Handle, TensorDesc};
use support::*;

struct Case {
    conv: ConvDesc,
    dx: TensorDesc,
    w: TensorDesc,
    dy: TensorDesc,
}

/// (dtype, x lengths, w lengths, groups, pad, dilation, layout of dx/dy, layout of w)
type Spec = (DataType, &'static [usize], &'static [usize], usize, i64, i64, Lay, Lay);

fn case(&(dt, lx, lw, groups, pad, dil, lay, lay_w): &Spec) -> Case {
    let nd = lx.len() - 2;
    let mut conv = ConvDesc::new(ConvMode::Convolution, &vec![pad; nd], &vec![1; nd], &vec![dil; nd]).unwrap();
    conv.set_groups(groups as i64).unwrap();
    let dx = desc(dt, lx, lay);
    let w = desc(dt, lw, lay_w);
    let dy = desc(dt, conv.output_desc(&dx, &w).unwrap().lens(), lay);
    Case { conv, dx, w, dy }
}

const CASES: [Spec; 12] = [
    (DataType::Half, &[2, 64, 9, 8], &[128, 64, 3, 3], 1, 1, 1, Lay::ChannelsLast, Lay::ChannelsLast),
    (DataType::BFloat16, &[2, 128, 7, 7], &[64, 128, 1, 1], 1, 0, 1, Lay::ChannelsLast, Lay::Packed),
    (DataType::Half, &[2, 64, 10, 9], &[128, 32, 3, 3], 2, 2, 2, Lay::ChannelsLast, Lay::ChannelsLast),
    (DataType::Half, &[2, 64, 6, 7], &[64, 64, 3, 3], 1, 1, 1, Lay::Packed, Lay::Packed),
    (DataType::BFloat16, &[3, 32, 5, 6], &[48, 32, 3, 1], 1, 0, 1, Lay::Packed, Lay::ChannelsLast),
    (DataType::Half, &[1, 16, 4, 5, 6], &[24, 16, 3, 3, 3], 1, 1, 1, Lay::ChannelsLast, Lay::Packed),
    (DataType::Half, &[2, 64, 8, 8], &[64, 64, 3, 3], 1, 0, 1, Lay::Packed, Lay::ChannelsLast),
    (DataType::Half, &[2, 32, 6, 6], &[64, 32, 3, 2], 1, 1, 1, Lay::ChannelsLast, Lay::Gapped),
    // Strict f32 (the descriptor's default): the forward kernel's split TF32 products.
    (DataType::Float, &[2, 64, 9, 8], &[96, 64, 3, 3], 1, 1, 1, Lay::ChannelsLast, Lay::ChannelsLast),
    (DataType::Float, &[2, 32, 7, 7], &[64, 32, 1, 1], 1, 0, 1, Lay::Packed, Lay::Packed),
    // ResNeXt-like groups of 8 (the grouped tensor-core kernel runs the flipped convolution).
    (DataType::Half, &[2, 64, 8, 9], &[64, 8, 3, 3], 8, 1, 1, Lay::ChannelsLast, Lay::ChannelsLast),
    // 96 output channels: the rewrite reads the filter in place in half-row (32-channel) k-steps.
    (DataType::Half, &[2, 96, 9, 8], &[96, 96, 3, 3], 1, 1, 1, Lay::ChannelsLast, Lay::ChannelsLast),
];

fn label(c: &Case, how: &str, h: &Handle) -> String {
    format!("bwd-data dx {} w {} {} via {how} on {}", c.dx.key(), c.w.key(), c.conv.key(), h.device().name())
}

/// Inputs and the reference dx = α·bwd(dy, w) + β·dx0.
fn reference(h: &Handle, c: &Case, exact: bool, seed: u64, (alpha, beta): (f64, f64)) -> (Dev, Dev, Vec<f64>, Vec<f64>) {
    let fill = if exact { Fill::SmallInt(-2, 2) } else { Fill::Normal };
    let dy = random(h, &c.dy, fill, seed);
    let w = random(h, &c.w, fill, seed + 1);
    let dx0 = conflux::reference::fill::fill_for(&c.dx, Fill::SmallInt(-3, 3), seed + 2);
    let mut want = dx0.clone();
    r::conv_backward_data_alpha_beta(alpha, beta, &c.conv, &c.dy, &dy.host, &c.w, &w.host, &c.dx, &mut want).unwrap();
    (dy, w, dx0, want)
}

device_tests!(backward_data_through_the_api, |h: &Handle| {
    for (i, spec) in CASES.iter().enumerate() {
        let c = case(spec);
        let exact = i % 2 == 0;
        let (dy, w, _, want) = reference(h, &c, exact, 10 + i as u64, (1.0, 0.0));
        if h.device_kind() == conflux::handle::DeviceKind::Cuda {
            let fp = FusedProblem::conv(ConvProblem::backward_data(&c.conv, &c.dy, &c.w, &c.dx).unwrap());
            let chosen = conflux::search::choose(h, &fp, Choice::Auto, 0).unwrap();
            // 1×1 stride-1 layers go to the cuBLASLt GEMM ahead of the tensor-core rewrite.
            if CudaConvBwdDataGemmLt.check(&fp, h.device().info()).is_ok() {
                assert_eq!(chosen.name(), CudaConvBwdDataGemmLt.name(), "{}", label(&c, "auto", h));
            } else if CudaConvBwdDataTc.check(&fp, h.device().info()).is_ok() {
                assert_eq!(chosen.name(), CudaConvBwdDataTc.name(), "{}", label(&c, "auto", h));
            }
        }
        let dx = poisoned(h, &c.dx);
        api::backward_data(h, &c.conv, &c.dy, dy.ptr(), &c.w, w.ptr(), &c.dx, dx.ptr(), 1.0, 0.0, Choice::Auto, Workspace::default())
            .unwrap_or_else(|e| panic!("{}: {e}", label(&c, "auto", h)));
        let tol = if exact { 0.0 } else { tolerance(spec.0) };
        assert_close(&label(&c, "auto", h), &logical(&c.dx, &download(h, &dx)), &logical(&c.dx, &want), tol);
    }
});

cuda_tests!(every_configuration_with_alpha_beta, |h: &Handle| {
    for (i, spec) in CASES.iter().enumerate() {
        let c = case(spec);
        let fp = FusedProblem::conv(ConvProblem::backward_data(&c.conv, &c.dy, &c.w, &c.dx).unwrap());
        CudaConvBwdDataTc.check(&fp, h.device().info()).unwrap_or_else(|why| panic!("{}: refused: {why}", label(&c, "check", h)));
        let exact = i % 2 == 1;
        let (alpha, beta) = if exact { (1.0, 0.5) } else { (0.75, 0.5) };
        let (dy, w, dx0, want) = reference(h, &c, exact, 30 + i as u64, (alpha, beta));
        let mut built = vec![("default".to_string(), CudaConvBwdDataTc.build(&fp, h.device()).unwrap())];
        built.extend(CudaConvBwdDataTc.tuning_space(&fp).into_iter().filter_map(|l| CudaConvBwdDataTc.build_config(&fp, h.device(), &l).ok().map(|inv| (l, inv))));
        assert!(built.len() > 2, "{}: no configuration built", label(&c, "tuning", h));
        for (cfg, inv) in built {
            let dx = upload(h, &c.dx, &dx0);
            let how = format!("tile {cfg}");
            let args = RunArgs { x: dx.ptr(), w: w.ptr(), y: dy.ptr(), alpha, beta, workspace: DevPtr::NULL, workspace_bytes: 0, ops: &[] };
            inv.run(h, &args).unwrap_or_else(|e| panic!("{}: {e}", label(&c, &how, h)));
            let tol = if exact { 0.0 } else { tolerance(spec.0) };
            assert_close(&label(&c, &how, h), &logical(&c.dx, &download(h, &dx)), &logical(&c.dx, &want), tol);
        }
    }
});

cuda_tests!(tf32_permission_reaches_the_forward_kernel, |h: &Handle| {
    // The rewritten forward convolution keeps the descriptor's attributes: with TF32 allowed
    // the error is TF32's (~1e-3 on random data), far above split TF32's (~3e-7).
    let mut c = case(&CASES[8]);
    c.conv.set_attribute(conflux::types::ConvAttrib::AllowTf32, 1).unwrap();
    let fp = FusedProblem::conv(ConvProblem::backward_data(&c.conv, &c.dy, &c.w, &c.dx).unwrap());
    if CudaConvBwdDataTc.check(&fp, h.device().info()).is_err() {
        return;
    }
    let (dy, w, _, want) = reference(h, &c, false, 50, (1.0, 0.0));
    let dx = poisoned(h, &c.dx);
    api::backward_data(h, &c.conv, &c.dy, dy.ptr(), &c.w, w.ptr(), &c.dx, dx.ptr(), 1.0, 0.0, Choice::Auto, Workspace::default()).unwrap();
    let got = logical(&c.dx, &download(h, &dx));
    let want = logical(&c.dx, &want);
    assert_close(&label(&c, "tf32", h), &got, &want, conflux::reference::compare::TF32_TOLERANCE);
    let err = conflux::reference::compare::rel_l2_error(&got, &want);
    assert!(err > 1e-5, "{}: error {err:e} is f32's: TF32 was not used", label(&c, "tf32", h));
});

cuda_tests!(refusals_name_the_cause, |h: &Handle| {
    // Stride 2 and padding beyond the filter's reach are not forward convolutions of dy.
    let dt = DataType::Half;
    let dx = desc(dt, &[1, 64, 8, 8], Lay::ChannelsLast);
    let w = desc(dt, &[64, 64, 3, 3], Lay::ChannelsLast);
    for (pad, stride, want) in [(1, 2, "stride"), (3, 1, "padding 3 exceeds")] {
        let conv = ConvDesc::new(ConvMode::Convolution, &[pad, pad], &[stride, stride], &[1, 1]).unwrap();
        let dy = conv.output_desc(&dx, &w).unwrap();
        let fp = FusedProblem::conv(ConvProblem::backward_data(&conv, &dy, &w, &dx).unwrap());
        let why = CudaConvBwdDataTc.check(&fp, h.device().info()).unwrap_err();
        assert!(why.contains(want), "{why}");
    }
});

cuda_tests!(filter_read_in_place_and_misaligned, |h: &Handle| {
    // 16-bit channels-last cases read the caller's w flipped in place (no copy); a w two bytes
    // past a 16-byte boundary goes through the copy path and must still be right.
    // NCHW dy and dx with a 1×1 KCRS filter: through the layout adapter, w still in place.
    const NCHW_1X1: Spec = (DataType::Half, &[2, 64, 7, 7], &[128, 64, 1, 1], 1, 0, 1, Lay::Packed, Lay::Packed);
    for (i, spec) in [&CASES[0], &CASES[1], &CASES[2], &NCHW_1X1].into_iter().enumerate() {
        let c = case(spec);
        let fp = FusedProblem::conv(ConvProblem::backward_data(&c.conv, &c.dy, &c.w, &c.dx).unwrap());
        assert!(reads_filter_in_place(&fp, h.device().info()), "{}: expected the in-place filter read", label(&c, "check", h));
        let (dy, w, _, want) = reference(h, &c, false, 70 + i as u64, (1.0, 0.0));
        let inv = CudaConvBwdDataTc.build(&fp, h.device()).unwrap();
        let (_ws, w_off) = misaligned_copy(h, &w);
        for (how, wp) in [("in place", w.ptr()), ("misaligned w", w_off)] {
            let dx = poisoned(h, &c.dx);
            let args = RunArgs { x: dx.ptr(), w: wp, y: dy.ptr(), alpha: 1.0, beta: 0.0, workspace: DevPtr::NULL, workspace_bytes: 0, ops: &[] };
            inv.run(h, &args).unwrap_or_else(|e| panic!("{}: {e}", label(&c, how, h)));
            assert_close(&label(&c, how, h), &logical(&c.dx, &download(h, &dx)), &logical(&c.dx, &want), tolerance(c.w.dtype()));
        }
    }
    // KCRS filters with taps (case 3) take the copy.
    let c = case(&CASES[3]);
    let fp = FusedProblem::conv(ConvProblem::backward_data(&c.conv, &c.dy, &c.w, &c.dx).unwrap());
    assert!(!reads_filter_in_place(&fp, h.device().info()), "{}", label(&c, "check", h));
});
