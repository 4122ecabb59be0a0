//! The channels-last f32 depthwise CPU solver: 3×3 / 5×5 / 7×7 and a 2×3 filter, strides 1–3,
//! padding, dilation, packed and gapped channels-last tensors and (small planes) NCHW ones, every direction through
//! `check_solver` (f64 reference, poisoned output, bit-identical rerun, gaps untouched) with
//! exact and α/β data; immediate choice takes it; fused bias + leaky-ReLU plans (the per-element
//! epilogue) and bias + ReLU plans (the fused store) against the f64 reference.

mod support;

use conflux::reference::compare::tolerance;
use conflux::reference::{activation, bias, conv as rconv, fill::Fill};
use conflux::{ActivationDesc, ActivationMode, ConvDesc, ConvMode, DataType, FusionDirection, FusionPlan, Handle, OpArg, OpArgs, TensorDesc};
use support::cba::{data, execute, plan_for, Case};
use support::*;

const SOLVER: &str = "CpuConvDepthwiseNhwc";
const PLANES: &str = "CpuConvDepthwisePlanes";
const BLOCKS: &str = "CpuConvDepthwiseBlocks";
const FLAT: &str = "CpuConvDepthwiseFlat";

/// (x lengths, filter [r, s], pad, stride, dilation)
type Spec = ([usize; 4], [usize; 2], [i64; 2], [i64; 2], [i64; 2]);

const CASES: [Spec; 9] = [
    ([2, 16, 9, 10], [3, 3], [1, 1], [1, 1], [1, 1]),
    ([2, 24, 12, 11], [3, 3], [1, 1], [2, 2], [1, 1]),
    ([1, 8, 11, 12], [7, 7], [3, 3], [1, 1], [1, 1]),
    ([2, 12, 13, 13], [5, 5], [2, 2], [2, 2], [2, 2]),
    ([1, 5, 10, 9], [2, 3], [0, 1], [3, 1], [1, 1]),
    // Rows of 16 outputs or more: channels-last forward reads x in place (interior outputs four
    // at a time, borders on their own lists); a block of 16 channels plus a remainder.
    ([1, 20, 9, 40], [3, 3], [1, 1], [1, 1], [1, 1]),
    ([1, 18, 7, 37], [5, 5], [2, 2], [2, 2], [1, 1]),
    // ≥ 256 channels: on AVX-512 the forward's register rows over a tap table take wide rows
    // too (16 channel blocks plus a masked remainder of 8; dilation; stride 2).
    ([1, 264, 5, 19], [3, 3], [1, 1], [1, 1], [2, 2]),
    ([1, 256, 9, 20], [5, 5], [2, 2], [2, 2], [1, 1]),
];

fn case(&(lx, [r, s], pad, stride, dil): &Spec, lay: Lay) -> ConvCase {
    let mut conv = ConvDesc::new(ConvMode::Convolution, &pad, &stride, &dil).unwrap();
    conv.set_groups(lx[1] as i64).unwrap();
    let x = desc(DataType::Float, &lx, lay);
    let w = desc(DataType::Float, &[lx[1], 1, r, s], Lay::Packed);
    let y = desc(DataType::Float, conv.output_desc(&x, &w).unwrap().lens(), lay);
    ConvCase::new(&conv, &x, &w, &y)
}

#[test]
fn every_direction() {
    let h = Handle::cpu();
    let id = solution_id(SOLVER);
    for (i, spec) in CASES.iter().enumerate() {
        for lay in [Lay::ChannelsLast, Lay::GappedChannelsLast, Lay::Packed] {
            let c = case(spec, lay);
            for d in [Dir::Forward, Dir::BackwardData, Dir::BackwardWeights] {
                let chosen = conflux::search::choose(&h, &c.fused(d), conflux::conv::Choice::Auto, 0).unwrap();
                // Channels-first forward goes to the plane solver first; the AVX-512 flat and
                // block solvers take forward problems before both where they apply, the flat one
                // channels-first backward-weights too; stride-1 backward-data runs as the forward
                // with reversed taps.
                let want = if lay == Lay::Packed && d == Dir::Forward { PLANES } else { SOLVER };
                let ahead = match d {
                    Dir::Forward => [BLOCKS, FLAT].contains(&chosen.name()),
                    Dir::BackwardData => spec.3 == [1, 1] && chosen.name() == "CpuConvDepthwiseBwdData",
                    Dir::BackwardWeights => lay == Lay::Packed && chosen.name() == FLAT,
                };
                assert!(chosen.name() == want || ahead, "{} for {d:?} {c:?}", chosen.name());
                check_exact_and_scaled(&h, &c, d, id, 5000 + 10 * i as u64);
            }
        }
    }
}

