//! Backward-weights on tensor cores (TMA + wgmma, the pixel reduction split across blocks and
//! summed in a fixed order): 16-bit 2-D problems, and f32 ones with TF32 allowed (TF32
//! products) or strict (split TF32 products, the f32 tolerance), with padding, stride,
//! dilation, groups, 1×1 plain-GEMM loads (for f32 both operand roles: x or dy transposed),
//! partial channel tiles and dw in any layout, against the f64 reference through the
//! convolution API on every device; on CUDA the test also checks that the tensor-core solver
//! (or, for NCHW x and dy, the layout adapter feeding it; for 1×1 stride-1 layers the cuBLASLt
//! GEMM ahead of it) is chosen where it applies and runs every configuration with α/β, twice (the results must be bit-identical).

mod support;

use conflux::conv::{api, Choice, ConvProblem, Workspace};
use conflux::reference::compare::{rel_l2_error, tolerance, TF32_TOLERANCE};
use conflux::solver::cuda::wgrad_few_channels::CudaConvWgradFewChannels;
use conflux::solver::cuda::wgrad_gemm_lt::CudaConvWgradGemmLt;
use conflux::solver::cuda::wgrad_simt::CudaConvWgradSimt;
use conflux::solver::cuda::nchw_tc::CudaConvTcNchw;
use conflux::solver::cuda::wgrad_tma::CudaConvWgradTma;
use conflux::solver::{RunArgs, Solver};
use conflux::types::ConvAttrib;
use conflux::{ConvDesc, ConvMode, DataType, DevPtr, Handle};
use support::wgrad::{label, problem, reference, Case};
use support::*;


/// (dtype, x lengths, w lengths, groups, pad, stride, dilation, layout of x/dy, layout of dw)
type Spec = (DataType, &'static [usize], &'static [usize], usize, i64, i64, i64, Lay, Lay);

/// The case of `spec`; `tf32` sets the descriptor's TF32 permission (f32 data only).
fn case(&(dt, lx, lw, groups, pad, stride, dil, lay, lay_w): &Spec, tf32: bool) -> Case {
    let nd = lx.len() - 2;
    let mut conv = ConvDesc::new(ConvMode::Convolution, &vec![pad; nd], &vec![stride; nd], &vec![dil; nd]).unwrap();
    conv.set_groups(groups as i64).unwrap();
    conv.set_attribute(ConvAttrib::AllowTf32, tf32 as i64).unwrap();
    let x = desc(dt, lx, lay);
    let dw = desc(dt, lw, lay_w);
    let dy = desc(dt, conv.output_desc(&x, &dw).unwrap().lens(), lay);
    Case { conv, x, dw, dy }
}

/// Exact cases keep every sum within f16's exact integers (pixels × 4 ≤ 2048). The last five
/// have channels per group that are not whole 64-channel boxes: one group of 96 or 32
/// (the boxes' overhang reads zeros) and groups of 16, 32 and 8 merged into dense 64-channel
/// groups of which only the diagonal blocks are stored. The last three are 3-D (5-D im2col
/// copies of x, taps over depth).
const CASES: [Spec; 17] = [
    (DataType::Half, &[2, 64, 9, 8], &[128, 64, 3, 3], 1, 1, 1, 1, Lay::ChannelsLast, Lay::ChannelsLast),
    (DataType::BFloat16, &[2, 128, 7, 7], &[64, 128, 1, 1], 1, 0, 1, 1, Lay::ChannelsLast, Lay::Packed),
    (DataType::Half, &[2, 64, 11, 9], &[72, 64, 3, 3], 1, 1, 2, 1, Lay::ChannelsLast, Lay::ChannelsLast),
    (DataType::Half, &[2, 128, 10, 9], &[128, 64, 3, 3], 2, 2, 1, 2, Lay::ChannelsLast, Lay::Packed),
    (DataType::Half, &[3, 64, 6, 5], &[200, 64, 1, 3], 1, 1, 1, 1, Lay::ChannelsLast, Lay::Gapped),
    (DataType::BFloat16, &[4, 64, 28, 28], &[64, 64, 3, 3], 1, 1, 1, 1, Lay::ChannelsLast, Lay::ChannelsLast),
    (DataType::Half, &[2, 192, 5, 5], &[320, 192, 1, 1], 1, 0, 1, 1, Lay::ChannelsLast, Lay::ChannelsLast),
    (DataType::Half, &[2, 64, 6, 6], &[64, 64, 3, 3], 1, 1, 1, 1, Lay::Packed, Lay::Packed),
    (DataType::Half, &[2, 128, 9, 9], &[64, 128, 3, 3], 1, 1, 2, 1, Lay::Packed, Lay::ChannelsLast),
    (DataType::BFloat16, &[2, 96, 8, 7], &[40, 96, 2, 2], 1, 0, 2, 1, Lay::ChannelsLast, Lay::Packed),
    (DataType::Half, &[2, 32, 9, 8], &[32, 32, 3, 3], 1, 1, 1, 1, Lay::ChannelsLast, Lay::ChannelsLast),
    (DataType::BFloat16, &[2, 64, 7, 7], &[64, 16, 3, 3], 4, 1, 1, 1, Lay::ChannelsLast, Lay::Packed),
    (DataType::Half, &[2, 128, 8, 8], &[128, 32, 3, 3], 4, 1, 2, 1, Lay::ChannelsLast, Lay::ChannelsLast),
    (DataType::Half, &[2, 128, 6, 6], &[64, 8, 3, 3], 16, 1, 1, 1, Lay::ChannelsLast, Lay::ChannelsLast),
    (DataType::Half, &[2, 64, 4, 5, 6], &[64, 64, 3, 3, 3], 1, 1, 1, 1, Lay::ChannelsLast, Lay::ChannelsLast),
    (DataType::BFloat16, &[2, 64, 6, 7, 7], &[72, 64, 3, 3, 3], 1, 1, 2, 1, Lay::ChannelsLast, Lay::Packed),
    (DataType::Half, &[1, 128, 4, 6, 6], &[64, 128, 3, 3, 3], 1, 1, 1, 1, Lay::ChannelsLast, Lay::Gapped),
];

