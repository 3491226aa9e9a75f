//! The consolidation lock: `<memory dir>/.consolidate-lock`, body = holder's
//! PID, mtime = time of the last consolidation.

use fs4::fs_std::FileExt;
use std::fs::{File, OpenOptions};
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

    /// Time of the last consolidation (the lock's mtime); `None` when there never was one.
    pub fn last_consolidation(&self) -> std::io::Result<Option<SystemTime>> {
        match std::fs::metadata(&self.path) {
            Ok(m) if m.len() > 0 => m.modified().map(Some),
            Ok(_) => Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Try to take the lock: blocked when the mtime is younger than the staleness limit and the
    /// PID in it is alive; otherwise write our PID and re-read it (another body → lost race).
    /// The check-write-reread sequence runs under an OS file lock, so two memloop processes
    /// never both win; the re-read also catches writers that do not take the file lock.
    pub fn acquire(&self) -> std::io::Result<LockAttempt> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&self.path)?;
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
        let found = std::fs::read_to_string(&self.path)?;
        if found.trim() != pid.to_string() {
            // The file is the winner's now: leave it alone.
            return Ok(LockAttempt::LostRace { found });
        }
        Ok(LockAttempt::Acquired(LockGuard {
            path: self.path.clone(),
            previous,
            finished: false,
        }))
    }
}

/// A held consolidation lock. Dropping it without [`commit`](Self::commit) rolls back.
#[derive(Debug)]
pub struct LockGuard {
    path: PathBuf,
    previous: Option<SystemTime>,
    finished: bool,
}

impl LockGuard {
    /// The consolidation succeeded: the lock's mtime becomes now (the new "last consolidation").
    pub fn commit(mut self) -> std::io::Result<()> {
        self.finished = true;
        File::options()
            .write(true)
            .open(&self.path)?
            .set_modified(SystemTime::now())
    }

    /// The consolidation failed: delete the lock if it did not exist before, else restore its
    /// previous mtime (so the time gate opens again as before).
    pub fn rollback(mut self) -> std::io::Result<()> {
        self.finished = true;
        restore(&self.path, self.previous)
    }
}

fn restore(path: &Path, previous: Option<SystemTime>) -> std::io::Result<()> {
    match previous {
        None => match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        },
        Some(t) => File::options().write(true).open(path)?.set_modified(t),
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if !self.finished {
            if let Err(e) = restore(&self.path, self.previous) {
                tracing::warn!(error = %e, "could not roll the consolidation lock back");
            }
        }
    }
}
