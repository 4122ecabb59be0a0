//! The tensor-core implicit-GEMM forward kernels (mma.sync, and wgmma on sm_90): 16-bit
//! channels-last convolutions whose channels per group are multiples of 8, with a fused
//! bias + leaky-ReLU epilogue, against the f64 reference. The plan runs on every device; on
//! CUDA the test also checks that a tensor-core solver is the one chosen and runs every tile
//! configuration of both kernels, α/β, and the fallback for pointers the 16-byte copies
//! cannot use.

mod support;

use conflux::fusion::FusedProblem;
use conflux::reference::compare::tolerance;
use conflux::reference::fill::Fill;
use conflux::solver::cuda::igemm_mma::{CudaConvIgemmTc, CONFIGS};
use conflux::solver::cuda::igemm_tma::{CudaConvIgemmTma, TMA_CONFIGS};
use conflux::solver::cuda::igemm_wgmma::{CudaConvIgemmWgmma, WG_CONFIGS};
use conflux::solver::cuda::nchw_tc::CudaConvTcNchw;
use conflux::solver::{Invoker, RunArgs, Solver};
use std::sync::Arc;
use conflux::{ConvDesc, ConvMode, DataType, DevPtr, FusionDirection, FusionPlan, Handle, OpArg, TensorDesc};
use support::cba::{data, execute, plan_for, Case, Data, LEAKY};
use support::*;

const TC: &str = "CudaConvImplicitGemmTensorCore";
const WGMMA: &str = "CudaConvImplicitGemmWgmma";
const TMA: &str = "CudaConvImplicitGemmTma";
const NCHW: &str = "CudaConvTensorCoreNchw";

fn random_case(r: &mut SplitMix64, dt: DataType) -> Case {
    let nd = if r.range(0, 3) == 0 { 3 } else { 2 };
    let groups = r.pick(&[1, 1, 2]);
    let (cg, kg) = (8 * r.range(1, 3), r.range(1, 40));
    let mut lx = vec![r.range(1, 2), groups * cg];
    let mut lw = vec![groups * kg, cg];
    let (mut pads, mut strides, mut dils) = (vec![], vec![], vec![]);
    for _ in 0..nd {
        lx.push(r.range(5, if nd == 3 { 6 } else { 13 }));
        lw.push(r.range(1, 3));
        pads.push(r.range(0, 1) as i64);
        strides.push(r.range(1, 2) as i64);
        dils.push(r.range(1, 2) as i64);
    }
    let mut conv = ConvDesc::new(ConvMode::Convolution, &pads, &strides, &dils).unwrap();
    conv.set_groups(groups as i64).unwrap();
    let x = desc(dt, &lx, Lay::ChannelsLast);
    let w = desc(dt, &lw, Lay::ChannelsLast);
    let y = conv.output_desc(&x, &w).unwrap();
    let b = TensorDesc::new(dt, &[&[1, groups * kg][..], &vec![1; nd]].concat()).unwrap();
    Case { dt, conv, x, w, y, b }
}

fn what(c: &Case, how: &str, h: &Handle) -> String {
    format!("{} x {} w {} {} via {how} on {}", c.dt.short(), c.x.key(), c.w.key(), c.conv.key(), h.device().name())
}

fn check(h: &Handle, c: &Case, d: &Data, y: &Dev, exact: bool, how: &str) {
    let got = logical(&c.y, &download(h, y));
    assert_close(&what(c, how, h), &got, &d.want, if exact { 0.0 } else { tolerance(c.dt) });
}

/// Through the Fusion API with the default solver choice.
fn run_plan(h: &Handle, c: &Case, seed: u64, exact: bool) {
    let d = data(h, c, seed, exact, 1.0, 0.0);
    let mut plan = plan_for(c);
    plan.compile(h).unwrap();
    if h.device_kind() == conflux::handle::DeviceKind::Cuda {
        // TMA + wgmma where the GPU and geometry allow, channels-first tensors through the
        // layout adapter, else wgmma (sm_90), else mma.sync.
        let p = plan.problem().unwrap();
        let want = if solver("CudaConvFolded3d").check(&p, h.device().info()).is_ok() {
            "CudaConvFolded3d"
        } else if solver("CudaConvGroupedTensorCore").check(&p, h.device().info()).is_ok() {
            // Groups of ≤ 32 channels go to the grouped kernel first (run_configs still runs
            // every TMA tile on them).
            "CudaConvGroupedTensorCore"
        } else if CudaConvIgemmTma.check(&p, h.device().info()).is_ok() {
            TMA
        } else if CudaConvTcNchw.check(&p, h.device().info()).is_ok() {
            NCHW
        } else if CudaConvIgemmWgmma.check(&p, h.device().info()).is_ok() {
            WGMMA
        } else {
            TC
        };
        assert_eq!(plan.solver_name(), Some(want), "{}", what(c, "plan", h));
    }
    let y = execute(h, c, &d, &plan);
    check(h, c, &d, &y, exact, "plan");
}

