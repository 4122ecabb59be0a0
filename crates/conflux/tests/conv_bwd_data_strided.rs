//! Strided backward-data on tensor cores by phases: 1×1 stride 2 (phases no tap reaches), 3×3
//! stride 2 on even and odd sizes (asymmetric phase padding), 2×2 and 4×4 patchify strides,
//! stride 3 over a 2×2 filter, dilation with groups, a 7×7 stride-2 stem's 3-channel dx; f16,
//! bf16 and strict f32; NHWC and NCHW tensors, KRSC filters read in place and KCRS ones copied
//! per phase; through `check_solver` (f64 reference, poisoned output, bit-identical rerun,
//! gaps untouched) with exact small-integer data and with α/β; refusals name the cause;
//! immediate choice takes it for a strided 16-bit layer. 3-D: 3×3×3 and 1×1×1 stride 2.

mod support;

use conflux::{ConvDesc, ConvMode, DataType, Handle};
use support::*;

const SOLVER: &str = "CudaConvBwdDataStridedTensorCore";

/// (dtype, dx lengths, w lengths, groups, pad, stride, dilation, layout of dx/dy, layout of w)
type Spec = (DataType, &'static [usize], &'static [usize], usize, i64, i64, i64, Lay, Lay);

const CASES: [Spec; 15] = [
    (DataType::Half, &[2, 64, 14, 14], &[128, 64, 1, 1], 1, 0, 2, 1, Lay::ChannelsLast, Lay::ChannelsLast),
    (DataType::Half, &[2, 64, 14, 13], &[64, 64, 3, 3], 1, 1, 2, 1, Lay::ChannelsLast, Lay::ChannelsLast),
    // 32 output channels: each phase reads its sub-filter in place in half-row k-steps.
    (DataType::Half, &[2, 64, 14, 13], &[32, 64, 3, 3], 1, 1, 2, 1, Lay::ChannelsLast, Lay::ChannelsLast),
    (DataType::BFloat16, &[2, 128, 9, 9], &[64, 128, 2, 2], 1, 0, 2, 1, Lay::ChannelsLast, Lay::Packed),
    (DataType::Half, &[2, 64, 11, 10], &[64, 64, 3, 3], 1, 1, 2, 1, Lay::Packed, Lay::Packed),
    (DataType::Half, &[1, 64, 16, 16], &[64, 64, 4, 4], 1, 0, 4, 1, Lay::ChannelsLast, Lay::ChannelsLast),
    (DataType::Half, &[2, 64, 13, 12], &[128, 32, 3, 3], 2, 2, 2, 2, Lay::ChannelsLast, Lay::ChannelsLast),
    (DataType::Half, &[1, 64, 10, 11], &[64, 64, 2, 2], 1, 0, 3, 1, Lay::ChannelsLast, Lay::ChannelsLast),
    (DataType::Half, &[2, 3, 15, 14], &[64, 3, 7, 7], 1, 3, 2, 1, Lay::ChannelsLast, Lay::ChannelsLast),
    (DataType::BFloat16, &[2, 64, 12, 12], &[64, 64, 3, 3], 1, 1, 2, 1, Lay::GappedChannelsLast, Lay::ChannelsLast),
    // Strict f32 (the descriptor's default): split TF32 products on copied sub-filters.
    (DataType::Float, &[2, 32, 9, 9], &[64, 32, 3, 3], 1, 1, 2, 1, Lay::Packed, Lay::Packed),
    (DataType::Float, &[2, 32, 8, 8], &[32, 32, 1, 1], 1, 0, 2, 1, Lay::ChannelsLast, Lay::ChannelsLast),
    // ResNeXt-like groups of 16, stride 2 (phases on the grouped tensor-core kernel).
    (DataType::Half, &[2, 64, 12, 11], &[64, 16, 3, 3], 4, 1, 2, 1, Lay::ChannelsLast, Lay::ChannelsLast),
    // 3-D (r3d's downsampling): eight phases, sub-filters gathered per phase.
    (DataType::Half, &[2, 64, 6, 7, 6], &[64, 64, 3, 3, 3], 1, 1, 2, 1, Lay::ChannelsLast, Lay::ChannelsLast),
    (DataType::BFloat16, &[1, 64, 4, 6, 6], &[128, 64, 1, 1, 1], 1, 0, 2, 1, Lay::ChannelsLast, Lay::Packed),
];

fn case(&(dt, lx, lw, groups, pad, stride, dil, lay, lay_w): &Spec) -> ConvCase {
    let nd = lx.len() - 2;
    let mut conv = ConvDesc::new(ConvMode::Convolution, &vec![pad; nd], &vec![stride; nd], &vec![dil; nd]).unwrap();
    conv.set_groups(groups as i64).unwrap();
    let x = desc(dt, lx, lay);
    let w = desc(dt, lw, lay_w);
    let y = desc(dt, conv.output_desc(&x, &w).unwrap().lens(), lay);
    ConvCase::new(&conv, &x, &w, &y)
}

