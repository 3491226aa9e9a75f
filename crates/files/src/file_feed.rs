//! The file store's change feed ([`MemoryStore::changes`](crate::MemoryStore::changes)
//! for [`FileMemoryStore`](crate::FileMemoryStore)): what changed in the memory dir since
//! a cursor, by any writer (memloop, an editor, `git checkout`, another process).
//!
//! Two sources, one journal:
//! - **watching** (the default where it works): filesystem notifications, one non-recursive
//!   watch per non-hidden directory, mark paths dirty; a refresh re-reads only those. No refresh
//!   trusts an event that "has not arrived yet": on Linux the feed reads the kernel's inotify
//!   queue itself, which holds every change completed before the read (`kernel`); elsewhere
//!   `notify`'s watcher thread delivers the events and each refresh waits for a barrier event
//!   first (`thread`). A refresh that finds nothing, or a few memories, queued is answered on
//!   the caller's task ([`FileFeed::changes_now`]). Anything the watcher cannot describe exactly
//!   (a directory created, deleted or renamed, a queue overflow) starts a new epoch: every cursor
//!   then gets [`Changes::Rescan`]; so does a barrier that times out (the watcher is restarted).
//!   A watcher error or a watcher that cannot start switches the feed to polling for good.
//! - **polling** (network and FUSE filesystems, where other machines' changes raise no local
//!   event; `StoreConfig::watch = false`; a failed watcher): each refresh walks the dir and
//!   compares every memory file's (size, mtime, ctime, inode) with the last walk, then reads only
//!   what differs. A file changed within [`RACY_WINDOW`] of a walk could change again within the
//!   same timestamp tick with the same size; such "racy" files are re-hashed on every refresh
//!   until their stamp is older than the window, so a second edit in one tick is still seen.
//!
//! Reads create nothing in the memory dir (the barrier's directory is a temp dir of its own),
//! and the feed keeps its state in memory (cursors are only valid within this process and this
//! store instance; another one's cursor gets `Rescan`).

#[cfg(target_os = "linux")]
mod kernel;
mod lost;
mod thread;
mod watch;

use crate::scan::{ScanConfig, header_at, walk};
use crate::stamp::{Stamp, stamp_of};
use lost::Lost;
use memloop_store::MemoryPath;
use memloop_store::{ChangeCursor, Changes};
use memloop_store::{MemoryError, MemoryHeader};
use sha2::{Digest, Sha256};
use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, TryLockError};
use std::time::{Duration, SystemTime};
use watch::{Backend, Dirty, Watch};

/// A file whose ctime or mtime is this close to a walk may change again within the same
/// timestamp tick (coarse clocks, 2-second FAT times, a file server's clock): the polling feed
/// re-hashes it until it is older.
pub(crate) const RACY_WINDOW: Duration = Duration::from_secs(2);

/// How long a refresh waits for the watcher thread's barrier event before it stops trusting
/// that watcher and starts a new one.
const BARRIER_TIMEOUT: Duration = Duration::from_secs(2);

/// At most this many changed memories are read on the caller's task by
/// [`FileFeed::changes_now`] (a header each); more go to a blocking thread.
const INLINE_READS: usize = 4;

/// Changes remembered for cursors; an older cursor gets `Rescan`.
const JOURNAL_CAP: usize = 65_536;

/// Filesystems where a local watcher does not see other machines' changes (or sees none).
const UNWATCHABLE_FS: &[&str] = &[
    "nfs",
    "nfs4",
    "cifs",
    "smb3",
    "smbfs",
    "9p",
    "ceph",
    "afs",
    "glusterfs",
    "lustre",
    "gpfs",
    "virtiofs",
    "fuse",
    "fuseblk",
];

/// Distinguishes feeds (and so their cursors) within a process.
static NEXT_FEED: AtomicU64 = AtomicU64::new(1);

/// How the feed learns about changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FeedMode {
    /// Filesystem notifications (with polling as the fallback).
    Watch,
    /// `notify`'s watcher thread and the barrier even on Linux (tests of the other platforms'
    /// path).
    #[cfg(test)]
    WatchThread,
    /// Polling only.
    Poll,
}

