//! The cross-process lock around index updates.

use super::internal::open_internal_file;
use fs4::fs_std::FileExt;
use memloop_store::MemoryError;
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
        // Errors name the lock file, never the memory dir's path (they reach clients); the log
        // has the whole path.
        let fail = |what: &str, e: std::io::Error| {
            tracing::warn!(lock = %path.display(), error = %e, "{what} the memory dir lock failed");
            MemoryError::Lock(format!("{what} `{LOCK_FILE}`: {e}"))
        };
        // Without following a link: a planted `.memloop.lock` link leads no open (and no
        // created file) outside the memory dir.
        let file = open_internal_file(
            dir,
            LOCK_FILE,
            OpenOptions::new()
                .create(true)
                .truncate(false)
                .read(true)
                .write(true),
        )
        .map_err(|e| fail("opening", e))?;
        let held = FileExt::try_lock_exclusive(&file).map_err(|e| fail("locking", e))?;
        let timed_out = || {
            tracing::warn!(lock = %path.display(), ?timeout, "memory dir lock timed out");
            MemoryError::Lock(format!(
                "timed out after {timeout:?} waiting for `{LOCK_FILE}`: another memloop process \
                 is writing this memory dir (or is stuck); try again, or stop that process"
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
                .map_err(|e| fail("waiting for", e))?;
            match rx.recv_timeout(timeout) {
                Ok(Ok(file)) => file,
                Ok(Err(e)) => return Err(fail("locking", e)),
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
        assert!(!msg.contains(&*dir.path().to_string_lossy()), "{msg}");
        drop(held);
        assert!(DirLock::acquire_within(dir.path(), Duration::from_millis(30)).is_ok());
    }

    #[cfg(unix)]
    #[test]
    fn a_lock_file_that_is_a_link_is_refused_and_its_target_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let victim = tempfile::tempdir().unwrap();
        let target = victim.path().join("важный.txt");
        std::fs::write(&target, "keep").unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join(LOCK_FILE)).unwrap();
        let err = DirLock::acquire_within(dir.path(), Duration::ZERO).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("is a symbolic link"), "{msg}");
        assert!(!msg.contains(&*dir.path().to_string_lossy()), "{msg}");
        // Not opened: a lock on it would be held on the target's inode.
        let target_file = std::fs::File::open(&target).unwrap();
        assert!(FileExt::try_lock_exclusive(&target_file).unwrap());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
        // A dangling link creates nothing where it points.
        let dangling = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(victim.path().join("new"), dangling.path().join(LOCK_FILE))
            .unwrap();
        assert!(DirLock::acquire(dangling.path()).is_err());
        assert!(!victim.path().join("new").exists());
    }
}
