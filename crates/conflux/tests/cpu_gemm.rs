//! The packed CPU GEMM alone, every kernel this machine can run, against an f64 GEMM on odd
//! sizes (edges of every micro-tile and cache block), small blockings that force many K
//! blocks and tasks, k = 0, and exact small-integer data. Row-major A is read in place by the
//! kernels; `packed_a_path` covers A operands that must be packed (and shared B packing).
//! Sinks that accept register stores (`Sink::direct`, the row-major `DenseSink` among them)
//! get every tile straight from the kernels; `accumulating_sink_takes_the_block_buffer` and
//! `direct_stores_with_bias_and_relu` cover the block-buffer path and the fused bias + ReLU.

mod support;

use conflux::backend::cpu::gemm::{available, gemm_with, sgemm_with, Blocking, Dense, DenseSink, Direct, Elem, Sink};
use conflux::backend::cpu::clamp::Clamp;
use std::ops::Range;
use conflux::reference::fill::{fill_normal, fill_small_int};
use support::{Pick, SplitMix64};

fn naive(m: usize, n: usize, k: usize, a: &[f32], b: &[f32]) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for p in 0..k {
            let av = a[i * k + p] as f64;
            for j in 0..n {
                c[i * n + j] += av * b[p * n + j] as f64;
            }
        }
    }
    c
}

fn check(m: usize, n: usize, k: usize, blk: Option<Blocking>, exact: bool, seed: u64) {
    let conv = |v: Vec<f64>| v.into_iter().map(|x| x as f32).collect::<Vec<f32>>();
    let (a, b) = if exact {
        (conv(fill_small_int(seed, m * k, -3, 3)), conv(fill_small_int(seed + 1, k * n, -3, 3)))
    } else {
        (conv(fill_normal(seed, m * k)), conv(fill_normal(seed + 1, k * n)))
    };
    let want = naive(m, n, k, &a, &b);
    for kern in available() {
        let mut c = vec![f32::NAN; m * n];
        sgemm_with(&kern, blk, m, n, k, &a, &b, &mut c);
        let got: Vec<f64> = c.iter().map(|&v| v as f64).collect();
        let what = format!("{} {m}x{n}x{k} {blk:?}", kern.name);
        if exact {
            assert_eq!(got, want, "{what}");
        } else {
            let tol = 1e-5 * (k as f64).sqrt().max(1.0);
            support::assert_close(&what, &got, &want, tol);
        }
    }
}

#[test]
fn odd_sizes_against_f64() {
    let mut r = SplitMix64::new(11);
    for case in 0..40u64 {
        let (m, n, k) = (r.range(1, 70), r.range(1, 90), r.range(0, 300));
        check(m, n, k, None, case % 2 == 0, case);
    }
}

#[test]
fn tiny_blocks_many_tasks() {
    // Every K block boundary and task edge, with blocks far below the defaults.
    for kern in available() {
        let blk = Blocking { mc: kern.mr, kc: 7, nc: kern.nr };
        check(2 * kern.mr + 3, 3 * kern.nr + 5, 33, Some(blk), true, 5);
        check(kern.mr - 1, kern.nr + 1, 1, Some(blk), false, 6);
    }
}

#[test]
fn empty_k_gives_zeros() {
    check(5, 9, 0, None, true, 1);
}

#[test]
fn packed_a_path() {
    // A given element by element cannot be read in place: every tile is packed. Small mc
    // gives several M blocks, so B is packed once and shared between tasks.
    for kern in available() {
        for (m, n, k) in [(2 * kern.mr + 3, 2 * kern.nr + 1, 40), (kern.mr * 5, 7, 300)] {
            let a: Vec<f32> = fill_small_int(3, m * k, -3, 3).into_iter().map(|x| x as f32).collect();
            let b: Vec<f32> = fill_small_int(4, k * n, -3, 3).into_iter().map(|x| x as f32).collect();
            let want = naive(m, n, k, &a, &b);
            let av = Elem(|o: usize, p: usize| a[o * k + p]);
            let bv = Dense { data: &b, outer_stride: 1, inner_stride: n };
            let mut c = vec![f32::NAN; m * n];
            // SAFETY: c is m×n row-major and outlives the call.
            let sink = unsafe { DenseSink::new(c.as_mut_ptr(), n, false) };
            gemm_with(&kern, Blocking { mc: kern.mr, kc: 64, nc: 4 * kern.nr }, m, n, k, &av, &bv, &sink);
            let got: Vec<f64> = c.iter().map(|&v| v as f64).collect();
            assert_eq!(got, want, "{} {m}x{n}x{k}", kern.name);
        }
    }
}

#[test]
fn accumulating_sink_takes_the_block_buffer() {
    // C += A·B declines register stores: every block goes through the f32 block buffer.
    for kern in available() {
        let (m, n, k) = (2 * kern.mr + 1, 3 * kern.nr + 2, 70);
        let a: Vec<f32> = fill_small_int(7, m * k, -3, 3).into_iter().map(|x| x as f32).collect();
        let b: Vec<f32> = fill_small_int(8, k * n, -3, 3).into_iter().map(|x| x as f32).collect();
        let mut c: Vec<f32> = fill_small_int(9, m * n, -5, 5).into_iter().map(|x| x as f32).collect();
        let want: Vec<f64> = naive(m, n, k, &a, &b).iter().zip(&c).map(|(p, &c0)| p + c0 as f64).collect();
        let av = Dense { data: &a, outer_stride: k, inner_stride: 1 };
        let bv = Dense { data: &b, outer_stride: 1, inner_stride: n };
        // SAFETY: c is m×n row-major and outlives the call.
        let sink = unsafe { DenseSink::new(c.as_mut_ptr(), n, true) };
        assert!(sink.direct(0..m, 0..n).is_none());
        gemm_with(&kern, Blocking { mc: kern.mr, kc: 32, nc: kern.nr }, m, n, k, &av, &bv, &sink);
        let got: Vec<f64> = c.iter().map(|&v| v as f64).collect();
        assert_eq!(got, want, "{}", kern.name);
    }
}