/// An invoker of every tile configuration of the tensor-core kernels (wgmma and TMA only
/// where the GPU and geometry allow), labelled.
fn every_tile(h: &Handle, problem: &FusedProblem) -> Vec<(String, Arc<dyn Invoker>)> {
    let mut out: Vec<(String, Arc<dyn Invoker>)> = CONFIGS.iter().map(|c| (c.label(), CudaConvIgemmTc.build_with(problem, h.device(), *c).unwrap())).collect();
    if CudaConvIgemmWgmma.check(problem, h.device().info()).is_ok() {
        out.extend(WG_CONFIGS.iter().map(|c| (c.label(), CudaConvIgemmWgmma.build_with(problem, h.device(), *c).unwrap())));
        // The persistent kernel with a small grid, so every block walks several tiles.
        out.extend(WG_CONFIGS.iter().filter(|c| c.persistent).map(|c| (format!("{} on 3 blocks", c.label()), CudaConvIgemmWgmma.build_capped(problem, h.device(), *c, Some(3)).unwrap())));
    }
    if CudaConvIgemmTma.check(problem, h.device().info()).is_ok() {
        for c in TMA_CONFIGS {
            out.push((c.label(), CudaConvIgemmTma.build_with(problem, h.device(), *c, None).unwrap()));
            out.push((format!("{} on 3 blocks", c.label()), CudaConvIgemmTma.build_with(problem, h.device(), *c, Some(3)).unwrap()));
        }
    }
    out
}

/// Every tile configuration, with α/β, straight through the solvers' invokers.
fn run_configs(h: &Handle, c: &Case, seed: u64, exact: bool) {
    let problem: FusedProblem = plan_for(c).problem().unwrap();
    CudaConvIgemmTc.check(&problem, h.device().info()).unwrap_or_else(|why| panic!("{}: refused: {why}", what(c, "check", h)));
    let (alpha, beta) = if exact { (1.0, 0.5) } else { (0.75, 0.5) };
    let d = data(h, c, seed, exact, alpha, beta);
    let ops = [OpArg::Bias { b: d.b.ptr() }, OpArg::Activation { alpha: LEAKY, beta: 0.0, gamma: 0.0 }];
    for (label, inv) in every_tile(h, &problem) {
        let y = upload(h, &c.y, &d.y0);
        let args = RunArgs { x: d.x.ptr(), w: d.w.ptr(), y: y.ptr(), alpha, beta, workspace: DevPtr::NULL, workspace_bytes: 0, ops: &ops };
        inv.run(h, &args).unwrap();
        check(h, c, &d, &y, exact, &format!("tile {label}"));
    }
}

device_tests!(random_geometries, |h: &Handle| {
    let mut r = SplitMix64::new(41);
    for (i, dt) in [DataType::Half, DataType::BFloat16].into_iter().enumerate() {
        for j in 0..12 {
            let c = random_case(&mut r, dt);
            let seed = (i * 100 + j) as u64;
            run_plan(h, &c, seed, false);
            if h.device_kind() == conflux::handle::DeviceKind::Cuda && j % 3 == 0 {
                run_configs(h, &c, seed, false);
            }
        }
    }
});

cuda_tests!(tiles_larger_than_one_block, |h: &Handle| {
    // Several k-tiles, several pixel tiles and a partial channel tile for every block shape
    // (the random cases are small enough for one tile of the big configurations).
    for (k, (dt, exact)) in [(DataType::Half, true), (DataType::BFloat16, false), (DataType::Half, false)].into_iter().enumerate() {
        let conv = ConvDesc::new(ConvMode::Convolution, &[1, 1], &[1 + k as i64 % 2, 1], &[1, 1]).unwrap();
        let x = desc(dt, &[2, 64, 17, 15], Lay::ChannelsLast);
        let w = desc(dt, &[200 + 56 * k, 64, 3, 3], Lay::ChannelsLast);
        let y = conv.output_desc(&x, &w).unwrap();
        let b = TensorDesc::new(dt, &[1, 200 + 56 * k, 1, 1]).unwrap();
        run_configs(h, &Case { dt, conv, x, w, y, b }, 50 + k as u64, exact);
    }
});

