//! The Linux watch queue: the feed reads the inotify queue itself. The kernel queues an inotify
//! event inside the system call that makes the change, before that call returns, and keeps the
//! queue in order; so a non-blocking read at the start of a refresh returns every change
//! completed before it, by this process or any other on the machine. No thread, no barrier, no
//! wait: a refresh with nothing queued costs one `read` that answers "nothing".
//!
//! The process has one inotify instance, whatever the number of memory dirs it watches
//! ([`Shared`]): a read hands each event to the feeds watching its directory.

use super::lost::Lost;
use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask};
use std::collections::{HashMap, HashSet};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Bytes read per call: many events (one is at most 16 bytes plus a 256-byte name).
const BUFFER: usize = 16 * 1024;

/// What changes a watch reports: every way a file's content, name or existence changes.
fn mask() -> WatchMask {
    WatchMask::CREATE
        | WatchMask::DELETE
        | WatchMask::MODIFY
        | WatchMask::CLOSE_WRITE
        | WatchMask::ATTRIB
        | WatchMask::MOVED_FROM
        | WatchMask::MOVED_TO
        | WatchMask::DELETE_SELF
        | WatchMask::MOVE_SELF
        | WatchMask::ONLYDIR
        | WatchMask::DONT_FOLLOW
}

/// The events read from the kernel for one feed's queue, not yet taken by a drain.
#[derive(Default)]
struct Events {
    /// Paths changed.
    pending: HashSet<PathBuf>,
    /// An event no path can describe was read (overflow, a directory created or gone).
    rescan: bool,
    /// Reading failed.
    broken: Option<String>,
}

/// The process's one inotify instance, shared by every feed: an instance per open memory dir
/// would exhaust the user's instances (`fs.inotify.max_user_instances`, often 128) in a server
/// holding many projects, and take inotify from every other process of that user. Each queue
/// (one per running watch of a feed) owns its watch descriptors; a read of the instance, by
/// any queue, hands every event to the queues watching its directory, so none loses another's
/// events, and an overflow makes every queue rescan.
struct Shared {
    inotify: Inotify,
    buffer: Box<[u8]>,
    /// Each watch: its descriptor and who watches it (queue and directory). Two feeds over one
    /// directory get one descriptor from the kernel, so a watch has owners and goes with the
    /// last.
    watches: HashMap<i32, (WatchDescriptor, Vec<(u64, PathBuf)>)>,
    /// Each live queue's events.
    queues: HashMap<u64, Events>,
}

/// The shared instance, started by the first queue (again after a failed start).
static SHARED: Mutex<Option<Shared>> = Mutex::new(None);

/// Distinguishes queues.
static NEXT_QUEUE: AtomicU64 = AtomicU64::new(1);

fn shared() -> MutexGuard<'static, Option<Shared>> {
    // The state stays consistent between statements: a panic elsewhere leaves it usable.
    SHARED.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One feed's view of the shared inotify instance: the watches it added and the events read
/// for them. Dropping it removes its watches (`inotify_rm_watch`) unless another queue watches
/// the same directory, so the watches held are bounded by the watches running.
pub(super) struct KernelQueue {
    id: u64,
}

impl KernelQueue {
    /// A queue with no watch yet, on the shared instance (started here if need be).
    pub(super) fn new() -> Result<Self, String> {
        let mut guard = shared();
        if guard.is_none() {
            let inotify = Inotify::init().map_err(|e| format!("starting inotify: {e}"))?;
            *guard = Some(Shared {
                inotify,
                buffer: vec![0; BUFFER].into_boxed_slice(),
                watches: HashMap::new(),
                queues: HashMap::new(),
            });
        }
        let id = NEXT_QUEUE.fetch_add(1, Ordering::Relaxed);
        if let Some(shared) = guard.as_mut() {
            shared.queues.insert(id, Events::default());
        }
        Ok(Self { id })
    }

    /// Watch `dir` (not its subdirectories).
    pub(super) fn watch(&mut self, dir: &Path) -> Result<(), String> {
        let mut guard = shared();
        let shared = guard
            .as_mut()
            .ok_or_else(|| "the inotify instance is gone".to_owned())?;
        let wd = shared
            .inotify
            .watches()
            .add(dir, mask())
            .map_err(|e| format!("watching {}: {e}", dir.display()))?;
        shared
            .watches
            .entry(wd.get_watch_descriptor_id())
            .or_insert_with(|| (wd, Vec::new()))
            .1
            .push((self.id, dir.to_path_buf()));
        Ok(())
    }

