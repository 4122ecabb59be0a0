//! Tile and split-K choices of the TMA kernel, and its generated sources.

use super::*;
use crate::problem::{ConvProblem, EpiOp, FusedKind};
use crate::types::{ActivationMode, ConvMode, Layout};
use crate::{ConvDesc, TensorDesc};

/// A fused conv + bias + ReLU over channels-last tensors: c-hw-hw → k, an fh × fw filter.
fn problem(dt: DataType, n: usize, c: usize, hw: usize, k: usize, (fh, fw): (usize, usize), stride: usize) -> FusedProblem {
    problem_padded(dt, n, c, hw, k, (fh, fw), stride, [fh / 2, fw / 2])
}

/// The same with explicit padding (patchify layers: none).
#[allow(clippy::too_many_arguments)]
fn problem_padded(dt: DataType, n: usize, c: usize, hw: usize, k: usize, (fh, fw): (usize, usize), stride: usize, pad: [usize; 2]) -> FusedProblem {
    let conv = ConvDesc::new(ConvMode::Convolution, &[pad[0] as i64, pad[1] as i64], &[stride as i64; 2], &[1; 2]).unwrap();
    let t = |l: &[usize]| TensorDesc::with_layout(dt, Layout::NHWC, l).unwrap();
    let (x, w) = (t(&[n, c, hw, hw]), t(&[k, c, fh, fw]));
    let y = t(conv.output_desc(&x, &w).unwrap().lens());
    let conv = ConvProblem::forward(&conv, &x, &w, &y).unwrap();
    let epilogue = vec![EpiOp::Bias { dtype: dt }, EpiOp::Activation { mode: ActivationMode::Relu }];
    FusedProblem { kind: FusedKind::Conv { conv, epilogue } }
}

/// The same over NDHWC tensors: c-d-hw-hw → k, a 3 × 3 × 3 filter padded by 1.
fn problem_3d(dt: DataType, n: usize, c: usize, d: usize, hw: usize, k: usize) -> FusedProblem {
    let conv = ConvDesc::new(ConvMode::Convolution, &[1; 3], &[1; 3], &[1; 3]).unwrap();
    let t = |l: &[usize]| TensorDesc::with_layout(dt, Layout::NDHWC, l).unwrap();
    let (x, w) = (t(&[n, c, d, hw, hw]), t(&[k, c, 3, 3, 3]));
    let y = t(conv.output_desc(&x, &w).unwrap().lens());
    let conv = ConvProblem::forward(&conv, &x, &w, &y).unwrap();
    FusedProblem { kind: FusedKind::Conv { conv, epilogue: vec![EpiOp::Bias { dtype: dt }] } }
}

fn geom(p: &FusedProblem) -> (Geom, TcPrecision) { tma_geometry(p).unwrap() }

#[test]
fn heuristic_avoids_a_nearly_empty_last_wave() {
    let pick = |n, c, hw, k, f| {
        let (g, prec) = geom(&problem(DataType::Half, n, c, hw, k, f, 1));
        tma_heuristic(&g, prec, 132).label()
    };
    // Inception's 17 × 17 layers at batch 32: 146 tiles of 128 × 128 (a second wave of 14),
    // 111 of 256 × 64 (one wave).
    assert_eq!(pick(32, 160, 17, 160, (1, 7)), "tma256x64s4");
    // ResNet's 28 × 28 3 × 3 at batch 32: 196 × 2 tiles of 128 × 128 fill three waves well.
    assert_eq!(pick(32, 256, 28, 256, (3, 3)), "tma128x128s4");
    // Batch 1 on 7 × 7: one row of tiles either way; narrower tiles give more blocks.
    assert_eq!(pick(1, 512, 7, 512, (3, 3)), "tma128x64s6");
    // Strict f32 keeps its own choice.
    let (g, prec) = geom(&problem(DataType::Float, 32, 160, 17, 160, (1, 7), 1));
    assert_eq!(tma_heuristic(&g, prec, 132).label(), "tma128x128s4d");
}

