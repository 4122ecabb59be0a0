//! Find 2.0 on every device: problems found, every solution run against the f64 reference
//! (convolutions in the three directions, a fused convolution + bias + activation, softmax),
//! saved and reloaded solutions giving bit-identical results, and refusals (a damaged or
//! foreign blob, a missing tensor, another device) that write nothing.

mod support;

use conflux::conv::Workspace;
use conflux::find2::{self, arg, FindOptions, Operator, Problem, ProblemDirection, RunTensors, Solution};
use conflux::reference::{self, tolerance, Fill};
use conflux::softmax::{SoftmaxAlgorithm, SoftmaxMode};
use conflux::{ActivationDesc, ActivationMode, ConvDesc, ConvMode, DataType, Handle, Layout, Status, TensorDesc};
use support::*;

fn conv_problem(conv: &ConvDesc, direction: ProblemDirection, x: &TensorDesc, w: &TensorDesc, y: &TensorDesc) -> Problem {
    let mut p = Problem::new(Operator::Conv(conv.clone()), direction).unwrap();
    p.set_tensor(arg::CONV_X, x.clone()).unwrap();
    p.set_tensor(arg::CONV_W, w.clone()).unwrap();
    p.set_tensor(arg::CONV_Y, y.clone()).unwrap();
    p
}

fn tensors(list: &[(u32, &Dev)]) -> RunTensors {
    let mut t = RunTensors::default();
    for (id, d) in list {
        t.tensors.insert(*id, (Some(d.desc.clone()), d.ptr()));
    }
    t
}

/// Run `s` writing `out` (poisoned first) and return what it wrote.
fn run_poisoned(h: &Handle, s: &Solution, inputs: &[(u32, &Dev)], out: (u32, &TensorDesc)) -> Vec<f64> {
    let o = poisoned(h, out.1);
    let mut list = inputs.to_vec();
    list.push((out.0, &o));
    let ws_bytes = s.workspace_bytes;
    let (_ws_buf, ws) = if ws_bytes > 0 { let b = h.alloc(ws_bytes).unwrap(); let p = b.ptr(); (Some(b), Workspace { ptr: p, bytes: ws_bytes }) } else { (None, Workspace::default()) };
    find2::run(h, s, &tensors(&list), ws).unwrap_or_else(|e| panic!("{} ({}): {e}", s.solver, s.solution_id));
    download(h, &o)
}

device_tests!(convolution_solutions_in_every_direction_match_the_reference, |h: &Handle| {
    for dt in [DataType::Float, DataType::Half] {
        let conv = ConvDesc::new(ConvMode::Convolution, &[1, 1], &[2, 2], &[1, 1]).unwrap();
        let x = TensorDesc::with_layout(dt, Layout::NHWC, &[2, 16, 9, 11]).unwrap();
        let w = TensorDesc::with_strides(dt, &[24, 16, 3, 3], &[144, 1, 48, 16]).unwrap();
        let y = conv.output_desc(&x, &w).unwrap();
        let tol = tolerance(dt);
        let (xd, wd, yd) = (random(h, &x, Fill::Uniform(-1.0, 1.0), 1), random(h, &w, Fill::Uniform(-1.0, 1.0), 2), random(h, &y, Fill::Uniform(-1.0, 1.0), 3));

        let fwd = find2::find_solutions(h, &conv_problem(&conv, ProblemDirection::Forward, &x, &w, &y), &FindOptions::default(), 32).unwrap();
        assert!(!fwd.is_empty());
        assert!(fwd.windows(2).all(|p| p[0].time_ms <= p[1].time_ms), "solutions are not fastest first");
        let mut want = vec![0.0; y.element_space()];
        reference::conv_forward(&conv, &x, &xd.host, &w, &wd.host, &y, &mut want).unwrap();
        for s in &fwd {
            let got = run_poisoned(h, s, &[(arg::CONV_X, &xd), (arg::CONV_W, &wd)], (arg::CONV_Y, &y));
            assert_close(&format!("forward {dt:?} {}", s.solver), &logical(&y, &got), &logical(&y, &want), tol);
        }

        let bwd = find2::find_solutions(h, &conv_problem(&conv, ProblemDirection::Backward, &x, &w, &y), &FindOptions::default(), 32).unwrap();
        let mut want = vec![0.0; x.element_space()];
        reference::conv_backward_data(&conv, &y, &yd.host, &w, &wd.host, &x, &mut want).unwrap();
        for s in &bwd {
            let got = run_poisoned(h, s, &[(arg::CONV_Y, &yd), (arg::CONV_W, &wd)], (arg::CONV_X, &x));
            assert_close(&format!("backward-data {dt:?} {}", s.solver), &logical(&x, &got), &logical(&x, &want), tol);
        }

        let wrw = find2::find_solutions(h, &conv_problem(&conv, ProblemDirection::BackwardWeights, &x, &w, &y), &FindOptions::default(), 32).unwrap();
        let mut want = vec![0.0; w.element_space()];
        reference::conv_backward_weights(&conv, &y, &yd.host, &x, &xd.host, &w, &mut want).unwrap();
        for s in &wrw {
            let got = run_poisoned(h, s, &[(arg::CONV_Y, &yd), (arg::CONV_X, &xd)], (arg::CONV_W, &w));
            // Sums over 2·5·6 pixels per weight: allow the reduction's rounding.
            assert_close(&format!("backward-weights {dt:?} {}", s.solver), &logical(&w, &got), &logical(&w, &want), 4.0 * tol);
        }
    }
});

