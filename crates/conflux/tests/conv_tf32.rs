//! f32 convolutions on TF32 tensor cores (the TMA + wgmma kernel with tf32 multiplies and
//! 32-channel k-steps): TF32 opt-in per descriptor (`ConvAttrib::AllowTf32`); strict
//! descriptors run the same kernel with every operand split into TF32 high and low parts
//! (three products each), which must meet the f32 tolerance. Channels-last x and w with
//! channels per group a multiple of 32 (NCHW ones through the layout adapter), fused bias +
//! leaky ReLU, α/β. Checked against the f64 reference with the precision's tolerance on
//! random data and exactly on small integers (which TF32 represents exactly); on the CPU the
//! attribute changes nothing.

mod support;

use conflux::fusion::FusedProblem;
use conflux::reference::compare::{rel_l2_error, tolerance, TF32_TOLERANCE};
use conflux::solver::cuda::igemm_simt::CudaConvIgemm;
use conflux::solver::cuda::igemm_tma::{CudaConvIgemmTma, TMA_CONFIGS};
use conflux::solver::cuda::nchw_tc::CudaConvTcNchw;
use conflux::solver::{Invoker, RunArgs, Solver};
use conflux::types::ConvAttrib;
use conflux::{ConvDesc, ConvMode, DataType, DevPtr, Handle, OpArg, TensorDesc};
use std::sync::Arc;
use support::cba::{data, execute, plan_for, Case, LEAKY};
use support::*;

const TMA: &str = "CudaConvImplicitGemmTma";
const NCHW: &str = "CudaConvTensorCoreNchw";

/// f32 x [n, c, h, w] and w [k, c/g, r, s] in `lay` (y follows x), TF32 allowed (or not).
fn case_in(lay: Lay, lx: [usize; 4], lw: [usize; 4], groups: usize, pad: [i64; 2], stride: [i64; 2], dil: [i64; 2], tf32: bool) -> Case {
    let mut conv = ConvDesc::new(ConvMode::Convolution, &pad, &stride, &dil).unwrap();
    conv.set_groups(groups as i64).unwrap();
    conv.set_attribute(ConvAttrib::AllowTf32, tf32 as i64).unwrap();
    let x = desc(DataType::Float, &lx, lay);
    let w = desc(DataType::Float, &lw, lay);
    let y = conv.output_desc(&x, &w).unwrap();
    let b = TensorDesc::new(DataType::Float, &[1, lw[0], 1, 1]).unwrap();
    Case { dt: DataType::Float, conv, x, w, y, b }
}

fn case(lx: [usize; 4], lw: [usize; 4], groups: usize, pad: [i64; 2], stride: [i64; 2], dil: [i64; 2], tf32: bool) -> Case {
    case_in(Lay::ChannelsLast, lx, lw, groups, pad, stride, dil, tf32)
}

/// The geometries of the kernel's walks: im2col with padding (several taps and channel
/// slices), a 1×1 plain GEMM with a partial channel tile, groups with stride and dilation.
fn cases(tf32: bool) -> Vec<Case> {
    vec![
        case([2, 64, 11, 9], [96, 64, 3, 3], 1, [1, 1], [1, 1], [1, 1], tf32),
        case([3, 32, 7, 7], [40, 32, 1, 1], 1, [0, 0], [1, 1], [1, 1], tf32),
        case([2, 128, 13, 10], [72, 64, 3, 3], 2, [1, 1], [2, 2], [2, 2], tf32),
        // NCHW / KCRS: copied to channels-last scratch by the adapter (a 1×1 KCRS filter is
        // already KRSC), y written in NCHW.
        case_in(Lay::Packed, [2, 64, 9, 8], [48, 64, 3, 3], 1, [1, 1], [1, 1], [1, 1], tf32),
        case_in(Lay::Packed, [2, 32, 7, 7], [64, 32, 1, 1], 1, [0, 0], [1, 1], [1, 1], tf32),
    ]
}