#[test]
fn splits_fill_the_gpu_only_when_the_grid_is_small() {
    // 8 tiles (batch 1, 7 × 7, 512 outputs in 64-wide tiles), 72 k-steps.
    assert_eq!(tma_splits(8, 72, 132), 16);
    // Inception's 1 × 7 at batch 1 (9 tiles, 21 k-steps): four k-steps per split.
    assert_eq!(tma_splits(9, 21, 132), 5);
    // Short reductions stay whole.
    assert_eq!(tma_splits(8, 9, 132), 1);
    // Half the SMs busy or more: no split.
    assert_eq!(tma_splits(66, 72, 132), 2);
    assert_eq!(tma_splits(67, 72, 132), 1);
}

/// Sources for split and unsplit kernels of every precision and store path generate; with
/// `CONFLUX_KERNEL_SOURCES` set, written there for an offline NVRTC compile
/// (`scripts/nvrtc_check.py`).
#[test]
fn sources_generate_with_and_without_splits() {
    let out = std::env::var("CONFLUX_KERNEL_SOURCES").ok();
    let cases = [
        ("f16_n1_7x7", problem(DataType::Half, 1, 512, 7, 512, (3, 3), 1), None),
        ("f16_n32_17x17_tail", problem(DataType::Half, 32, 160, 17, 192, (7, 1), 1), None),
        ("f16_n1_tail_pingpong", problem(DataType::Half, 1, 96, 14, 96, (3, 3), 2), Some(TmaTile::pingpong(128, 4, true))),
        ("f16_n1_1x1", problem(DataType::Half, 1, 1024, 14, 256, (1, 1), 1), Some(TmaTile::new(128, 128, 4, false))),
        ("f32x3_n1", problem(DataType::Float, 1, 256, 14, 256, (3, 3), 1), None),
        ("f16_n32_28x28", problem(DataType::Half, 32, 256, 28, 256, (3, 3), 1), None),
        ("f16_3d_n1", problem_3d(DataType::Half, 1, 512, 2, 7, 512), None),
        ("f32x3_3d_n8", problem_3d(DataType::Float, 8, 128, 8, 28, 128), None),
        ("f16_n32_32ch_half_rows", problem(DataType::Half, 32, 32, 149, 32, (3, 3), 1), None),
        ("f16_n32_80ch_half_rows", problem(DataType::Half, 32, 80, 73, 192, (3, 3), 1), None),
        ("f16_n1_48ch_half_rows_split", problem(DataType::Half, 1, 48, 28, 256, (3, 3), 1), None),
        ("f16_n32_patchify_2x2_s2", problem_padded(DataType::Half, 32, 384, 14, 768, (2, 2), 2, [0, 0]), None),
        ("f16_n32_1x7", problem(DataType::Half, 32, 128, 17, 128, (1, 7), 1), None),
    ];
    for (name, p, tile) in cases {
        let (g, prec) = geom(&p);
        let cfg = tile.unwrap_or_else(|| tma_heuristic(&g, prec, 132));
        let plan = kernel_plan(&p, &g, prec, cfg, FilterSource::Own, None, 132).unwrap();
        assert!(plan.src.contains(&format!("#define SPLITS {}", plan.splits)), "{name}");
        assert!(plan.cfg.smem_bytes(prec) <= SMEM_LIMIT, "{name}");
        assert_eq!(plan.splits > 1, g.n == 1, "{name}: {} splits", plan.splits);
        assert_eq!(plan.src.contains("#define TMA_3D 1"), g.filter[0] == 3, "{name}");
        if let Some(dir) = &out {
            std::fs::write(format!("{dir}/igemm_tma_{name}.cu"), &plan.src).unwrap();
        }
    }
}