    /// Every path changed since the last drain.
    pub(super) fn drain(&mut self) -> Result<HashSet<PathBuf>, Lost> {
        let mut guard = shared();
        let Some(shared) = guard.as_mut() else {
            return Err(Lost::Broken("the inotify instance is gone".into()));
        };
        shared.read();
        let events = shared.queues.entry(self.id).or_default();
        if let Some(why) = events.broken.take() {
            return Err(Lost::Broken(why));
        }
        if std::mem::take(&mut events.rescan) {
            return Err(Lost::Rescan);
        }
        Ok(std::mem::take(&mut events.pending))
    }

    /// Read what is queued; `true` when at most `reads` paths that `ignore` does not accept
    /// (those are dropped) changed since the last drain, and nothing needs a rescan.
    pub(super) fn cheap(&mut self, ignore: impl Fn(&Path) -> bool, reads: usize) -> bool {
        let mut guard = shared();
        let Some(shared) = guard.as_mut() else {
            return false;
        };
        shared.read();
        let events = shared.queues.entry(self.id).or_default();
        events.pending.retain(|p| !ignore(p));
        events.pending.len() <= reads && !events.rescan && events.broken.is_none()
    }
}

impl Drop for KernelQueue {
    fn drop(&mut self) {
        let mut guard = shared();
        let Some(shared) = guard.as_mut() else {
            return;
        };
        shared.queues.remove(&self.id);
        let Shared {
            inotify, watches, ..
        } = shared;
        watches.retain(|_, (wd, owners)| {
            owners.retain(|(queue, _)| *queue != self.id);
            if !owners.is_empty() {
                return true;
            }
            // The kernel answers with an `IN_IGNORED` event for it, which no queue claims.
            if let Err(e) = inotify.watches().remove(wd.clone()) {
                tracing::debug!(error = %e, "removing an inotify watch failed (already gone)");
            }
            false
        });
    }
}

impl Shared {
    /// Move everything the kernel has queued into the queues' events, without waiting.
    fn read(&mut self) {
        let Self {
            inotify,
            buffer,
            watches,
            queues,
        } = self;
        loop {
            let events = match inotify.read_events(buffer) {
                Ok(events) => events,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    for q in queues.values_mut() {
                        q.broken = Some(format!("reading inotify events: {e}"));
                    }
                    return;
                }
            };
            for event in events {
                let mask = event.mask;
                if mask.contains(EventMask::Q_OVERFLOW) {
                    // Events were lost, of any queue's directories: every queue rescans.
                    for q in queues.values_mut() {
                        q.rescan = true;
                    }
                    continue;
                }
                let wd = event.wd.get_watch_descriptor_id();
                // A watch no queue owns was removed by its queue: its events concern no one.
                let Some((_, owners)) = watches.get(&wd) else {
                    continue;
                };
                let mut rescan = || {
                    for (queue, _) in owners {
                        queues.entry(*queue).or_default().rescan = true;
                    }
                };
                if mask
                    .intersects(EventMask::IGNORED | EventMask::DELETE_SELF | EventMask::MOVE_SELF)
                {
                    // A watched directory went: the watches no longer match the tree.
                    rescan();
                    if mask.contains(EventMask::IGNORED) {
                        // The kernel dropped the watch itself.
                        watches.remove(&wd);
                    }
                    continue;
                }
                // No name: the watched directory's own attributes, which name no memory.
                let Some(name) = event.name else {
                    continue;
                };
                // Hidden names are never memories and hidden directories are never watched.
                if name.as_bytes().first() == Some(&b'.') {
                    continue;
                }
                if mask.contains(EventMask::ISDIR) {
                    if mask.intersects(
                        EventMask::CREATE
                            | EventMask::DELETE
                            | EventMask::MOVED_FROM
                            | EventMask::MOVED_TO,
                    ) {
                        rescan();
                    }
                    continue;
                }
                for (queue, dir) in owners {
                    queues
                        .entry(*queue)
                        .or_default()
                        .pending
                        .insert(dir.join(name));
                }
            }
        }
    }
}