/// f32: 32-channel k-step boxes; x transposed when a plain 1×1 GEMM has fewer input than output
/// channels (cases 3, 7, 9), else dy.
const F32_CASES: [Spec; 10] = [
    (DataType::Float, &[2, 32, 9, 8], &[64, 32, 3, 3], 1, 1, 1, 1, Lay::ChannelsLast, Lay::ChannelsLast),
    (DataType::Float, &[2, 96, 7, 7], &[40, 96, 1, 1], 1, 0, 1, 1, Lay::ChannelsLast, Lay::Packed),
    (DataType::Float, &[2, 32, 7, 7], &[100, 32, 1, 1], 1, 0, 1, 1, Lay::ChannelsLast, Lay::ChannelsLast),
    (DataType::Float, &[2, 64, 11, 9], &[72, 32, 3, 3], 2, 2, 2, 2, Lay::ChannelsLast, Lay::Packed),
    (DataType::Float, &[3, 64, 6, 5], &[200, 64, 1, 3], 1, 1, 1, 1, Lay::ChannelsLast, Lay::Gapped),
    (DataType::Float, &[4, 32, 28, 28], &[64, 32, 3, 3], 1, 1, 1, 1, Lay::ChannelsLast, Lay::ChannelsLast),
    (DataType::Float, &[2, 64, 5, 5], &[128, 32, 1, 1], 2, 0, 1, 1, Lay::ChannelsLast, Lay::ChannelsLast),
    (DataType::Float, &[2, 64, 9, 9], &[128, 64, 1, 1], 1, 0, 2, 1, Lay::ChannelsLast, Lay::ChannelsLast),
    (DataType::Float, &[2, 32, 7, 7], &[64, 32, 1, 1], 1, 0, 1, 1, Lay::Packed, Lay::Packed),
    (DataType::Float, &[2, 32, 6, 6], &[64, 32, 3, 3], 1, 1, 1, 1, Lay::Packed, Lay::ChannelsLast),
];

/// Exact cases (small integers, every sum exact) every other case for f16 and f32.
fn exact(spec: &Spec, i: usize) -> bool { matches!(spec.0, DataType::Half | DataType::Float) && i % 2 == 0 }

fn tol(spec: &Spec, tf32: bool, exact: bool) -> f64 {
    match (exact, spec.0) {
        (true, _) => 0.0,
        (false, DataType::Float) if tf32 => TF32_TOLERANCE,
        (false, dt) => tolerance(dt),
    }
}



