//! The perf-db: the tuned configuration of a tunable solver, one file per (solver, problem,
//! device identity, library version) under `<cache dir>/perf-db/`, written atomically through
//! `cache.rs`. Find with `exhaustive` fills it; building the solver's invoker reads it. An
//! entry whose header, checksum, problem, solver or configuration does not match is ignored
//! (the solver's heuristic is used) and rewritten by the next exhaustive Find.

use crate::cache;
use crate::handle::Handle;
use std::path::PathBuf;

const MAGIC: &[u8; 8] = b"CFXPDB01";
const HEADER: &str = "conflux perf-db 1";

fn dir() -> Option<PathBuf> {
    cache::record_dir("perf-db")
}

fn file_name(handle: &Handle, solver: &str, key: &str) -> String {
    cache::record_name("perf-db", "pdb", &handle.device().identity(), &[solver, key])
}

/// The stored configuration label of `solver` for the problem `key`, if a valid entry exists.
pub fn lookup(handle: &Handle, solver: &str, key: &str) -> Option<String> {
    let payload = cache::read_entry(&dir()?, &file_name(handle, solver, key), MAGIC)?;
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
pub fn store(handle: &Handle, solver: &str, key: &str, config: &str) {
    let Some(d) = dir() else { return };
    let payload = format!("{HEADER}\n{key}\n{solver}\n{config}\n");
    if let Err(e) = cache::write_entry(&d, &file_name(handle, solver, key), MAGIC, payload.as_bytes()) {
        tracing::warn!(solver, error = %e, "could not write the perf-db entry");
    }
}

/// The configuration a tunable solver builds with: the one the environment variable `force`
/// names (for measuring a tuning space), else the tuned one in the perf-db, else `fallback`.
pub fn chosen_config<C>(
    handle: &Handle,
    solver: &str,
    key: &str,
    force: &str,
    parse: impl Fn(&str) -> Option<C>,
    fallback: impl FnOnce() -> C,
) -> crate::error::Result<C> {
    if let Ok(s) = std::env::var(force) {
        return parse(&s).ok_or_else(|| crate::error::Error::bad_parm(format!("{force}={s}: not a configuration of {solver}")));
    }
    Ok(lookup(handle, solver, key).and_then(|label| parse(&label)).unwrap_or_else(fallback))
}