fn what(c: &Case, how: &str, h: &Handle) -> String {
    format!("f32 x {} w {} {} via {how} on {}", c.x.key(), c.w.key(), c.conv.key(), h.device().name())
}

/// Tolerance of a result: exact on small integers; TF32's where the TF32 kernel ran with TF32
/// allowed, else f32's (strict descriptors: split products or CUDA cores).
fn tol(c: &Case, exact: bool, on_tensor_cores: bool) -> f64 {
    match (exact, on_tensor_cores && c.conv.allows_tf32()) {
        (true, _) => 0.0,
        (false, true) => TF32_TOLERANCE,
        (false, false) => tolerance(DataType::Float),
    }
}

/// Through the Fusion API with the default solver choice: the TF32 kernel (plain or split)
/// whenever the GPU has it.
fn run_plan(h: &Handle, c: &Case, seed: u64, exact: bool) {
    let d = data(h, c, seed, exact, 1.0, 0.0);
    let mut plan = plan_for(c);
    plan.compile(h).unwrap();
    let problem = plan.problem().unwrap();
    let on_tc = matches!(plan.solver_name(), Some(TMA | NCHW));
    if h.device_kind() == conflux::handle::DeviceKind::Cuda {
        let takes = CudaConvIgemmTma.check(&problem, h.device().info()).or_else(|direct| CudaConvTcNchw.check(&problem, h.device().info()).map_err(|adapted| format!("{direct}; adapter: {adapted}")));
        assert_eq!(on_tc, takes.is_ok(), "{}: chosen {:?}, TF32 kernels say {takes:?}", what(c, "plan", h), plan.solver_name());
    } else {
        assert!(!on_tc);
    }
    let y = execute(h, c, &d, &plan);
    let got = logical(&c.y, &download(h, &y));
    assert_close(&what(c, "plan", h), &got, &d.want, tol(c, exact, on_tc));
}

/// Every tile of the TMA kernel (and each on a 3-block grid, so blocks walk several tiles)
/// with α/β, straight through the invokers.
fn run_every_tile(h: &Handle, c: &Case, seed: u64, exact: bool) {
    let problem: FusedProblem = plan_for(c).problem().unwrap();
    let (alpha, beta) = if exact { (1.0, 0.5) } else { (0.75, 0.5) };
    let d = data(h, c, seed, exact, alpha, beta);
    let ops = [OpArg::Bias { b: d.b.ptr() }, OpArg::Activation { alpha: LEAKY, beta: 0.0, gamma: 0.0 }];
    let mut built: Vec<(String, Arc<dyn Invoker>)> = Vec::new();
    for t in TMA_CONFIGS {
        built.push((t.label(), CudaConvIgemmTma.build_with(&problem, h.device(), *t, None).unwrap()));
        built.push((format!("{} on 3 blocks", t.label()), CudaConvIgemmTma.build_with(&problem, h.device(), *t, Some(3)).unwrap()));
    }
    for (label, inv) in built {
        let y = upload(h, &c.y, &d.y0);
        let args = RunArgs { x: d.x.ptr(), w: d.w.ptr(), y: y.ptr(), alpha, beta, workspace: DevPtr::NULL, workspace_bytes: 0, ops: &ops };
        inv.run(h, &args).unwrap();
        let got = logical(&c.y, &download(h, &y));
        assert_close(&what(c, &format!("tile {label}"), h), &got, &d.want, tol(c, exact, true));
    }
}

device_tests!(tf32_allowed, |h: &Handle| {
    for (i, c) in cases(true).iter().enumerate() {
        run_plan(h, c, 10 + i as u64, false);
        run_plan(h, c, 20 + i as u64, true);
    }
});

/// Every tile on the channels-last cases (the NCHW ones reach this kernel through the adapter).
fn every_tile(h: &Handle, tf32: bool) {
    for (i, c) in cases(tf32).iter().enumerate().filter(|(_, c)| c.x.strides()[1] == 1) {
        let problem = plan_for(c).problem().unwrap();
        if let Err(why) = CudaConvIgemmTma.check(&problem, h.device().info()) {
            // Not an sm_90 GPU: nothing of this kernel to run.
            assert!(why.contains("compute capability"), "{}: {why}", what(c, "check", h));
            return;
        }
        run_every_tile(h, c, 30 + i as u64, i == 0);
        run_every_tile(h, c, 40 + i as u64, i != 0);
    }
}

