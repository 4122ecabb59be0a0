//! Building Find's candidates on several threads before they are timed one at a time. A cold
//! Find on the GPU is almost all kernel compilation (NVRTC, one program per solver or tuning
//! configuration, 200–900 ms each), and the programs are independent, so they compile side by
//! side; timing stays sequential, since kernels timed together would disturb each other.

use super::find::isolated;
use super::session::{invoker, Session, Tuned};
use crate::backend::DeviceKind;
use crate::error::Result;
use crate::problem::FusedProblem;
use crate::solver::{Invoker, Solver};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Whether building on threads pays on this session's device: CUDA builds compile kernels;
/// CPU builds only plan and are over in microseconds.
fn worth_it(s: &dyn Session, jobs: usize) -> bool { jobs > 1 && s.device().kind() == DeviceKind::Cuda }

/// Threads to use for `jobs` builds: one per job, at most one per core.
fn threads_for(jobs: usize) -> usize { std::thread::available_parallelism().map_or(1, |n| n.get()).min(jobs) }

/// `f` over `items` on up to `threads` scoped threads; results in the order of `items`.
fn map_on_threads<T: Sync, R: Send>(items: &[T], threads: usize, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<Option<R>>> = Mutex::new(items.iter().map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                let r = f(item);
                out.lock().unwrap()[i] = Some(r);
            });
        }
    });
    out.into_inner().unwrap().into_iter().map(|r| r.expect("every item was mapped")).collect()
}

/// Build (and cache in the session) the invokers of `solvers` for `problem` in parallel where
/// that pays. Failures are not reported here: the timing loop asks the cache again, builds
/// what is missing and reports its error against the solver.
pub(super) fn invokers(s: &dyn Session, problem: &FusedProblem, solvers: &[&'static dyn Solver]) {
    if !worth_it(s, solvers.len()) {
        return;
    }
    map_on_threads(solvers, threads_for(solvers.len()), |&sv| {
        let _ = isolated(sv.name(), || invoker(s, problem, sv));
    });
}

/// The invokers of each tuning configuration of `solver`, in the order of `configs`: built in
/// parallel where that pays, else one after another.
pub(super) fn configurations(s: &dyn Session, problem: &FusedProblem, solver: &'static dyn Solver, configs: &[String]) -> Vec<Result<Arc<dyn Invoker>>> {
    let build = |config: &String| isolated(solver.name(), || solver.build_config(problem, &Tuned(s.device()), config));
    if !worth_it(s, configs.len()) {
        return configs.iter().map(build).collect();
    }
    map_on_threads(configs, threads_for(configs.len()), build)
}

#[cfg(test)]
mod tests {
    use super::map_on_threads;

    #[test]
    fn results_keep_the_order_of_the_items() {
        let items: Vec<u64> = (0..37).collect();
        for threads in [1, 2, 5, 64] {
            let out = map_on_threads(&items, threads, |&v| v * v);
            assert_eq!(out, items.iter().map(|v| v * v).collect::<Vec<_>>(), "{threads} threads");
        }
        assert!(map_on_threads(&[] as &[u8], 4, |&v| v).is_empty());
    }
}
