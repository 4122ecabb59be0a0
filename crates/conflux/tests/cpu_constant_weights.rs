//! The constant-weights promise (conflux convolution attribute CONSTANT_WEIGHTS) on the CPU
//! solvers that keep a transformed filter per filter address: the 1×1 GEMM, the 1×1 AMX
//! solver (where the CPU has AMX) and Winograd F(4×4), through the convolution API and a fusion plan. New addresses give new
//! results; an address seen before with the same values gives the transform made then; a
//! filter rewritten in place, or another one allocated at a freed address, is seen through
//! the sampled words (`weight_cache.rs`), but an edit between them is not (the promise is the
//! caller's); without the promise every call reads the filter.

mod support;

use conflux::conv::api::{self, Workspace};
use conflux::conv::Choice;
use conflux::fusion::FusedProblem;
use conflux::reference::{self as r, fill::Fill};
use conflux::{ActivationMode, ConvAlgorithm, ConvAttrib, ConvDesc, ConvMode, ConvProblem, DataType, FusionDirection, FusionPlan, Handle, OpArg, OpArgs, TensorDesc};
use support::*;

// The solvers under test, by name (`support::solution_id` finds their ids).
const WINOGRAD4: &str = "CpuConvWinogradF4x3";
const GEMM1X1: &str = "CpuConvGemm1x1";
const AMX1X1: &str = "CpuConvAmx1x1";

struct Case {
    solution: &'static str,
    conv: ConvDesc,
    x: TensorDesc,
    w: TensorDesc,
    y: TensorDesc,
}

fn case(solution: &'static str, x: [usize; 4], w: [usize; 4], pad: i64, constant: bool) -> Case {
    let mut conv = ConvDesc::new(ConvMode::Convolution, &[pad, pad], &[1, 1], &[1, 1]).unwrap();
    conv.set_attribute(ConvAttrib::ConstantWeights, constant as i64).unwrap();
    let x = TensorDesc::new(DataType::Float, &x).unwrap();
    let w = TensorDesc::new(DataType::Float, &w).unwrap();
    let y = TensorDesc::new(DataType::Float, &conv.output_lens(&x, &w).unwrap()).unwrap();
    Case { solution, conv, x, w, y }
}

/// The cases whose solver applies on this machine (the 1×1 solver needs AVX-512).
fn cases(constant: bool) -> Vec<Case> {
    let h = Handle::cpu();
    // 1×1 with 300 input channels (two K blocks) and 70 filters (a partial panel); 1×1 on
    // 272-position images (the positions-in-lanes driver, W packed by row blocks; the AMX
    // solver, 18 tiles of 32 positions, a partial channel step and filter block, and one
    // partial tile against three filter blocks, x split whole first); Winograd
    // with partial last tiles and a partial filter panel.
    [
        case(GEMM1X1, [2, 300, 5, 7], [70, 300, 1, 1], 0, constant),
        case(GEMM1X1, [2, 20, 16, 17], [30, 20, 1, 1], 0, constant),
        case(AMX1X1, [2, 70, 16, 17], [90, 70, 1, 1], 0, constant),
        case(AMX1X1, [1, 64, 5, 6], [70, 64, 1, 1], 0, constant),
        case(WINOGRAD4, [2, 12, 9, 11], [40, 12, 3, 3], 1, constant),
    ]
        .into_iter()
        .filter(|c| {
            let fp = FusedProblem::conv(ConvProblem::forward(&c.conv, &c.x, &c.w, &c.y).unwrap());
            solver(c.solution).check(&fp, h.device().info()).is_ok()
        })
        .collect()
}

fn want(c: &Case, x: &Dev, w: &[f64]) -> Vec<f64> {
    let mut y = vec![0.0; c.y.element_space()];
    r::conv_forward_alpha_beta(1.0, 0.0, &c.conv, &c.x, &x.host, &c.w, w, &c.y, &mut y).unwrap();
    logical(&c.y, &y)
}

