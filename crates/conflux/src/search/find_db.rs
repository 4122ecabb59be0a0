//! The find-db: what Find measured, one file per (problem, device identity, library version)
//! under `<cache dir>/find-db/`, written atomically through `cache.rs` (magic + SHA-256).
//! A truncated, corrupt or foreign file, or one naming a solver this build does not have,
//! is ignored (a miss) and rewritten by the next Find; it is never trusted.
//! `CONFLUX_DISABLE_FIND_DB` (any value but empty or 0) turns the disk side off; results of
//! Find still live on the handle that ran it.

use crate::cache;
use crate::problem::FusedProblem;
use super::session::Session;
use crate::backend::Device;
use crate::solver::find_by_name;
use crate::types::ConvAlgorithm;
use std::fmt::Write;
use std::path::PathBuf;
use std::sync::Arc;

const MAGIC: &[u8; 8] = b"CFXFDB01";
const HEADER: &str = "conflux find-db 1";

/// One measured solver.
#[derive(Clone, Debug, PartialEq)]
pub struct FindEntry {
    pub solver: &'static str,
    pub solution_id: u64,
    pub algorithm: ConvAlgorithm,
    pub time_ms: f32,
    pub workspace_bytes: usize,
}

/// Every solver measured for one problem, fastest first.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FindRecord {
    pub entries: Vec<FindEntry>,
}

fn disabled() -> bool {
    std::env::var("CONFLUX_DISABLE_FIND_DB").map(|v| !v.is_empty() && v != "0").unwrap_or(false)
}

fn dir() -> Option<PathBuf> {
    cache::record_dir("find-db")
}

fn file_name(device: &Device, key: &str) -> String {
    cache::record_name("find-db", "fdb", &device.identity(), &[key])
}

/// Where the entry of `problem` on this handle's device lives (None without a cache dir).
pub fn path(s: &dyn Session, problem: &FusedProblem) -> Option<PathBuf> {
    dir().map(|d| d.join(file_name(s.device(), &problem.key())))
}

/// The record of `problem`: the handle's copy, else the disk's (read once per handle).
pub fn lookup(s: &dyn Session, problem: &FusedProblem) -> Option<Arc<FindRecord>> {
    let key = problem.key();
    if let Some(hit) = s.search_state().find_memo.lock().unwrap().get(&key) {
        return hit.clone();
    }
    let rec = if disabled() { None } else { read(s.device(), &key).map(Arc::new) };
    s.search_state().find_memo.lock().unwrap().insert(key, rec.clone());
    rec
}

/// Merge `measured` into the record of `problem` (a solver measured again replaces its old
/// entry; solvers not measured now keep theirs) and write it back.
pub fn store(s: &dyn Session, problem: &FusedProblem, measured: &[FindEntry]) {
    let key = problem.key();
    let mut entries: Vec<FindEntry> = lookup(s, problem).map(|r| r.entries.clone()).unwrap_or_default();
    entries.retain(|e| measured.iter().all(|m| m.solver != e.solver));
    entries.extend_from_slice(measured);
    entries.sort_by(|a, b| a.time_ms.total_cmp(&b.time_ms));
    let rec = FindRecord { entries };
    if !disabled() {
        if let Some(d) = dir() {
            let name = file_name(s.device(), &key);
            if let Err(e) = cache::write_entry(&d, &name, MAGIC, encode(s.device(), &key, &rec).as_bytes()) {
                tracing::warn!(error = %e, "could not write the find-db");
            }
        }
    }
    s.search_state().find_memo.lock().unwrap().insert(key, Some(Arc::new(rec)));
    super::session::forget_resolved(s);
}

fn encode(device: &Device, key: &str, rec: &FindRecord) -> String {
    let mut s = format!("{HEADER}\nversion {}\ndevice {}\nproblem {key}\n", env!("CARGO_PKG_VERSION"), device.identity());
    for e in &rec.entries {
        writeln!(s, "{} {} {} {} {}", e.solver, e.solution_id, e.algorithm as i32, e.time_ms, e.workspace_bytes).unwrap();
    }
    s
}

fn read(device: &Device, key: &str) -> Option<FindRecord> {
    let d = dir()?;
    let payload = cache::read_entry(&d, &file_name(device, key), MAGIC)?;
    let rec = decode(device, key, &payload);
    if rec.is_none() {
        tracing::warn!(file = %d.join(file_name(device, key)).display(), "find-db entry is for another problem or device, or malformed; ignoring it");
    }
    rec
}

/// Parse a payload; anything unexpected rejects the whole file.
fn decode(device: &Device, key: &str, payload: &[u8]) -> Option<FindRecord> {
    let text = std::str::from_utf8(payload).ok()?;
    let mut lines = text.lines();
    let want = [
        HEADER.to_string(),
        format!("version {}", env!("CARGO_PKG_VERSION")),
        format!("device {}", device.identity()),
        format!("problem {key}"),
    ];
    for w in &want {
        if lines.next()? != w {
            return None;
        }
    }
    let mut entries = Vec::new();
    for line in lines {
        let f: Vec<&str> = line.split(' ').collect();
        let [name, id, algo, time, ws] = f.as_slice() else { return None };
        let s = find_by_name(name)?;
        let algorithm = ConvAlgorithm::from_i32(algo.parse().ok()?)?;
        let time_ms: f32 = time.parse().ok()?;
        if s.solution_id() != id.parse::<u64>().ok()? || s.algorithm() != algorithm || s.device() != device.kind() || !(time_ms.is_finite() && time_ms >= 0.0) {
            return None;
        }
        entries.push(FindEntry { solver: s.name(), solution_id: s.solution_id(), algorithm, time_ms, workspace_bytes: ws.parse().ok()? });
    }
    Some(FindRecord { entries })
}
