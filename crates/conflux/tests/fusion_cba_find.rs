//! `fusion::conv_bias_activation_forward` against the reference (cached plans build nothing
//! on repeated calls; refusals leave y untouched) and Find during `FusionPlan::compile` per
//! find mode (the find-db entry is written, then used by a Fast compile on a new handle).

mod support;

use conflux::conv::api::Workspace;
use conflux::conv::find_db;
use conflux::fusion::conv_bias_activation_forward;
use conflux::reference::{self as r, compare::tolerance, fill::Fill};
use conflux::{
    ActivationDesc, ActivationMode, ConvAlgorithm, ConvDesc, ConvMode, DataType, DevPtr, FindMode, FusionDirection, FusionPlan, Handle, OpArg,
    OpArgs, Status, TensorDesc,
};
use support::*;

const F32: DataType = DataType::Float;

/// The algorithm of the first applicable fused solver of a C+Z+B+A plan.
fn some_algo(h: &Handle, plan: &FusionPlan) -> ConvAlgorithm {
    plan.convolution_algos(h).unwrap()[0]
}

struct Cba {
    conv: ConvDesc,
    x: TensorDesc,
    w: TensorDesc,
    y: TensorDesc,
    b: TensorDesc,
}

fn cba(dt: DataType, lay: Lay, hw: usize) -> Cba {
    let conv = ConvDesc::new(ConvMode::Convolution, &[1, 1], &[1, 1], &[1, 1]).unwrap();
    let (x, w) = (desc(dt, &[2, 3, hw, hw], lay), desc(dt, &[4, 3, 3, 3], lay));
    let y = desc(dt, &conv.output_lens(&x, &w).unwrap(), lay);
    let b = TensorDesc::new(dt, &[1, 4, 1, 1]).unwrap();
    Cba { conv, x, w, y, b }
}

impl Cba {
    fn plan(&self, z: bool) -> FusionPlan {
        let mut p = FusionPlan::new(FusionDirection::Vertical, self.x.clone());
        p.add_conv_forward(&self.conv, &self.w).unwrap();
        if z {
            p.add_tensor_add(&self.y).unwrap();
        }
        p.add_bias(&self.b).unwrap();
        p.add_activation(ActivationMode::Relu).unwrap();
        p
    }
}

device_tests!(conv_bias_activation_matches_reference, |h: &Handle| {
    let mut seed = 1;
    for (dt, fill, tol) in [
        (F32, Fill::Normal, tolerance(F32)),
        (F32, Fill::SmallInt(-2, 2), 0.0),
        (DataType::Half, Fill::Normal, tolerance(DataType::Half)),
        (DataType::BFloat16, Fill::Normal, tolerance(DataType::BFloat16)),
    ] {
        for lay in [Lay::Packed, Lay::ChannelsLast] {
            let c = cba(dt, lay, 5);
            let algo = some_algo(h, &c.plan(true));
            for (act, with_z, (a1, a2)) in [
                (ActivationDesc::relu(), true, (1.0, 1.0)),
                (ActivationDesc::new(ActivationMode::LeakyRelu, 0.25, 0.0, 0.0), true, (2.0, -1.0)),
                (ActivationDesc::relu(), false, (-1.0, 0.0)),
            ] {
                let (x, w) = (random(h, &c.x, fill, seed), random(h, &c.w, fill, seed + 1));
                let (z, b) = (random(h, &c.y, fill, seed + 2), random(h, &c.b, fill, seed + 3));
                seed += 4;
                let zp = if with_z { z.ptr() } else { DevPtr::NULL };
                let call = |y: &Dev| {
                    conv_bias_activation_forward(
                        h, a1, &c.x, x.ptr(), &c.w, w.ptr(), &c.conv, algo, Workspace::default(), a2, &c.y, zp, &c.b, b.ptr(), &act, &c.y, y.ptr(),
                    )
                };
                let y = poisoned(h, &c.y);
                call(&y).unwrap();
                let mut want = vec![0.0; c.y.element_space()];
                let zr = with_z.then_some((&c.y, z.host.as_slice()));
                r::conv_bias_act_forward(a1, &c.conv, &c.x, &x.host, &c.w, &w.host, a2, zr, Some((&c.b, &b.host)), &act, &c.y, &mut want).unwrap();
                let label = format!("CBA {act:?} z={with_z} α1={a1} α2={a2} {} on {}", c.y.key(), h.device().name());
                assert_close(&label, &logical(&c.y, &download(h, &y)), &logical(&c.y, &want), tol);
                // A second call reuses the cached invoker.
                let built = h.build_count();
                let y2 = poisoned(h, &c.y);
                call(&y2).unwrap();
                assert_eq!(h.build_count(), built, "{label}: the second call built again");
                assert_close(&format!("{label} (2nd)"), &logical(&c.y, &download(h, &y2)), &logical(&c.y, &want), tol);
            }
        }
    }
});

