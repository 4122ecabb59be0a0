//! Find, the find-db, immediate mode, `Choice`, workspace rules and bad-input statuses of the
//! convolution API, plus `support::check_solver` on every applicable solver: against the f64
//! reference, rerun with poisoned output and workspace, the same invoker run twice.
//! Shapes are tiny (the CPU convolution is a naive loop); each test uses geometries of its
//! own so find-db entries of different tests never meet.

mod support;

use conflux::conv::api::{Choice, Workspace};
use conflux::conv::{self, find_db, ConvPerf};
use conflux::handle::DeviceKind;
use conflux::reference::{self as r, compare::tolerance, fill::Fill};
use conflux::{Buffer, ConvAlgorithm, ConvDesc, ConvMode, ConvProblem, DataType, DevPtr, Handle, Status, TensorDesc};
use support::conv_case::poisoned_ws;
use support::*;

const F32: DataType = DataType::Float;

const DIRS: [Dir; 3] = Dir::ALL;

/// A convolution as the user states it, with descriptors of one dtype and layout.
type Case = ConvCase;

/// Find as these tests run it: exhaustive for backward-weights only.
#[allow(clippy::too_many_arguments)]
fn find(c: &Case, h: &Handle, d: Dir, a: DevPtr, b: DevPtr, out: DevPtr, count: usize, ws: Workspace) -> conflux::Result<Vec<ConvPerf>> {
    c.find(h, d, a, b, out, count, d == Dir::BackwardWeights, ws)
}

#[allow(clippy::too_many_arguments)]
fn case(mode: ConvMode, pads: &[i64], strides: &[i64], groups: i64, x: &[usize], w: &[usize], dt: DataType, lay: Lay) -> Case {
    let mut conv = ConvDesc::new(mode, pads, strides, &vec![1; pads.len()]).unwrap();
    conv.set_groups(groups).unwrap();
    let probe = |l: &[usize]| TensorDesc::new(F32, l).unwrap();
    let y = conv.output_lens(&probe(x), &probe(w)).unwrap();
    Case { conv, x: desc(dt, x, lay), w: desc(dt, w, lay), y: desc(dt, &y, lay) }
}

/// A plain 2-D 3×3 case whose input size `hw` makes it unique to one test.
fn plain(hw: usize, dt: DataType) -> Case {
    case(ConvMode::Convolution, &[1, 1], &[1, 1], 1, &[1, 2, hw, hw + 1], &[3, 2, 3, 3], dt, Lay::Packed)
}

/// A poisoned workspace as large as any applicable solver needs (GetWorkSpaceSize).
fn full_ws(h: &Handle, c: &Case, d: Dir) -> (Buffer, Workspace) {
    poisoned_ws(h, conv::workspace_size(h, &c.problem(d)).unwrap())
}

/// mode, pads, strides, groups, x lengths, w lengths, layout.
type Geo = (ConvMode, &'static [i64], &'static [i64], i64, &'static [usize], &'static [usize], Lay);

device_tests!(check_solver_every_applicable, |h: &Handle| {
    use ConvMode::*;
    let geos: [Geo; 4] = [
        (Convolution, &[1, 0], &[1, 2], 1, &[2, 3, 5, 6], &[4, 3, 3, 2], Lay::Packed),
        (Convolution, &[1, 1], &[1, 1], 2, &[1, 4, 4, 5], &[4, 2, 3, 3], Lay::ChannelsLast),
        (Transpose, &[0, 1], &[2, 1], 1, &[1, 3, 3, 4], &[3, 2, 2, 3], Lay::Packed),
        (Convolution, &[1, 0, 1], &[1, 1, 2], 1, &[1, 2, 3, 4, 4], &[2, 2, 2, 2, 3], Lay::ChannelsLast),
    ];
    let mut seed = 10;
    let mut checked = 0;
    for (mode, p, s, g, x, w, lay) in geos {
        for (dt, fill, tol) in [
            (F32, Fill::Normal, tolerance(F32)),
            (F32, Fill::SmallInt(-3, 3), 0.0),
            (DataType::Half, Fill::Normal, tolerance(DataType::Half)),
            (DataType::BFloat16, Fill::Normal, tolerance(DataType::BFloat16)),
        ] {
            let c = case(mode, p, s, g, x, w, dt, lay);
            for d in DIRS {
                let ids = applicable_ids(h, &c.fused(d));
                assert!(!ids.is_empty(), "no solver for {d:?} {c:?}");
                for id in ids {
                    assert!(check_solver(h, &c, d, id, (1.0, 0.0), fill, tol, seed), "solver {id} is applicable but refused {d:?} {c:?}");
                    checked += 1;
                    seed += 10;
                }
            }
        }
    }
    assert!(checked >= 48, "only {checked} solver runs");
});