/// A 2-D or 3-D channels-last case: x and w lengths, groups, padding, stride, dilation.
fn channels_last_case(dt: DataType, lx: &[usize], lw: &[usize], groups: usize, pad: &[i64], stride: &[i64], dil: &[i64]) -> Case {
    let mut conv = ConvDesc::new(ConvMode::Convolution, pad, stride, dil).unwrap();
    conv.set_groups(groups as i64).unwrap();
    let x = desc(dt, lx, Lay::ChannelsLast);
    let w = desc(dt, lw, Lay::ChannelsLast);
    let y = conv.output_desc(&x, &w).unwrap();
    let b = TensorDesc::new(dt, &[&[1, lw[0]][..], &vec![1; pad.len()]].concat()).unwrap();
    Case { dt, conv, x, w, y, b }
}

cuda_tests!(tma_geometries, |h: &Handle| {
    // The TMA kernel's own conditions (2-D, 64-channel groups): padding and stride in the
    // im2col walk, dilated taps, groups, 1×1 (plain GEMM loads) with a pixel tail and with
    // groups, a one-row filter, every tile; ungrouped channel counts that end in a partial
    // 64-channel slice (80, 160, 96, 72, 112: boxes overhanging the channels read zeros).
    let cases: [(DataType, bool, [usize; 4], [usize; 4], usize, [i64; 2], [i64; 2], [i64; 2]); 14] = [
        (DataType::Half, true, [2, 80, 9, 9], [48, 80, 3, 3], 1, [0, 0], [1, 1], [1, 1]),
        (DataType::BFloat16, false, [2, 160, 8, 7], [72, 160, 1, 7], 1, [0, 3], [1, 1], [1, 1]),
        (DataType::Half, true, [2, 96, 8, 8], [64, 96, 2, 2], 1, [0, 0], [2, 2], [1, 1]),
        (DataType::Half, true, [3, 72, 7, 5], [40, 72, 1, 1], 1, [0, 0], [1, 1], [1, 1]),
        (DataType::Half, false, [1, 112, 12, 11], [32, 112, 3, 3], 1, [1, 1], [2, 2], [2, 2]),
        (DataType::Half, true, [2, 128, 11, 9], [144, 64, 3, 3], 2, [2, 2], [1, 1], [2, 2]),
        (DataType::BFloat16, false, [2, 128, 7, 7], [64, 128, 1, 1], 1, [0, 0], [1, 1], [1, 1]),
        (DataType::Half, false, [3, 64, 13, 10], [72, 64, 3, 3], 1, [1, 1], [2, 2], [1, 1]),
        (DataType::Half, true, [2, 64, 6, 9], [40, 64, 1, 3], 1, [0, 1], [1, 2], [1, 1]),
        (DataType::BFloat16, false, [4, 192, 15, 15], [320, 192, 3, 3], 1, [1, 1], [1, 1], [1, 1]),
        (DataType::Half, true, [3, 128, 5, 6], [128, 64, 1, 1], 2, [0, 0], [1, 1], [1, 1]),
        // Half-row (32-channel) k-steps: 32 channels, 48 (a tail), groups of 32.
        (DataType::Half, true, [2, 32, 10, 9], [32, 32, 3, 3], 1, [1, 1], [1, 1], [1, 1]),
        (DataType::BFloat16, false, [2, 48, 7, 8], [64, 48, 3, 3], 1, [1, 1], [2, 2], [1, 1]),
        (DataType::Half, true, [2, 64, 6, 7], [96, 32, 3, 3], 2, [1, 1], [1, 1], [1, 1]),
    ];
    for (i, (dt, exact, lx, lw, groups, pad, stride, dil)) in cases.into_iter().enumerate() {
        let c = channels_last_case(dt, &lx, &lw, groups, &pad, &stride, &dil);
        let problem = plan_for(&c).problem().unwrap();
        if CudaConvIgemmTma.check(&problem, h.device().info()).is_err() {
            // Not an sm_90 GPU: the other kernels are covered elsewhere.
            assert!(CudaConvIgemmWgmma.check(&problem, h.device().info()).is_err(), "TMA refused {}: {:?}", what(&c, "check", h), CudaConvIgemmTma.check(&problem, h.device().info()));
            return;
        }
        run_plan(h, &c, 70 + i as u64, exact);
        run_configs(h, &c, 80 + i as u64, exact);
    }
});