/// y through the convolution API with the case's solver, on a NaN-poisoned output.
fn forward(h: &Handle, c: &Case, x: &Dev, w: &Dev) -> Vec<f64> {
    let y = poisoned(h, &c.y);
    let ws = Workspace { ptr: conflux::DevPtr::NULL, bytes: 0 };
    api::forward(h, &c.conv, &c.x, x.ptr(), &c.w, w.ptr(), &c.y, y.ptr(), 1.0, 0.0, Choice::Solution(solution_id(c.solution)), ws).unwrap();
    logical(&c.y, &download(h, &y))
}

#[test]
fn new_addresses_give_new_results_and_known_ones_the_kept_transform() {
    let h = Handle::cpu();
    for c in cases(true) {
        let label = format!("solution {} x {:?}", c.solution, c.x.lens());
        let x = random(&h, &c.x, Fill::SmallInt(-2, 2), 1);
        let w1 = random(&h, &c.w, Fill::SmallInt(-2, 2), 2);
        let w2 = random(&h, &c.w, Fill::SmallInt(-2, 2), 3);
        let (y1, y2) = (want(&c, &x, &w1.host), want(&c, &x, &w2.host));
        assert_ne!(y1, y2, "{label}: the two filters must differ in their results");
        assert_close(&format!("{label}: w1"), &forward(&h, &c, &x, &w1), &y1, 0.0);
        assert_close(&format!("{label}: w2 at another address"), &forward(&h, &c, &x, &w2), &y2, 0.0);
        assert_close(&format!("{label}: w1 again"), &forward(&h, &c, &x, &w1), &y1, 0.0);
        // Rewriting w1's values in place breaks the promise, but the sample sees it.
        let mut w1 = w1;
        h.write(&mut w1.buf, &conflux::element::encode(DataType::Float, &w2.host)).unwrap();
        assert_close(&format!("{label}: w1 rewritten in place"), &forward(&h, &c, &x, &w1), &y2, 0.0);
        // One value changed between the sampled words is not seen: the kept transform of w2's
        // values is used. (Element 1 lies between the first two sampled words here.)
        let mut edited = w2.host.clone();
        edited[1] += 1.0;
        h.write(&mut w1.buf, &conflux::element::encode(DataType::Float, &edited)).unwrap();
        assert_close(&format!("{label}: an unsampled edit"), &forward(&h, &c, &x, &w1), &y2, 0.0);
    }
}

#[test]
fn without_the_promise_every_call_reads_the_filter() {
    let h = Handle::cpu();
    for c in cases(false) {
        let label = format!("solution {}", c.solution);
        let x = random(&h, &c.x, Fill::SmallInt(-2, 2), 4);
        let mut w = random(&h, &c.w, Fill::SmallInt(-2, 2), 5);
        let w2 = random(&h, &c.w, Fill::SmallInt(-2, 2), 6);
        assert_close(&format!("{label}: w"), &forward(&h, &c, &x, &w), &want(&c, &x, &w.host), 0.0);
        h.write(&mut w.buf, &conflux::element::encode(DataType::Float, &w2.host)).unwrap();
        assert_close(&format!("{label}: w rewritten"), &forward(&h, &c, &x, &w), &want(&c, &x, &w2.host), 0.0);
    }
}

