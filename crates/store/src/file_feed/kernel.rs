//! The Linux watch queue: the feed reads the inotify queue itself. The kernel queues an inotify
//! event inside the system call that makes the change, before that call returns, and keeps the
//! queue in order; so a non-blocking read at the start of a refresh returns every change
//! completed before it, by this process or any other on the machine. No thread, no barrier, no
//! wait: a refresh with nothing queued costs one `read` that answers "nothing".

use super::lost::Lost;
use inotify::{EventMask, Inotify, WatchMask};
use std::collections::{HashMap, HashSet};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

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

/// One inotify instance over the memory dir's directories.
pub(super) struct KernelQueue {
    inotify: Inotify,
    /// Each watch's directory, by watch descriptor.
    dirs: HashMap<i32, PathBuf>,
    buffer: Box<[u8]>,
    /// Read from the kernel, not yet taken by a drain.
    pending: HashSet<PathBuf>,
    /// An event no path can describe was read (overflow, a directory created or gone).
    rescan: bool,
    /// Reading failed.
    broken: Option<String>,
}

impl KernelQueue {
    /// An inotify instance with no watch yet.
    pub(super) fn new() -> Result<Self, String> {
        let inotify = Inotify::init().map_err(|e| format!("starting inotify: {e}"))?;
        Ok(Self {
            inotify,
            dirs: HashMap::new(),
            buffer: vec![0; BUFFER].into_boxed_slice(),
            pending: HashSet::new(),
            rescan: false,
            broken: None,
        })
    }

    /// Watch `dir` (not its subdirectories).
    pub(super) fn watch(&mut self, dir: &Path) -> Result<(), String> {
        let wd = self
            .inotify
            .watches()
            .add(dir, mask())
            .map_err(|e| format!("watching {}: {e}", dir.display()))?;
        self.dirs
            .insert(wd.get_watch_descriptor_id(), dir.to_path_buf());
        Ok(())
    }

    /// Every path changed since the last drain.
    pub(super) fn drain(&mut self) -> Result<HashSet<PathBuf>, Lost> {
        self.read();
        if let Some(why) = self.broken.take() {
            return Err(Lost::Broken(why));
        }
        if std::mem::take(&mut self.rescan) {
            return Err(Lost::Rescan);
        }
        Ok(std::mem::take(&mut self.pending))
    }

    /// Read what is queued; `true` when at most `reads` paths that `ignore` does not accept
    /// (those are dropped) changed since the last drain, and nothing needs a rescan.
    pub(super) fn cheap(&mut self, ignore: impl Fn(&Path) -> bool, reads: usize) -> bool {
        self.read();
        self.pending.retain(|p| !ignore(p));
        self.pending.len() <= reads && !self.rescan && self.broken.is_none()
    }

    /// Move everything the kernel has queued into `pending` / `rescan` / `broken`, without
    /// waiting.
    fn read(&mut self) {
        let Self {
            inotify,
            dirs,
            buffer,
            pending,
            rescan,
            broken,
        } = self;
        while broken.is_none() {
            let events = match inotify.read_events(buffer) {
                Ok(events) => events,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    *broken = Some(format!("reading inotify events: {e}"));
                    return;
                }
            };
            for event in events {
                let mask = event.mask;
                if mask.intersects(
                    EventMask::Q_OVERFLOW
                        | EventMask::IGNORED
                        | EventMask::DELETE_SELF
                        | EventMask::MOVE_SELF,
                ) {
                    // Events were lost, or a watched directory went: the watches no longer
                    // match the tree.
                    *rescan = true;
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
                        *rescan = true;
                    }
                    continue;
                }
                match dirs.get(&event.wd.get_watch_descriptor_id()) {
                    Some(dir) => {
                        pending.insert(dir.join(name));
                    }
                    None => *rescan = true,
                }
            }
        }
    }
}