cuda_tests!(tma_split_k, |h: &Handle| {
    // Batch-1 layers on small images with long reductions: each output tile's k-steps are
    // split over several blocks, whose partial sums the last one adds in split order. Exact
    // data, every tile (each with its own split count) and a 3-block grid walking the splits;
    // reruns give the same bits whichever block finishes last.
    let cases: [(DataType, bool, [usize; 4], [usize; 4], [i64; 2], [i64; 2]); 4] = [
        (DataType::Half, true, [1, 256, 7, 7], [96, 256, 3, 3], [1, 1], [1, 1]),
        (DataType::Half, true, [1, 48, 9, 9], [128, 48, 3, 3], [1, 1], [1, 1]),
        (DataType::BFloat16, false, [1, 160, 9, 9], [192, 160, 7, 1], [3, 0], [1, 1]),
        (DataType::Half, true, [2, 128, 8, 8], [136, 128, 3, 3], [1, 1], [2, 2]),
    ];
    for (i, (dt, exact, lx, lw, pad, stride)) in cases.into_iter().enumerate() {
        let c = channels_last_case(dt, &lx, &lw, 1, &pad, &stride, &[1, 1]);
        let problem = plan_for(&c).problem().unwrap();
        if CudaConvIgemmTma.check(&problem, h.device().info()).is_err() {
            return; // not an sm_90 GPU
        }
        run_plan(h, &c, 90 + i as u64, exact);
        run_configs(h, &c, 95 + i as u64, exact);
        let d = data(h, &c, 99, false, 0.75, 0.5);
        let ops = [OpArg::Bias { b: d.b.ptr() }, OpArg::Activation { alpha: LEAKY, beta: 0.0, gamma: 0.0 }];
        for (label, inv) in every_tile(h, &problem).into_iter().filter(|(l, _)| l.starts_with("tma")) {
            let runs: Vec<Vec<f64>> = (0..3)
                .map(|_| {
                    let y = upload(h, &c.y, &d.y0);
                    let args = RunArgs { x: d.x.ptr(), w: d.w.ptr(), y: y.ptr(), alpha: 0.75, beta: 0.5, workspace: DevPtr::NULL, workspace_bytes: 0, ops: &ops };
                    inv.run(h, &args).unwrap();
                    download(h, &y)
                })
                .collect();
            assert!(runs.iter().all(|r| r.iter().zip(&runs[0]).all(|(a, b)| a.to_bits() == b.to_bits())), "{}: reruns differ", what(&c, &label, h));
            // A burst of launches queued without waiting: more than the counter blocks an
            // invoker keeps, so later launches zero counters in scratch; every result the same.
            let ys: Vec<Dev> = (0..10).map(|_| upload(h, &c.y, &d.y0)).collect();
            for y in &ys {
                let args = RunArgs { x: d.x.ptr(), w: d.w.ptr(), y: y.ptr(), alpha: 0.75, beta: 0.5, workspace: DevPtr::NULL, workspace_bytes: 0, ops: &ops };
                inv.run(h, &args).unwrap();
            }
            for (i, y) in ys.iter().enumerate() {
                assert!(download(h, y).iter().zip(&runs[0]).all(|(a, b)| a.to_bits() == b.to_bits()), "{}: launch {i} of a burst differs", what(&c, &label, h));
            }
        }
    }
});