device_tests!(alpha_beta_every_direction, |h: &Handle| {
    // y = α·conv + β·y_old with a real old output, random data per dtype and exact integers.
    let mut seed = 300;
    for (dt, fill, tol) in [
        (F32, Fill::Normal, tolerance(F32)),
        (F32, Fill::SmallInt(-2, 2), 0.0),
        (DataType::Half, Fill::Normal, tolerance(DataType::Half)),
        (DataType::BFloat16, Fill::Normal, tolerance(DataType::BFloat16)),
    ] {
        for lay in [Lay::Packed, Lay::ChannelsLast] {
            let c = case(ConvMode::Convolution, &[1, 0], &[2, 1], 1, &[2, 2, 5, 4], &[3, 2, 3, 2], dt, lay);
            for d in DIRS {
                for ab in [(2.0, -1.0), (-1.0, 3.0), (0.5, 0.0)] {
                    let (ad, bd, od) = c.roles(d);
                    let (a, b) = (random(h, ad, fill, seed), random(h, bd, fill, seed + 1));
                    let out = random(h, od, fill, seed + 2);
                    seed += 10;
                    c.run(h, d, a.ptr(), b.ptr(), out.ptr(), ab, Choice::Auto, Workspace::default()).unwrap();
                    let want = c.reference(d, ab, &a.host, &b.host, &out.host);
                    let got = download(h, &out);
                    assert_close(&format!("{d:?} α,β={ab:?} {c:?}"), &logical(od, &got), &logical(od, &want), tol);
                    // β ≠ 0 really read the old output.
                    if ab.1 != 0.0 {
                        let plain = c.reference(d, (ab.0, 0.0), &a.host, &b.host, &out.host);
                        assert!(r::check(&logical(od, &got), &logical(od, &plain), 1e-3).is_err(), "{d:?}: β was ignored");
                    }
                }
            }
        }
    }
});

