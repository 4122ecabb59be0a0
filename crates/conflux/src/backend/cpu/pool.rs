//! Handing a CPU call over to rayon's pool.
//!
//! A CPU convolution runs several parallel phases (padding, transforms, GEMM). Started from a
//! thread outside the pool, each phase would be handed to the pool while the caller sleeps,
//! and the workers would go idle between phases: so the whole call is handed over once.
//!
//! The caller then waits. Sleeping on a lock costs a wake-up when the call ends, which on a
//! virtual machine (a halted vCPU woken by an interrupt) is a sizeable share of a short layer.
//! So the job is spawned into the pool and, when this thread's previous call was short, the
//! caller waits by yielding its CPU, parking only once the call has taken longer than `SPIN`;
//! short calls then run as fast as from a caller that is itself a pool thread
//! (`BENCH_LOOP_IN_POOL`).
//!
//! Long calls must not yield-wait: a third runnable thread beside two busy workers slows
//! them down, so after a call longer than `SPIN` the next one parks at once. Measurements of
//! both: bench/results/2026-11-27-history-from-status.md (pool.rs); parking or SCHED_IDLE
//! instead of yielding measured slower (bench/results/2026-11-25-cpu-amx.md).

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long the caller yields before it parks, when its previous call took less than this.
const SPIN: Duration = Duration::from_micros(1000);

thread_local! {
    /// Did this thread's last call end within `SPIN`?
    static LAST_SHORT: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
}

/// Runs `f` on a thread of rayon's pool (directly when already on one) and returns its result;
/// a panic in `f` is resumed on the caller.
pub fn on_pool<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    if rayon::current_thread_index().is_some() {
        return f();
    }
    let done = AtomicBool::new(false);
    let mut out: Option<std::thread::Result<R>> = None;
    {
        let (done, out_ptr, caller) = (&done, SendPtr(&mut out as *mut Option<std::thread::Result<R>>), std::thread::current());
        let job = move || {
            let r = catch_unwind(AssertUnwindSafe(f));
            let out_ptr = out_ptr;
            // SAFETY: the caller reads `out` only after `done` is set below.
            unsafe { *out_ptr.0 = Some(r) };
            done.store(true, Ordering::Release);
            // The caller may have returned by now: only the job's own handle is used.
            caller.unpark();
        };
        let job: Box<dyn FnOnce() + Send + '_> = Box::new(job);
        // SAFETY: the job borrows `done` and `out` from this frame, and this function does not
        // return before the job has set `done`, its last access to them.
        let job: Box<dyn FnOnce() + Send + 'static> = unsafe { std::mem::transmute(job) };
        rayon::spawn(job);
    }
    let start = Instant::now();
    let spin = if LAST_SHORT.get() { SPIN } else { Duration::ZERO };
    while !done.load(Ordering::Acquire) {
        if start.elapsed() < spin {
            std::thread::yield_now();
        } else {
            std::thread::park();
        }
    }
    LAST_SHORT.set(start.elapsed() < SPIN);
    match out.take() {
        Some(Ok(r)) => r,
        Some(Err(panic)) => resume_unwind(panic),
        None => unreachable!("the pool job sets its result before `done`"),
    }
}

/// A raw pointer the job may carry to another thread (the caller keeps the target alive).
struct SendPtr<T>(*mut T);
// SAFETY: see `on_pool`: the target is written once by the job, read by the caller after.
unsafe impl<T: Send> Send for SendPtr<T> {}

#[cfg(test)]
mod tests {
    use super::on_pool;
    use rayon::prelude::*;

    #[test]
    fn runs_on_the_pool_and_returns_the_result() {
        let v: Vec<u64> = (0..1000).collect();
        for _ in 0..200 {
            let (sum, on_worker) = on_pool(|| (v.par_iter().sum::<u64>(), rayon::current_thread_index().is_some()));
            assert_eq!(sum, 499500);
            assert!(on_worker);
        }
        // Long enough to park.
        let slow = on_pool(|| {
            std::thread::sleep(std::time::Duration::from_millis(5));
            7
        });
        assert_eq!(slow, 7);
    }

    #[test]
    fn a_panic_reaches_the_caller() {
        let r = std::panic::catch_unwind(|| on_pool(|| -> u32 { panic!("inside the pool") }));
        let msg = r.unwrap_err();
        assert_eq!(msg.downcast_ref::<&str>(), Some(&"inside the pool"));
    }
}


