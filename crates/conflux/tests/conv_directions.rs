//! Plain convolutions through `conv::api` (forward, backward-data, backward-weights, with
//! tensors in the user's roles, transpose mode included) on every device, against the f64
//! reference: random 2-D/3-D geometries with stride, padding, dilation, groups, depthwise
//! and transpose shapes, packed NCHW / NHWC and gapped layouts, f32/f16/bf16, with
//! α/β blending (β ≠ 0 reads a real old output; β = 0 writes over a NaN-poisoned one).
//! Small-integer f32 data must match exactly (tolerance 0), with the default choice and with
//! every applicable solver by id (`support::check_solver`).

mod support;

use conflux::conv::api::{Choice, Workspace};
use conflux::reference::{compare::tolerance, fill::Fill};
use conflux::{ConvDesc, ConvMode, DataType, Handle, TensorDesc};
use support::*;

/// A convolution as the user states it: x → y through w.
struct Geo {
    conv: ConvDesc,
    x: Vec<usize>,
    w: Vec<usize>,
    y: Vec<usize>,
}

impl std::fmt::Debug for Geo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} x {:?} w {:?} y {:?}", self.conv.key(), self.x, self.w, self.y)
    }
}

/// Random small geometry: 2-D or 3-D (half each), pad 0..2, stride 1..3, dilation 1..2, filter 1..3,
/// groups 1..3, depthwise (C = G) a quarter of the normal ones, transpose a third of the
/// time (with output padding < stride). Shapes whose output size MIOpen would clamp to 1
/// are skipped, so every output element is a real window.
fn random_geo(r: &mut SplitMix64) -> Geo {
    loop {
        let nd = if r.range(0, 1) == 0 { 3 } else { 2 };
        let transpose = r.range(0, 2) == 0;
        let depthwise = !transpose && r.range(0, 3) == 0;
        let (g, cg, kg) = if depthwise {
            (r.range(2, 4), 1, r.range(1, 2))
        } else {
            (r.pick(&[1, 1, 2, 3]), r.range(1, 3), r.range(1, 3))
        };
        let n = r.range(1, 2);
        let (mut pads, mut strides, mut dils, mut ks, mut ins) = (vec![], vec![], vec![], vec![], vec![]);
        for _ in 0..nd {
            pads.push(r.range(0, 2) as i64);
            strides.push(r.range(1, 3) as i64);
            dils.push(r.range(1, 2) as i64);
            ks.push(r.range(1, 3));
            ins.push(if nd == 3 { r.range(2, 4) } else { r.range(3, 8) });
        }
        let mode = if transpose { ConvMode::Transpose } else { ConvMode::Convolution };
        let mut conv = ConvDesc::new(mode, &pads, &strides, &dils).unwrap();
        conv.set_groups(g as i64).unwrap();
        let mut adj = vec![0i64; nd];
        if transpose {
            for i in 0..nd {
                adj[i] = r.range(0, strides[i] as usize - 1) as i64;
            }
            conv.set_out_pads(&adj).unwrap();
        }
        // Unclamped output sizes only.
        let raw_ok = (0..nd).all(|i| {
            let e = dils[i] * (ks[i] as i64 - 1) + 1;
            let inp = ins[i] as i64;
            if transpose {
                strides[i] * (inp - 1) + e - 2 * pads[i] + adj[i] >= 1
            } else {
                inp + 2 * pads[i] - e >= 0
            }
        });
        if !raw_ok {
            continue;
        }
        // Filter K × C/G × k…; a transpose filter is C_in × C_out/G × k… with C_in = K.
        let mut w = vec![kg * g, cg];
        w.extend(&ks);
        let mut x = vec![n, if transpose { kg * g } else { cg * g }];
        x.extend(&ins);
        let probe = |l: &[usize]| TensorDesc::new(DataType::Float, l).unwrap();
        let Ok(y) = conv.output_lens(&probe(&x), &probe(&w)) else { continue };
        if y.iter().product::<usize>() > 1000 || x.iter().product::<usize>() > 1000 {
            continue;
        }
        return Geo { conv, x, w, y };
    }
}

const DIRS: [Dir; 3] = Dir::ALL;