device_tests!(conv_bias_activation_refusals_leave_y_untouched, |h: &Handle| {
    let c = cba(F32, Lay::Packed, 4);
    let algo = some_algo(h, &c.plan(true));
    let (x, w, z, b) = (random(h, &c.x, Fill::Normal, 1), random(h, &c.w, Fill::Normal, 2), random(h, &c.y, Fill::Normal, 3), random(h, &c.b, Fill::Normal, 4));
    let y = sentinel(h, &c.y, 3.0);
    let relu = ActivationDesc::relu();
    let ws = Workspace::default();
    let call = |algo: ConvAlgorithm, ws: Workspace, yd: &TensorDesc, bd: &TensorDesc, xp: DevPtr| {
        conv_bias_activation_forward(h, 1.0, &c.x, xp, &c.w, w.ptr(), &c.conv, algo, ws, 1.0, &c.y, z.ptr(), bd, b.ptr(), &relu, yd, y.ptr())
    };
    let name = "convolution bias activation forward";
    let missing = ConvAlgorithm::ALL.iter().copied().find(|a| !c.plan(true).convolution_algos(h).unwrap().contains(a)).unwrap();
    expect_err("algorithm without solver", call(missing, ws, &c.y, &c.b, x.ptr()), Status::UnsupportedOp, &[name, &format!("{missing:?}")]);
    let bad_y = desc(F32, &[2, 4, 4, 5], Lay::Packed);
    expect_err("y descriptor", call(algo, ws, &bad_y, &c.b, x.ptr()), Status::BadParm, &[name]);
    let bad_b = TensorDesc::new(F32, &[1, 3, 1, 1]).unwrap();
    expect_err("bias channels", call(algo, ws, &c.y, &bad_b, x.ptr()), Status::BadParm, &[name, "bias"]);
    expect_err("x NULL", call(algo, ws, &c.y, &c.b, DevPtr::NULL), Status::BadParm, &[name, "input pointer"]);
    expect_err("NULL workspace", call(algo, Workspace { ptr: DevPtr::NULL, bytes: 64 }, &c.y, &c.b, x.ptr()), Status::BadParm, &[name, "workspace"]);
    assert_unchanged("y after refusals", h, &y);
});

device_tests!(compile_finds_per_find_mode, |h: &Handle| {
    for (i, mode) in [FindMode::Normal, FindMode::Hybrid, FindMode::DynamicHybrid, FindMode::Fast].into_iter().enumerate() {
        let c = cba(F32, Lay::Packed, 6 + i);
        let mut plan = c.plan(false);
        let problem = plan.problem().unwrap();
        let path = find_db::path(h, &problem).unwrap();
        let _ = std::fs::remove_file(&path);
        plan.set_find_mode(mode);
        assert_eq!(plan.find_mode(), mode);
        plan.compile(h).unwrap();
        // Every mode but Fast times the solvers when the find-db has no entry.
        assert_eq!(path.is_file(), mode != FindMode::Fast, "{mode:?}: find-db file at {}", path.display());
        let rec = find_db::lookup(h, &problem);
        if mode != FindMode::Fast {
            let rec = rec.expect("record");
            assert_eq!(plan.solver_name(), Some(rec.entries[0].solver), "{mode:?}: compile did not take the fastest solver");
            // A Fast compile on a new handle takes the recorded solver.
            let h2 = fresh(h);
            let mut again = c.plan(false);
            again.set_find_mode(FindMode::Fast);
            again.compile(&h2).unwrap();
            assert_eq!(again.solver_name(), Some(rec.entries[0].solver), "{mode:?}: Fast ignored the find-db");
        }
        // The plan computes the right thing after a compile-time Find.
        let (x, w, b) = (random(h, &c.x, Fill::SmallInt(-2, 2), 10), random(h, &c.w, Fill::SmallInt(-2, 2), 11), random(h, &c.b, Fill::SmallInt(-2, 2), 12));
        let mut args = OpArgs::new();
        args.set(0, OpArg::Conv { w: w.ptr(), alpha: 1.0, beta: 0.0 });
        args.set(1, OpArg::Bias { b: b.ptr() });
        args.set(2, OpArg::Activation { alpha: 0.0, beta: 0.0, gamma: 0.0 });
        let y = poisoned(h, &c.y);
        plan.execute(h, &c.x, x.ptr(), &c.y, y.ptr(), &args).unwrap();
        let mut want = vec![0.0; c.y.element_space()];
        r::conv_bias_act_forward(1.0, &c.conv, &c.x, &x.host, &c.w, &w.host, 0.0, None, Some((&c.b, &b.host)), &ActivationDesc::relu(), &c.y, &mut want).unwrap();
        assert_close(&format!("{mode:?}"), &download(h, &y), &want, 0.0);
    }
});
