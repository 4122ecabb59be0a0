//! Pooling forward and backward on every device against the f64 reference: random 2-D and 3-D
//! geometries (padding, strides), every mode, NCHW / NHWC / gapped strides, f32 / f16 / bf16,
//! saved indices of every type and mode, α/β, poisoned outputs and repeated runs; refused
//! calls leave every output untouched.

mod support;

use conflux::ops::{pooling_backward, pooling_forward, PoolWorkspace};
use conflux::pooling::{IndexMode, IndexType, PoolingDesc, PoolingMode};
use conflux::reference::{self, tolerance};
use conflux::{DataType, DevPtr, Handle, Status, TensorDesc};
use support::*;

/// Small integers: every max is exact, and so is every sum of a window.
fn ints(desc: &TensorDesc, seed: u64) -> Vec<f64> {
    conflux::reference::fill::fill_for(desc, conflux::reference::Fill::SmallInt(-8, 8), seed)
}

struct Case {
    pool: PoolingDesc,
    x: TensorDesc,
    y: TensorDesc,
}

fn random_case(r: &mut SplitMix64, dt: DataType) -> Case {
    let dims = r.range(2, 3);
    let mode = r.pick(PoolingMode::ALL);
    let window: Vec<i64> = (0..dims).map(|_| r.range(1, 4) as i64).collect();
    let pads: Vec<i64> = window.iter().map(|&k| r.range(0, (k as usize - 1).min(2)) as i64).collect();
    let strides: Vec<i64> = (0..dims).map(|_| r.range(1, 3) as i64).collect();
    let mut pool = PoolingDesc::new(mode, &window, &pads, &strides).unwrap();
    pool.index_mode = r.pick(IndexMode::ALL);
    let mut lens = vec![r.range(1, 3), r.pick(&[1, 3, 8, 17])];
    lens.extend((0..dims).map(|i| r.range(window[i] as usize, window[i] as usize + 9)));
    // Image indices of a 3-D volume can exceed 8 bits: take a type that numbers them.
    let positions = if pool.index_mode == IndexMode::Image { lens[2..].iter().product::<usize>() } else { window.iter().product::<i64>() as usize };
    pool.index_type = *IndexType::ALL.iter().filter(|t| (positions as u64) < t.max()).nth(r.range(0, 1)).unwrap_or(&IndexType::U64);
    let lay = r.pick(&[Lay::Packed, Lay::ChannelsLast, Lay::Gapped, Lay::GappedChannelsLast]);
    let x = desc(dt, &lens, lay);
    let y = desc(dt, &pool.output_lens(&x).unwrap(), r.pick(&[lay, Lay::Packed]));
    Case { pool, x, y }
}

fn read_indices(h: &Handle, buf: &conflux::Buffer, t: IndexType, count: usize) -> Vec<u64> {
    h.synchronize().unwrap();
    let b = h.read(buf).unwrap();
    let s = t.size();
    (0..count).map(|i| (0..s).map(|j| (b[i * s + j] as u64) << (8 * j)).sum()).collect()
}