/// One direction of `geo` with descriptors (x, w, y) in user roles through the API's
/// default choice: fill the two inputs, prepare the output (poisoned when β = 0, random old
/// values otherwise), run with the workspace GetWorkSpaceSize asks for, compare with the
/// reference within `tol`. (By id, `support::check_solver` holds each solver to this and
/// more.)
#[allow(clippy::too_many_arguments)]
fn run_auto(h: &Handle, geo: &Geo, (xd, wd, yd): (&TensorDesc, &TensorDesc, &TensorDesc), dir: Dir, (alpha, beta): (f64, f64), fill: Fill, tol: f64, seed: u64) {
    let c = ConvCase::new(&geo.conv, xd, wd, yd);
    let label = format!("{dir:?} α={alpha} β={beta} {geo:?} x {} w {} y {} auto on {}", xd.key(), wd.key(), yd.key(), h.device().name());
    let (ad, bd, od) = c.roles(dir);
    let a = random(h, ad, fill, seed);
    let b = random(h, bd, fill, seed + 1);
    let out = if beta == 0.0 { poisoned(h, od) } else { random(h, od, fill, seed + 2) };
    let want = c.reference(dir, (alpha, beta), &a.host, &b.host, &out.host);
    // Workspace as MIOpen's GetWorkSpaceSize sizes it: the most any applicable solver needs.
    let fp = c.fused(dir);
    let ws_bytes = conflux::search::support_matrix(&fp, h.device().info())
        .iter()
        .filter(|i| i.verdict.is_ok())
        .map(|i| i.solver.workspace_bytes(&fp))
        .max()
        .unwrap_or(0);
    let ws_buf = (ws_bytes > 0).then(|| poisoned(h, &TensorDesc::new(DataType::Float, &[ws_bytes.div_ceil(4)]).unwrap()));
    let ws = ws_buf.as_ref().map(|b| Workspace { ptr: b.ptr(), bytes: ws_bytes }).unwrap_or_default();
    c.run(h, dir, a.ptr(), b.ptr(), out.ptr(), (alpha, beta), Choice::Auto, ws).unwrap_or_else(|e| panic!("{label}: {e}"));
    let got = download(h, &out);
    assert_close(&label, &logical(od, &got), &logical(od, &want), tol);
    // Nothing is written between the described elements, and inputs stay as they were.
    assert_gaps_untouched(&label, od, &got);
    assert_unchanged(&format!("{label}: first input"), h, &a);
    assert_unchanged(&format!("{label}: second input"), h, &b);
}

const LAYS: [Lay; 4] = [Lay::Packed, Lay::ChannelsLast, Lay::Gapped, Lay::GappedChannelsLast];

/// Random layouts: mostly packed NCHW / NHWC for all three tensors alike, sometimes mixed
/// and gapped.
fn layouts(r: &mut SplitMix64) -> [Lay; 3] {
    match r.range(0, 3) {
        0 => [Lay::Packed; 3],
        1 => [Lay::ChannelsLast; 3],
        _ => [r.pick(&LAYS), r.pick(&LAYS), r.pick(&LAYS)],
    }
}

const ALPHA_BETA: [(f64, f64); 4] = [(1.0, 0.0), (0.5, 0.0), (1.0, 0.5), (-1.5, 2.0)];

device_tests!(random_geometries_all_directions, |h: &Handle| {
    let mut rng = SplitMix64::new(2024);
    let mut case = 0u64;
    let (mut transposes, mut grouped, mut three_d) = (0, 0, 0);
    for dt in [DataType::Float, DataType::Half, DataType::BFloat16] {
        for _ in 0..20 {
            let geo = random_geo(&mut rng);
            transposes += (geo.conv.mode() == ConvMode::Transpose) as usize;
            grouped += (geo.conv.groups() > 1) as usize;
            three_d += (geo.x.len() == 5) as usize;
            let [lx, lw, ly] = layouts(&mut rng);
            let (xd, wd, yd) = (desc(dt, &geo.x, lx), desc(dt, &geo.w, lw), desc(dt, &geo.y, ly));
            for (di, dir) in DIRS.into_iter().enumerate() {
                let ab = ALPHA_BETA[(case as usize * 3 + di) % ALPHA_BETA.len()];
                run_auto(h, &geo, (&xd, &wd, &yd), dir, ab, Fill::Normal, tolerance(dt), 100 * case + 10 * di as u64);
            }
            case += 1;
        }
    }
    eprintln!("coverage: {transposes} transpose, {grouped} grouped, {three_d} 3-D of {case}");
    // The generator really produced the interesting kinds.
    assert!(transposes >= 8 && grouped >= 8 && three_d >= 8, "coverage: {transposes} transpose, {grouped} grouped, {three_d} 3-D");
});

