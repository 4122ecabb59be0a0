use super::*;
use crate::problem::{EpiOp, FusedKind};
use crate::types::{ActivationMode, ConvMode, Layout};
use crate::{ConvDesc, TensorDesc};

/// A 2-D stem problem: (C, image, K, filter, pad, stride, dilation, layout), batch `n`.
type Spec = (usize, usize, usize, usize, i64, i64, i64, Layout);

fn problem(&(c, hw, k, f, pad, stride, dil, layout): &Spec, n: usize) -> FusedProblem {
    let conv = ConvDesc::new(ConvMode::Convolution, &[pad; 2], &[stride; 2], &[dil; 2]).unwrap();
    let t = |l: &[usize]| TensorDesc::with_layout(DataType::Half, layout, l).unwrap();
    let x = t(&[n, c, hw, hw]);
    let w = t(&[k, c, f, f]);
    let y = t(conv.output_desc(&x, &w).unwrap().lens());
    let conv = crate::problem::ConvProblem::forward(&conv, &x, &w, &y).unwrap();
    let epilogue = vec![EpiOp::Bias { dtype: DataType::Half }, EpiOp::Activation { mode: ActivationMode::Relu }];
    FusedProblem { kind: FusedKind::Conv { conv, epilogue } }
}

const STEMS: [Spec; 6] = [
    (3, 224, 64, 7, 3, 2, 1, Layout::NHWC),   // ResNet
    (3, 224, 32, 3, 1, 2, 1, Layout::NHWC),   // MobileNet, EfficientNet
    (3, 299, 32, 3, 0, 2, 1, Layout::NCHW),   // Inception
    (3, 224, 96, 4, 0, 4, 1, Layout::NHWC),   // ConvNeXt
    (1, 28, 16, 5, 4, 1, 2, Layout::NHWC),    // one channel, dilated
    (6, 32, 200, 3, 1, 3, 1, Layout::NCHW),   // 8-channel slots, two output-channel blocks
];

#[test]
fn chunking_packs_taps_into_16_byte_chunks() {
    let g = |s: &Spec| stem_geometry(&problem(s, 1)).unwrap();
    // 3 channels → slots of 4, two taps per chunk: a 7-tap row is 4 chunks, 28 in all.
    let resnet = g(&STEMS[0]);
    assert_eq!(Chunking::of(&resnet), Chunking { cp: 4, tpc: 2, qr: 4 });
    assert_eq!(Chunking::of(&resnet).chunks(&resnet), 28);
    // 3×3: 3 rows of 2 chunks; one channel: 8 taps per chunk; 6 channels: a tap per chunk.
    assert_eq!(Chunking::of(&g(&STEMS[1])).chunks(&g(&STEMS[1])), 6);
    assert_eq!(Chunking::of(&g(&STEMS[4])), Chunking { cp: 1, tpc: 8, qr: 1 });
    assert_eq!(Chunking::of(&g(&STEMS[4])).chunks(&g(&STEMS[4])), 6);
    assert_eq!(Chunking::of(&g(&STEMS[5])), Chunking { cp: 8, tpc: 1, qr: 3 });
    assert_eq!(Chunking::of(&g(&STEMS[5])).chunks(&g(&STEMS[5])), 10);
}

#[test]
fn labels_round_trip_and_the_heuristic_fits() {
    for s in &STEMS {
        for n in [1, 32] {
            let g = stem_geometry(&problem(s, n)).unwrap();
            let all = tiles(&g);
            assert!(!all.is_empty(), "{s:?}");
            for t in &all {
                assert_eq!(Tile::parse(&t.label()), Some(*t));
                assert!(t.bn(&g) % (8 * t.warps_n) == 0 && t.bn(&g) <= MAX_BLOCK_OUTPUTS);
            }
            let h = heuristic(&g, 132).unwrap();
            assert!(all.contains(&h), "{h:?}");
        }
    }
    // ResNet's 112×112 output: 8 × 16 tiles cover it exactly; ConvNeXt's 56×56 takes 8 × 8
    // tiles; batch 1 of ResNet takes 64-pixel tiles (98 of 128 pixels would leave SMs idle).
    let tile = |s: &Spec, n: usize| {
        let g = stem_geometry(&problem(s, n)).unwrap();
        let h = heuristic(&g, 132).unwrap();
        (h.th, h.tw, h.waste(&g))
    };
    assert_eq!(tile(&STEMS[0], 32), (8, 16, 1.0));
    assert_eq!(tile(&STEMS[3], 32), (8, 8, 1.0));
    assert_eq!(tile(&STEMS[0], 1).0 * tile(&STEMS[0], 1).1, 64);
    assert_eq!(Tile::parse("t8x12w2x2"), None);
    assert_eq!(Tile::parse("t8x16w3x2"), None);
}

#[test]
fn refusals_name_the_cause() {
    let mut p = problem(&STEMS[0], 1);
    let FusedKind::Conv { conv, .. } = &mut p.kind else { unreachable!() };
    conv.x = TensorDesc::with_layout(DataType::Half, Layout::NHWC, &[1, 8, 224, 224]).unwrap();
    conv.w = TensorDesc::with_layout(DataType::Half, Layout::NHWC, &[64, 8, 7, 7]).unwrap();
    assert!(stem_geometry(&p).unwrap_err().contains("input channels"));
    let one_tap = problem(&(4, 1, 96, 1, 0, 1, 1, Layout::NHWC), 32);
    assert!(stem_geometry(&one_tap).unwrap_err().contains("1×1"));
    // Six channels fill a chunk's one tap: squeeze-excitation 1×1 layers on 1×1 images run.
    assert!(stem_geometry(&problem(&(6, 1, 144, 1, 0, 1, 1, Layout::NHWC), 32)).is_ok());
}

/// Every tile's source for the stems with a bias + ReLU epilogue is generated; with
/// `CONFLUX_KERNEL_SOURCES` set, written there for an offline NVRTC compile
/// (`scripts/nvrtc_check.py`).
#[test]
fn sources_generate_for_every_tile() {
    let out = std::env::var("CONFLUX_KERNEL_SOURCES").ok();
    for (i, s) in STEMS.iter().enumerate() {
        let p = problem(s, 2);
        let g = stem_geometry(&p).unwrap();
        for tile in tiles(&g) {
            let (src, _) = kernel_source(&p, &g, tile).unwrap();
            assert!(src.contains("conv_fwd_stem_tc") && src.contains(&format!("#define BN {}", tile.bn(&g))));
            if let Some(dir) = &out {
                std::fs::write(format!("{dir}/stem_{i}_{}.cu", tile.label()), src).unwrap();
            }
        }
    }
}
