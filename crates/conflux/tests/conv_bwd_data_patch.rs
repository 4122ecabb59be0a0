//! Backward-data of patch layers (stride = filter, unpadded) as one GEMM into dx's patches:
//! ConvNeXt's 2×2 s2 downsampling and 4×4 s4 stem (3 channels: runs of 12 values, stored
//! without staging), a 1×2 patch (one run per patch), bf16, a dx with gaps between rows and
//! images; through `check_solver` (f64 reference, poisoned output, bit-identical rerun, gaps
//! untouched) with exact small-integer data and with α/β; pointers the copy engine cannot use
//! run on the next solver; refusals name the cause; Find and immediate mode take it for a
//! ConvNeXt-like downsampling layer.

mod support;

use conflux::conv::api::Choice;
use conflux::reference::fill::Fill;
use conflux::{ConvDesc, ConvMode, DataType, Handle, TensorDesc};
use support::*;

const SOLVER: &str = "CudaConvBwdDataPatch";

/// (dtype, dx lengths, w lengths, stride = filter (h, w), dx strides or None for packed NHWC)
type Spec = (DataType, [usize; 4], [usize; 4], Option<[usize; 4]>);

const CASES: [Spec; 6] = [
    (DataType::Half, [2, 64, 8, 8], [128, 64, 2, 2], None),
    (DataType::BFloat16, [2, 96, 6, 10], [64, 96, 2, 2], None),
    // The 4×4 s4 stem: 3-channel dx, runs of 12 values.
    (DataType::Half, [2, 3, 16, 12], [96, 3, 4, 4], None),
    // A 1×2 patch: one run per patch, rows one dy row apart.
    (DataType::Half, [1, 32, 5, 8], [64, 32, 1, 2], None),
    // dx rows and images with gaps (the runs' stride is the row's, not W·C).
    (DataType::Half, [2, 64, 4, 6], [64, 64, 2, 2], Some([1856, 1, 448, 64])),
    (DataType::Half, [1, 16, 12, 12], [64, 16, 3, 3], None),
];

fn case(&(dt, lx, lw, strides): &Spec) -> ConvCase {
    let conv = ConvDesc::new(ConvMode::Convolution, &[0, 0], &[lw[2] as i64, lw[3] as i64], &[1, 1]).unwrap();
    let x = match strides {
        Some(s) => TensorDesc::with_strides(dt, &lx, &s).unwrap(),
        None => desc(dt, &lx, Lay::ChannelsLast),
    };
    let w = desc(dt, &lw, Lay::ChannelsLast);
    let y = desc(dt, conv.output_desc(&x, &w).unwrap().lens(), Lay::ChannelsLast);
    ConvCase::new(&conv, &x, &w, &y)
}

cuda_tests!(every_case, |h: &Handle| {
    let id = solution_id(SOLVER);
    for (i, spec) in CASES.iter().enumerate() {
        check_exact_and_scaled(h, &case(spec), Dir::BackwardData, id, 700 + i as u64);
    }
});

cuda_tests!(unaligned_pointers_run_on_the_next_solver, |h: &Handle| {
    let c = case(&CASES[0]);
    let inv = h.invoker(&c.fused(Dir::BackwardData), solver(SOLVER)).unwrap();
    let (dy, w) = (random(h, &c.y, Fill::SmallInt(-2, 2), 11), random(h, &c.w, Fill::SmallInt(-2, 2), 12));
    let want = c.reference(Dir::BackwardData, (1.0, 0.0), &dy.host, &w.host, &vec![0.0; c.x.element_space()]);
    let (_keep, dyp) = misaligned_copy(h, &dy);
    let dx_buf = h.alloc(c.x.num_bytes() + 16).unwrap();
    let args = conflux::solver::RunArgs { x: dx_buf.ptr().add(2), w: w.ptr(), y: dyp, alpha: 1.0, beta: 0.0, workspace: conflux::DevPtr::NULL, workspace_bytes: 0, ops: &[] };
    conflux::solver::invoke(&*inv, h, &args).unwrap();
    h.synchronize().unwrap();
    let bytes = h.read(&dx_buf).unwrap();
    let got = conflux::element::decode(c.x.dtype(), &bytes[2..2 + c.x.num_bytes()]);
    assert_close("patch backward-data, misaligned dy and dx", &logical(&c.x, &got), &logical(&c.x, &want), 0.0);
});

cuda_tests!(refusals_name_the_cause, |h: &Handle| {
    let s = solver(SOLVER);
    let why_of = |c: &ConvCase, d: Dir| s.check(&c.fused(d), h.device().info()).unwrap_err();
    let base = case(&CASES[0]);
    assert!(why_of(&base, Dir::Forward).contains("backward-data only"));
    // Stride 2 over a 3×3 filter: patches overlap.
    let mut overlap = base.clone();
    overlap.conv = ConvDesc::new(ConvMode::Convolution, &[1, 1], &[2, 2], &[1, 1]).unwrap();
    overlap.w = desc(DataType::Half, &[128, 64, 3, 3], Lay::ChannelsLast);
    overlap.y = desc(DataType::Half, overlap.conv.output_desc(&overlap.x, &overlap.w).unwrap().lens(), Lay::ChannelsLast);
    let why = why_of(&overlap, Dir::BackwardData);
    assert!(why.contains("not the filter"), "{why}");
    // A dx the patches do not cover: 9 rows of 2×2 patches.
    let odd = case(&(DataType::Half, [2, 64, 9, 8], [128, 64, 2, 2], None));
    let why = why_of(&odd, Dir::BackwardData);
    assert!(why.contains("whole number"), "{why}");
    // Channels-first dx.
    let mut nchw = base.clone();
    nchw.x = desc(DataType::Half, &[2, 64, 8, 8], Lay::Packed);
    let why = why_of(&nchw, Dir::BackwardData);
    assert!(why.contains("channels-last"), "{why}");
    // f32 (strict): the phase solvers' split products.
    let f32c = case(&(DataType::Float, [2, 64, 8, 8], [128, 64, 2, 2], None));
    let why = why_of(&f32c, Dir::BackwardData);
    assert!(why.contains("16-bit"), "{why}");
});

cuda_tests!(chosen_for_a_downsampling_layer, |h: &Handle| {
    let c = case(&CASES[0]);
    let chosen = conflux::search::choose(h, &c.fused(Dir::BackwardData), Choice::Auto, 0).unwrap();
    assert_eq!(chosen.name(), SOLVER);
});
