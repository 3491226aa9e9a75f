//! The cross-process lock around index updates.

use crate::types::MemoryError;
use fs4::fs_std::FileExt;
use std::fs::{File, OpenOptions};
use std::path::Path;

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
    /// Block until the lock is held.
    pub fn acquire(dir: &Path) -> Result<Self, MemoryError> {
        let path = dir.join(LOCK_FILE);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| MemoryError::Lock(format!("opening {}: {e}", path.display())))?;
        file.lock_exclusive()
            .map_err(|e| MemoryError::Lock(format!("locking {}: {e}", path.display())))?;
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