device_tests!(find_sorted_unique_and_find_db_read_back, |h: &Handle| {
    for (i, d) in DIRS.into_iter().enumerate() {
        let c = plain(7 + i, F32);
        let (ad, bd, od) = c.roles(d);
        let (a, b) = (random(h, ad, Fill::SmallInt(-2, 2), 40 + i as u64), random(h, bd, Fill::SmallInt(-2, 2), 50 + i as u64));
        let fp = c.fused(d);
        let path = find_db::path(h, &fp).expect("a cache dir");
        let _ = std::fs::remove_file(&path);
        // Before Find: estimates only (negative times).
        let before = conv::solutions(h, &c.problem(d), 16).unwrap();
        assert!(!before.is_empty() && before.iter().all(|s| s.time_ms < 0.0), "{d:?}: {before:?}");
        let out = poisoned(h, od);
        let (_wsb, ws) = full_ws(h, &c, d);
        let perfs = find(&c, h, d, a.ptr(), b.ptr(), out.ptr(), 16, ws).unwrap();
        assert!(!perfs.is_empty());
        for (j, p) in perfs.iter().enumerate() {
            assert!(p.time_ms.is_finite() && p.time_ms >= 0.0, "{d:?}: {p:?}");
            assert!(perfs[..j].iter().all(|q| q.algorithm != p.algorithm), "{d:?}: algorithm twice: {perfs:?}");
            assert!(j == 0 || perfs[j - 1].time_ms <= p.time_ms, "{d:?}: not sorted: {perfs:?}");
            let s = conflux::solver::find_by_id(p.solution_id).unwrap();
            assert_eq!((s.name(), s.algorithm()), (p.solver, p.algorithm));
        }
        // Every algorithm with an applicable solver is reported.
        let mut algos: Vec<ConvAlgorithm> = applicable_ids(h, &fp).iter().map(|&id| conflux::solver::find_by_id(id).unwrap().algorithm()).collect();
        algos.sort();
        algos.dedup();
        assert_eq!(perfs.len(), algos.len(), "{d:?}: {perfs:?}");
        // Find wrote the output: conv(x, w) exactly (small integers).
        let want = c.reference(d, (1.0, 0.0), &a.host, &b.host, &out.host);
        assert_close(&format!("{d:?}: output of Find"), &logical(od, &download(h, &out)), &logical(od, &want), 0.0);
        // request_count truncates.
        let one = find(&c, h, d, a.ptr(), b.ptr(), out.ptr(), 1, Workspace::default()).unwrap();
        assert_eq!(one.len(), 1);
        // The find-db file exists and a new handle orders immediate-mode solutions by it.
        assert!(path.is_file(), "{d:?}: no find-db file at {}", path.display());
        let h2 = fresh(h);
        let sols = conv::solutions(&h2, &c.problem(d), 16).unwrap();
        assert!(sols[0].time_ms > 0.0, "{d:?}: the find-db was not read: {sols:?}");
        let rec = find_db::lookup(&h2, &fp).expect("record read back");
        assert_eq!(sols[0].solution_id, rec.entries[0].solution_id);
        assert!(rec.entries.windows(2).all(|w| w[0].time_ms <= w[1].time_ms));
        assert_eq!(conv::solution_count(&h2, &c.problem(d)).unwrap(), sols.len());
        assert_eq!(conv::solutions(&h2, &c.problem(d), 1).unwrap().len(), 1);
    }
});

type Corrupt = Box<dyn Fn()>;

/// Ways to break a find-db file.
/// `header` is a valid find-db header for `path`'s problem and device.
fn corruptions(path: &std::path::Path, other: &std::path::Path, header: String) -> Vec<(&'static str, Corrupt)> {
    let (p, o) = (path.to_path_buf(), other.to_path_buf());
    let dir = path.parent().unwrap().to_path_buf();
    let name = path.file_name().unwrap().to_str().unwrap().to_string();
    let (p1, p2, p3) = (p.clone(), p.clone(), p.clone());
    vec![
        ("flipped byte", Box::new(move || {
            let mut b = std::fs::read(&p1).unwrap();
            let n = b.len() - 3;
            b[n] ^= 0x20;
            std::fs::write(&p1, b).unwrap();
        })),
        ("truncated", Box::new(move || {
            let b = std::fs::read(&p2).unwrap();
            std::fs::write(&p2, &b[..b.len() / 2]).unwrap();
        })),
        ("another problem's entry", Box::new(move || {
            std::fs::copy(&o, &p3).unwrap();
        })),
        ("valid checksum, unknown solver", Box::new(move || {
            let text = format!("{header}NoSuchSolver 7 1 0.5 0\n");
            conflux::cache::write_entry(&dir, &name, b"CFXFDB01", text.as_bytes()).unwrap();
        })),
        ("garbage", Box::new(move || std::fs::write(&p, b"not a find-db file at all, just some bytes").unwrap())),
    ]
}

