//! The on-disk cache: one file per key, written to a temporary file and renamed so concurrent
//! processes never see a torn file. Every file carries a magic tag and a SHA-256 of its name
//! and payload; a truncated, corrupt or foreign file, or a valid record copied under another
//! record's name, reads as a miss and is rewritten.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Bump when any on-disk format changes; it names the versioned subfolder.
pub const CACHE_FORMAT: u32 = 2;

/// `$CONFLUX_CACHE_DIR`, else `$XDG_CACHE_HOME/conflux`, else `~/.cache/conflux`, with a
/// versioned subfolder.
pub fn cache_dir() -> Option<PathBuf> {
    let base = if let Some(d) = std::env::var_os("CONFLUX_CACHE_DIR").filter(|d| !d.is_empty()) {
        PathBuf::from(d)
    } else if let Some(d) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        PathBuf::from(d).join("conflux")
    } else {
        PathBuf::from(std::env::var_os("HOME")?).join(".cache").join("conflux")
    };
    Some(base.join(format!("v{CACHE_FORMAT}")))
}

/// Hex SHA-256 of `parts`, each length-prefixed so boundaries cannot collide.
pub fn hash_key(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The folder `<cache dir>/<kind>` of one kind of per-device record (find-db, perf-db).
pub fn record_dir(kind: &str) -> Option<PathBuf> {
    cache_dir().map(|d| d.join(kind))
}

/// File name of a per-device record: a hash of its kind, `parts`, the device identity and the
/// library version, so another GPU or another build never reads it.
pub fn record_name(kind: &str, ext: &str, device_identity: &str, parts: &[&str]) -> String {
    let mut all: Vec<&[u8]> = vec![kind.as_bytes()];
    all.extend(parts.iter().map(|p| p.as_bytes()));
    all.extend([device_identity.as_bytes(), env!("CARGO_PKG_VERSION").as_bytes()]);
    format!("{}.{ext}", hash_key(&all))
}

/// A temporary file older than this belongs to a writer that died (killed between write and
/// rename): live writers rename theirs within milliseconds.
const ORPHAN_AGE: std::time::Duration = std::time::Duration::from_secs(3600);

/// Remove `dir`'s orphaned temporary files, once per folder per process.
fn sweep_orphans(dir: &Path) {
    static SWEPT: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    {
        let mut swept = SWEPT.lock().unwrap_or_else(|p| p.into_inner());
        if swept.iter().any(|d| d == dir) {
            return;
        }
        swept.push(dir.to_path_buf());
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if !(name.starts_with('.') && name.ends_with(".tmp")) {
            continue;
        }
        let old = e.metadata().ok().filter(|m| m.is_file()).and_then(|m| m.modified().ok()).and_then(|t| t.elapsed().ok()).is_some_and(|age| age > ORPHAN_AGE);
        if old {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Write `payload` under `dir/name` atomically, tagged with `magic` (8 bytes). The first write
/// into a folder in a process also removes temporary files that writers killed mid-write left.
pub fn write_entry(dir: &Path, name: &str, magic: &[u8; 8], payload: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    sweep_orphans(dir);
    let mut data = Vec::with_capacity(payload.len() + 40);
    data.extend_from_slice(magic);
    data.extend_from_slice(&record_digest(name, payload));
    data.extend_from_slice(payload);
    let tmp = dir.join(format!(".{name}.{}.{:?}.tmp", std::process::id(), std::thread::current().id()));
    std::fs::write(&tmp, &data)?;
    let target = dir.join(name);
    let renamed = std::fs::rename(&tmp, &target).or_else(|e| {
        // A directory squatting on the record's name (a damaged cache) would block the record
        // forever: an empty one is removed and the rename retried.
        if target.is_dir() && std::fs::remove_dir(&target).is_ok() {
            std::fs::rename(&tmp, &target)
        } else {
            Err(e)
        }
    });
    renamed.inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// The checksum of a record: its name is part of it, so a record moved or copied under another
/// key (a cubin of another kernel whose function names may match) fails it instead of running.
fn record_digest(name: &str, payload: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update((name.len() as u64).to_le_bytes());
    h.update(name.as_bytes());
    h.update(payload);
    h.finalize().into()
}

/// Read `dir/name` if it exists, carries `magic` and its checksum matches.
pub fn read_entry(dir: &Path, name: &str, magic: &[u8; 8]) -> Option<Vec<u8>> {
    // Only a regular file is read: a FIFO or device in its place would block or never end.
    let path = dir.join(name);
    if !std::fs::metadata(&path).is_ok_and(|m| m.is_file()) {
        if path.exists() {
            tracing::warn!(file = %path.display(), "cache entry is not a regular file; ignoring it");
        }
        return None;
    }
    let data = std::fs::read(&path).ok()?;
    if data.len() < 40 || &data[..8] != magic {
        tracing::warn!(file = %dir.join(name).display(), "cache entry has a foreign or truncated header; ignoring it");
        return None;
    }
    let payload = &data[40..];
    if record_digest(name, payload).as_slice() != &data[8..40] {
        tracing::warn!(file = %dir.join(name).display(), "cache entry fails its checksum; ignoring it");
        return None;
    }
    Some(payload.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A FIFO, a directory or a dangling link in an entry's place is ignored at once (a FIFO
    /// used to block the lookup forever); a regular entry still reads back.
    #[test]
    fn orphaned_temporaries_are_swept_and_live_ones_kept() {
        let dir = std::env::temp_dir().join(format!("conflux-orphans-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (orphan, live) = (dir.join(".abc.123.ThreadId(1).tmp"), dir.join(".def.456.ThreadId(2).tmp"));
        std::fs::write(&orphan, b"partial").unwrap();
        std::fs::write(&live, b"partial").unwrap();
        let f = std::fs::File::options().write(true).open(&orphan).unwrap();
        f.set_modified(std::time::SystemTime::now() - 2 * ORPHAN_AGE).unwrap();
        drop(f);
        write_entry(&dir, "entry", b"TESTMAGC", b"payload").unwrap();
        assert!(!orphan.exists(), "a temporary older than ORPHAN_AGE was kept");
        assert!(live.exists(), "a fresh temporary (a live writer's) was removed");
        assert_eq!(read_entry(&dir, "entry", b"TESTMAGC").as_deref(), Some(&b"payload"[..]));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn only_regular_files_are_read() {
        let dir = std::env::temp_dir().join(format!("conflux-cache-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let magic = b"CFXTEST1";
        write_entry(&dir, "good", magic, b"payload").unwrap();
        assert_eq!(read_entry(&dir, "good", magic).as_deref(), Some(&b"payload"[..]));
        let fifo = dir.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo runs");
        assert!(made.success(), "mkfifo failed");
        std::fs::create_dir_all(dir.join("subdir")).unwrap();
        std::os::unix::fs::symlink(dir.join("missing"), dir.join("dangling")).unwrap();
        let started = std::time::Instant::now();
        for name in ["fifo", "subdir", "dangling", "absent"] {
            assert_eq!(read_entry(&dir, name, magic), None, "{name}");
        }
        assert!(started.elapsed().as_secs() < 5);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// An empty directory in a record's place (a damaged cache) is replaced by the record.
    #[test]
    fn a_directory_in_a_records_place_is_replaced() {
        let dir = std::env::temp_dir().join(format!("conflux-squat-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("rec")).unwrap();
        write_entry(&dir, "rec", b"TESTMAGC", b"payload").unwrap();
        assert_eq!(read_entry(&dir, "rec", b"TESTMAGC").as_deref(), Some(&b"payload"[..]));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A valid record copied under another record's name (its checksum matches its own bytes)
    /// reads as a miss: a kernel cache would otherwise load another kernel's cubin, and where
    /// the two share function names, run it.
    #[test]
    fn a_record_under_another_name_is_refused() {
        let dir = std::env::temp_dir().join(format!("conflux-moved-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        write_entry(&dir, "a.cubin", b"TESTMAGC", b"kernel a").unwrap();
        write_entry(&dir, "b.cubin", b"TESTMAGC", b"kernel b").unwrap();
        std::fs::copy(dir.join("a.cubin"), dir.join("b.cubin")).unwrap();
        assert_eq!(read_entry(&dir, "a.cubin", b"TESTMAGC").as_deref(), Some(&b"kernel a"[..]));
        assert_eq!(read_entry(&dir, "b.cubin", b"TESTMAGC"), None, "a's record was read as b's");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