/// The feed of one memory dir; shared by every clone of its store.
#[derive(Debug)]
pub(crate) struct FileFeed {
    root: PathBuf,
    scan: ScanConfig,
    mode: FeedMode,
    /// `pid.n`: a cursor names the feed that issued it.
    id: String,
    /// Set while a watcher runs (so the dir is on a local filesystem).
    watched: AtomicBool,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    source: Option<Source>,
    /// Bumped whenever the feed cannot say what changed: every older cursor gets `Rescan`.
    epoch: u64,
    /// The position of the last journal entry.
    seq: u64,
    /// Cursors below this are too old for the journal.
    floor: u64,
    journal: VecDeque<(u64, String)>,
    /// The current header of every path in the journal (`None`: gone or not a memory), with
    /// the position of its last journal entry.
    latest: HashMap<String, (u64, Option<MemoryHeader>)>,
}

#[derive(Debug)]
enum Source {
    Watch(Box<Watch>),
    Poll(Snapshot),
}

impl FileFeed {
    pub(crate) fn new(root: &Path, scan: ScanConfig, mode: FeedMode) -> Self {
        Self {
            root: root.to_path_buf(),
            scan,
            mode,
            id: format!(
                "{}.{}",
                std::process::id(),
                NEXT_FEED.fetch_add(1, Ordering::Relaxed)
            ),
            watched: AtomicBool::new(false),
            inner: Mutex::new(Inner::default()),
        }
    }

    /// Whether a watcher runs over the dir, so it is on a local filesystem (false until the
    /// first [`changes`](Self::changes), and for good once the feed polls).
    pub(crate) fn on_local_fs(&self) -> bool {
        self.watched.load(Ordering::Relaxed)
    }

    /// The contract of [`MemoryStore::changes`](crate::MemoryStore::changes). Blocking.
    pub(crate) fn changes(&self, since: Option<&ChangeCursor>) -> Result<Changes, MemoryError> {
        let mut inner = self
            .inner
            .lock()
            .map_err(|_| MemoryError::io("change feed", std::io::Error::other("poisoned")))?;
        self.refresh(&mut inner);
        Ok(self.answer(&inner, since))
    }

    /// [`changes`](Self::changes) when it can be answered at once: the feed is idle, it
    /// watches a queue it can read without waiting (Linux), and at most [`INLINE_READS`]
    /// memories changed since the last refresh (their headers are read here, from the local
    /// filesystem the watch runs on). `None` otherwise (a rescan, a barrier to wait for, a
    /// polled or busy feed, more changes): the caller runs `changes` where it may block.
    pub(crate) fn changes_now(&self, since: Option<&ChangeCursor>) -> Option<Changes> {
        let mut inner = match self.inner.try_lock() {
            Ok(inner) => inner,
            Err(TryLockError::WouldBlock | TryLockError::Poisoned(_)) => return None,
        };
        let Some(Source::Watch(watch)) = inner.source.as_mut() else {
            return None;
        };
        if !watch.cheap(&self.root, INLINE_READS) {
            return None;
        }
        self.refresh(&mut inner);
        Some(self.answer(&inner, since))
    }

    /// What changed since `since`, per the journal as it stands.
    fn answer(&self, inner: &Inner, since: Option<&ChangeCursor>) -> Changes {
        let cursor = ChangeCursor::new(format!("{}:{}:{}", self.id, inner.epoch, inner.seq));
        let rescan = Changes::Rescan {
            cursor: Some(cursor.clone()),
        };
        let Some(since) = since.and_then(|c| self.parse(c)) else {
            return rescan;
        };
        let (epoch, seq) = since;
        if epoch != inner.epoch || seq < inner.floor || seq > inner.seq {
            return rescan;
        }
        if seq == inner.seq {
            return Changes::Unchanged;
        }
        let start = inner.journal.partition_point(|(s, _)| *s <= seq);
        let mut seen = HashSet::new();
        let (mut written, mut removed) = (Vec::new(), Vec::new());
        for (_, rel) in inner.journal.range(start..) {
            if !seen.insert(rel.as_str()) {
                continue;
            }
            match inner.latest.get(rel) {
                Some((_, Some(h))) => written.push(h.clone()),
                _ => match MemoryPath::new(rel) {
                    Ok(p) => removed.push(p),
                    // A file the scan lists but no memory path can name: only a rescan drops it.
                    Err(_) => return rescan,
                },
            }
        }
        Changes::Changed {
            cursor,
            written,
            removed,
            files: Vec::new(),
        }
    }

