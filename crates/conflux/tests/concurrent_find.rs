//! Thread safety of Find (issue 33 item 7): eight threads share one handle, four of them
//! running Find on the same problem and four on problems of their own, at once. Each Find's
//! output (written by the fastest solver) matches the f64 reference; the find-db they wrote
//! concurrently is then read by a fresh handle, whose Find and immediate-mode runs are right.

mod support;

use conflux::conv::api::{self, Choice, Workspace};
use conflux::conv;
use conflux::reference::{conv as rconv, fill::Fill};
use conflux::{ConvDesc, ConvMode, DataType, Handle, TensorDesc};
use support::*;

/// Problem `i`: the shared one for i < 4, else one of its own.
fn problem(i: usize) -> (ConvDesc, TensorDesc, TensorDesc, TensorDesc) {
    let j = if i < 4 { 0 } else { i };
    let conv = ConvDesc::new(ConvMode::Convolution, &[1, 1], &[1, 1], &[1, 1]).unwrap();
    let x = TensorDesc::new(DataType::Float, &[1, 3 + j % 3, 8 + j, 9]).unwrap();
    let w = TensorDesc::new(DataType::Float, &[4 + j % 2, 3 + j % 3, 3, 3]).unwrap();
    let y = conv.output_desc(&x, &w).unwrap();
    (conv, x, w, y)
}

/// Find (or, with `find` false, immediate mode) on problem `i`, checked against the reference.
fn run(h: &Handle, i: usize, seed: u64, find: bool) {
    let (conv_d, x, w, y) = problem(i);
    let (xd, wd) = (random(h, &x, Fill::SmallInt(-2, 2), seed), random(h, &w, Fill::SmallInt(-2, 2), seed + 1));
    let yd = poisoned(h, &y);
    if find {
        let perfs = conv::find_forward(h, &conv_d, &x, xd.ptr(), &w, wd.ptr(), &y, yd.ptr(), 4, false, Workspace::default()).unwrap_or_else(|e| panic!("find {i}: {e}"));
        assert!(!perfs.is_empty(), "find {i}: no algorithm");
    } else {
        api::forward(h, &conv_d, &x, xd.ptr(), &w, wd.ptr(), &y, yd.ptr(), 1.0, 0.0, Choice::Auto, Workspace::default()).unwrap_or_else(|e| panic!("forward {i}: {e}"));
    }
    let mut want = vec![0.0; y.element_space()];
    rconv::conv_forward(&conv_d, &x, &xd.host, &w, &wd.host, &y, &mut want).unwrap();
    assert_close(&format!("problem {i} (find {find}) on {}", h.device().name()), &download(h, &yd), &want, 0.0);
}

device_tests!(finds_on_one_handle_from_eight_threads, |h: &Handle| {
    let h = &fresh(h);
    std::thread::scope(|s| {
        for i in 0..8 {
            s.spawn(move || run(h, i, 10 * i as u64, true));
        }
    });
    // The find-db written by the racing Finds serves a new handle.
    let h2 = fresh(h);
    for i in 0..8 {
        run(&h2, i, 100 + i as u64, true);
        run(&h2, i, 200 + i as u64, false);
    }
});