fn fused_problem(conv: &ConvDesc, x: &TensorDesc, w: &TensorDesc, b: &TensorDesc) -> Problem {
    let mut p = Problem::new(Operator::Conv(conv.clone()), ProblemDirection::Forward).unwrap();
    p.set_tensor(arg::CONV_X, x.clone()).unwrap();
    p.set_tensor(arg::CONV_W, w.clone()).unwrap();
    let mut bias = Problem::new(Operator::Bias, ProblemDirection::Forward).unwrap();
    bias.set_tensor(arg::BIAS, b.clone()).unwrap();
    let act = Problem::new(Operator::Activation(ActivationDesc::new(ActivationMode::LeakyRelu, 0.25, 0.0, 0.0)), ProblemDirection::Forward).unwrap();
    p.fuse(&bias);
    p.fuse(&act);
    p
}

device_tests!(a_fused_solution_saved_and_reloaded_runs_identically, |h: &Handle| {
    let conv = ConvDesc::new(ConvMode::Convolution, &[1, 1], &[1, 1], &[1, 1]).unwrap();
    let x = TensorDesc::with_layout(DataType::Half, Layout::NHWC, &[2, 32, 8, 8]).unwrap();
    let w = TensorDesc::with_strides(DataType::Half, &[64, 32, 3, 3], &[288, 1, 96, 32]).unwrap();
    let b = TensorDesc::new(DataType::Half, &[1, 64, 1, 1]).unwrap();
    let problem = fused_problem(&conv, &x, &w, &b);
    let (_, _, out_id, y) = problem.io().unwrap();
    assert_eq!(out_id, arg::ACTIVATION_Y);
    // Small integers: every solver's sums are exact in f16's accumulators.
    let (xd, wd, bd) = (random(h, &x, Fill::SmallInt(-2, 2), 4), random(h, &w, Fill::SmallInt(-2, 2), 5), random(h, &b, Fill::SmallInt(-3, 3), 6));
    let mut want = vec![0.0; y.element_space()];
    let act = ActivationDesc::new(ActivationMode::LeakyRelu, 0.25, 0.0, 0.0);
    reference::conv_bias_act_forward(1.0, &conv, &x, &xd.host, &w, &wd.host, 0.0, None, Some((&b, &bd.host)), &act, &y, &mut want).unwrap();
    let inputs = [(arg::CONV_X, &xd), (arg::CONV_W, &wd), (arg::BIAS, &bd)];
    let found = find2::find_solutions(h, &problem, &FindOptions::default(), 8).unwrap();
    assert!(!found.is_empty());
    for s in &found {
        let got = run_poisoned(h, s, &inputs, (out_id, &y));
        assert_close(&format!("fused {}", s.solver), &logical(&y, &got), &logical(&y, &want), 0.0);
        let blob = find2::save(s);
        let loaded = find2::load(&blob).unwrap();
        assert_eq!((loaded.solver, loaded.solution_id, loaded.workspace_bytes), (s.solver, s.solution_id, s.workspace_bytes));
        assert_eq!(find2::save(&loaded), blob, "a reloaded solution saves to the same blob");
        let again = run_poisoned(h, &loaded, &inputs, (out_id, &y));
        assert_eq!(got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), again.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), "{}: reloaded run differs", s.solver);
    }
});

