//! The perf-db: the tuned configuration of a tunable solver, one file per (solver, problem,
//! device identity, library version) under `<cache dir>/perf-db/`, written atomically through
//! `cache.rs`. Find with `exhaustive` fills it; building the solver's invoker reads it. An
//! entry whose header, checksum, problem, solver or configuration does not match is ignored
//! (the solver's heuristic is used) and rewritten by the next exhaustive Find.

use crate::backend::Device;
use crate::cache;
use std::path::PathBuf;

const MAGIC: &[u8; 8] = b"CFXPDB01";
const HEADER: &str = "conflux perf-db 1";

fn dir() -> Option<PathBuf> {
    cache::record_dir("perf-db")
}

fn file_name(device_identity: &str, solver: &str, key: &str) -> String {
    cache::record_name("perf-db", "pdb", device_identity, &[solver, key])
}

/// The stored configuration label of `solver` for the problem `key`, if a valid entry exists.
pub fn lookup(device: &Device, solver: &str, key: &str) -> Option<String> {
    let payload = cache::read_entry(&dir()?, &file_name(&device.identity(), solver, key), MAGIC)?;
    let text = String::from_utf8(payload).ok()?;
    let mut lines = text.lines();
    let ok = lines.next() == Some(HEADER) && lines.next() == Some(key) && lines.next() == Some(solver);
    let config = lines.next().filter(|_| ok).map(str::to_string);
    if config.is_none() {
        tracing::warn!(solver, "perf-db entry does not match its problem; ignoring it");
    }
    config
}

/// Record `config` as the tuned configuration (failures to write are logged, not fatal:
/// the cache is an optimisation).
pub fn store(device: &Device, solver: &str, key: &str, config: &str) {
    let Some(d) = dir() else { return };
    let payload = format!("{HEADER}\n{key}\n{solver}\n{config}\n");
    if let Err(e) = cache::write_entry(&d, &file_name(&device.identity(), solver, key), MAGIC, payload.as_bytes()) {
        tracing::warn!(solver, error = %e, "could not write the perf-db entry");
    }
}
