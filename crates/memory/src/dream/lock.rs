//! The consolidation lock: `<memory dir>/.consolidate-lock`, body = holder's
//! PID, mtime = time of the last consolidation.
//!
//! The lock is memloop's own file in the memory dir: every open, read, time change and removal
//! goes through [`memloop_files::open_internal_file`], so a symbolic link planted where the lock
//! belongs (by anyone who can write the memory dir) is refused, never followed: nothing is
//! truncated, written, re-timed or deleted wherever it points.

use fs4::fs_std::FileExt;
use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// File name of the lock inside the memory dir.
pub const CONSOLIDATE_LOCK: &str = ".consolidate-lock";

/// Result of [`ConsolidationLock::acquire`].
#[derive(Debug)]
pub enum LockAttempt {
    /// We hold the lock; finish with [`LockGuard::commit`] or [`LockGuard::rollback`].
    Acquired(LockGuard),
    /// A live process took it less than the staleness limit ago.
    Blocked {
        /// The holder's PID.
        holder_pid: u32,
        /// How long ago it took the lock.
        age: Duration,
    },
    /// We wrote our PID but re-reading found another body: someone else won.
    LostRace {
        /// What the file said on re-read.
        found: String,
    },
}

/// The lock file of one memory dir.
#[derive(Debug, Clone)]
pub struct ConsolidationLock {
    /// The dir holding the lock (the memory dir, or the store's local dir for locks).
    dir: PathBuf,
    path: PathBuf,
    stale_after: Duration,
}