device_tests!(refusals_name_the_cause_and_write_nothing, |h: &Handle| {
    let conv = ConvDesc::new(ConvMode::Convolution, &[0, 0], &[1, 1], &[1, 1]).unwrap();
    let x = TensorDesc::new(DataType::Float, &[1, 8, 5, 5]).unwrap();
    let w = TensorDesc::new(DataType::Float, &[8, 8, 1, 1]).unwrap();
    let y = conv.output_desc(&x, &w).unwrap();
    let problem = conv_problem(&conv, ProblemDirection::Forward, &x, &w, &y);
    let s = &find2::find_solutions(h, &problem, &FindOptions::default(), 1).unwrap()[0];
    let (xd, wd, yd) = (random(h, &x, Fill::Normal, 7), random(h, &w, Fill::Normal, 8), poisoned(h, &y));
    let untouched = |what: &str| assert_eq!(download(h, &yd).iter().map(|v| v.to_bits()).collect::<Vec<_>>(), yd.host.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), "{what} wrote y");

    let e = find2::run(h, s, &tensors(&[(arg::CONV_X, &xd), (arg::CONV_Y, &yd)]), Workspace::default()).unwrap_err();
    assert!(e.status == Status::BadParm && e.reason.contains("argument 2"), "{e}");
    untouched("a run without w");

    let mut wrong = tensors(&[(arg::CONV_X, &xd), (arg::CONV_W, &wd), (arg::CONV_Y, &yd)]);
    wrong.tensors.get_mut(&arg::CONV_X).unwrap().0 = Some(TensorDesc::new(DataType::Float, &[1, 8, 5, 6]).unwrap());
    let e = find2::run(h, s, &wrong, Workspace::default()).unwrap_err();
    assert!(e.status == Status::BadParm && e.reason.contains("differs from the problem's"), "{e}");
    untouched("a run with another descriptor");

    let blob = String::from_utf8(find2::save(s)).unwrap();
    let foreign = blob.replacen(&format!("device {}", s.device), "device cuda-Some Other GPU-sm_00-1sm", 1);
    let moved = find2::load(foreign.as_bytes()).unwrap();
    let e = find2::run(h, &moved, &tensors(&[(arg::CONV_X, &xd), (arg::CONV_W, &wd), (arg::CONV_Y, &yd)]), Workspace::default()).unwrap_err();
    assert!(e.status == Status::BadParm && e.reason.contains("was found on cuda-Some Other GPU"), "{e}");
    untouched("a solution of another device");

    let old = blob.replacen(&format!("library {}", env!("CARGO_PKG_VERSION")), "library 0.0.1", 1);
    let e = find2::load(old.as_bytes()).err().expect("an old blob loads");
    assert!(e.reason.contains("saved by conflux 0.0.1"), "{e}");
    for damaged in [&blob[..blob.len() / 2], "not a solution", &blob.replace("solver ", "solver NoSuchSolver ")] {
        let e = find2::load(damaged.as_bytes()).err().expect("a damaged blob loads");
        assert_eq!(e.status, Status::BadParm, "{e}");
    }
    let e = find2::load(&blob.as_bytes()[..0]).err().expect("an empty blob loads");
    assert_eq!(e.status, Status::BadParm);
});

device_tests!(softmax_problems_round_trip, |h: &Handle| {
    let x = TensorDesc::new(DataType::Float, &[3, 10, 2, 2]).unwrap();
    let op = Operator::Softmax { algo: SoftmaxAlgorithm::Log, mode: SoftmaxMode::Channel, alpha: 1.0, beta: 0.0 };
    let mut p = Problem::new(op, ProblemDirection::Forward).unwrap();
    p.set_tensor(arg::SOFTMAX_X, x.clone()).unwrap();
    let s = &find2::find_solutions(h, &p, &FindOptions::default(), 4).unwrap()[0];
    let s = find2::load(&find2::save(s)).unwrap();
    let xd = random(h, &x, Fill::Uniform(-3.0, 3.0), 9);
    let got = run_poisoned(h, &s, &[(arg::SOFTMAX_X, &xd)], (arg::SOFTMAX_Y, &x));
    let mut want = vec![0.0; x.element_space()];
    reference::softmax_forward(SoftmaxAlgorithm::Log, SoftmaxMode::Channel, (1.0, 0.0), &x, &xd.host, &x, &mut want).unwrap();
    assert_close("log-softmax solution", &got, &want, tolerance(DataType::Float));
    // Softmax does not fuse.
    let mut fused = conv_problem(&ConvDesc::new(ConvMode::Convolution, &[0, 0], &[1, 1], &[1, 1]).unwrap(), ProblemDirection::Forward, &x, &TensorDesc::new(DataType::Float, &[10, 10, 1, 1]).unwrap(), &x);
    fused.fuse(&p);
    let e = find2::find_solutions(h, &fused, &FindOptions::default(), 4).err().expect("softmax fused");
    assert!(e.status == Status::UnsupportedOp && e.reason.contains("softmax runs alone"), "{e}");
});