    fn parse(&self, cursor: &ChangeCursor) -> Option<(u64, u64)> {
        let mut parts = cursor.as_str().rsplitn(3, ':');
        let seq = parts.next()?.parse().ok()?;
        let epoch = parts.next()?.parse().ok()?;
        (parts.next()? == self.id).then_some((epoch, seq))
    }

    /// Bring the journal up to date with the dir.
    fn refresh(&self, inner: &mut Inner) {
        match inner.source.take() {
            None => self.start(inner),
            Some(Source::Watch(mut w)) => match w.drain(BARRIER_TIMEOUT) {
                Ok(paths) => {
                    let mut lost = false;
                    let mut rels = Vec::new();
                    for p in paths {
                        match w.classify(&self.root, &p) {
                            Dirty::Ignore => {}
                            Dirty::Memory(rel) => rels.push(rel),
                            Dirty::Structure => lost = true,
                        }
                    }
                    if lost {
                        tracing::debug!(
                            root = %self.root.display(),
                            "a directory changed; watches rebuilt, caches rescan"
                        );
                        drop(w);
                        self.start(inner);
                    } else {
                        for rel in rels {
                            self.record(inner, rel);
                        }
                        inner.source = Some(Source::Watch(w));
                    }
                }
                Err(Lost::Rescan) => {
                    tracing::debug!(root = %self.root.display(), "watcher asked for a rescan");
                    drop(w);
                    self.start(inner);
                }
                Err(Lost::Broken(why)) => {
                    tracing::warn!(
                        root = %self.root.display(), reason = %why,
                        "memory dir watcher failed; polling the dir from now on"
                    );
                    drop(w);
                    self.start_polling(inner);
                }
            },
            Some(Source::Poll(mut snap)) => {
                for rel in snap.diff(&self.root) {
                    self.record(inner, rel);
                }
                inner.source = Some(Source::Poll(snap));
            }
        }
    }

    /// Start a source and a new epoch (every cursor rescans).
    fn start(&self, inner: &mut Inner) {
        let backend = match self.mode {
            FeedMode::Watch => Some(Backend::native()),
            #[cfg(test)]
            FeedMode::WatchThread => Some(Backend::Thread),
            FeedMode::Poll => None,
        };
        if let Some(backend) = backend {
            match watchable(&self.root).and_then(|()| Watch::start(&self.root, backend)) {
                Ok(w) => {
                    inner.source = Some(Source::Watch(Box::new(w)));
                    self.watched.store(true, Ordering::Relaxed);
                    self.new_epoch(inner);
                    return;
                }
                Err(why) => tracing::info!(
                    root = %self.root.display(), reason = %why,
                    "not watching the memory dir; polling it"
                ),
            }
        }
        self.start_polling(inner);
    }

    fn start_polling(&self, inner: &mut Inner) {
        self.watched.store(false, Ordering::Relaxed);
        let mut snap = Snapshot::default();
        snap.diff(&self.root);
        inner.source = Some(Source::Poll(snap));
        self.new_epoch(inner);
    }

    fn new_epoch(&self, inner: &mut Inner) {
        inner.epoch += 1;
        inner.journal.clear();
        inner.latest.clear();
        inner.floor = inner.seq;
    }

    fn record(&self, inner: &mut Inner, rel: String) {
        let header = header_at(&self.root, &rel, &self.scan);
        inner.seq += 1;
        inner.latest.insert(rel.clone(), (inner.seq, header));
        inner.journal.push_back((inner.seq, rel));
        while inner.journal.len() > JOURNAL_CAP {
            if let Some((s, old)) = inner.journal.pop_front() {
                inner.floor = s;
                if inner.latest.get(&old).is_some_and(|(last, _)| *last == s) {
                    inner.latest.remove(&old);
                }
            }
        }
    }
}