/// A quantized conv (+ bias + ReLU when `fused`) over channels-last tensors of the given types.
fn quant_problem((xt, wt, yt): (DataType, DataType, DataType), n: usize, c: usize, hw: usize, k: usize, f: usize, fused: bool) -> FusedProblem {
    let conv = ConvDesc::new(ConvMode::Convolution, &[f as i64 / 2; 2], &[1; 2], &[1; 2]).unwrap();
    let t = |dt, l: &[usize]| TensorDesc::with_layout(dt, Layout::NHWC, l).unwrap();
    let (x, w) = (t(xt, &[n, c, hw, hw]), t(wt, &[k, c, f, f]));
    let y = t(yt, conv.output_desc(&x, &w).unwrap().lens());
    let conv = ConvProblem::forward(&conv, &x, &w, &y).unwrap();
    let epilogue = if fused { vec![EpiOp::Bias { dtype: DataType::Float }, EpiOp::Activation { mode: ActivationMode::Relu }] } else { vec![] };
    FusedProblem { kind: FusedKind::Conv { conv, epilogue } }
}

/// int8 and fp8 problems take 128-channel k-steps (64 where the channels are a multiple of
/// 64 but not of 128), s8 / fp8 wgmma, and stage only 16-bit y; their sources generate (and
/// are written for the offline compile check as above).
#[test]
fn quantized_sources_generate() {
    use DataType::*;
    let out = std::env::var("CONFLUX_KERNEL_SOURCES").ok();
    let cases = [
        ("i8_i32_raw", quant_problem((Int8, Int8, Int32), 2, 256, 14, 256, 3, false)),
        ("i8_f16_n1_split", quant_problem((Int8, Int8, Half), 1, 512, 7, 512, 3, true)),
        ("i8_i8_64ch", quant_problem((Int8, Int8, Int8), 8, 64, 28, 64, 3, true)),
        ("i8_f16_192ch", quant_problem((Int8, Int8, Half), 8, 192, 14, 128, 3, true)),
        ("i8_f16_96ch_tail", quant_problem((Int8, Int8, Half), 8, 96, 14, 128, 3, true)),
        ("i8_f32_1x1", quant_problem((Int8, Int8, Float), 8, 256, 28, 512, 1, true)),
        ("e4m3_f16", quant_problem((Float8, Float8, Half), 8, 256, 14, 256, 3, true)),
        ("e4m3_e5m2_bf8", quant_problem((Float8, BFloat8, BFloat8), 8, 128, 14, 128, 3, false)),
    ];
    for (name, p) in cases {
        let (g, prec) = geom(&p);
        assert!(prec.elem() == 1, "{name}");
        let cfg = tma_heuristic(&g, prec, 132);
        let plan = kernel_plan(&p, &g, prec, cfg, FilterSource::Own, None, 132).unwrap();
        let bk = if g.cg() % 128 != 0 && g.cg() % 64 == 0 { 64 } else { 128 };
        assert!(plan.src.contains(&format!("#define BK {bk}\n")), "{name}");
        assert_eq!(plan.src.contains("#define CHANNEL_TAIL 1"), g.cg() % 64 != 0, "{name}");
        // (The fp8 output rounds stochastically, MIOpen's default: from registers.)
        let staged = matches!(p.conv_problem().unwrap().y.dtype(), Half | Int8);
        assert_eq!(plan.src.contains("#define STAGE_STORE 1"), staged, "{name}");
        assert!(!plan.src.contains("#define TMA_STORE 1") || p.conv_problem().unwrap().y.dtype() == Half, "{name}");
        assert!(plan.cfg.smem_bytes(prec) <= SMEM_LIMIT, "{name}");
        if let Some(dir) = &out {
            std::fs::write(format!("{dir}/igemm_tma_{name}.cu"), &plan.src).unwrap();
        }
    }
}