cuda_tests!(tma_3d, |h: &Handle| {
    // 3-D convolutions on the TMA kernel (5-D im2col maps of x, taps over depth too): 3×3×3
    // with padding, strided in every axis, a channel tail, dilated depth, a small batch-1 grid
    // (split-K), f16 and bf16; every tile, exact data bit for bit. Frames-as-images shapes
    // (1 × R × S) are the folded solver's and stay out of this list; the T × 1 × 1 one runs
    // through it in the plan and on the TMA kernel directly in every tile.
    type Spec = (DataType, bool, [usize; 5], [usize; 5], [i64; 3], [i64; 3], [i64; 3]);
    let cases: [Spec; 5] = [
        (DataType::Half, true, [2, 64, 4, 6, 5], [48, 64, 3, 3, 3], [1, 1, 1], [1, 1, 1], [1, 1, 1]),
        (DataType::BFloat16, false, [2, 128, 5, 7, 6], [72, 128, 3, 3, 3], [1, 1, 1], [2, 2, 2], [1, 1, 1]),
        (DataType::Half, true, [1, 80, 6, 5, 5], [64, 80, 3, 1, 1], [2, 0, 0], [1, 1, 1], [2, 1, 1]),
        (DataType::Half, true, [1, 256, 2, 7, 7], [96, 256, 3, 3, 3], [1, 1, 1], [1, 1, 1], [1, 1, 1]),
        (DataType::BFloat16, false, [2, 64, 6, 9, 8], [64, 64, 3, 3, 3], [0, 1, 1], [2, 1, 2], [1, 1, 1]),
    ];
    for (i, (dt, exact, lx, lw, pad, stride, dil)) in cases.into_iter().enumerate() {
        let c = channels_last_case(dt, &lx, &lw, 1, &pad, &stride, &dil);
        let problem = plan_for(&c).problem().unwrap();
        if let Err(why) = CudaConvIgemmTma.check(&problem, h.device().info()) {
            assert!(why.contains("compute capability"), "TMA refused {}: {why}", what(&c, "check", h));
            return; // not an sm_90 GPU
        }
        run_plan(h, &c, 110 + i as u64, exact);
        run_configs(h, &c, 120 + i as u64, exact);
    }
});

/// The layout adapter with every configuration of the kernel it feeds (labels of the other
/// kernels fail to build and are skipped), with α/β, into `y` of any layout.
fn run_adapter_configs(h: &Handle, c: &Case, seed: u64, exact: bool) {
    let problem = FusedProblem { kind: conflux::fusion::FusedKind::Conv { conv: conflux::conv::ConvProblem::forward(&c.conv, &c.x, &c.w, &c.y).unwrap(), epilogue: plan_for(c).problem().unwrap().epilogue().to_vec() } };
    CudaConvTcNchw.check(&problem, h.device().info()).unwrap_or_else(|why| panic!("{}: refused: {why}", what(c, "check", h)));
    let (alpha, beta) = if exact { (1.0, 0.5) } else { (0.75, 0.5) };
    let d = data(h, c, seed, exact, alpha, beta);
    let ops = [OpArg::Bias { b: d.b.ptr() }, OpArg::Activation { alpha: LEAKY, beta: 0.0, gamma: 0.0 }];
    let mut built = vec![("default".to_string(), CudaConvTcNchw.build(&problem, h.device()).unwrap())];
    built.extend(CudaConvTcNchw.tuning_space(&problem).into_iter().filter_map(|l| CudaConvTcNchw.build_config(&problem, h.device(), &l).ok().map(|inv| (l, inv))));
    assert!(built.len() > 2, "{}: no configuration of the adapted kernel built", what(c, "adapter", h));
    for (label, inv) in built {
        let y = upload(h, &c.y, &d.y0);
        let args = RunArgs { x: d.x.ptr(), w: d.w.ptr(), y: y.ptr(), alpha, beta, workspace: DevPtr::NULL, workspace_bytes: 0, ops: &ops };
        let how = format!("adapter, tile {label}");
        inv.run(h, &args).unwrap_or_else(|e| panic!("{}: {e:?}", what(c, &how, h)));
        check(h, c, &d, &y, exact, &how);
    }
}