device_tests!(corrupt_find_db_is_ignored_and_rewritten, |h: &Handle| {
    let c = plain(12, F32);
    let other = plain(13, F32);
    let d = Dir::Forward;
    let (x, w) = (random(h, &c.x, Fill::SmallInt(-2, 2), 1), random(h, &c.w, Fill::SmallInt(-2, 2), 2));
    let y = poisoned(h, &c.y);
    let (ox, ow, oy) = (random(h, &other.x, Fill::Normal, 3), random(h, &other.w, Fill::Normal, 4), poisoned(h, &other.y));
    find(&other, h, d, ox.ptr(), ow.ptr(), oy.ptr(), 4, Workspace::default()).unwrap();
    let path = find_db::path(h, &c.fused(d)).unwrap();
    let other_path = find_db::path(h, &other.fused(d)).unwrap();
    let header = format!("conflux find-db 1\nversion {}\ndevice {}\nproblem {}\n", env!("CARGO_PKG_VERSION"), h.device().identity(), c.fused(d).key());
    for (what, corrupt) in corruptions(&path, &other_path, header) {
        find(&c, h, d, x.ptr(), w.ptr(), y.ptr(), 4, Workspace::default()).unwrap();
        let good = std::fs::read(&path).unwrap();
        corrupt();
        assert_ne!(std::fs::read(&path).unwrap(), good, "{what}: corruption did nothing");
        // A new handle ignores the file: estimates only, and Auto still computes correctly.
        let h2 = fresh(h);
        assert!(find_db::lookup(&h2, &c.fused(d)).is_none(), "{what}: a corrupt file was trusted");
        let sols = conv::solutions(&h2, &c.problem(d), 8).unwrap();
        assert!(sols.iter().all(|s| s.time_ms < 0.0), "{what}: {sols:?}");
        let y2 = poisoned(&h2, &c.y);
        let (x2, w2) = (upload(&h2, &c.x, &x.host), upload(&h2, &c.w, &w.host));
        c.run(&h2, d, x2.ptr(), w2.ptr(), y2.ptr(), (1.0, 0.0), Choice::Auto, Workspace::default()).unwrap();
        let want = c.reference(d, (1.0, 0.0), &x.host, &w.host, &y2.host);
        assert_close(what, &download(&h2, &y2), &want, 0.0);
        // Find on that handle rewrites the file, which a third handle trusts again.
        find(&c, &h2, d, x2.ptr(), w2.ptr(), y2.ptr(), 4, Workspace::default()).unwrap();
        let h3 = fresh(h);
        assert!(find_db::lookup(&h3, &c.fused(d)).is_some(), "{what}: the file was not rewritten");
        assert!(conv::solutions(&h3, &c.problem(d), 8).unwrap()[0].time_ms > 0.0, "{what}");
    }
});

device_tests!(choice_algorithm_without_find, |h: &Handle| {
    for (i, d) in DIRS.into_iter().enumerate() {
        let c = plain(20 + i, F32);
        let fp = c.fused(d);
        let _ = std::fs::remove_file(find_db::path(h, &fp).unwrap());
        let (ad, bd, od) = c.roles(d);
        let (a, b) = (random(h, ad, Fill::SmallInt(-2, 2), 60), random(h, bd, Fill::SmallInt(-2, 2), 61));
        let algos: Vec<ConvAlgorithm> = applicable_ids(h, &fp).iter().map(|&id| conflux::solver::find_by_id(id).unwrap().algorithm()).collect();
        for algo in ConvAlgorithm::ALL.iter().copied() {
            let out = poisoned(h, od);
            let (_wsb, ws) = full_ws(h, &c, d);
            let res = c.run(h, d, a.ptr(), b.ptr(), out.ptr(), (1.0, 0.0), Choice::Algorithm(algo), ws);
            if algos.contains(&algo) {
                res.unwrap_or_else(|e| panic!("{d:?} {algo:?}: {e}"));
                let want = c.reference(d, (1.0, 0.0), &a.host, &b.host, &out.host);
                assert_close(&format!("{d:?} {algo:?}"), &logical(od, &download(h, &out)), &logical(od, &want), 0.0);
            } else {
                expect_err(&format!("{d:?} {algo:?}"), res, Status::UnsupportedOp, &[&format!("{algo:?}")]);
                assert_unchanged(&format!("{d:?} {algo:?}: output"), h, &out);
            }
        }
        assert!(!algos.is_empty());
    }
});

