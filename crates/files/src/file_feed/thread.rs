//! The portable watch queue: `notify`'s recommended watcher delivers events on its own thread,
//! so a refresh cannot tell "no change" from "an event not handled yet". Before each drain a
//! *barrier* creates a uniquely named file in a private directory outside the memory dir,
//! watched by the same watcher, and waits for its event: the watcher delivers events in order,
//! so once the barrier's event is in, every change completed before the drain has been seen.

use super::lost::Lost;
use notify::{EventKind, RecursiveMode, Watcher};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// What the watcher's event handler collects for the next drain.
#[derive(Debug, Default)]
struct Events {
    dirty: HashSet<PathBuf>,
    rescan: bool,
    broken: Option<String>,
    /// The highest barrier number seen.
    barrier: u64,
}

#[derive(Debug, Default)]
struct Shared {
    events: Mutex<Events>,
    arrived: Condvar,
}

/// `notify`'s watcher thread and the barrier.
#[cfg_attr(all(target_os = "linux", not(test)), allow(dead_code))]
pub(super) struct ThreadQueue {
    watcher: notify::RecommendedWatcher,
    shared: Arc<Shared>,
    /// The barrier's private directory (outside the memory dir).
    barrier_dir: tempfile::TempDir,
    next_barrier: u64,
}

#[cfg_attr(all(target_os = "linux", not(test)), allow(dead_code))]
impl ThreadQueue {
    /// A watcher over the barrier dir alone.
    pub(super) fn new() -> Result<Self, String> {
        let barrier_dir = tempfile::Builder::new()
            .prefix("memloop-feed-")
            .tempdir()
            .map_err(|e| format!("creating the watcher's barrier dir: {e}"))?;
        let shared = Arc::new(Shared::default());
        let barrier_path = barrier_dir.path().to_path_buf();
        let handler_shared = shared.clone();
        let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            handle(&handler_shared, &barrier_path, res);
        })
        .map_err(|e| format!("starting the watcher: {e}"))?;
        watcher
            .watch(barrier_dir.path(), RecursiveMode::NonRecursive)
            .map_err(|e| format!("watching the barrier dir: {e}"))?;
        Ok(Self {
            watcher,
            shared,
            barrier_dir,
            next_barrier: 0,
        })
    }

    /// Watch `dir` (not its subdirectories).
    pub(super) fn watch(&mut self, dir: &Path) -> Result<(), String> {
        self.watcher
            .watch(dir, RecursiveMode::NonRecursive)
            .map_err(|e| format!("watching {}: {e}", dir.display()))
    }

    /// Wait until every event queued before this call has been handled (the barrier), then
    /// take the dirty paths.
    pub(super) fn drain(&mut self, timeout: Duration) -> Result<HashSet<PathBuf>, Lost> {
        self.next_barrier += 1;
        let n = self.next_barrier;
        let marker = self.barrier_dir.path().join(format!("b{n}"));
        std::fs::File::create(&marker)
            .and_then(|_| std::fs::remove_file(&marker))
            .map_err(|e| Lost::Broken(format!("writing the barrier file: {e}")))?;
        let events = self
            .shared
            .events
            .lock()
            .map_err(|_| Lost::Broken("watcher state poisoned".into()))?;
        let (mut events, wait) = self
            .shared
            .arrived
            .wait_timeout_while(events, timeout, |e| e.barrier < n && e.broken.is_none())
            .map_err(|_| Lost::Broken("watcher state poisoned".into()))?;
        if let Some(why) = events.broken.take() {
            return Err(Lost::Broken(why));
        }
        if wait.timed_out() {
            // A stalled watcher thread (an overloaded machine): start a fresh watcher and let
            // every cache rescan, rather than trust events that may never come.
            tracing::warn!(?timeout, "memory dir watcher did not answer; restarting it");
            return Err(Lost::Rescan);
        }
        if std::mem::take(&mut events.rescan) {
            return Err(Lost::Rescan);
        }
        Ok(std::mem::take(&mut events.dirty))
    }
}

/// The watcher's event handler (runs on the watcher's thread).
fn handle(shared: &Shared, barrier_dir: &Path, res: notify::Result<notify::Event>) {
    let Ok(mut events) = shared.events.lock() else {
        return;
    };
    match res {
        Err(e) => events.broken = Some(e.to_string()),
        Ok(ev) => {
            if ev.need_rescan() {
                events.rescan = true;
            }
            let structural = matches!(
                ev.kind,
                EventKind::Create(notify::event::CreateKind::Folder)
                    | EventKind::Remove(notify::event::RemoveKind::Folder)
            );
            let read_only = matches!(
                ev.kind,
                EventKind::Access(
                    notify::event::AccessKind::Open(_)
                        | notify::event::AccessKind::Close(notify::event::AccessMode::Read)
                        | notify::event::AccessKind::Read
                )
            );
            for p in ev.paths {
                if p.parent() == Some(barrier_dir) {
                    if matches!(ev.kind, EventKind::Create(_)) {
                        let n = p
                            .file_name()
                            .and_then(|n| n.to_str())
                            .and_then(|n| n.strip_prefix('b'))
                            .and_then(|n| n.parse().ok())
                            .unwrap_or(0);
                        events.barrier = events.barrier.max(n);
                    }
                } else if p.starts_with(barrier_dir) || read_only {
                } else if structural {
                    let hidden = p
                        .file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with('.'));
                    if !hidden {
                        events.rescan = true;
                    }
                } else {
                    events.dirty.insert(p);
                }
            }
        }
    }
    drop(events);
    shared.arrived.notify_all();
}