device_tests!(channels_first, |h: &Handle| {
    // NCHW x and/or w (MIOpen's and PyTorch's default) go to the tensor-core kernels through
    // channels-last scratch; y is written in its own layout: NCHW as 16-byte runs (images of
    // 8k pixels), NCHW element runs (odd image sizes, gapped y), channels-last rows. Also 3-D
    // and 32-channel groups (the cp.async wgmma kernel rather than TMA). A 1×1 KCRS filter is
    // already KRSC in memory: no copy, even with nothing else to convert.
    use DataType::{BFloat16 as Bf, Half as Hf};
    use Lay::{ChannelsLast as Cl, Gapped as Gp, Packed as Pk};
    let cases: [(DataType, bool, &[usize], &[usize], usize, i64, i64, [Lay; 3]); 8] = [
        (Hf, true, &[2, 64, 8, 8], &[96, 64, 3, 3], 1, 1, 1, [Pk, Pk, Pk]),
        (Bf, false, &[3, 128, 7, 7], &[80, 128, 1, 1], 1, 0, 1, [Pk, Pk, Pk]),
        (Hf, false, &[2, 128, 9, 9], &[128, 64, 3, 3], 2, 1, 2, [Pk, Cl, Gp]),
        (Hf, true, &[2, 64, 10, 6], &[64, 64, 1, 1], 1, 0, 1, [Pk, Pk, Cl]),
        (Bf, false, &[2, 32, 9, 9], &[48, 32, 3, 3], 1, 1, 1, [Pk, Pk, Pk]),
        (Hf, true, &[1, 16, 4, 5, 6], &[24, 16, 3, 3, 3], 1, 1, 1, [Pk, Pk, Pk]),
        (Hf, false, &[2, 64, 5, 5], &[64, 64, 3, 3], 1, 1, 1, [Cl, Pk, Pk]),
        (Bf, true, &[2, 64, 6, 7], &[72, 64, 1, 1], 1, 0, 1, [Cl, Pk, Cl]),
    ];
    for (i, (dt, exact, lx, lw, groups, pad, stride, [lay_x, lay_w, lay_y])) in cases.into_iter().enumerate() {
        let nd = lx.len() - 2;
        let mut conv = ConvDesc::new(ConvMode::Convolution, &vec![pad; nd], &vec![stride; nd], &vec![1; nd]).unwrap();
        conv.set_groups(groups as i64).unwrap();
        let x = desc(dt, lx, lay_x);
        let w = desc(dt, lw, lay_w);
        let derived = conv.output_desc(&x, &w).unwrap();
        let y = desc(dt, derived.lens(), lay_y);
        let b = TensorDesc::new(dt, &[&[1, lw[0]][..], &vec![1; nd]].concat()).unwrap();
        let c = Case { dt, conv, x, w, y, b };
        if c.y == derived {
            run_plan(h, &c, 90 + i as u64, exact);
        }
        if h.device_kind() == conflux::handle::DeviceKind::Cuda {
            run_adapter_configs(h, &c, 95 + i as u64, exact);
        }
    }
});

device_tests!(exact_small_integers, |h: &Handle| {
    // |sums| stay below 2048, so f16 and bf16 (8 bits of mantissa: below 256) hold them exactly.
    for (dt, lx, lw) in [
        (DataType::Half, [2, 32, 9, 7], [24, 32, 3, 3]),
        (DataType::BFloat16, [1, 8, 6, 5], [10, 8, 3, 3]),
    ] {
        let conv = ConvDesc::new(ConvMode::Convolution, &[1, 1], &[1, 1], &[1, 1]).unwrap();
        let x = desc(dt, &lx, Lay::ChannelsLast);
        let w = desc(dt, &lw, Lay::ChannelsLast);
        let y = conv.output_desc(&x, &w).unwrap();
        let b = TensorDesc::new(dt, &[1, lw[0], 1, 1]).unwrap();
        let c = Case { dt, conv, x, w, y, b };
        run_plan(h, &c, 3, true);
    }
});

device_tests!(refusals_name_the_cause, |h: &Handle| {
    let conv = ConvDesc::new(ConvMode::Convolution, &[1, 1], &[1, 1], &[1, 1]).unwrap();
    let problem = |dt, c: usize, lay: Lay| {
        let x = desc(dt, &[1, c, 6, 6], lay);
        let w = desc(dt, &[8, c, 3, 3], lay);
        let mut plan = FusionPlan::new(FusionDirection::Vertical, x);
        plan.add_conv_forward(&conv, &w).unwrap();
        plan.problem().unwrap()
    };
    let refuse = |p: FusedProblem, needle: &str| {
        let why = CudaConvIgemmTc.check(&p, h.device().info()).expect_err("must refuse");
        assert!(why.contains(needle), "reason {why:?} lacks {needle:?}");
    };
    refuse(problem(DataType::Float, 8, Lay::ChannelsLast), "f16 or bf16");
    refuse(problem(DataType::Half, 12, Lay::ChannelsLast), "multiple of 8");
    refuse(problem(DataType::Half, 8, Lay::Packed), "channels-last");
    refuse(problem(DataType::Half, 8, Lay::GappedChannelsLast), "channels-last");
});

