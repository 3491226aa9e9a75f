//! The watching source of the feed: one watch per non-hidden directory of the memory dir, and
//! the queue their events arrive in (the kernel's, read directly, on Linux; `notify`'s watcher
//! thread with a barrier elsewhere).

#[cfg(target_os = "linux")]
use super::kernel::KernelQueue;
use super::lost::Lost;
use super::thread::ThreadQueue;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What a dirty path means.
pub(super) enum Dirty {
    Ignore,
    Memory(String),
    /// A directory appeared, vanished or moved: the watches no longer match the tree.
    Structure,
}

/// Which queue a watch reads its events from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Backend {
    /// Linux: the feed reads the inotify queue itself, with no thread and no barrier.
    #[cfg(target_os = "linux")]
    Kernel,
    /// `notify`'s watcher thread and a barrier per refresh (every other platform; on Linux only
    /// in tests, to keep this path checked).
    Thread,
}

impl Backend {
    /// The backend of a watching feed on this platform.
    pub(super) fn native() -> Self {
        #[cfg(target_os = "linux")]
        return Self::Kernel;
        #[cfg(not(target_os = "linux"))]
        return Self::Thread;
    }
}

enum Queue {
    #[cfg(target_os = "linux")]
    Kernel(KernelQueue),
    Thread(ThreadQueue),
}

impl Queue {
    fn watch(&mut self, dir: &Path) -> Result<(), String> {
        match self {
            #[cfg(target_os = "linux")]
            Self::Kernel(q) => q.watch(dir),
            Self::Thread(q) => q.watch(dir),
        }
    }
}

/// A running watcher over the memory dir's directories.
pub(super) struct Watch {
    queue: Queue,
    /// Every watched directory (absolute).
    dirs: HashSet<PathBuf>,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let backend = match self.queue {
            #[cfg(target_os = "linux")]
            Queue::Kernel(_) => Backend::Kernel,
            Queue::Thread(_) => Backend::Thread,
        };
        f.debug_struct("Watch")
            .field("backend", &backend)
            .field("dirs", &self.dirs.len())
            .finish_non_exhaustive()
    }
}

impl Watch {
    /// Watch every non-hidden directory under `root`.
    pub(super) fn start(root: &Path, backend: Backend) -> Result<Self, String> {
        let mut queue = match backend {
            #[cfg(target_os = "linux")]
            Backend::Kernel => Queue::Kernel(KernelQueue::new()?),
            Backend::Thread => Queue::Thread(ThreadQueue::new()?),
        };
        // Each directory is watched before it is listed: a subdirectory created after its
        // parent was listed raises an event there (and the next refresh rebuilds the watches).
        let mut dirs = HashSet::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            queue.watch(&dir)?;
            let entries =
                std::fs::read_dir(&dir).map_err(|e| format!("listing {}: {e}", dir.display()))?;
            for e in entries.flatten() {
                let hidden = e.file_name().to_string_lossy().starts_with('.');
                if !hidden && e.file_type().is_ok_and(|t| t.is_dir()) {
                    stack.push(e.path());
                }
            }
            dirs.insert(dir);
        }
        Ok(Self { queue, dirs })
    }

    /// Every path changed by a change completed before this call (waiting at most `timeout`
    /// for the watcher thread's barrier, where there is one).
    pub(super) fn drain(&mut self, timeout: Duration) -> Result<HashSet<PathBuf>, Lost> {
        match &mut self.queue {
            #[cfg(target_os = "linux")]
            Queue::Kernel(q) => q.drain(),
            Queue::Thread(q) => q.drain(timeout),
        }
    }

    /// `true` when the next drain is cheap: it needs no wait and at most `reads` memories
    /// changed since the last one (nothing else that needs work: no rescan, no failure).
    /// Answered without waiting and without reading any memory; `false` when this queue cannot
    /// tell without waiting. Changes seen here are kept for the drain; ones that concern no
    /// memory (hidden files, the index) are dropped.
    pub(super) fn cheap(&mut self, root: &Path, reads: usize) -> bool {
        match &mut self.queue {
            #[cfg(target_os = "linux")]
            Queue::Kernel(q) => {
                let dirs = &self.dirs;
                q.cheap(|p| matches!(classify(dirs, root, p), Dirty::Ignore), reads)
            }
            Queue::Thread(_) => {
                let _ = (root, reads);
                false
            }
        }
    }

    /// What a dirty path means for the feed.
    pub(super) fn classify(&self, root: &Path, path: &Path) -> Dirty {
        classify(&self.dirs, root, path)
    }
}

fn classify(dirs: &HashSet<PathBuf>, root: &Path, path: &Path) -> Dirty {
    let Ok(rel) = path.strip_prefix(root) else {
        return Dirty::Ignore;
    };
    if dirs.contains(path) {
        return Dirty::Structure;
    }
    let Some(rel) = rel.to_str() else {
        return Dirty::Ignore;
    };
    let rel = rel.replace('\\', "/");
    if rel.is_empty() {
        return Dirty::Structure;
    }
    if rel.split('/').any(|c| c.starts_with('.')) {
        return Dirty::Ignore;
    }
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) {
        return Dirty::Structure;
    }
    let name = rel.rsplit('/').next().unwrap_or(&rel);
    if rel.ends_with(".md") && name != memloop_store::INDEX_FILE {
        Dirty::Memory(rel)
    } else {
        Dirty::Ignore
    }
}