device_tests!(hand_picked_geometries, |h: &Handle| {
    // Shapes the random generator may miss: stride larger than the filter, dilation with
    // padding, a depthwise 3×3 with channel multiplier 2, a 1×1 transpose with stride 2 and
    // output padding, an asymmetric 3-D case.
    let mk = |mode, p: &[i64], s: &[i64], d: &[i64], g: i64, adj: Option<&[i64]>, x: &[usize], w: &[usize]| {
        let mut conv = ConvDesc::new(mode, p, s, d).unwrap();
        conv.set_groups(g).unwrap();
        if let Some(a) = adj {
            conv.set_out_pads(a).unwrap();
        }
        let probe = |l: &[usize]| TensorDesc::new(DataType::Float, l).unwrap();
        let y = conv.output_lens(&probe(x), &probe(w)).unwrap();
        Geo { conv, x: x.to_vec(), w: w.to_vec(), y }
    };
    use ConvMode::*;
    let geos = [
        mk(Convolution, &[0, 1], &[3, 2], &[1, 1], 1, None, &[2, 3, 8, 7], &[4, 3, 2, 2]),
        mk(Convolution, &[2, 2], &[1, 1], &[2, 2], 1, None, &[1, 2, 6, 6], &[3, 2, 3, 3]),
        mk(Convolution, &[1, 1], &[1, 1], &[1, 1], 4, None, &[2, 4, 5, 6], &[8, 1, 3, 3]),
        mk(Transpose, &[0, 0], &[2, 2], &[1, 1], 1, Some(&[1, 1]), &[2, 3, 4, 3], &[3, 2, 1, 1]),
        mk(Transpose, &[1, 0], &[2, 1], &[1, 2], 2, Some(&[1, 0]), &[1, 4, 3, 4], &[4, 2, 3, 2]),
        mk(Convolution, &[1, 0, 1], &[2, 1, 1], &[1, 1, 2], 1, None, &[1, 2, 5, 3, 6], &[2, 2, 3, 1, 2]),
    ];
    let mut seed = 7000;
    for dt in [DataType::Float, DataType::Half, DataType::BFloat16] {
        for (gi, geo) in geos.iter().enumerate() {
            let lay = if gi % 2 == 0 { Lay::Packed } else { Lay::ChannelsLast };
            let (xd, wd, yd) = (desc(dt, &geo.x, lay), desc(dt, &geo.w, lay), desc(dt, &geo.y, lay));
            for (di, dir) in DIRS.into_iter().enumerate() {
                let ab = ALPHA_BETA[(gi + di) % ALPHA_BETA.len()];
                run_auto(h, geo, (&xd, &wd, &yd), dir, ab, Fill::Normal, tolerance(dt), seed);
                seed += 10;
            }
        }
    }
});

device_tests!(exact_small_integers_every_solver, |h: &Handle| {
    // Integer data and integer α/β keep every f32 partial sum exact: the results must equal
    // the reference bit for bit, with each applicable solver chosen explicitly and with the
    // default choice.
    let mut rng = SplitMix64::new(77);
    for case in 0..10u64 {
        let geo = random_geo(&mut rng);
        let [lx, lw, ly] = layouts(&mut rng);
        let dt = DataType::Float;
        let (xd, wd, yd) = (desc(dt, &geo.x, lx), desc(dt, &geo.w, lw), desc(dt, &geo.y, ly));
        let c = ConvCase::new(&geo.conv, &xd, &wd, &yd);
        for (di, dir) in DIRS.into_iter().enumerate() {
            let ids = applicable_ids(h, &c.fused(dir));
            assert!(!ids.is_empty(), "no applicable solver for {dir:?} {geo:?}");
            let ab = [(1.0, 0.0), (2.0, 0.0), (1.0, -1.0), (-1.0, 3.0)][(case as usize + di) % 4];
            run_auto(h, &geo, (&xd, &wd, &yd), dir, ab, Fill::SmallInt(-2, 2), 0.0, 500 + 10 * case);
            for id in ids {
                assert!(check_solver(h, &c, dir, id, ab, Fill::SmallInt(-2, 2), 0.0, 500 + 10 * case), "solver {id} is applicable but refused {dir:?} {c:?}");
            }
        }
    }
});