cuda_tests!(misaligned_x_falls_back, |h: &Handle| {
    // x two bytes past a 16-byte boundary: the invoker must fall back and still be right.
    let conv = ConvDesc::new(ConvMode::Convolution, &[1, 1], &[1, 1], &[1, 1]).unwrap();
    let dt = DataType::Half;
    let x = desc(dt, &[1, 16, 7, 7], Lay::ChannelsLast);
    let w = desc(dt, &[8, 16, 3, 3], Lay::ChannelsLast);
    let y = conv.output_desc(&x, &w).unwrap();
    let b = TensorDesc::new(dt, &[1, 8, 1, 1]).unwrap();
    let c = Case { dt, conv, x, w, y, b };
    let d = data(h, &c, 9, false, 1.0, 0.0);
    let (_xs, x_off) = misaligned_copy(h, &d.x);
    let problem = plan_for(&c).problem().unwrap();
    let ops = [OpArg::Bias { b: d.b.ptr() }, OpArg::Activation { alpha: LEAKY, beta: 0.0, gamma: 0.0 }];
    for (label, inv) in every_tile(h, &problem).into_iter().step_by(CONFIGS.len()).take(2) {
        let out = poisoned(h, &c.y);
        let args = RunArgs { x: x_off, w: d.w.ptr(), y: out.ptr(), alpha: 1.0, beta: 0.0, workspace: DevPtr::NULL, workspace_bytes: 0, ops: &ops };
        inv.run(h, &args).unwrap();
        check(h, &c, &d, &out, false, &format!("misaligned x (fallback from {label})"));
    }
});

#[test]
fn tile_space_is_consistent() {
    use conflux::solver::cuda::igemm_mma::TileConfig;
    for c in CONFIGS {
        assert_eq!(TileConfig::parse(&c.label()), Some(*c), "{}", c.label());
        assert!(c.bm % c.wm == 0 && c.bn % c.wn == 0 && c.wm % 16 == 0 && c.wn % 16 == 0, "{}", c.label());
        assert!((c.bm * c.bk / 8) % c.threads() == 0 && (c.bn * c.bk / 8) % c.threads() == 0, "{}", c.label());
        assert!(c.bk == 32 || c.bk == 64, "{}", c.label());
        assert!(c.smem_bytes() * c.min_blocks().min(2) <= 227 * 1024, "{}: shared memory", c.label());
    }
    assert_eq!(TileConfig::parse("1x1x1w1x1s1"), None);
    use conflux::solver::cuda::igemm_wgmma::WgTile;
    for c in WG_CONFIGS {
        assert_eq!(WgTile::parse(&c.label()), Some(*c), "{}", c.label());
        assert!(c.bm % 64 == 0 && [64, 128, 256].contains(&c.bn) && c.stages >= 3, "{}", c.label());
        assert!((c.bm * 8) % c.threads() == 0 && (c.bn * 8) % c.threads() == 0, "{}", c.label());
        assert!(c.smem_bytes() <= 227 * 1024, "{}: shared memory", c.label());
    }
    use conflux::solver::cuda::tensor_core::TcPrecision;
    use conflux::solver::cuda::igemm_tma::TmaTile;
    for c in TMA_CONFIGS {
        assert_eq!(TmaTile::parse(&c.label()), Some(*c), "{}", c.label());
        assert!([64, 128, 256].contains(&c.bn) && c.stages >= 2, "{}", c.label());
        // 16-bit results (f32 ones are staged only where the buffer fits, decided at build).
        let p = TcPrecision::Bits16;
        assert!(c.smem_bytes(p) * c.min_blocks(p, false) <= 227 * 1024, "{}: shared memory", c.label());
        // Split TF32 stages hold two w tiles: `fitted` trims them until the pipeline fits.
        let split = TmaTile { staged: false, ..c.fitted(1000, TcPrecision::Tf32x3) };
        assert!(split.stages >= 2 && split.smem_bytes(TcPrecision::Tf32x3) <= 227 * 1024, "{}: split shared memory", c.label());
    }
}

