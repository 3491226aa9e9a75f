//! Atomic file replacement: temp file in the same dir, (fsync,) rename, (fsync the dir).

use memloop_store::MemoryError;
use std::io::Write;
use std::path::Path;

/// Prefix of temp files (hidden: scans skip them).
pub const TEMP_PREFIX: &str = ".memloop-tmp-";

/// How far a write is made durable before it returns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Durability {
    /// Through a killed process: the file is replaced by a rename, so readers see the old
    /// content or the new one, never a torn file, and a write that returned is in the kernel's
    /// hands. A power cut or kernel crash may lose the last writes (never tear them). What
    /// Claude Code gives.
    #[default]
    Process,
    /// Through a power cut too: the file is fsync'd before the rename and its directory after
    /// (from about half a millisecond to several per write, by disk).
    Power,
}

/// Write `bytes` to `path` atomically: readers see the old content or the new one, never a torn
/// file, even if the process is killed mid-write. Durable through a power cut
/// ([`Durability::Power`]; see [`atomic_write_with`]). An existing file's permissions are kept.
/// The temp file is removed on every error path.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> Result<(), MemoryError> {
    atomic_write_with(path, bytes, Durability::Power)
}

/// [`atomic_write`], made as durable as `durability` says.
pub fn atomic_write_with(
    path: &Path,
    bytes: &[u8],
    durability: Durability,
) -> Result<(), MemoryError> {
    let dir = path.parent().ok_or_else(|| {
        MemoryError::io(
            format!("{} has no parent dir", path.display()),
            std::io::Error::from(std::io::ErrorKind::InvalidInput),
        )
    })?;
    let ctx = |what: &str| format!("{what} {}", path.display());
    std::fs::create_dir_all(dir).map_err(|e| MemoryError::io(ctx("creating the dir of"), e))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(TEMP_PREFIX)
        .tempfile_in(dir)
        .map_err(|e| MemoryError::io(ctx("creating a temp file for"), e))?;
    if let Ok(meta) = std::fs::metadata(path) {
        // Best effort: a failure only means the new file keeps the temp file's 0600 mode.
        let _ = tmp.as_file().set_permissions(meta.permissions());
    }
    tmp.write_all(bytes)
        .map_err(|e| MemoryError::io(ctx("writing"), e))?;
    if durability == Durability::Power {
        tmp.as_file()
            .sync_all()
            .map_err(|e| MemoryError::io(ctx("syncing"), e))?;
    }
    tmp.persist(path)
        .map_err(|e| MemoryError::io(ctx("renaming into place"), e.error))?;
    if durability == Durability::Power {
        sync_dir(dir);
    }
    Ok(())
}

/// Make the directory entry of `path` durable (fsync its parent dir; best effort).
pub(crate) fn sync_parent_dir(path: &Path) {
    if let Some(dir) = path.parent() {
        sync_dir(dir);
    }
}

/// fsync the directory `dir` (best effort: a failure is logged).
#[cfg(unix)]
pub(super) fn sync_dir(dir: &Path) {
    if let Err(e) = std::fs::File::open(dir).and_then(|d| d.sync_all()) {
        tracing::debug!(dir = %dir.display(), error = %e, "directory fsync failed");
    }
}

#[cfg(not(unix))]
pub(super) fn sync_dir(_dir: &Path) {}

/// Every temp file ([`TEMP_PREFIX`]) under `root` (recursively, symlinks not followed).
fn temp_files(root: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                stack.push(e.path());
            } else if ft.is_file() && e.file_name().to_string_lossy().starts_with(TEMP_PREFIX) {
                found.push(e.path());
            }
        }
    }
    found
}

/// Whether any temp file ([`TEMP_PREFIX`]) lies under `root` (a read-only look: no lock).
pub fn has_temp_files(root: &Path) -> bool {
    !temp_files(root).is_empty()
}

/// Remove every temp file ([`TEMP_PREFIX`]) under `root` (recursively, symlinks not followed);
/// returns how many went. Only call it while holding the dir lock: writers keep their temp
/// files under that lock, so what is found then was left by a killed writer.
pub fn remove_temp_files(root: &Path) -> Result<usize, MemoryError> {
    let found = temp_files(root);
    for path in &found {
        std::fs::remove_file(path)
            .map_err(|err| MemoryError::io("removing a leftover temp file", err))?;
    }
    Ok(found.len())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {

    #[test]
    fn every_durability_replaces_the_file_whole_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sub/m.md");
        for (i, durability) in [Durability::Process, Durability::Power]
            .into_iter()
            .enumerate()
        {
            let text = format!("revision {i}\n").repeat(1000);
            atomic_write_with(&p, text.as_bytes(), durability).unwrap();
            assert_eq!(std::fs::read_to_string(&p).unwrap(), text);
            assert!(!has_temp_files(dir.path()));
        }
    }

    use super::*;
    use tempfile::TempDir;

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp_files() {
        let d = TempDir::new().unwrap();
        let p = d.path().join("sub/a.md");
        atomic_write(&p, b"one").unwrap();
        atomic_write(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
            atomic_write(&p, b"three").unwrap();
            assert_eq!(
                std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
                0o644,
                "mode kept"
            );
        }
        // Error path: the target is a directory, so the rename fails; the temp file is cleaned up.
        let dir_target = d.path().join("sub/isdir.md");
        std::fs::create_dir_all(dir_target.join("x")).unwrap();
        assert!(atomic_write(&dir_target, b"x").is_err());
        let leftovers: Vec<_> = std::fs::read_dir(d.path().join("sub"))
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(TEMP_PREFIX))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }
}
