//! The on-disk cache under stress (issue 33 item 5): worker processes (this test binary run
//! again with `CONFLUX_CACHE_WORKER` set) run Find, tuning and fusion compiles on one cache
//! directory at once, some are SIGKILLed at random moments, and between rounds the records
//! are truncated, bit-flipped, swapped with each other or replaced by a directory. Every worker
//! that is not killed must compute right answers; a clean worker's records must then be read
//! by the next process; an unusable cache directory must only turn the cache off.
//!
//! CI runs a few rounds; a long run: `CONFLUX_CACHE_STRESS_ROUNDS=200 cargo test --release -p
//! conflux --test cache_stress -- --nocapture`.

mod support;

use conflux::conv::{self, Workspace};
use conflux::reference::{conv as rconv, fill::Fill, SplitMix64};
use conflux::{ConvDesc, ConvMode, DataType, Handle, TensorDesc};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use support::*;

const WORKER_ENV: &str = "CONFLUX_CACHE_WORKER";

/// Problem `i` of a small fixed set, so that workers write and read the same records.
fn problem(i: usize) -> (ConvDesc, TensorDesc, TensorDesc, TensorDesc) {
    let conv = ConvDesc::new(ConvMode::Convolution, &[1, 1], &[1 + (i % 2) as i64, 1], &[1, 1]).unwrap();
    let x = TensorDesc::new(DataType::Float, &[1, 4 + i % 3, 9, 7 + i]).unwrap();
    let w = TensorDesc::new(DataType::Float, &[5, 4 + i % 3, 3, 3]).unwrap();
    let y = conv.output_desc(&x, &w).unwrap();
    (conv, x, w, y)
}

/// Find on problem `i` (exhaustively, which tunes and writes the perf-db, when `tune`), its
/// output checked against the reference.
fn find_and_check(h: &Handle, i: usize, tune: bool) {
    let (c, x, w, y) = problem(i);
    let (xd, wd) = (random(h, &x, Fill::SmallInt(-2, 2), i as u64), random(h, &w, Fill::SmallInt(-2, 2), 99 + i as u64));
    let yd = poisoned(h, &y);
    conv::find_forward(h, &c, &x, xd.ptr(), &w, wd.ptr(), &y, yd.ptr(), 4, tune, Workspace::default()).unwrap_or_else(|e| panic!("find {i}: {e}"));
    let mut want = vec![0.0; y.element_space()];
    rconv::conv_forward(&c, &x, &xd.host, &w, &wd.host, &y, &mut want).unwrap();
    assert_close(&format!("worker {} problem {i}", std::process::id()), &download(h, &yd), &want, 0.0);
}

/// The worker's body: runs only in a child process (the parent test sets the variable).
#[test]
fn worker() {
    let Ok(seed) = std::env::var(WORKER_ENV) else { return };
    let h = Handle::new().expect("a handle");
    let seed: u64 = seed.parse().unwrap();
    // Problem seed % 4 always runs (the parent checks that the clean worker's record persists).
    find_and_check(&h, seed as usize % 4, false);
    let mut r = SplitMix64::new(seed);
    for _ in 0..5 {
        let i = (r.next_u64() % 4) as usize;
        find_and_check(&h, i, r.next_u64() % 4 == 0);
    }
}

fn spawn(dir: &Path, device: &str, seed: u64) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "worker", "--test-threads=1", "--nocapture"])
        .env(WORKER_ENV, seed.to_string())
        .env("CONFLUX_CACHE_DIR", dir)
        .env("CONFLUX_DEVICE", device)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn a worker")
}

fn finish(child: Child, what: &str) {
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{what} failed ({}):\n{}", out.status, String::from_utf8_lossy(&out.stderr));
}

