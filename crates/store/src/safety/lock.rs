//! The cross-process lock around index updates.

use crate::types::MemoryError;
use fs4::fs_std::FileExt;
use std::fs::{File, OpenOptions};
use std::path::Path;
use std::time::Duration;

/// How long a writer waits for the dir lock before giving up with [`MemoryError::Lock`].
pub const LOCK_TIMEOUT: Duration = Duration::from_secs(10);

/// Name of the lock file inside the memory dir (hidden, so scans and selectors never see it).
pub const LOCK_FILE: &str = ".memloop.lock";

/// An exclusive advisory lock on `<memory dir>/.memloop.lock`, held until dropped. It excludes
/// other processes and other handles in this process alike (each acquisition opens its own file
/// description). Blocking: call it from a blocking context (`spawn_blocking`).
#[derive(Debug)]
pub struct DirLock {
    file: File,
}

impl DirLock {
    /// Block until the lock is held, at most [`LOCK_TIMEOUT`].
    pub fn acquire(dir: &Path) -> Result<Self, MemoryError> {
        Self::acquire_within(dir, LOCK_TIMEOUT)
    }

    /// Block until the lock is held, at most `timeout`; then a [`MemoryError::Lock`] that says
    /// another writer holds it.
    pub fn acquire_within(dir: &Path, timeout: Duration) -> Result<Self, MemoryError> {
        let path = dir.join(LOCK_FILE);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| MemoryError::Lock(format!("opening {}: {e}", path.display())))?;
        let held = FileExt::try_lock_exclusive(&file)
            .map_err(|e| MemoryError::Lock(format!("locking {}: {e}", path.display())))?;
        let timed_out = || {
            tracing::warn!(lock = %path.display(), ?timeout, "memory dir lock timed out");
            MemoryError::Lock(format!(
                "timed out after {timeout:?} waiting for {}: another memloop process is \
                 writing this memory dir (or is stuck); try again, or stop that process",
                path.display()
            ))
        };
        let file = if held {
            file
        } else if timeout.is_zero() {
            // No wait at all: no helper either. One left queued in the kernel would take the
            // lock as soon as its holder let go and hold it until it noticed nobody waits, so a
            // try right after the release could fail.
            return Err(timed_out());
        } else {
            // Wait in the kernel's queue (fair, unlike polling) on a helper thread, at most
            // `timeout`. If we give up first, the helper's send fails once it gets the lock and
            // it drops the file, which releases the lock again.
            let (tx, rx) = std::sync::mpsc::sync_channel::<std::io::Result<File>>(1);
            std::thread::Builder::new()
                .name("memloop-dir-lock".into())
                .spawn(move || {
                    let got = file.lock_exclusive().map(|()| file);
                    let _ = tx.send(got);
                })
                .map_err(|e| MemoryError::Lock(format!("waiting for {}: {e}", path.display())))?;
            match rx.recv_timeout(timeout) {
                Ok(Ok(file)) => file,
                Ok(Err(e)) => {
                    return Err(MemoryError::Lock(format!(
                        "locking {}: {e}",
                        path.display()
                    )));
                }
                Err(_) => return Err(timed_out()),
            }
        };
        tracing::trace!(lock = %path.display(), "memory dir locked");
        Ok(Self { file })
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        if let Err(e) = FileExt::unlock(&self.file) {
            tracing::warn!(error = %e, "unlocking the memory dir failed (closing releases it)");
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_times_out_with_a_clear_error_then_is_free_once_released() {
        let dir = tempfile::tempdir().unwrap();
        let held = DirLock::acquire(dir.path()).unwrap();
        let err = DirLock::acquire_within(dir.path(), Duration::from_millis(30)).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, MemoryError::Lock(_)), "{msg}");
        assert!(
            msg.contains("timed out") && msg.contains(LOCK_FILE),
            "{msg}"
        );
        drop(held);
        assert!(DirLock::acquire_within(dir.path(), Duration::from_millis(30)).is_ok());
    }
}