// 3-D convolutions that are 2-D ones over other strides (`problem::fold_3d`) run through the
// folded solver of each backend: immediate mode picks it for the forward, every direction
// matches the f64 reference by id (exact small integers, then α/β data), a fused
// bias + activation plan compiles to it; full 3-D filters and channels-first frames stay off it.
device_tests!(folded_3d_problems, |h: &Handle| {
    let name = if h.device_kind() == conflux::handle::DeviceKind::Cpu { "CpuConvFolded3d" } else { "CudaConvFolded3d" };
    let id = solution_id(name);
    // (type, layout, x, w, pads, strides, groups)
    type Spec = (DataType, Lay, [usize; 5], [usize; 5], [i64; 3], [i64; 3], i64);
    let specs: [Spec; 5] = [
        // Frames as images: 1 × 3 × 3 over channels-last frames, strided, grouped, 1 × 1 × 1.
        (DataType::Half, Lay::ChannelsLast, [2, 16, 3, 6, 7], [24, 16, 1, 3, 3], [0, 1, 1], [1, 2, 1], 1),
        (DataType::Float, Lay::ChannelsLast, [1, 8, 4, 5, 5], [8, 4, 1, 3, 3], [0, 1, 1], [1, 1, 1], 2),
        (DataType::BFloat16, Lay::ChannelsLast, [2, 16, 3, 4, 4], [32, 16, 1, 1, 1], [0, 0, 0], [1, 1, 1], 1),
        // Planes as rows: 3 × 1 × 1 over (D, H·W), both layouts, strided in depth.
        (DataType::Half, Lay::ChannelsLast, [2, 16, 6, 3, 4], [16, 16, 3, 1, 1], [1, 0, 0], [2, 1, 1], 1),
        (DataType::Float, Lay::Packed, [1, 12, 5, 3, 3], [20, 12, 3, 1, 1], [1, 0, 0], [1, 1, 1], 1),
    ];
    for (i, &(dt, lay, x, w, pads, strides, groups)) in specs.iter().enumerate() {
        let mut conv = ConvDesc::new(ConvMode::Convolution, &pads, &strides, &[1, 1, 1]).unwrap();
        conv.set_groups(groups).unwrap();
        let (xd, wd) = (desc(dt, &x, lay), desc(dt, &w, lay));
        let yd = desc(dt, conv.output_desc(&xd, &wd).unwrap().lens(), lay);
        let c = ConvCase::new(&conv, &xd, &wd, &yd);
        let chosen = conflux::search::choose(h, &c.fused(Dir::Forward), Choice::Auto, 0).unwrap();
        assert_eq!(chosen.name(), name, "{c:?}");
        for (di, dir) in DIRS.into_iter().enumerate() {
            check_exact_and_scaled(h, &c, dir, id, 9000 + 100 * i as u64 + 10 * di as u64);
        }
        // conv → bias → leaky ReLU as one plan.
        let b = TensorDesc::new(dt, &[1, yd.c(), 1, 1, 1]).unwrap();
        let fc = support::cba::Case { dt, conv: conv.clone(), x: xd.clone(), w: wd.clone(), y: yd.clone(), b };
        let d = support::cba::data(h, &fc, 9500 + i as u64, true, 1.0, 0.0);
        let mut plan = support::cba::plan_for(&fc);
        plan.compile(h).unwrap();
        assert_eq!(plan.solver_name(), Some(name), "fused {c:?}");
        let y = support::cba::execute(h, &fc, &d, &plan);
        assert_close(&format!("fused {c:?}"), &logical(&yd, &download(h, &y)), &d.want, if dt == DataType::BFloat16 { tolerance(dt) } else { 0.0 });
    }
    let refused = |lay: Lay, w: [usize; 5], pads: [i64; 3]| {
        let conv = ConvDesc::new(ConvMode::Convolution, &pads, &[1, 1, 1], &[1, 1, 1]).unwrap();
        let (xd, wd) = (desc(DataType::Half, &[2, 8, 4, 6, 6], lay), desc(DataType::Half, &w, lay));
        let yd = desc(DataType::Half, conv.output_desc(&xd, &wd).unwrap().lens(), lay);
        solver(name).check(&ConvCase::new(&conv, &xd, &wd, &yd).fused(Dir::Forward), h.device().info()).unwrap_err()
    };
    assert!(refused(Lay::ChannelsLast, [8, 8, 3, 3, 3], [1, 1, 1]).contains("not a 3-D convolution with"));
    assert!(refused(Lay::Packed, [8, 8, 1, 3, 3], [0, 1, 1]).contains("strides do not allow folding"));
});

// A 3-D convolution over one frame whose depth padding makes three output frames (two all
// padding): depth 1 everywhere is not 2-D when the depth is padded. The fuzzer found a 2-D
// solver taking it (`Geom::is_2d`); every applicable solver must match the reference exactly.
device_tests!(padded_depth_over_one_frame, |h: &Handle| {
    let mut conv = ConvDesc::new(ConvMode::Convolution, &[2, 0, 2], &[2, 1, 2], &[1, 2, 1]).unwrap();
    conv.set_groups(3).unwrap();
    for (dt, lay) in [(DataType::Float, Lay::Packed), (DataType::Half, Lay::ChannelsLast)] {
        let (x, w) = (desc(dt, &[2, 3, 1, 2, 1], lay), desc(dt, &[6, 1, 1, 1, 2], lay));
        let y = desc(dt, conv.output_desc(&x, &w).unwrap().lens(), lay);
        assert_eq!(y.lens(), &[2, 6, 3, 2, 2]);
        let c = ConvCase::new(&conv, &x, &w, &y);
        for dir in DIRS {
            for id in applicable_ids(h, &c.fused(dir)) {
                assert!(check_solver(h, &c, dir, id, (1.0, 0.0), Fill::SmallInt(-2, 2), 0.0, 77), "solver {id} {dir:?} {c:?}");
            }
        }
    }
});
