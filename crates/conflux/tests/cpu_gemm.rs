//! The packed CPU GEMM alone, every kernel this machine can run, against an f64 GEMM on odd
//! sizes (edges of every micro-tile and cache block), small blockings that force many K
//! blocks and tasks, k = 0, and exact small-integer data. Row-major A is read in place by the
//! kernels; `packed_a_path` covers A operands that must be packed (and shared B packing).

mod support;

use conflux::backend::cpu::gemm::{available, gemm_with, sgemm_with, Blocking, Dense, DenseSink, Elem};
use conflux::reference::fill::{fill_normal, fill_small_int};
use support::Rng;

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
    let mut r = Rng(11);
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
