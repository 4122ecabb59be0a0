//! A deterministic fuzzer of the C API (issue 33): random call sequences on the CPU backend,
//! valid ones with small random shapes and hostile ones (NULLs, undefined enums, zero,
//! negative, huge and overflowing sizes, ranks 1 to 8, mismatched descriptors, too little
//! workspace, fusion ops in any order), int8 and fp8 convolutions among them. Every call must return a status MIOpen defines, in
//! bounded time; a failure writes nothing; a success equals the f64 reference; a request the
//! generator knows to be invalid must fail.
//!
//! CI runs a bounded number of scenarios. A long run:
//!   CONFLUX_FUZZ_SCENARIOS=200000 CONFLUX_FUZZ_SEED=7 \
//!     cargo test --release -p conflux-capi --test fuzz -- --nocapture
//! CONFLUX_FUZZ_TRACE=1 names each scenario on stderr before it runs (to locate an abort).

mod conv;
mod conv_find;
mod fusion_run;
mod harness;
mod layers;
mod pooling;
mod quantized;

use harness::{Rng, Stats};
use std::ptr::null_mut;
use MIOpen::handle::{miopenCreate, miopenDestroy};

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[test]
fn random_c_api_calls_crash_nothing_and_never_succeed_wrongly() {
    std::env::set_var("CONFLUX_DEVICE", "cpu");
    // Find results of this run stay in a scratch cache.
    let cache = std::env::temp_dir().join(format!("conflux-fuzz-cache-{}", std::process::id()));
    std::env::set_var("CONFLUX_CACHE_DIR", &cache);
    let seed = env_or("CONFLUX_FUZZ_SEED", 1);
    let scenarios = env_or("CONFLUX_FUZZ_SCENARIOS", 5000);
    let mut r = Rng::new(seed);
    let mut s = Stats::default();
    let mut h = null_mut();
    assert_eq!(unsafe { miopenCreate(&mut h) }, 0);
    let start = std::time::Instant::now();
    for i in 0..scenarios {
        let which = r.range(0, 11);
        s.context = format!("seed {seed} scenario {i}");
        if harness::tracing() {
            // An abort cannot be caught: the last line names the scenario that caused it.
            eprintln!("{} ({which})", s.context);
        }
        match which {
            0..=3 => conv::convolution(&mut r, &mut s, h),
            4 | 5 => layers::activation(&mut r, &mut s, h),
            6 => layers::softmax(&mut r, &mut s, h),
            7 | 8 => layers::fusion(&mut r, &mut s, h),
            9 => layers::descriptors(&mut r, &mut s),
            10 => quantized::convolution(&mut r, &mut s, h),
            _ => pooling::pooling(&mut r, &mut s, h),
        }
    }
    unsafe { miopenDestroy(h) };
    let _ = std::fs::remove_dir_all(&cache);
    println!(
        "fuzz seed {seed}: {scenarios} scenarios, {} calls in {:.1} s, {} successes, statuses {:?}, {} findings; compared with the reference: {:?}",
        s.calls,
        start.elapsed().as_secs_f64(),
        s.successes,
        s.by_status,
        s.findings.len(),
        s.checked
    );
    assert!(s.findings.is_empty(), "findings:\n{}", s.findings.join("\n"));
}