/// Every regular file under `dir` (records and temporaries).
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return out };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// Damage one record in one of several ways.
fn damage(r: &mut SplitMix64, all: &[PathBuf]) {
    if all.is_empty() {
        return;
    }
    let f = &all[(r.next_u64() % all.len() as u64) as usize];
    let Ok(mut data) = std::fs::read(f) else { return };
    match r.next_u64() % 5 {
        0 => data.truncate(data.len() / 2),
        1 if !data.is_empty() => {
            let i = (r.next_u64() % data.len() as u64) as usize;
            data[i] ^= 1 << (r.next_u64() % 8);
        }
        2 => {
            // Another record's bytes under this name (a valid checksum, the wrong problem).
            let other = &all[(r.next_u64() % all.len() as u64) as usize];
            data = std::fs::read(other).unwrap_or_default();
        }
        3 => {
            let _ = std::fs::remove_file(f);
            let _ = std::fs::create_dir(f);
            return;
        }
        _ => data = b"garbage".to_vec(),
    }
    let _ = std::fs::write(f, data);
}

fn stress(device: &str) {
    let rounds: u64 = std::env::var("CONFLUX_CACHE_STRESS_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(4);
    let dir = std::env::temp_dir().join(format!("conflux-cache-stress-{device}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut r = SplitMix64::new(0xcac4e);
    let mut killed = 0;
    for round in 0..rounds {
        let mut workers: Vec<(Child, bool)> = (0..4).map(|k| (spawn(&dir, device, round * 10 + k), false)).collect();
        std::thread::sleep(Duration::from_millis(r.next_u64() % 300));
        for (w, kill) in workers.iter_mut() {
            if r.next_u64() % 3 == 0 {
                let _ = w.kill();
                *kill = true;
                killed += 1;
            }
        }
        for (i, (w, was_killed)) in workers.into_iter().enumerate() {
            if was_killed {
                let _ = w.wait_with_output();
            } else {
                finish(w, &format!("round {round} worker {i}"));
            }
        }
        for _ in 0..3 {
            damage(&mut r, &files(&dir));
        }
    }
    // After all that: a clean worker runs right, and the next process reads what it wrote.
    const CLEAN: u64 = 777;
    finish(spawn(&dir, device, CLEAN), "the clean worker after the damage");
    let h = match device {
        "cpu" => Handle::cpu(),
        _ => Handle::cuda(0).unwrap(),
    };
    std::env::set_var("CONFLUX_CACHE_DIR", &dir);
    let (c, x, w, y) = problem(CLEAN as usize % 4);
    let p = conflux::ConvProblem::forward(&c, &x, &w, &y).unwrap();
    let measured = conv::solutions(&h, &p, 16).unwrap().iter().filter(|s| s.time_ms > 0.0).count();
    assert!(measured > 0, "the records the clean worker wrote were not read back ({killed} workers killed)");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn concurrent_killed_and_damaged_cache_users_cpu() {
    if std::env::var(WORKER_ENV).is_ok() {
        return;
    }
    stress("cpu");
}

#[test]
fn concurrent_killed_and_damaged_cache_users_cuda() {
    if std::env::var(WORKER_ENV).is_ok() {
        return;
    }
    if cuda().is_some() {
        stress("cuda");
    }
}

/// A cache directory that cannot be created (under /proc, which no one may write, root
/// included) or that is a regular file turns the cache off: Find and tuning still succeed.
#[test]
fn an_unusable_cache_directory_only_disables_the_cache() {
    if std::env::var(WORKER_ENV).is_ok() {
        return;
    }
    let file = std::env::temp_dir().join(format!("conflux-cache-is-a-file-{}", std::process::id()));
    std::fs::write(&file, b"not a directory").unwrap();
    for dir in [PathBuf::from("/proc/conflux-cache-cannot-exist"), file.clone()] {
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "worker", "--test-threads=1"])
            .env(WORKER_ENV, "5")
            .env("CONFLUX_CACHE_DIR", &dir)
            .env("CONFLUX_DEVICE", "cpu")
            .output()
            .unwrap();
        assert!(out.status.success(), "cache dir {}: {}", dir.display(), String::from_utf8_lossy(&out.stderr));
    }
    let _ = std::fs::remove_file(file);
}