/// 16-bit layers take half-row (32-channel) k-steps where a whole 64-channel last slice would be
/// at least half zeros, with twice the stages of the tile they were given.
#[test]
fn sixteen_bit_half_rows() {
    for (c, bk) in [(32, 32), (48, 32), (64, 64), (80, 32), (96, 32), (112, 64), (128, 64), (160, 32), (192, 64)] {
        let p = problem(DataType::Half, 8, c, 28, 128, (3, 3), 1);
        let (g, prec) = geom(&p);
        let tile = TmaTile::new(128, 128, 4, true);
        let plan = kernel_plan(&p, &g, prec, tile, FilterSource::Own, None, 132).unwrap();
        assert!(plan.src.contains(&format!("#define BK {bk}\n")), "{c} channels");
        assert_eq!(plan.src.contains("#define CHANNEL_TAIL 1"), c % bk != 0, "{c} channels");
        assert_eq!(plan.cfg.stages, if bk == 32 { 8 } else { 4 }, "{c} channels");
        assert_eq!(plan.cfg.smem_bytes(prec), if bk == 32 { 8 * 256 * 64 } else { 4 * 256 * 128 } + 128 * 128 * 2 + 16 * plan.cfg.stages + 16 + 1024);
    }
    let few = problem(DataType::Half, 8, 16, 28, 128, (3, 3), 1);
    assert!(tma_check(&geom(&few).0, DataType::Half).unwrap_err().contains("fewer than 32"));
}

/// Backward-data of a patch layer as the GEMM `bwd_data_patch.rs` builds: dy (k channels) times
/// W (fy·fx·c columns, read in place) into dx seen as patches, its channels in runs of fx·c one
/// dx row apart. Staged rows where the runs hold whole 16-byte chunks, else stores from
/// registers; never bulk stores. Sources written for the offline compile check as above.
#[test]
fn patch_runs_sources_generate() {
    let out = std::env::var("CONFLUX_KERNEL_SOURCES").ok();
    for (name, n, c, hw, k, f, staged) in [("patch_2x2_c96", 32, 96, 56, 192, 2, true), ("patch_stem_4x4_c3", 32, 3, 224, 96, 4, false)] {
        let (cols, p) = (f * f * c, hw / f);
        let one = ConvDesc::new(ConvMode::Convolution, &[0, 0], &[1, 1], &[1, 1]).unwrap();
        let dy = TensorDesc::with_layout(DataType::Half, Layout::NHWC, &[n, k, p, p]).unwrap();
        let w = TensorDesc::with_layout(DataType::Half, Layout::NHWC, &[cols, k, 1, 1]).unwrap();
        let patches = TensorDesc::with_strides(DataType::Half, &[n, cols, p, p], &[hw * hw * c, 1, f * hw * c, f * c]).unwrap();
        let fp = FusedProblem::conv(ConvProblem::forward(&one, &dy, &w, &patches).unwrap());
        let (g, prec) = geom(&fp);
        let single = crate::problem::TapAxis { first: 0, step: 1, count: 1 };
        let filter = FilterSource::Flipped { rows: k, row_elems: cols, taps: crate::problem::TapMap { axes: [single; 3], src: [1; 3] } };
        let runs = ChannelRuns { channels: f * c, stride: hw * c };
        let plan = kernel_plan(&fp, &g, prec, tma_heuristic(&g, prec, 132), filter, Some(runs), 132).unwrap();
        assert!(plan.src.contains(&format!("#define Y_SEG {}\n", f * c)), "{name}");
        assert!(plan.src.contains(&format!("#define Y_SEG_STRIDE {}\n", hw * c)), "{name}");
        assert!(!plan.tma_store && !plan.src.contains("#define TMA_STORE 1"), "{name}");
        assert_eq!(plan.src.contains("#define STAGE_STORE 1"), staged, "{name}");
        assert!(plan.src.contains("#define WGMMA_B_MN_MAJOR 1"), "{name}");
        if let Some(dir) = &out {
            std::fs::write(format!("{dir}/igemm_tma_{name}.cu"), &plan.src).unwrap();
        }
    }
}
