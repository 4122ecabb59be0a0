//! Exhaustive Find tunes solvers that have a configuration space and records the winner in
//! the perf-db, which later builds use; a corrupt or foreign perf-db entry is ignored.

mod support;

use conflux::conv::{self, Workspace};
use conflux::fusion::FusedProblem;
use conflux::reference::fill::Fill;
use conflux::search::perf_db;
use conflux::solver::find_by_name;
use conflux::{ConvDesc, ConvMode, ConvProblem, DataType, Handle};
use support::*;

const TC: &str = "CudaConvImplicitGemmTensorCore";
const WGMMA: &str = "CudaConvImplicitGemmWgmma";

device_tests!(perf_db_round_trip_and_rejection, |h: &Handle| {
    isolate_cache();
    let key = format!("tuning-test-{}", std::process::id());
    assert_eq!(perf_db::lookup(h.device(), "SomeSolver", &key), None);
    perf_db::store(h.device(), "SomeSolver", &key, "64x64x64w32x32s4");
    assert_eq!(perf_db::lookup(h.device(), "SomeSolver", &key).as_deref(), Some("64x64x64w32x32s4"));
    // Another solver or problem never sees it.
    assert_eq!(perf_db::lookup(h.device(), "OtherSolver", &key), None);
    assert_eq!(perf_db::lookup(h.device(), "SomeSolver", &format!("{key}-other")), None);
    // Corrupt every file of the perf-db: the entry must read as a miss, then be rewritable.
    let dir = conflux::cache::cache_dir().unwrap().join("perf-db");
    for f in std::fs::read_dir(&dir).unwrap() {
        let p = f.unwrap().path();
        let mut bytes = std::fs::read(&p).unwrap();
        let last = bytes.len() - 2;
        bytes[last] ^= 0x55;
        std::fs::write(&p, bytes).unwrap();
    }
    assert_eq!(perf_db::lookup(h.device(), "SomeSolver", &key), None);
    perf_db::store(h.device(), "SomeSolver", &key, "128x64x64w64x32s3");
    assert_eq!(perf_db::lookup(h.device(), "SomeSolver", &key).as_deref(), Some("128x64x64w64x32s3"));
});

device_tests!(exhaustive_find_tunes_tensor_core_tiles, |h: &Handle| {
    isolate_cache();
    let dt = DataType::Half;
    let conv = ConvDesc::new(ConvMode::Convolution, &[1, 1], &[1, 1], &[1, 1]).unwrap();
    let x = desc(dt, &[2, 16, 9, 9], Lay::ChannelsLast);
    let w = desc(dt, &[24, 16, 3, 3], Lay::ChannelsLast);
    let y = conv.output_desc(&x, &w).unwrap();
    let problem = ConvProblem::forward(&conv, &x, &w, &y).unwrap();
    let fp = FusedProblem::conv(problem.clone());
    let xb = random(h, &x, Fill::SmallInt(-2, 2), 1);
    let wb = random(h, &w, Fill::SmallInt(-2, 2), 2);
    let out = poisoned(h, &y);
    let perfs = conv::find_forward(h, &conv, &x, xb.ptr(), &w, wb.ptr(), &y, out.ptr(), 4, true, Workspace::default()).unwrap();
    assert!(!perfs.is_empty());
    for name in [TC, WGMMA] {
        let tc = find_by_name(name).unwrap();
        let tunable = tc.device() == h.device_kind() && tc.check(&fp, h.device().info()).is_ok();
        let entry = perf_db::lookup(h.device(), name, &fp.key());
        if !tunable {
            // CPU (or no wgmma): nothing to tune, nothing recorded.
            assert_eq!(entry, None, "{name}");
            continue;
        }
        assert!(!tc.tuning_space(&fp).is_empty());
        let label = entry.unwrap_or_else(|| panic!("exhaustive Find records the tuned tile of {name}"));
        assert!(tc.tuning_space(&fp).contains(&label), "{label}");
        // A new handle builds with the recorded tile and still computes the right thing.
        let h2 = fresh(h);
        let inv = h2.invoker(&fp, tc).unwrap();
        let out2 = poisoned(&h2, &y);
        let xb2 = upload(&h2, &x, &xb.host);
        let wb2 = upload(&h2, &w, &wb.host);
        let args = conflux::solver::RunArgs { x: xb2.ptr(), w: wb2.ptr(), y: out2.ptr(), alpha: 1.0, beta: 0.0, workspace: conflux::DevPtr::NULL, workspace_bytes: 0, ops: &[] };
        inv.run(&h2, &args).unwrap();
        assert_eq!(logical(&y, &download(&h2, &out2)), logical(&y, &download(h, &out)), "{name}: tuned invoker on a new handle differs from Find's output");
    }
});