/// `Ok` when a local watcher sees every change of the filesystem holding `root` (not a network
/// or FUSE filesystem, per `/proc/self/mountinfo`; other systems are trusted).
fn watchable(root: &Path) -> Result<(), String> {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Ok(());
    };
    let mut best: Option<(usize, String)> = None;
    for line in info.lines() {
        let mut halves = line.splitn(2, " - ");
        let (Some(left), Some(right)) = (halves.next(), halves.next()) else {
            continue;
        };
        let (Some(mount), Some(fstype)) = (left.split(' ').nth(4), right.split(' ').next()) else {
            continue;
        };
        let mount = unescape_mount(mount);
        if root.starts_with(&mount) && best.as_ref().is_none_or(|(len, _)| mount.len() >= *len) {
            best = Some((mount.len(), fstype.to_owned()));
        }
    }
    match best {
        Some((_, fstype))
            if UNWATCHABLE_FS.contains(&fstype.as_str()) || fstype.starts_with("fuse.") =>
        {
            Err(format!("the memory dir is on a `{fstype}` filesystem"))
        }
        _ => Ok(()),
    }
}

/// A mount point as `/proc/self/mountinfo` writes it (`\040` for a space, ...).
fn unescape_mount(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).and_then(|d| {
            std::str::from_utf8(d)
                .ok()
                .and_then(|d| u8::from_str_radix(d, 8).ok())
        });
        match (bytes[i], octal) {
            (b'\\', Some(b)) => {
                out.push(b);
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One memory file as the polling feed last saw it.
#[derive(Debug)]
struct Seen {
    stamp: Stamp,
    /// Set while the stamp is racy (within [`RACY_WINDOW`] of the walk): the content's hash.
    racy: Option<[u8; 32]>,
}

/// The polling feed's picture of the dir.
#[derive(Debug, Default)]
struct Snapshot {
    files: HashMap<String, Seen>,
}

fn is_racy(stamp: &Stamp, walk_started: SystemTime) -> bool {
    let Some(edge) = walk_started.checked_sub(RACY_WINDOW) else {
        return true;
    };
    let edge_secs = edge
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    // Sub-second ctime precision is not trusted: compare whole seconds, rounding toward racy.
    stamp.ctime.0 >= edge_secs || stamp.mtime.is_none_or(|m| m >= edge)
}

fn content_hash(path: &Path) -> Option<[u8; 32]> {
    std::fs::read(path).ok().map(|b| Sha256::digest(&b).into())
}

impl Snapshot {
    /// Walk the dir; update the picture; return the paths that changed (written or removed).
    fn diff(&mut self, root: &Path) -> Vec<String> {
        let started = SystemTime::now();
        let found = match walk(root) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(root = %root.display(), error = %e, "cannot walk the memory dir");
                return Vec::new();
            }
        };
        let mut changed = Vec::new();
        let mut next = HashMap::with_capacity(found.len());
        for f in found {
            let Ok(meta) = std::fs::metadata(&f.abs) else {
                continue; // gone between the walk and the stat: reported as removed below
            };
            let stamp = stamp_of(&meta);
            let racy_now = is_racy(&stamp, started);
            let old = self.files.remove(&f.rel);
            let (differs, hash) = match old {
                None => (true, None),
                Some(o) if o.stamp != stamp => (true, None),
                Some(Seen { racy: Some(h), .. }) => {
                    let now = content_hash(&f.abs);
                    (now != Some(h), now)
                }
                Some(_) => (false, None),
            };
            let racy = if racy_now {
                hash.or_else(|| content_hash(&f.abs))
            } else {
                None
            };
            if differs {
                changed.push(f.rel.clone());
            }
            next.insert(f.rel, Seen { stamp, racy });
        }
        changed.extend(self.files.drain().map(|(rel, _)| rel));
        self.files = next;
        changed
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
