//! The few-outputs CUDA kernel (ungrouped, ≤ 8 output channels, any number of input channels:
//! image-producing output layers and the phases of stem backward-data): every type, 2-D and
//! 3-D, 1×1 to 7×7 and 1×7 filters, stride, padding, dilation, channel counts that do not fill
//! a vector, 1 to 8 outputs, NCHW / NHWC / gapped tensors, through `check_solver` (f64
//! reference, poisoned output, bit-identical rerun, gaps untouched) with exact small-integer
//! data and with α/β; misaligned pointers take the element kernel; refusals name the cause.

mod support;

use conflux::{DataType, Handle};
use support::*;

const SOLVER: &str = "CudaConvFewOutputs";

const CASES: [GroupedSpec; 11] = [
    // A super-resolution output layer: 64 channels to RGB, channels-last vectors.
    (DataType::Half, &[2, 64, 12, 13], &[3, 64, 3, 3], 1, 1, 1, 1, Lay::ChannelsLast),
    // Planar (NCHW) tensors take element loads; stride 2.
    (DataType::Float, &[2, 16, 11, 10], &[3, 16, 3, 3], 1, 1, 2, 1, Lay::Packed),
    // 8 outputs (two shared-memory words), dilation 2.
    (DataType::BFloat16, &[1, 32, 13, 12], &[8, 32, 5, 5], 1, 4, 1, 2, Lay::ChannelsLast),
    // 5 outputs, 1×1, gapped channels-last tensors.
    (DataType::Half, &[2, 24, 7, 9], &[5, 24, 1, 1], 1, 0, 1, 1, Lay::GappedChannelsLast),
    // Channels not a multiple of the vector (the last chunk is part padding).
    (DataType::Half, &[2, 12, 9, 9], &[4, 12, 3, 3], 1, 1, 1, 1, Lay::ChannelsLast),
    (DataType::Float, &[1, 6, 8, 9], &[2, 6, 3, 3], 1, 1, 1, 1, Lay::ChannelsLast),
    // One output channel; a 7×7 filter at stride 2 (a narrower column tile).
    (DataType::Float, &[2, 40, 17, 19], &[1, 40, 7, 7], 1, 3, 2, 1, Lay::ChannelsLast),
    // Many chunks per lane: 256 f16 channels.
    (DataType::Half, &[1, 256, 6, 7], &[3, 256, 3, 3], 1, 1, 1, 1, Lay::ChannelsLast),
    // Gapped planar tensors; output narrower than a column tile.
    (DataType::Half, &[2, 16, 5, 3], &[3, 16, 3, 3], 1, 1, 1, 1, Lay::Gapped),
    // A 1×7 filter over a wide row.
    (DataType::BFloat16, &[1, 16, 4, 30], &[3, 16, 1, 7], 1, 0, 1, 1, Lay::ChannelsLast),
    // Stride 4 patches (a ConvNeXt stem's shape with the channel roles swapped).
    (DataType::Half, &[2, 96, 8, 8], &[3, 96, 4, 4], 1, 0, 4, 1, Lay::ChannelsLast),
];

cuda_tests!(every_geometry_and_type, |h: &Handle| {
    let id = solution_id(SOLVER);
    for (i, spec) in CASES.iter().enumerate() {
        check_exact_and_scaled(h, &grouped_case(spec), Dir::Forward, id, 900 + i as u64);
    }
});

cuda_tests!(three_dimensional, |h: &Handle| {
    let id = solution_id(SOLVER);
    let mut conv = conflux::ConvDesc::new(conflux::ConvMode::Convolution, &[1, 1, 1], &[1, 1, 1], &[1, 1, 1]).unwrap();
    conv.set_groups(1).unwrap();
    let x = desc(DataType::Float, &[1, 8, 5, 6, 7], Lay::ChannelsLast);
    let w = desc(DataType::Float, &[2, 8, 3, 3, 3], Lay::ChannelsLast);
    let y = desc(DataType::Float, conv.output_desc(&x, &w).unwrap().lens(), Lay::ChannelsLast);
    check_exact_and_scaled(h, &ConvCase::new(&conv, &x, &w, &y), Dir::Forward, id, 950);
});

cuda_tests!(refusals_name_the_cause, |h: &Handle| {
    let s = solver(SOLVER);
    let check = |spec: &GroupedSpec, d: Dir| s.check(&grouped_case(spec).fused(d), h.device().info()).unwrap_err();
    let wide = (DataType::Half, &[1, 16, 8, 8][..], &[16, 16, 3, 3][..], 1, 1, 1, 1, Lay::ChannelsLast);
    assert!(check(&wide, Dir::Forward).contains("output channels"));
    let grouped = (DataType::Half, &[1, 16, 8, 8][..], &[4, 8, 3, 3][..], 2, 1, 1, 1, Lay::ChannelsLast);
    assert!(check(&grouped, Dir::Forward).contains("grouped"));
    let huge = (DataType::Float, &[1, 2048, 8, 8][..], &[8, 2048, 3, 3][..], 1, 1, 1, 1, Lay::ChannelsLast);
    assert!(check(&huge, Dir::Forward).contains("shared memory"));
    assert!(check(&CASES[0], Dir::BackwardData).contains("forward only"));
});

cuda_tests!(misaligned_pointers_take_the_element_kernel, |h: &Handle| {
    check_misaligned_forward(h, &grouped_case(&CASES[0]), SOLVER);
});