device_tests!(workspace_rules, |h: &Handle| {
    let c = plain(30, F32);
    for d in DIRS {
        let p = c.problem(d);
        let fp = c.fused(d);
        let infos: Vec<_> = conflux::search::support_matrix(&fp, h.device().info()).into_iter().filter(|i| i.verdict.is_ok()).collect();
        let max = infos.iter().map(|i| i.solver.workspace_bytes(&fp)).max().unwrap();
        assert_eq!(conv::workspace_size(h, &p).unwrap(), max, "{d:?}");
        assert_eq!(conv::solution_count(h, &p).unwrap(), infos.len());
        for i in &infos {
            let id = i.solver.solution_id();
            assert_eq!(conv::solution_workspace(h, &p, id).unwrap(), i.solver.workspace_bytes(&fp));
        }
        // An id no solver has: the literal is the thing tested (MIOpen's BadParm for it).
        expect_err("unknown id", conv::solution_workspace(h, &p, 424_242), Status::BadParm, &["424242"]);
        // The naive convolution of the other device.
        let foreign = solution_id(if h.device_kind() == DeviceKind::Cpu { "CudaConvDirect" } else { "CpuConvNaive" });
        expect_err("foreign id", conv::compile_solution(h, &p, foreign), Status::BadParm, &["another device"]);

        let (ad, bd, od) = c.roles(d);
        let (a, b) = (random(h, ad, Fill::Normal, 70), random(h, bd, Fill::Normal, 71));
        let out = sentinel(h, od, 5.0);
        // A NULL workspace promising bytes is refused, by the run and by Find.
        let bad = Workspace { ptr: DevPtr::NULL, bytes: 256 };
        expect_err("NULL workspace", c.run(h, d, a.ptr(), b.ptr(), out.ptr(), (1.0, 0.0), Choice::Auto, bad), Status::BadParm, &["workspace", "NULL"]);
        expect_err("NULL workspace find", find(&c, h, d, a.ptr(), b.ptr(), out.ptr(), 4, bad), Status::BadParm, &["workspace", "NULL"]);
        assert_unchanged(&format!("{d:?}: output after NULL workspace"), h, &out);
        // Solvers that need workspace: refused with one byte less, skipped by Find.
        let found = find(&c, h, d, a.ptr(), b.ptr(), poisoned(h, od).ptr(), 8, Workspace::default()).unwrap();
        assert!(found.iter().all(|f| f.workspace_bytes == 0), "{d:?}: Find used workspace it was not given: {found:?}");
        for i in infos.iter().filter(|i| i.solver.workspace_bytes(&fp) > 0) {
            let need = i.solver.workspace_bytes(&fp);
            let (_buf, mut ws) = poisoned_ws(h, need);
            ws.bytes = need - 1;
            let res = c.run(h, d, a.ptr(), b.ptr(), out.ptr(), (1.0, 0.0), Choice::Solution(i.solver.solution_id()), ws);
            expect_err("undersized workspace", res, Status::BadParm, &["workspace"]);
            assert_unchanged("output after undersized workspace", h, &out);
        }
    }
});