/// A destination with a gap after each row, a per-row bias and an optional ReLU, written only
/// through register stores (`store` must never be called).
struct BiasReluSink {
    ptr: *mut f32,
    ld: usize,
    bias: Vec<f32>,
    relu: Clamp,
}

// SAFETY: the GEMM gives disjoint blocks to its tasks.
unsafe impl Sync for BiasReluSink {}

impl Sink for BiasReluSink {
    fn store(&self, _rows: Range<usize>, _cols: Range<usize>, _c: &mut [f32], _ld: usize) {
        panic!("BiasReluSink accepts register stores only");
    }
    fn direct(&self, rows: Range<usize>, cols: Range<usize>) -> Option<Direct> {
        // SAFETY (pointer arithmetic): inside the destination.
        Some(Direct { ptr: unsafe { self.ptr.add(rows.start * self.ld + cols.start) }, ld: self.ld, bias: self.bias[rows.start..].as_ptr(), relu: self.relu })
    }
}

#[test]
fn direct_stores_with_bias_and_relu() {
    // Partial tiles in both directions, several K blocks (the last one adds the block
    // buffer's partial sum before the bias), A in place and packed; exact small integers.
    for kern in available() {
        for (m, n, k, relu, packed_a) in [
            (2 * kern.mr + 5, 2 * kern.nr + 3, 100, Clamp::RELU, false),
            (kern.mr - 1, kern.nr + 7, 9, Clamp::NONE, true),
            (3 * kern.mr, 5, 300, Clamp::RELU, true),
            // ReLU6 (CLIPPEDRELU α = 6) on the same register stores.
            (2 * kern.mr + 1, kern.nr + 5, 60, Clamp { on: true, hi: 6.0 }, false),
        ] {
            let a: Vec<f32> = fill_small_int(20, m * k, -3, 3).into_iter().map(|x| x as f32).collect();
            let b: Vec<f32> = fill_small_int(21, k * n, -3, 3).into_iter().map(|x| x as f32).collect();
            let bias: Vec<f32> = fill_small_int(22, m, -40, 40).into_iter().map(|x| x as f32).collect();
            let ld = n + 3;
            let mut c = vec![f32::NAN; m * ld];
            let sink = BiasReluSink { ptr: c.as_mut_ptr(), ld, bias: bias.clone(), relu };
            let bv = Dense { data: &b, outer_stride: 1, inner_stride: n };
            let blk = Blocking { mc: 2 * kern.mr, kc: 40, nc: 2 * kern.nr };
            if packed_a {
                gemm_with(&kern, blk, m, n, k, &Elem(|o: usize, p: usize| a[o * k + p]), &bv, &sink);
            } else {
                gemm_with(&kern, blk, m, n, k, &Dense { data: &a, outer_stride: k, inner_stride: 1 }, &bv, &sink);
            }
            let want = naive(m, n, k, &a, &b);
            let what = format!("{} {m}x{n}x{k} relu {relu:?} packed A {packed_a}", kern.name);
            for i in 0..m {
                for j in 0..ld {
                    let got = c[i * ld + j];
                    if j >= n {
                        assert!(got.is_nan(), "{what}: gap ({i}, {j}) written");
                        continue;
                    }
                    let v = want[i * n + j] + bias[i] as f64;
                    let v = if relu.on { v.max(0.0).min(relu.hi as f64) } else { v };
                    assert_eq!(got as f64, v, "{what}: ({i}, {j})");
                }
            }
        }
    }
}

#[test]
fn prefetching_kernel_matches_the_plain_one() {
    // `Kernel::fb` only adds prefetches: the same tile, bit for bit, from zero and accumulating.
    for kern in available() {
        let kc = 37;
        let a: Vec<f32> = (0..kc * kern.mr).map(|i| ((i * 7 % 11) as f32 - 5.0) * 0.25).collect();
        let b: Vec<f32> = (0..kc * kern.nr).map(|i| ((i * 5 % 13) as f32 - 6.0) * 0.5).collect();
        for accumulate in [false, true] {
            let start: Vec<f32> = (0..kern.mr * kern.nr).map(|i| i as f32).collect();
            let (mut c, mut cb) = (start.clone(), start);
            // SAFETY: panels of kc·mr and kc·nr values, an mr×nr tile with row stride nr.
            unsafe {
                (kern.f)(kc, a.as_ptr(), b.as_ptr(), c.as_mut_ptr(), kern.nr, accumulate);
                (kern.fb)(kc, a.as_ptr(), b.as_ptr(), cb.as_mut_ptr(), kern.nr, accumulate);
            }
            assert_eq!(c, cb, "{} accumulate {accumulate}", kern.name);
            assert!(c.iter().any(|v| *v != 0.0));
        }
    }
}