#[test]
fn fusion_plan_with_constant_weights() {
    // conv + bias + ReLU restricted to each algorithm: the plan picks the solver that keeps the
    // transform, and a second weight set at another address is seen.
    let h = Handle::cpu();
    for (c, algo) in cases(true).into_iter().map(|c| {
        let algo = if c.solution == WINOGRAD4 { ConvAlgorithm::Winograd } else { ConvAlgorithm::Gemm };
        (c, algo)
    }) {
        let k = c.w.lens()[0];
        let bd = TensorDesc::new(DataType::Float, &[1, k, 1, 1]).unwrap();
        let mut plan = FusionPlan::new(FusionDirection::Vertical, c.x.clone());
        plan.set_algo(algo);
        plan.add_conv_forward(&c.conv, &c.w).unwrap();
        plan.add_bias(&bd).unwrap();
        plan.add_activation(ActivationMode::Relu).unwrap();
        plan.compile(&h).unwrap();
        let name = plan.solver_name().unwrap_or("?").to_string();
        // The AMX solver comes first among the GEMM ones where it applies.
        let fp = FusedProblem::conv(ConvProblem::forward(&c.conv, &c.x, &c.w, &c.y).unwrap());
        let amx = solver(AMX1X1).check(&fp, h.device().info()).is_ok();
        let expected = match c.solution {
            WINOGRAD4 => WINOGRAD4,
            _ if amx => AMX1X1,
            _ => GEMM1X1,
        };
        assert_eq!(name, expected);
        let x = random(&h, &c.x, Fill::Normal, 7);
        let b = random(&h, &bd, Fill::Normal, 8);
        for (i, seed) in [9u64, 10, 9].into_iter().enumerate() {
            // Seeds 9, 10, 9; each set is freed before the next is allocated, so the allocator
            // may hand out one address with other values (the sample sees it).
            let w = random(&h, &c.w, Fill::Normal, seed);
            let y = poisoned(&h, &c.y);
            let mut args = OpArgs::new();
            args.set(0, OpArg::Conv { w: w.ptr(), alpha: 1.0, beta: 0.0 });
            args.set(1, OpArg::Bias { b: b.ptr() });
            args.set(2, OpArg::Activation { alpha: 0.0, beta: 0.0, gamma: 0.0 });
            plan.execute(&h, &c.x, x.ptr(), &c.y, y.ptr(), &args).unwrap();
            let mut conv = vec![0.0; c.y.element_space()];
            r::conv_forward_alpha_beta(1.0, 0.0, &c.conv, &c.x, &x.host, &c.w, &w.host, &c.y, &mut conv).unwrap();
            let plane: usize = c.y.lens()[2..].iter().product();
            let want: Vec<f64> = logical(&c.y, &conv).iter().enumerate().map(|(e, v)| (v + b.host[e / plane % k]).max(0.0)).collect();
            assert_close(&format!("{name} weight set {i}"), &logical(&c.y, &download(&h, &y)), &want, conflux::reference::compare::tolerance(DataType::Float));
        }
    }
}

#[test]
fn winograd_takes_wide_filters_at_small_batches_only_with_the_promise() {
    // 1024×2048 filters for five output tiles: transformed per call it would cost more than
    // it saves, so the solver refuses; with constant weights the transform is made once.
    let h = Handle::cpu();
    for constant in [false, true] {
        let c = case(WINOGRAD4, [1, 2048, 4, 20], [1024, 2048, 3, 3], 1, constant);
        let fp = FusedProblem::conv(ConvProblem::forward(&c.conv, &c.x, &c.w, &c.y).unwrap());
        let verdict = solver(WINOGRAD4).check(&fp, h.device().info());
        match constant {
            false => assert!(verdict.as_ref().is_err_and(|why| why.contains("filter transform")), "{verdict:?}"),
            true => assert!(verdict.is_ok(), "{verdict:?}"),
        }
    }
}

#[test]
fn winograd_f2_takes_layers_of_few_tiles() {
    // One 4×4 output tile: F(4×4) declines whatever the promise, F(2×2) takes it.
    let h = Handle::cpu();
    for constant in [false, true] {
        let c = case(WINOGRAD4, [1, 64, 4, 4], [64, 64, 3, 3], 1, constant);
        let fp = FusedProblem::conv(ConvProblem::forward(&c.conv, &c.x, &c.w, &c.y).unwrap());
        let f4 = solver(WINOGRAD4).check(&fp, h.device().info());
        assert!(f4.as_ref().is_err_and(|why| why.contains("F(2×2) is faster")), "{f4:?}");
        assert!(solver("CpuConvWinogradF2x3").check(&fp, h.device().info()).is_ok());
    }
}