#[test]
fn refusals_name_the_cause() {
    let h = Handle::cpu();
    let s = solver(SOLVER);
    let big_plane = ([1, 8, 40, 40], [3, 3], [1, 1], [1, 1], [1, 1]);
    let why = s.check(&case(&big_plane, Lay::Packed).fused(Dir::Forward), h.device().info()).unwrap_err();
    assert!(why.contains("planar direct"), "{why}");
    let mut conv = ConvDesc::new(ConvMode::Convolution, &[1, 1], &[1, 1], &[1, 1]).unwrap();
    conv.set_groups(4).unwrap();
    let x = desc(DataType::Float, &[1, 8, 6, 6], Lay::ChannelsLast);
    let w = desc(DataType::Float, &[8, 2, 3, 3], Lay::Packed);
    let y = desc(DataType::Float, conv.output_desc(&x, &w).unwrap().lens(), Lay::ChannelsLast);
    let why = s.check(&ConvCase::new(&conv, &x, &w, &y).fused(Dir::Forward), h.device().info()).unwrap_err();
    assert!(why.contains("depthwise"), "{why}");
}

fn cba_case(spec: &Spec, lay: Lay) -> Case {
    let c = case(spec, lay);
    let b = TensorDesc::new(DataType::Float, &[1, c.x.c(), 1, 1]).unwrap();
    Case { dt: DataType::Float, conv: c.conv.clone(), x: c.x.clone(), w: c.w.clone(), y: c.y.clone(), b }
}

#[test]
fn fused_bias_leaky_relu() {
    let h = Handle::cpu();
    for (i, spec) in CASES.iter().enumerate() {
        let c = cba_case(spec, Lay::ChannelsLast);
        for exact in [true, false] {
            let d = data(&h, &c, 60 + i as u64, exact, 1.0, 0.0);
            let mut plan = plan_for(&c);
            plan.compile(&h).unwrap();
            assert_eq!(plan.solver_name(), Some(SOLVER));
            let y = execute(&h, &c, &d, &plan);
            let got = logical(&c.y, &download(&h, &y));
            assert_close(&format!("fused depthwise {i} exact={exact}"), &got, &d.want, if exact { 0.0 } else { tolerance(DataType::Float) });
        }
    }
}

#[test]
fn fused_bias_relu_store() {
    // NCHW y too: rows of ≥ 8 pixels and ≥ 8 channels are stored through 8 × 8 transposes.
    let h = Handle::cpu();
    for (i, (spec, lay)) in CASES.iter().flat_map(|s| [(s, Lay::ChannelsLast), (s, Lay::Packed)]).enumerate() {
        let c = cba_case(spec, lay);
        let fill = Fill::SmallInt(-2, 2);
        let (x, w, b) = (random(&h, &c.x, fill, 70 + i as u64), random(&h, &c.w, fill, 80 + i as u64), random(&h, &c.b, fill, 90 + i as u64));
        let packed = TensorDesc::new(DataType::Float, c.y.lens()).unwrap();
        let mut want = vec![0.0; packed.element_space()];
        rconv::conv_forward(&c.conv, &c.x, &x.host, &c.w, &w.host, &packed, &mut want).unwrap();
        bias::bias_forward(&packed, &mut want, &c.b, &b.host).unwrap();
        let pre = want.clone();
        activation::activation_forward(&ActivationDesc::new(ActivationMode::Relu, 0.0, 0.0, 0.0), &packed, &pre, &packed, &mut want).unwrap();
        let mut plan = FusionPlan::new(FusionDirection::Vertical, c.x.clone());
        plan.add_conv_forward(&c.conv, &c.w).unwrap();
        plan.add_bias(&c.b).unwrap();
        plan.add_activation(ActivationMode::Relu).unwrap();
        // Pinned: the AVX-512 block solver takes some of these first.
        let solver = if lay == Lay::Packed { PLANES } else { SOLVER };
        plan.set_solution(Some(solution_id(solver)));
        plan.compile(&h).unwrap();
        assert_eq!(plan.solver_name(), Some(solver), "{i} {lay:?}");
        let mut args = OpArgs::new();
        args.set(0, OpArg::Conv { w: w.ptr(), alpha: 1.0, beta: 0.0 });
        args.set(1, OpArg::Bias { b: b.ptr() });
        args.set(2, OpArg::Activation { alpha: 0.0, beta: 0.0, gamma: 0.0 });
        let y = poisoned(&h, &c.y);
        plan.execute(&h, &c.x, x.ptr(), &c.y, y.ptr(), &args).unwrap();
        let got = logical(&c.y, &download(&h, &y));
        assert_close(&format!("fused depthwise bias+ReLU {i} {lay:?}"), &got, &want, 0.0);
    }
}