/// Forward with indices, α/β, then backward, each against the reference.
fn check_case(h: &Handle, c: &Case, seed: u64) {
    let what = format!("{:?} k{:?} p{:?} s{:?} {:?}/{:?} x {} y {}", c.pool.mode, c.pool.window, c.pool.pads, c.pool.strides, c.pool.index_mode, c.pool.index_type, c.x.key(), c.y.key());
    let dt = c.x.dtype();
    let x = upload(h, &c.x, &ints(&c.x, seed));
    let y = poisoned(h, &c.y);
    let ws_bytes = c.pool.workspace_bytes(&c.y);
    let mut ws = h.alloc(ws_bytes.max(1)).unwrap();
    h.write(&mut ws, &vec![0xa5; ws_bytes.max(1)]).unwrap();
    let wsa = PoolWorkspace { ptr: ws.ptr(), bytes: ws_bytes };
    pooling_forward(h, &c.pool, (1.0, 0.0), &c.x, x.ptr(), &c.y, y.ptr(), true, wsa).unwrap_or_else(|e| panic!("{what}: {e}"));
    let mut want = y.host.clone();
    let idx = reference::pooling_forward(&c.pool, (1.0, 0.0), &c.x, &x.host, &c.y, &mut want).unwrap();
    let got = download(h, &y);
    assert_gaps_untouched(&what, &c.y, &got);
    // Max is exact; averages divide by window counts that need not be powers of two.
    let tol = if c.pool.mode == PoolingMode::Max { 0.0 } else { tolerance(dt) };
    assert_close(&format!("forward {what}"), &logical(&c.y, &got), &logical(&c.y, &want), tol);
    if c.pool.mode == PoolingMode::Max {
        assert_eq!(read_indices(h, &ws, c.pool.index_type, c.y.element_count()), idx, "indices {what}");
    }

    // α/β over the previous output (a repeated run with other scalars).
    let old = upload(h, &c.y, &got);
    pooling_forward(h, &c.pool, (0.5, -2.0), &c.x, x.ptr(), &c.y, old.ptr(), false, PoolWorkspace { ptr: DevPtr::NULL, bytes: 0 }).unwrap();
    let mut want2 = old.host.clone();
    reference::pooling_forward(&c.pool, (0.5, -2.0), &c.x, &x.host, &c.y, &mut want2).unwrap();
    assert_close(&format!("forward α/β {what}"), &logical(&c.y, &download(h, &old)), &logical(&c.y, &want2), tol.max(tolerance(dt) * 0.1));

    // Backward from the saved indices (dy through y's descriptor, dx through x's).
    let dy = upload(h, &c.y, &ints(&c.y, seed + 1));
    let dx = poisoned(h, &c.x);
    let run_bwd = |ab: (f64, f64), dx: &Dev| pooling_backward(h, &c.pool, ab, &c.y, &c.y, dy.ptr(), &c.x, &c.x, dx.ptr(), ws.ptr());
    run_bwd((1.0, 0.0), &dx).unwrap_or_else(|e| panic!("backward {what}: {e}"));
    let mut want_dx = dx.host.clone();
    reference::pooling_backward(&c.pool, (1.0, 0.0), &c.y, &dy.host, &c.x, &mut want_dx, &idx).unwrap();
    let got_dx = download(h, &dx);
    assert_gaps_untouched(&format!("backward {what}"), &c.x, &got_dx);
    assert_close(&format!("backward {what}"), &logical(&c.x, &got_dx), &logical(&c.x, &want_dx), tol);
    let old_dx = upload(h, &c.x, &got_dx);
    run_bwd((2.0, 0.5), &old_dx).unwrap();
    let mut want_dx2 = old_dx.host.clone();
    reference::pooling_backward(&c.pool, (2.0, 0.5), &c.y, &dy.host, &c.x, &mut want_dx2, &idx).unwrap();
    assert_close(&format!("backward α/β {what}"), &logical(&c.x, &download(h, &old_dx)), &logical(&c.x, &want_dx2), tol.max(tolerance(dt) * 0.1));
}

device_tests!(random_geometries_match_the_reference, |h: &Handle| {
    let mut r = SplitMix64::new(0x9001);
    for i in 0..36 {
        let dt = [DataType::Float, DataType::Half, DataType::BFloat16][i % 3];
        let c = random_case(&mut r, dt);
        check_case(h, &c, 100 + i as u64);
    }
});

device_tests!(common_layers_are_exact_on_integers, |h: &Handle| {
    // ResNet's stem max pool (3×3, pad 1, stride 2) and a global average over 4×4 (a power of
    // two: exact), channels-last and planar.
    for (mode, k, p, s, hw) in [(PoolingMode::Max, 3, 1, 2, 13), (PoolingMode::AverageInclusive, 4, 0, 4, 4), (PoolingMode::Average, 2, 0, 2, 8)] {
        for lay in [Lay::Packed, Lay::ChannelsLast] {
            let pool = PoolingDesc::new(mode, &[k, k], &[p, p], &[s, s]).unwrap();
            let x = desc(DataType::Float, &[2, 16, hw, hw], lay);
            let y = desc(DataType::Float, &pool.output_lens(&x).unwrap(), lay);
            check_case(h, &Case { pool, x, y }, 7);
        }
    }
});