cuda_tests!(every_case, |h: &Handle| {
    let id = solution_id(SOLVER);
    for (i, spec) in CASES.iter().enumerate() {
        check_exact_and_scaled(h, &case(spec), Dir::BackwardData, id, 500 + i as u64);
    }
});

cuda_tests!(refusals_name_the_cause, |h: &Handle| {
    let s = solver(SOLVER);
    let check = |spec: &Spec, d: Dir| s.check(&case(spec).fused(d), h.device().info()).unwrap_err();
    let stride1 = (DataType::Half, &[2, 64, 8, 8][..], &[64, 64, 3, 3][..], 1, 1, 1, 1, Lay::ChannelsLast, Lay::ChannelsLast);
    let why = check(&stride1, Dir::BackwardData);
    assert!(why.contains("stride 1"), "{why}");
    let why = check(&CASES[0], Dir::Forward);
    assert!(why.contains("backward-data only"), "{why}");
    let depthwise = (DataType::Half, &[2, 64, 8, 8][..], &[64, 1, 3, 3][..], 64, 1, 2, 1, Lay::ChannelsLast, Lay::ChannelsLast);
    let why = check(&depthwise, Dir::BackwardData);
    assert!(why.contains("phase"), "{why}");
});

// (1×1 strided layers go to the cuBLASLt GEMMs first.)
cuda_tests!(chosen_for_a_strided_layer, |h: &Handle| {
    for spec in [&CASES[1], &CASES[2]] {
        let c = case(spec);
        let chosen = conflux::search::choose(h, &c.fused(Dir::BackwardData), conflux::conv::Choice::Auto, 0).unwrap();
        assert_eq!(chosen.name(), SOLVER);
    }
});

// Frameworks capture whole training steps into CUDA graphs. Inside a capture the phases run one
// after another on the handle's stream (the side streams are shared by the device's threads),
// and the 1×1 stride-2 layer's tap-less phases are one memset: the replayed graph gives the
// reference's dx, and so does the same call outside a capture (phases side by side).
cuda_tests!(phases_inside_stream_capture, |h: &Handle| {
    use conflux::conv::api::{Choice, Workspace};
    use conflux::reference::fill::Fill;
    use cudarc::driver::{result as cu, sys};
    let id = solution_id(SOLVER);
    let stream = cu::stream::create(cu::stream::StreamKind::NonBlocking).unwrap();
    h.set_stream(stream as u64).unwrap();
    for spec in [&CASES[0], &CASES[1], &CASES[5]] {
        let c = case(spec);
        let (dy, w) = (random(h, &c.y, Fill::SmallInt(-2, 2), 21), random(h, &c.w, Fill::SmallInt(-2, 2), 22));
        let want = c.reference(Dir::BackwardData, (1.0, 0.0), &dy.host, &w.host, &vec![0.0; c.x.element_space()]);
        let run = |dx: &Dev| c.run(h, Dir::BackwardData, dy.ptr(), w.ptr(), dx.ptr(), (1.0, 0.0), Choice::Solution(id), Workspace::default());
        let direct = poisoned(h, &c.x);
        run(&direct).unwrap();
        h.synchronize().unwrap();
        assert_close(&format!("{c:?} outside a capture"), &logical(&c.x, &download(h, &direct)), &logical(&c.x, &want), 0.0);
        let captured = poisoned(h, &c.x);
        h.synchronize().unwrap();
        // SAFETY: a live stream, captured by this thread only; the graph and its instance are
        // destroyed below. Thread-local mode: this binary's other tests run on other threads,
        // and a global capture forbids their (uncaptured) stream-ordered allocations, which
        // then fail and invalidate this capture.
        unsafe {
            cu::stream::begin_capture(stream, sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL).unwrap();
            let queued = run(&captured);
            let graph = cu::stream::end_capture(stream).unwrap();
            queued.unwrap();
            let exec = cu::graph::instantiate(graph, sys::CUgraphInstantiate_flags(0)).unwrap();
            cu::graph::launch(exec, stream).unwrap();
            h.synchronize().unwrap();
            cu::graph::exec_destroy(exec).unwrap();
            cu::graph::destroy(graph).unwrap();
        }
        assert_close(&format!("{c:?} replayed from a graph"), &logical(&c.x, &download(h, &captured)), &logical(&c.x, &want), 0.0);
    }
    h.set_stream(0).unwrap();
    // SAFETY: made above; nothing is queued on it any more.
    unsafe { cu::stream::destroy(stream).unwrap() };
});