fn through_the_api(h: &Handle, specs: &[Spec], tf32: bool) {
    for (i, spec) in specs.iter().enumerate() {
        let c = case(spec, tf32);
        let exact = exact(spec, i);
        let (dy, x, _, want) = reference(h, &c, exact, 10 + i as u64, (1.0, 0.0));
        if h.device_kind() == conflux::handle::DeviceKind::Cuda {
            let fp = problem(&c);
            let chosen = conflux::search::choose(h, &fp, Choice::Auto, 0).unwrap();
            if CudaConvWgradFewChannels.check(&fp, h.device().info()).is_ok() {
                // Ahead of the tensor-core kernels for groups of ≤ 16 channels; Find times both.
            } else if CudaConvWgradGemmLt.check(&fp, h.device().info()).is_ok() {
                assert_eq!(chosen.name(), CudaConvWgradGemmLt.name(), "{}", label(&c, "auto", h));
            } else if CudaConvWgradTma.check(&fp, h.device().info()).is_ok() {
                assert_eq!(chosen.name(), CudaConvWgradTma.name(), "{}", label(&c, "auto", h));
            } else if CudaConvTcNchw.check(&fp, h.device().info()).is_ok() {
                assert_eq!(chosen.name(), CudaConvTcNchw.name(), "{}", label(&c, "auto", h));
            } else {
                panic!("{}: no tensor-core solver takes it", label(&c, "auto", h));
            }
        }
        let dw = poisoned(h, &c.dw);
        api::backward_weights(h, &c.conv, &c.dy, dy.ptr(), &c.x, x.ptr(), &c.dw, dw.ptr(), 1.0, 0.0, Choice::Auto, Workspace::default())
            .unwrap_or_else(|e| panic!("{}: {e}", label(&c, "auto", h)));
        assert_close(&label(&c, "auto", h), &logical(&c.dw, &download(h, &dw)), &logical(&c.dw, &want), tol(spec, tf32, exact));
    }
}

fn every_configuration(h: &Handle, specs: &[Spec], tf32: bool) {
    for (i, spec) in specs.iter().enumerate() {
        let c = case(spec, tf32);
        let fp = problem(&c);
        // Channels-first x and dy go through the layout adapter.
        let solver: &dyn Solver = if spec.7 == Lay::Packed { &CudaConvTcNchw } else { &CudaConvWgradTma };
        solver.check(&fp, h.device().info()).unwrap_or_else(|why| panic!("{}: {} refused: {why}", label(&c, "check", h), solver.name()));
        let exact = exact(spec, i);
        let (alpha, beta) = if exact { (1.0, 0.5) } else { (0.75, 0.5) };
        let (dy, x, dw0, want) = reference(h, &c, exact, 30 + i as u64, (alpha, beta));
        let mut built = vec![("default".to_string(), solver.build(&fp, h.device()).unwrap())];
        built.extend(solver.tuning_space(&fp).into_iter().map(|l| {
            let inv = solver.build_config(&fp, h.device(), &l).unwrap_or_else(|e| panic!("{}: {e}", label(&c, &l, h)));
            (l, inv)
        }));
        for (cfg, inv) in built {
            // Twice with the same invoker: the fixed summation order gives the same bits.
            let mut first = None;
            for run in 0..2 {
                let dw = upload(h, &c.dw, &dw0);
                let how = format!("tile {cfg} run {run}");
                let args = RunArgs { x: x.ptr(), w: dw.ptr(), y: dy.ptr(), alpha, beta, workspace: DevPtr::NULL, workspace_bytes: 0, ops: &[] };
                inv.run(h, &args).unwrap_or_else(|e| panic!("{}: {e}", label(&c, &how, h)));
                let got = download(h, &dw);
                assert_close(&label(&c, &how, h), &logical(&c.dw, &got), &logical(&c.dw, &want), tol(spec, tf32, exact));
                match &first {
                    None => first = Some(got),
                    Some(f) => assert!(f.iter().zip(&got).all(|(a, b)| a.to_bits() == b.to_bits()), "{}: results differ between runs", label(&c, &how, h)),
                }
            }
        }
    }
}

device_tests!(backward_weights_through_the_api, |h: &Handle| through_the_api(h, &CASES, false));
cuda_tests!(every_configuration_with_alpha_beta, |h: &Handle| every_configuration(h, &CASES, false));
device_tests!(f32_tf32_through_the_api, |h: &Handle| through_the_api(h, &F32_CASES, true));
device_tests!(f32_strict_through_the_api, |h: &Handle| through_the_api(h, &F32_CASES, false));
cuda_tests!(f32_tf32_every_configuration, |h: &Handle| every_configuration(h, &F32_CASES, true));
cuda_tests!(f32_strict_every_configuration, |h: &Handle| every_configuration(h, &F32_CASES, false));

