//! Backward-weights on CUDA cores (tiled GEMM, the pixel reduction split across blocks and
//! summed in a fixed order): every type, 2-D and 3-D, groups and depthwise, stride, padding,
//! dilation, NCHW / NHWC / gapped tensors, α/β, against the f64 reference through the API with
//! the solver forced by id (so the CPU variant checks the refusal), twice with bit-identical
//! results, exact small-integer data bit for bit, and chosen automatically for the f32 problems
//! no tensor-core or few-channels kernel takes (3-D).

mod support;

use conflux::conv::{api, Choice, ConvProblem, Workspace};
use conflux::fusion::FusedProblem;
use conflux::reference::compare::tolerance;
use conflux::solver::cuda::wgrad_simt::CudaConvWgradSimt;
use conflux::solver::Solver;
use conflux::{ConvDesc, ConvMode, DataType, Handle};
use support::wgrad::{label, reference, Case};
use support::*;

const SIMT: &str = "CudaConvBwdWeightsSimt";

/// (dtype, x lengths, w lengths, groups, pad, stride, dilation, layout)
type Spec = (DataType, &'static [usize], &'static [usize], usize, i64, i64, i64, Lay);

const CASES: [Spec; 8] = [
    (DataType::Float, &[2, 64, 9, 8], &[96, 64, 3, 3], 1, 1, 1, 1, Lay::Packed),
    (DataType::Float, &[3, 24, 13, 11], &[40, 24, 1, 1], 1, 0, 1, 1, Lay::ChannelsLast),
    (DataType::Float, &[2, 12, 10, 9], &[18, 4, 3, 3], 3, 2, 2, 2, Lay::Gapped),
    (DataType::Float, &[2, 16, 12, 12], &[16, 1, 3, 3], 16, 1, 1, 1, Lay::ChannelsLast),
    (DataType::Half, &[2, 20, 9, 7], &[30, 20, 3, 2], 1, 1, 2, 1, Lay::Packed),
    (DataType::BFloat16, &[2, 8, 9, 10], &[70, 8, 3, 3], 1, 1, 1, 1, Lay::GappedChannelsLast),
    (DataType::Float, &[1, 6, 5, 6, 7], &[10, 6, 3, 3, 3], 1, 1, 1, 1, Lay::Packed),
    // Long reduction (many splits of the 8·28·28 pixels), 128 × 128 block tiles.
    (DataType::Float, &[8, 32, 28, 28], &[128, 32, 3, 3], 1, 1, 1, 1, Lay::ChannelsLast),
];


fn case(&(dt, lx, lw, groups, pad, stride, dil, lay): &Spec) -> Case {
    let nd = lx.len() - 2;
    let mut conv = ConvDesc::new(ConvMode::Convolution, &vec![pad; nd], &vec![stride; nd], &vec![dil; nd]).unwrap();
    conv.set_groups(groups as i64).unwrap();
    let x = desc(dt, lx, lay);
    let dw = desc(dt, lw, lay);
    let dy = desc(dt, conv.output_desc(&x, &dw).unwrap().lens(), lay);
    Case { conv, x, dw, dy }
}


fn run(h: &Handle, c: &Case, exact: bool, seed: u64, (alpha, beta): (f64, f64), choice: Choice) -> Result<(Vec<f64>, Vec<f64>), conflux::Error> {
    let (dy, x, dw0, want) = reference(h, c, exact, seed, (alpha, beta));
    let dw = if beta == 0.0 { poisoned(h, &c.dw) } else { upload(h, &c.dw, &dw0) };
    api::backward_weights(h, &c.conv, &c.dy, dy.ptr(), &c.x, x.ptr(), &c.dw, dw.ptr(), alpha, beta, choice, Workspace::default())?;
    Ok((download(h, &dw), want))
}

device_tests!(every_geometry_and_type, |h: &Handle| {
    let cuda = h.device_kind() == conflux::handle::DeviceKind::Cuda;
    let id = solution_id(SIMT);
    let how = format!("{SIMT} by id");
    for (i, spec) in CASES.iter().enumerate() {
        let c = case(spec);
        // Exact data only where every sum is an exact value of the type (bf16: |v| ≤ 256).
        let exact = i % 2 == 1 && spec.0 != DataType::BFloat16;
        let ab = if exact { (1.0, -1.0) } else { (0.75, 0.5) };
        let tol = if exact { 0.0 } else { tolerance(spec.0) * 2.0 };
        match run(h, &c, exact, 10 + i as u64, ab, Choice::Solution(id)) {
            Ok((got, want)) => {
                assert!(cuda, "{}: a CUDA solver ran on the CPU", label(&c, &how, h));
                assert_close(&label(&c, &how, h), &logical(&c.dw, &got), &logical(&c.dw, &want), tol);
                assert_gaps_untouched(&label(&c, &how, h), &c.dw, &got);
                // The same inputs again: bit for bit (the split sums are added in a fixed order).
                let (again, _) = run(h, &c, exact, 10 + i as u64, ab, Choice::Solution(id)).unwrap();
                assert!(got.iter().zip(&again).all(|(a, b)| a.to_bits() == b.to_bits()), "{}: rerun differs", label(&c, &how, h));
            }
            // On the CPU the API refuses the CUDA solver's id, naming the device.
            Err(e) => {
                assert!(!cuda, "{}: {e}", label(&c, &how, h));
                assert!(e.reason.contains("another device"), "{}: {e}", label(&c, &how, h));
            }
        }
    }
});

cuda_tests!(chosen_for_f32, |h: &Handle| {
    // A 3-D f32 problem: the tensor-core kernel, its channel-padding adapter and the
    // few-channels kernel take 2-D problems only.
    let c = case(&CASES[6]);
    let fp = FusedProblem::conv(ConvProblem::backward_weights(&c.conv, &c.dy, &c.x, &c.dw).unwrap());
    assert_eq!(conflux::search::choose(h, &fp, Choice::Auto, 0).unwrap().name(), CudaConvWgradSimt.name());
    let (got, want) = run(h, &c, false, 40, (1.0, 0.0), Choice::Auto).unwrap();
    assert_close(&label(&c, "auto", h), &logical(&c.dw, &got), &logical(&c.dw, &want), tolerance(DataType::Float) * 2.0);
});