device_tests!(repeated_runs_reuse_one_invoker_and_agree_bit_for_bit, |h: &Handle| {
    let pool = PoolingDesc::new(PoolingMode::Average, &[3, 3], &[1, 1], &[2, 2]).unwrap();
    let x = desc(DataType::Half, &[2, 5, 9, 11], Lay::ChannelsLast);
    let y = desc(DataType::Half, &pool.output_lens(&x).unwrap(), Lay::ChannelsLast);
    let xd = random(h, &x, conflux::reference::Fill::Normal, 3);
    let none = PoolWorkspace { ptr: DevPtr::NULL, bytes: 0 };
    let (a, b) = (poisoned(h, &y), poisoned(h, &y));
    pooling_forward(h, &pool, (1.0, 0.0), &x, xd.ptr(), &y, a.ptr(), false, none).unwrap();
    let built = h.build_count();
    pooling_forward(h, &pool, (1.0, 0.0), &x, xd.ptr(), &y, b.ptr(), false, none).unwrap();
    assert_eq!(h.build_count(), built, "the second call built again");
    let (ga, gb) = (download(h, &a), download(h, &b));
    assert!(ga.iter().zip(&gb).all(|(p, q)| p.to_bits() == q.to_bits()), "reruns differ");
});

device_tests!(refused_calls_leave_outputs_untouched, |h: &Handle| {
    let pool = PoolingDesc::new(PoolingMode::Max, &[2, 2], &[0, 0], &[2, 2]).unwrap();
    let x = desc(DataType::Float, &[1, 2, 16, 16], Lay::Packed);
    let y = desc(DataType::Float, &[1, 2, 8, 8], Lay::Packed);
    let xd = random(h, &x, conflux::reference::Fill::Normal, 1);
    let yd = sentinel(h, &y, 42.0);
    let need = pool.workspace_bytes(&y);
    assert_eq!(need, 128, "one 8-bit index per output");
    let small = sentinel(h, &TensorDesc::new(DataType::Float, &[32]).unwrap(), 7.0);
    let ws = |ptr: DevPtr, bytes: usize| PoolWorkspace { ptr, bytes };
    let fwd = |pool: &PoolingDesc, ydesc: &TensorDesc, w: PoolWorkspace| pooling_forward(h, pool, (1.0, 0.0), &x, xd.ptr(), ydesc, yd.ptr(), true, w);
    expect_err("wrong y lengths", fwd(&pool, &desc(DataType::Float, &[1, 2, 7, 8], Lay::Packed), ws(small.ptr(), 128)), Status::BadParm, &["pooling forward", "[1, 2, 8, 8]"]);
    expect_err("NULL workspace", fwd(&pool, &y, ws(DevPtr::NULL, 0)), Status::BadParm, &["workspace", "NULL"]);
    expect_err("small workspace", fwd(&pool, &y, ws(small.ptr(), need - 1)), Status::BadParm, &["127 bytes", "128"]);
    expect_err("y type", fwd(&pool, &desc(DataType::Half, &[1, 2, 8, 8], Lay::Packed), ws(small.ptr(), need)), Status::BadParm, &["Half"]);
    let mut image = pool.clone();
    image.index_mode = IndexMode::Image;
    expect_err("8-bit image indices of 256 positions", fwd(&image, &y, ws(small.ptr(), need)), Status::BadParm, &["256", "miopenSetPoolingIndexType"]);
    expect_err("unset descriptor", fwd(&PoolingDesc::default(), &y, ws(small.ptr(), need)), Status::BadParm, &["never set"]);
    let three = PoolingDesc::new(PoolingMode::Max, &[2, 2, 2], &[0, 0, 0], &[2, 2, 2]).unwrap();
    expect_err("3-D pooling of 4-D x", fwd(&three, &y, ws(small.ptr(), need)), Status::BadParm, &["5-D"]);
    let dx = sentinel(h, &x, 5.0);
    let bwd = |w: DevPtr, dxd: &TensorDesc| pooling_backward(h, &pool, (1.0, 0.0), &y, &y, yd.ptr(), &x, dxd, dx.ptr(), w);
    expect_err("backward without indices", bwd(DevPtr::NULL, &x), Status::BadParm, &["pooling backward", "workspace is NULL"]);
    expect_err("backward dx lengths", bwd(small.ptr(), &desc(DataType::Float, &[1, 2, 16, 15], Lay::Packed)), Status::BadParm, &["dx lengths"]);
    assert_unchanged("y", h, &yd);
    assert_unchanged("workspace", h, &small);
    assert_unchanged("dx", h, &dx);
});