// Strict f32 on split TF32 products keeps the accuracy of the CUDA-core kernel over a long
// reduction (12544 pixels per sum).
cuda_tests!(f32_strict_as_accurate_as_cuda_cores, |h: &Handle| {
    for spec in [
        (DataType::Float, &[16, 64, 28, 28][..], &[64, 64, 3, 3][..], 1, 1, 1, 1, Lay::ChannelsLast, Lay::ChannelsLast),
        (DataType::Float, &[16, 64, 28, 28][..], &[128, 64, 1, 1][..], 1, 0, 1, 1, Lay::ChannelsLast, Lay::ChannelsLast),
    ] {
        let c = case(&spec, false);
        let fp = problem(&c);
        let (dy, x, dw0, want) = reference(h, &c, false, 77, (1.0, 0.0));
        let want = logical(&c.dw, &want);
        let err = |s: &dyn Solver| {
            let dw = upload(h, &c.dw, &dw0);
            let args = RunArgs { x: x.ptr(), w: dw.ptr(), y: dy.ptr(), alpha: 1.0, beta: 0.0, workspace: DevPtr::NULL, workspace_bytes: 0, ops: &[] };
            s.build(&fp, h.device()).and_then(|inv| inv.run(h, &args)).unwrap_or_else(|e| panic!("{}: {e}", label(&c, s.name(), h)));
            rel_l2_error(&logical(&c.dw, &download(h, &dw)), &want)
        };
        let (split, simt) = (err(&CudaConvWgradTma), err(&CudaConvWgradSimt));
        eprintln!("{}: split TF32 {split:.2e}, CUDA cores {simt:.2e}", label(&c, "both", h));
        assert!(split <= 4.0 * simt.max(1e-7), "{}: split TF32 error {split:.2e} vs CUDA cores {simt:.2e}", label(&c, "both", h));
    }
});

cuda_tests!(refusals_name_the_cause, |h: &Handle| {
    let dt = DataType::Half;
    for (lx, lw, groups, lay, want) in [
        (&[1, 64, 8, 8], &[64, 64, 3, 3], 1, Lay::Packed, "channels-last"),
        (&[1, 48, 8, 8], &[48, 24, 3, 3], 2, Lay::ChannelsLast, "neither whole 64-channel boxes nor groups that merge"),
    ] {
        let mut conv = ConvDesc::new(ConvMode::Convolution, &[1, 1], &[1, 1], &[1, 1]).unwrap();
        conv.set_groups(groups).unwrap();
        let x = desc(dt, lx, lay);
        let dw = desc(dt, lw, Lay::ChannelsLast);
        let dy = desc(dt, conv.output_desc(&x, &dw).unwrap().lens(), lay);
        let why = CudaConvWgradTma.check(&problem(&Case { conv: conv.clone(), x, dw, dy }), h.device().info()).unwrap_err();
        assert!(why.contains(want), "{why}");
    }
});

#[test]
fn f32_plan_choices() {
    // Host-side choices of the f32 backward-weights kernel (CI checks them without a GPU).
    use conflux::conv::Geom;
    use conflux::solver::cuda::tensor_core::TcPrecision;
    use conflux::solver::cuda::wgrad_tf32::{r_is_x, smem_bytes, tf32_heuristic, TLayout, TF32_CONFIGS};
    let geom = |spec: &Spec| {
        let c = case(spec, false);
        Geom::of(&ConvProblem::backward_weights(&c.conv, &c.dy, &c.x, &c.dw).unwrap())
    };
    // Which operand is transposed: dy, except a plain 1×1 GEMM with fewer input channels whose
    // dy loads as boxes (then x, the smaller one).
    assert!(r_is_x(&geom(&F32_CASES[0])), "3×3: x through im2col, dy transposed");
    assert!(r_is_x(&geom(&F32_CASES[1])), "1×1, C > K: dy transposed");
    assert!(!r_is_x(&geom(&F32_CASES[2])), "1×1, C < K, NHWC: x transposed");
    assert!(r_is_x(&geom(&F32_CASES[7])), "1×1 with stride 2 is not a plain GEMM");
    let nchw = (DataType::Float, &[2, 32, 7, 7][..], &[64, 32, 1, 1][..], 1, 0, 1, 1, Lay::ChannelsLast, Lay::Packed);
    let mut c = case(&nchw, false);
    c.dy = desc(DataType::Float, c.dy.lens(), Lay::Packed);
    let g = Geom::of(&ConvProblem::backward_weights(&c.conv, &c.dy, &c.x, &c.dw).unwrap());
    assert!(r_is_x(&g), "NCHW dy cannot be loaded as boxes: it is the transposed one");
    // The transposed matrix: T's channels × pixels, rows 16-byte aligned, hi and lo parts when strict.
    let g = geom(&F32_CASES[2]);
    let (strict, tf32) = (TLayout::of(&g, TcPrecision::Tf32x3), TLayout::of(&g, TcPrecision::Tf32));
    assert_eq!((strict.rows, strict.pixels, strict.ld % 4, strict.parts, tf32.parts), (32, 98, 0, 2, 1));
    assert_eq!(strict.bytes(), 2 * 32 * 100 * 4);
    // Every tile fits a block's shared memory with split stages; the heuristic picks from the space.
    for t in TF32_CONFIGS {
        assert!(smem_bytes(t, TcPrecision::Tf32x3) <= 227 * 1024, "{}", t.label());
    }
    for spec in &F32_CASES {
        assert!(TF32_CONFIGS.contains(&tf32_heuristic(&geom(spec))));
    }
}