cuda_tests!(tf32_every_tile, |h: &Handle| every_tile(h, true));

cuda_tests!(strict_f32_split_every_tile, |h: &Handle| every_tile(h, false));

/// Strict f32 on tensor cores must be as accurate as f32 on CUDA cores: on data whose values
/// use every mantissa bit, its error against f64 is compared with the CUDA-core kernel's.
fn split_matches_cuda_cores(h: &Handle) {
    // The channels-last cases, and two long reductions (4608 and 2048 products per output):
    // the tensor cores' own accumulation error grows with the length of a sum.
    let long = [
        case([1, 512, 6, 6], [64, 512, 3, 3], 1, [1, 1], [1, 1], [1, 1], false),
        case([2, 2048, 4, 4], [64, 2048, 1, 1], 1, [0, 0], [1, 1], [1, 1], false),
    ];
    for (i, c) in cases(false).iter().chain(&long).enumerate().filter(|(_, c)| c.x.strides()[1] == 1) {
        let problem: FusedProblem = plan_for(c).problem().unwrap();
        if CudaConvIgemmTma.check(&problem, h.device().info()).is_err() {
            return;
        }
        let d = data(h, c, 60 + i as u64, false, 1.0, 0.0);
        let ops = [OpArg::Bias { b: d.b.ptr() }, OpArg::Activation { alpha: LEAKY, beta: 0.0, gamma: 0.0 }];
        let error_of = |inv: Arc<dyn Invoker>| {
            let y = poisoned(h, &c.y);
            let args = RunArgs { x: d.x.ptr(), w: d.w.ptr(), y: y.ptr(), alpha: 1.0, beta: 0.0, workspace: DevPtr::NULL, workspace_bytes: 0, ops: &ops };
            inv.run(h, &args).unwrap();
            rel_l2_error(&logical(&c.y, &download(h, &y)), &d.want)
        };
        let split = error_of(CudaConvIgemmTma.build(&problem, h.device()).unwrap());
        let simt = error_of(CudaConvIgemm.build(&problem, h.device()).unwrap());
        eprintln!("{}: relative L2 error split TF32 {split:.3e}, CUDA cores {simt:.3e}", what(c, "accuracy", h));
        // TF32 alone would be ~1e-3.
        assert!(split <= 4.0 * simt.max(1e-8), "{}: split TF32 error {split:e}, CUDA cores {simt:e}", what(c, "accuracy", h));
    }
}

cuda_tests!(strict_f32_as_accurate_as_cuda_cores, split_matches_cuda_cores);

device_tests!(strict_f32_on_split_tensor_cores, |h: &Handle| {
    // The default (no environment override in the test runner) and an explicit 0: f32 accuracy.
    assert!(std::env::var("CONFLUX_ALLOW_TF32").is_err(), "run the tests without CONFLUX_ALLOW_TF32");
    for (i, c) in cases(false).iter().enumerate() {
        run_plan(h, c, 50 + i as u64, false);
        run_plan(h, c, 55 + i as u64, true);
    }
    let mut d = ConvDesc::default();
    assert_eq!(d.attribute(ConvAttrib::AllowTf32), -1);
    assert!(!d.allows_tf32());
    d.set_attribute(ConvAttrib::AllowTf32, 1).unwrap();
    assert!(d.allows_tf32());
    assert!(d.set_attribute(ConvAttrib::AllowTf32, 2).is_err());
    // The attribute is part of the problem key: strict and TF32 results are cached apart.
    let (a, b) = (plan_for(&cases(true)[0]).problem().unwrap().key(), plan_for(&cases(false)[0]).problem().unwrap().key());
    assert_ne!(a, b);
});