device_tests!(find_bad_input_leaves_output_untouched, |h: &Handle| {
    let c = plain(31, F32);
    let (x, w) = (random(h, &c.x, Fill::Normal, 80), random(h, &c.w, Fill::Normal, 81));
    let y = sentinel(h, &c.y, 9.0);
    let ws = Workspace::default();
    let conv_d = &c.conv;
    let bp = Status::BadParm;
    let check = |what: &str, r: conflux::Result<Vec<ConvPerf>>, status: Status, needles: &[&str]| {
        expect_err(what, r, status, needles);
        assert_unchanged(what, h, &y);
    };
    check("request 0", conv::find_forward(h, conv_d, &c.x, x.ptr(), &c.w, w.ptr(), &c.y, y.ptr(), 0, false, ws), bp, &["convolution forward", "request count"]);
    check("x NULL", conv::find_forward(h, conv_d, &c.x, DevPtr::NULL, &c.w, w.ptr(), &c.y, y.ptr(), 1, false, ws), bp, &["convolution forward", "x pointer"]);
    let bad_y = desc(F32, &[1, 3, 31, 31], Lay::Packed);
    check("y lengths", conv::find_forward(h, conv_d, &c.x, x.ptr(), &c.w, w.ptr(), &bad_y, y.ptr(), 1, false, ws), bp, &["convolution forward", "y lengths"]);
    let half_w = c.w.with_dtype(DataType::Half).unwrap();
    check("w type", conv::find_forward(h, conv_d, &c.x, x.ptr(), &half_w, w.ptr(), &c.y, y.ptr(), 1, false, ws), bp, &["type"]);
    let dx = sentinel(h, &c.x, 9.0);
    expect_err(
        "dx NULL",
        conv::find_backward_data(h, conv_d, &c.y, y.ptr(), &c.w, w.ptr(), &c.x, DevPtr::NULL, 1, false, ws),
        bp,
        &["convolution backward-data", "dx pointer"],
    );
    expect_err(
        "dw type",
        conv::find_backward_weights(h, conv_d, &c.y, y.ptr(), &c.x, x.ptr(), &half_w, dx.ptr(), 1, false, ws),
        bp,
        &["convolution backward-weights", "type"],
    );
    assert_unchanged("dx", h, &dx);
    // Immediate mode refuses an unsupported element type with NotImplemented.
    let dbl = |t: &TensorDesc| t.with_dtype(DataType::Double).unwrap();
    expect_err("double", ConvProblem::forward(conv_d, &dbl(&c.x), &dbl(&c.w), &dbl(&c.y)), Status::NotImplemented, &["Double"]);
});

device_tests!(compiled_solution_runs_by_id_after_auto_choice, |h: &Handle| {
    // After Find, Auto runs the find-db's fastest solver; before, the first applicable one;
    // both give the reference result, and compile_solution makes the run build nothing.
    let c = plain(32, F32);
    let p = c.problem(Dir::Forward);
    let (x, w) = (random(h, &c.x, Fill::SmallInt(-2, 2), 90), random(h, &c.w, Fill::SmallInt(-2, 2), 91));
    let best = conv::solutions(h, &p, 1).unwrap()[0].clone();
    conv::compile_solution(h, &p, best.solution_id).unwrap();
    let built = h.build_count();
    let y = poisoned(h, &c.y);
    c.run(h, Dir::Forward, x.ptr(), w.ptr(), y.ptr(), (1.0, 0.0), Choice::Solution(best.solution_id), Workspace::default()).unwrap();
    assert_eq!(h.build_count(), built, "compile_solution did not cache the invoker");
    let want = c.reference(Dir::Forward, (1.0, 0.0), &x.host, &w.host, &y.host);
    assert_close("by id", &download(h, &y), &want, 0.0);
    let perfs = find(&c, h, Dir::Forward, x.ptr(), w.ptr(), y.ptr(), 8, Workspace::default()).unwrap();
    let chosen = conflux::search::choose(h, &c.fused(Dir::Forward), Choice::Auto, 0).unwrap();
    assert_eq!(chosen.solution_id(), perfs[0].solution_id, "Auto ignores the find-db");
    for p in &perfs {
        let by_algo = conflux::search::choose(h, &c.fused(Dir::Forward), Choice::Algorithm(p.algorithm), 0).unwrap();
        assert_eq!(by_algo.solution_id(), p.solution_id, "Algorithm({:?}) ignores the find-db", p.algorithm);
    }
});