cuda_tests!(simt_tile_heights, |h: &Handle| {
    // The CUDA-core kernel picks 64- or 128-pixel tiles by grid size; small test shapes would
    // only ever see one, so both are built explicitly here (f32, both layouts, a 3-D case).
    use conflux::solver::cuda::igemm_simt::CudaConvIgemm;
    let mut r = SplitMix64::new(77);
    for (j, dt) in [DataType::Float, DataType::Float, DataType::Half, DataType::Float].into_iter().enumerate() {
        let mut c = random_case(&mut r, dt);
        if j == 1 {
            // NCHW too.
            c.x = desc(dt, c.x.lens(), Lay::Packed);
            c.w = desc(dt, c.w.lens(), Lay::Packed);
            c.y = c.conv.output_desc(&c.x, &c.w).unwrap();
        }
        let d = data(h, &c, j as u64, false, 0.5, 1.5);
        let problem = plan_for(&c).problem().unwrap();
        let ops = [OpArg::Bias { b: d.b.ptr() }, OpArg::Activation { alpha: LEAKY, beta: 0.0, gamma: 0.0 }];
        for bm in [64, 128] {
            let inv = CudaConvIgemm.build_with(&problem, h.device(), bm).unwrap();
            let y = upload(h, &c.y, &d.y0);
            let args = RunArgs { x: d.x.ptr(), w: d.w.ptr(), y: y.ptr(), alpha: 0.5, beta: 1.5, workspace: DevPtr::NULL, workspace_bytes: 0, ops: &ops };
            inv.run(h, &args).unwrap();
            check(h, &c, &d, &y, false, &format!("simt bm {bm}"));
        }
    }
});

/// (dtype, x lengths, w lengths, groups, pad, stride, dilation, layout)
type TrimSpec = (DataType, &'static [usize], &'static [usize], i64, i64, i64, i64, support::Lay);

cuda_tests!(trimmed_atrous_taps, |h: &Handle| {
    // Atrous layers whose outer taps reach no output run with those taps cut (a view of w, the
    // padding shrunk) on the solver that takes the smaller problem: centre tap only (a 1×1,
    // grouped, strided, f32 channels-first), and a 5×5 whose outer ring lies in the padding.
    use support::{check_solver, desc, solution_id, ConvCase, Dir, Lay};
    const TRIM: [TrimSpec; 5] = [
        (DataType::Half, &[2, 64, 6, 6], &[32, 64, 3, 3], 1, 8, 1, 8, Lay::ChannelsLast),
        (DataType::BFloat16, &[1, 32, 5, 7], &[48, 32, 5, 5], 1, 8, 1, 4, Lay::ChannelsLast),
        (DataType::Half, &[1, 64, 6, 6], &[64, 16, 3, 3], 4, 8, 1, 8, Lay::ChannelsLast),
        (DataType::Half, &[1, 64, 7, 7], &[64, 64, 3, 3], 1, 12, 2, 12, Lay::ChannelsLast),
        (DataType::Float, &[2, 16, 4, 4], &[8, 16, 3, 3], 1, 6, 1, 6, Lay::Packed),
    ];
    let id = solution_id("CudaConvTrimmedTaps");
    for (i, &(dt, lx, lw, groups, pad, stride, dil, lay)) in TRIM.iter().enumerate() {
        let mut conv = ConvDesc::new(ConvMode::Convolution, &[pad, pad], &[stride, stride], &[dil, dil]).unwrap();
        conv.set_groups(groups).unwrap();
        let (x, w) = (desc(dt, lx, lay), desc(dt, lw, lay));
        let y = desc(dt, conv.output_desc(&x, &w).unwrap().lens(), lay);
        let c = ConvCase::new(&conv, &x, &w, &y);
        assert!(check_solver(h, &c, Dir::Forward, id, (1.0, 0.0), Fill::SmallInt(-2, 2), 0.0, 500 + i as u64), "refused {c:?}");
        assert!(check_solver(h, &c, Dir::Forward, id, (0.75, 0.5), Fill::Normal, tolerance(dt), 510 + i as u64), "refused {c:?}");
        if i == 0 {
            // First in the list that takes it: ahead of the dense kernels.
            let problem = c.fused(Dir::Forward);
            let first = conflux::solver::registry::walk(&problem, h.device().info(), |_| true).find(|i| i.verdict.is_ok()).map(|i| i.solver.name());
            assert_eq!(first, Some("CudaConvTrimmedTaps"));
        }
    }
    let dense = ConvCase::new(&ConvDesc::new(ConvMode::Convolution, &[2, 2], &[1, 1], &[2, 2]).unwrap(), &desc(DataType::Half, &[1, 64, 6, 6], Lay::ChannelsLast), &desc(DataType::Half, &[8, 64, 3, 3], Lay::ChannelsLast), &desc(DataType::Half, &[1, 8, 6, 6], Lay::ChannelsLast));
    let why = support::solver("CudaConvTrimmedTaps").check(&dense.fused(Dir::Forward), h.device().info()).unwrap_err();
    assert!(why.contains("reach no output"), "{why}");
});