/// Whether process `pid` is alive (Linux: `/proc/<pid>`; other Unix: `kill -0`; elsewhere the
/// PID is assumed alive and only the age makes a lock stale).
pub(crate) fn pid_alive(pid: u32) -> bool {
    if cfg!(unix) {
        if Path::new("/proc/self").exists() {
            return Path::new("/proc").join(pid.to_string()).exists();
        }
        return std::process::Command::new("kill")
            .args(["-0", &pid.to_string()])
            .stderr(std::process::Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(true);
    }
    true
}

impl ConsolidationLock {
    /// The lock of `memory_dir`, stale after 1 hour.
    pub fn new(memory_dir: &Path) -> Self {
        Self {
            dir: memory_dir.to_path_buf(),
            path: memory_dir.join(CONSOLIDATE_LOCK),
            stale_after: Duration::from_secs(3_600),
        }
    }

    /// Change the staleness limit (builder style).
    pub fn stale_after(mut self, d: Duration) -> Self {
        self.stale_after = d;
        self
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Time of the last consolidation (the lock's mtime); `None` when there never was one. A
    /// link where the lock belongs is refused ([`std::io::ErrorKind::InvalidInput`]): its
    /// target's time is not the last consolidation.
    pub fn last_consolidation(&self) -> std::io::Result<Option<SystemTime>> {
        let file = memloop_files::open_internal_file(
            &self.dir,
            CONSOLIDATE_LOCK,
            OpenOptions::new().read(true),
        );
        match file.and_then(|f| f.metadata()) {
            Ok(m) if m.len() > 0 => m.modified().map(Some),
            Ok(_) => Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Try to take the lock: blocked when the mtime is younger than the staleness limit and the
    /// PID in it is alive; otherwise write our PID and re-read it (another body → lost race).
    /// The check-write-reread sequence runs under an OS file lock, so two memloop processes
    /// never both win; the re-read also catches writers that do not take the file lock. A link
    /// (or anything but a regular file) where the lock belongs fails with
    /// [`std::io::ErrorKind::InvalidInput`], naming the lock relative to its dir, and is left
    /// alone, as is whatever it points at.
    pub fn acquire(&self) -> std::io::Result<LockAttempt> {
        let mut file = memloop_files::open_internal_file(
            &self.dir,
            CONSOLIDATE_LOCK,
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false),
        )?;
        file.lock_exclusive()?;
        let meta = file.metadata()?;
        let mut body = String::new();
        // A non-UTF-8 body is treated like a foreign, unparsable holder.
        let _ = file.read_to_string(&mut body);
        let previous = if meta.len() > 0 {
            let mtime = meta.modified()?;
            let age = SystemTime::now()
                .duration_since(mtime)
                .unwrap_or(Duration::ZERO);
            if let Some(pid) = body.trim().parse::<u32>().ok().filter(|p| pid_alive(*p)) {
                if age < self.stale_after {
                    return Ok(LockAttempt::Blocked {
                        holder_pid: pid,
                        age,
                    });
                }
            }
            Some(mtime)
        } else {
            None
        };
        let pid = std::process::id();
        file.set_len(0)?;
        file.seek(SeekFrom::Start(0))?;
        file.write_all(pid.to_string().as_bytes())?;
        file.sync_all()?;
        let found = memloop_files::read_internal_file(&self.dir, CONSOLIDATE_LOCK)?;
        let found = String::from_utf8_lossy(&found).into_owned();
        if found.trim() != pid.to_string() {
            // The file is the winner's now: leave it alone.
            return Ok(LockAttempt::LostRace { found });
        }
        Ok(LockAttempt::Acquired(LockGuard {
            dir: self.dir.clone(),
            previous,
            finished: false,
        }))
    }
}

/// A held consolidation lock. Dropping it without [`commit`](Self::commit) rolls back.
#[derive(Debug)]
pub struct LockGuard {
    /// The dir holding the lock.
    dir: PathBuf,
    previous: Option<SystemTime>,
    finished: bool,
}

impl LockGuard {
    /// The consolidation succeeded: the lock's mtime becomes now (the new "last consolidation").
    pub fn commit(mut self) -> std::io::Result<()> {
        self.finished = true;
        touch(&self.dir, SystemTime::now())
    }

    /// The consolidation failed: delete the lock if it did not exist before, else restore its
    /// previous mtime (so the time gate opens again as before).
    pub fn rollback(mut self) -> std::io::Result<()> {
        self.finished = true;
        restore(&self.dir, self.previous)
    }
}

/// Set the lock's mtime to `t`, through the lock file itself (never through a link there).
fn touch(dir: &Path, t: SystemTime) -> std::io::Result<()> {
    memloop_files::open_internal_file(dir, CONSOLIDATE_LOCK, OpenOptions::new().write(true))?
        .set_modified(t)
}

/// Undo a consolidation: remove the lock (removing a link there removes the link, never what it
/// points at) or give it back its `previous` mtime.
fn restore(dir: &Path, previous: Option<SystemTime>) -> std::io::Result<()> {
    match previous {
        None => match std::fs::remove_file(dir.join(CONSOLIDATE_LOCK)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        },
        Some(t) => touch(dir, t),
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if !self.finished {
            if let Err(e) = restore(&self.dir, self.previous) {
                tracing::warn!(error = %e, "could not roll the consolidation lock back");
            }
        }
    }
}

#[cfg(all(test, unix))]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    const VICTIM_TEXT: &str = "Ünïcödé жертва 受害者: not memloop's";

    /// A dir elsewhere holding one file with known bytes and a known, old mtime.
    fn victim() -> (tempfile::TempDir, PathBuf, SystemTime) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("target.txt");
        std::fs::write(&file, VICTIM_TEXT).unwrap();
        let old = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        std::fs::File::options()
            .write(true)
            .open(&file)
            .unwrap()
            .set_modified(old)
            .unwrap();
        (dir, file, old)
    }

    fn assert_untouched(victim_dir: &Path, file: &Path, mtime: SystemTime) {
        assert_eq!(std::fs::read_to_string(file).unwrap(), VICTIM_TEXT);
        assert_eq!(std::fs::metadata(file).unwrap().modified().unwrap(), mtime);
        assert_eq!(std::fs::read_dir(victim_dir).unwrap().count(), 1);
    }

    #[test]
    fn a_link_where_the_lock_belongs_is_refused_and_its_target_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let (victim_dir, file, mtime) = victim();
        symlink(&file, dir.path().join(CONSOLIDATE_LOCK)).unwrap();
        let lock = ConsolidationLock::new(dir.path());

        let err = lock.acquire().unwrap_err();
        let msg = err.to_string();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{msg}");
        assert!(msg.contains("`.consolidate-lock`"), "{msg}");
        assert!(!msg.contains(&*dir.path().to_string_lossy()), "{msg}");
        // The link's target's time is not the last consolidation.
        assert_eq!(
            lock.last_consolidation().unwrap_err().kind(),
            std::io::ErrorKind::InvalidInput
        );
        assert_untouched(victim_dir.path(), &file, mtime);
        assert!(
            std::fs::symlink_metadata(dir.path().join(CONSOLIDATE_LOCK))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        // A dangling link is not created through either.
        std::fs::remove_file(dir.path().join(CONSOLIDATE_LOCK)).unwrap();
        symlink(
            victim_dir.path().join("new.txt"),
            dir.path().join(CONSOLIDATE_LOCK),
        )
        .unwrap();
        assert!(lock.acquire().is_err());
        assert_untouched(victim_dir.path(), &file, mtime);
    }

    #[test]
    fn a_link_swapped_in_while_the_lock_is_held_is_not_retimed_through() {
        let dir = tempfile::tempdir().unwrap();
        let (victim_dir, file, mtime) = victim();
        let path = dir.path().join(CONSOLIDATE_LOCK);
        let lock = ConsolidationLock::new(dir.path());
        let swap_in_link = || {
            std::fs::remove_file(&path).unwrap();
            symlink(&file, &path).unwrap();
        };
        let put_back_lock = || {
            let _ = std::fs::remove_file(&path);
            // A body that is no live PID: the lock is free, with a previous consolidation.
            std::fs::write(&path, "последний").unwrap();
        };

        put_back_lock();
        let LockAttempt::Acquired(guard) = lock.acquire().unwrap() else {
            panic!("the lock is free")
        };
        swap_in_link();
        let err = guard.commit().unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
        assert_untouched(victim_dir.path(), &file, mtime);

        put_back_lock();
        let LockAttempt::Acquired(guard) = lock.acquire().unwrap() else {
            panic!("the lock is free")
        };
        swap_in_link();
        assert!(guard.rollback().is_err());
        assert_untouched(victim_dir.path(), &file, mtime);

        put_back_lock();
        let LockAttempt::Acquired(guard) = lock.acquire().unwrap() else {
            panic!("the lock is free")
        };
        swap_in_link();
        drop(guard);
        assert_untouched(victim_dir.path(), &file, mtime);

        // No previous consolidation: rolling back removes the link itself, not its target.
        std::fs::remove_file(&path).unwrap();
        let LockAttempt::Acquired(guard) = lock.acquire().unwrap() else {
            panic!("the lock is free")
        };
        swap_in_link();
        guard.rollback().unwrap();
        assert!(std::fs::symlink_metadata(&path).is_err());
        assert_untouched(victim_dir.path(), &file, mtime);
    }
}
