//! [`ScanCache`]: a store's headers kept current through its change feed
//! ([`MemoryStore::changes`]), so whatever needs "every memory" each turn (the recall hook, the
//! BM25 and vector indexes, MCP search) pays O(changes) instead of a rescan.
//!
//! One cache is the one follower of the feed for everything built on it: the recall hook, the
//! BM25 postings and the vector cache of one store share it, so a turn asks the store once what
//! changed ([`ScanCache::follow`]), and a changed memory is read once ([`ScanCache::read`])
//! however many indexes take it in.

use crate::changes::{ChangeCursor, Changes};
use crate::memory_store::MemoryStore;
use crate::newest_first::NewestFirst;
use crate::path_view::PathView;
use crate::types::{MemoryError, MemoryFile, MemoryHeader};
use std::cmp::Reverse;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;
use tokio::sync::Mutex;

/// What changed since the previous [`ScanCache::refresh`] of the same cache.
#[derive(Debug, Clone, PartialEq)]
pub enum ScanChange {
    /// Nothing.
    Unchanged,
    /// These memories were written (current headers) or removed (paths).
    Changed {
        /// Created or rewritten memories.
        written: Vec<MemoryHeader>,
        /// Removed memories.
        removed: Vec<String>,
    },
    /// The store could not say: the headers were rescanned; diff against them.
    Rescanned,
}

/// What changed in a [`ScanCache`] since the version a consumer last caught up with.
#[derive(Debug, Clone, PartialEq)]
pub enum Since {
    /// Nothing: the consumer is current.
    Current,
    /// These memories were written (current headers) or removed (paths) since; a path appears
    /// at most once, in its last state.
    Changed {
        /// Created or rewritten memories.
        written: Vec<MemoryHeader>,
        /// Removed memories.
        removed: Vec<String>,
    },
    /// The cache cannot say (its first scan, a rescan, or more changes than it remembers):
    /// compare against every header.
    Rescan,
}

/// One [`ScanCache::follow`]: every header, and what changed since the consumer's version.
#[derive(Debug, Clone)]
pub struct Followed {
    /// All memories, newest first (ties by path).
    pub headers: Arc<Headers>,
    /// What changed since the version the consumer gave.
    pub since: Since,
}

/// Every memory's header, newest first (ties by path) like [`MemoryStore::scan`], with the
/// views a caller answering from it needs without walking it: a lookup by path
/// ([`get`](Self::get)), the paths in order ([`by_path`](Self::by_path), [`count`](Self::count)
/// of a prefix) and each top-level folder newest first ([`newest_in`](Self::newest_in)). The
/// views are kept with the list, each change of the store applied to them as to it (O(log n)
/// to find a path, plus the moves of one insert or remove: none beyond the new header's for a
/// new memory in the list and its folder, which take the newest at their front and end, and
/// one block's entries, at most 512, in the path view, which is kept in blocks), so an answer
/// of `k` headers costs O(k log n) whatever the number `n` of memories. Derefs to the slice.
#[derive(Debug, Default)]
pub struct Headers {
    list: NewestFirst,
    /// Every listed path with its mtime (where it sits in `list`) and a hint of its place
    /// ([`Headers::listed`]), by path.
    paths: PathView,
    /// Each top-level folder ([`folder_of`]), by name, with its paths in the list's order
    /// reversed (oldest first: a new memory goes at the end, moving none of the others).
    folders: Vec<(String, Vec<Ordered>)>,
    version: u64,
    /// The heap the headers' and the views' strings own, kept as they change, so the estimate
    /// of a list never walks it.
    owned: usize,
}

impl Clone for Headers {
    /// A copy, its strings counted afresh (a cloned string's buffer is its length).
    fn clone(&self) -> Self {
        let mut h = Self {
            list: self.list.clone(),
            paths: self.paths.clone(),
            folders: self.folders.clone(),
            version: self.version,
            owned: 0,
        };
        h.owned = h.walk();
        h
    }
}

impl FromIterator<MemoryHeader> for Headers {
    /// The headers in the scan order (newest first, ties by path), a path listed once (the
    /// last header given for it), at version 0.
    fn from_iter<I: IntoIterator<Item = MemoryHeader>>(iter: I) -> Self {
        let mut h = Self::default();
        let list: Vec<MemoryHeader> = iter.into_iter().collect();
        h.apply(&list, &[]);
        h
    }
}

/// A path with its place in the scan order (newest first, then by path).
type Ordered = (Reverse<SystemTime>, String);

/// A hint that holds for no header (the folder views keep none).
const NO_HINT: u32 = u32::MAX;

/// A path view's hint for a header `from_end` places from the list's end (one that does not
/// fit is never right, and is checked like any other).
fn hint(from_end: usize) -> u32 {
    u32::try_from(from_end).unwrap_or(NO_HINT)
}

/// The top-level folder of a memory path, its `/` included (`todos/` of `todos/fix-ci.md`), or
/// `""` for a path at the top of the store.
pub fn folder_of(path: &str) -> &str {
    path.find('/').map_or("", |i| &path[..=i])
}

impl Headers {
    /// A list (in the scan order, each path once) as the version `version`.
    fn new(list: Vec<MemoryHeader>, version: u64) -> Self {
        let last = list.len().saturating_sub(1);
        let mut paths: Vec<crate::path_view::Entry> = list
            .iter()
            .enumerate()
            .map(|(i, h)| (h.rel_path.clone(), h.mtime, hint(last - i)))
            .collect();
        paths.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let paths = PathView::from_sorted(paths);
        let mut folders: Vec<(String, Vec<Ordered>)> = Vec::new();
        for h in list.iter().rev() {
            let folder = folder_of(&h.rel_path);
            let entry = (Reverse(h.mtime), h.rel_path.clone());
            match folders.binary_search_by(|(f, _)| f.as_str().cmp(folder)) {
                Ok(i) => folders[i].1.push(entry),
                Err(i) => folders.insert(i, (folder.to_owned(), vec![entry])),
            }
        }
        let mut h = Self {
            list: NewestFirst::from_vec(list),
            paths,
            folders,
            version,
            owned: 0,
        };
        h.owned = h.walk();
        h
    }

    /// The list as [`ScanCache::approx_bytes`] counts it (O(1)): its `Arc`, its buffers and
    /// the strings they own (kept as they change).
    fn approx_bytes(&self) -> usize {
        use crate::heap::{arc, vec};
        arc::<Self>()
            + vec(self.list.buffer())
            + self.owned
            + self.paths.buffers()
            + vec(&self.folders)
    }

    /// What the strings of the list and its views own, walked.
    fn walk(&self) -> usize {
        use crate::heap::{header, string, vec};
        self.list.as_slice().iter().map(header).sum::<usize>()
            + self.paths.iter().map(|(p, ..)| string(p)).sum::<usize>()
            + self
                .folders
                .iter()
                .map(|(f, v)| string(f) + vec(v) + v.iter().map(|(_, p)| string(p)).sum::<usize>())
                .sum::<usize>()
    }

    /// Apply a delta in O(k log n) lookups (plus the moves of one `Vec` insert or remove each,
    /// in the list and in each view).
    fn apply(&mut self, written: &[MemoryHeader], removed: &[String]) {
        for p in removed {
            self.drop_path(p);
        }
        for w in written {
            self.drop_path(&w.rel_path);
        }
        for w in written {
            // A path written twice in one delta keeps its last header.
            self.drop_path(&w.rel_path);
            self.insert(w);
        }
    }

    /// Remove `path` from the list and its views, if it is listed.
    fn drop_path(&mut self, path: &str) {
        use crate::heap::{header, string, vec};
        let Ok(at) = self.paths.find(path) else {
            return;
        };
        let (path, mtime, from_end) = self.paths.remove(at);
        self.owned -= string(&path);
        let probe = (Reverse(mtime), path.as_str());
        if let Some(i) = self.position(mtime, &path, from_end)
            && let Some(gone) = self.list.remove(i)
        {
            self.owned -= header(&gone);
        }
        let folder = folder_of(&path);
        if let Ok(f) = self
            .folders
            .binary_search_by(|(n, _)| n.as_str().cmp(folder))
        {
            let entries = &mut self.folders[f].1;
            if let Ok(i) = entries.binary_search_by(|(t, p)| probe.cmp(&(*t, p.as_str()))) {
                self.owned -= string(&entries.remove(i).1);
            }
            if entries.is_empty() {
                let (name, entries) = self.folders.remove(f);
                self.owned -= string(&name) + vec(&entries);
            }
        }
    }

    /// Add `w`, whose path is not listed, to the list and its views.
    fn insert(&mut self, w: &MemoryHeader) {
        use crate::heap::{header, string, vec};
        let i = self.list.as_slice().partition_point(|x| key(x) < key(w));
        self.owned += header(w);
        self.list.insert(i, w.clone());
        if let Err(at) = self.paths.find(&w.rel_path) {
            let path = w.rel_path.clone();
            self.owned += string(&path);
            let from_end = self.list.as_slice().len() - 1 - i;
            self.paths.insert(at, (path, w.mtime, hint(from_end)));
        }
        let folder = folder_of(&w.rel_path);
        let f = match self
            .folders
            .binary_search_by(|(n, _)| n.as_str().cmp(folder))
        {
            Ok(f) => f,
            Err(f) => {
                let name = folder.to_owned();
                self.owned += string(&name);
                self.folders.insert(f, (name, Vec::new()));
                f
            }
        };
        let entries = &mut self.folders[f].1;
        let before = vec(entries);
        let probe = key(w);
        let i = entries.partition_point(|(t, p)| (*t, p.as_str()) > probe);
        let path = w.rel_path.clone();
        self.owned += string(&path);
        entries.insert(i, (Reverse(w.mtime), path));
        self.owned = self.owned + vec(entries) - before;
    }

    /// Bumped by every refresh that changed something: equal versions from one [`ScanCache`]
    /// mean equal lists (so derived data can be kept per version).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The headers, newest first.
    pub fn as_slice(&self) -> &[MemoryHeader] {
        self.list.as_slice()
    }

    /// The header of `path`, if it is listed (O(log n)).
    pub fn get(&self, path: &str) -> Option<&MemoryHeader> {
        let (_, mtime, from_end) = self.paths.get(path)?;
        self.listed(*mtime, path, *from_end)
    }

    /// The header of `path` listed with `mtime` (from a view, which holds both).
    fn listed(&self, mtime: SystemTime, path: &str, from_end: u32) -> Option<&MemoryHeader> {
        self.position(mtime, path, from_end)
            .map(|i| &self.list.as_slice()[i])
    }

    /// Where the header of `path`, listed with `mtime`, is in the list. First where the path
    /// view's hint says (`from_end`: its place counted from the list's end when the view took
    /// it, which a new memory, taken at the front, does not change): one header compared. A
    /// change behind the front (a rewrite moving a memory to the front, a removal) moves the
    /// newer headers' places, so a hint that does not hold falls back to a search of the list
    /// by its order (O(log n), the path compared only between headers of the same time).
    fn position(&self, mtime: SystemTime, path: &str, from_end: u32) -> Option<usize> {
        let list = self.list.as_slice();
        let hinted = list.len().checked_sub(1 + from_end as usize);
        if let Some(i) = hinted
            && let Some(h) = list.get(i)
            && h.mtime == mtime
            && h.rel_path == path
        {
            return Some(i);
        }
        let probe = (Reverse(mtime), path);
        list.binary_search_by(|h| key(h).cmp(&probe)).ok()
    }

    /// Whether `path` is listed.
    pub fn contains(&self, path: &str) -> bool {
        self.paths.find(path).is_ok()
    }

    /// How many listed paths start with `prefix` (O(log n)).
    pub fn count(&self, prefix: &str) -> usize {
        self.paths.count(prefix)
    }

    /// The headers whose path starts with `prefix`, by path, from the first path strictly
    /// after `after` (from the first of the prefix without it): O(log n) to start, O(log n)
    /// an item.
    pub fn by_path<'a>(
        &'a self,
        prefix: &str,
        after: Option<&str>,
    ) -> impl Iterator<Item = &'a MemoryHeader> + 'a {
        self.paths
            .starting_with(prefix, after)
            .filter_map(|(p, mtime, from_end)| self.listed(*mtime, p, *from_end))
    }

    /// The headers of the top-level folder `folder` ([`folder_of`]: `todos/`, or `""` for the
    /// paths at the top), newest first (ties by path): O(log n) an item.
    pub fn newest_in<'a>(&'a self, folder: &str) -> impl Iterator<Item = &'a MemoryHeader> + 'a {
        let entries = self
            .folders
            .binary_search_by(|(n, _)| n.as_str().cmp(folder))
            .map_or(&[][..], |f| self.folders[f].1.as_slice());
        entries
            .iter()
            .rev()
            .filter_map(|(Reverse(mtime), p)| self.listed(*mtime, p, NO_HINT))
    }
}

impl std::ops::Deref for Headers {
    type Target = [MemoryHeader];
    fn deref(&self) -> &[MemoryHeader] {
        self.list.as_slice()
    }
}

/// One refresh: every header and what changed.
#[derive(Debug, Clone)]
pub struct ScanUpdate {
    /// All memories, newest first (ties by path).
    pub headers: Arc<Headers>,
    /// What changed since the previous refresh.
    pub change: ScanChange,
}

/// A store's headers, kept current through its change feed: with no change a refresh costs one
/// [`MemoryStore::changes`] call; with `k` changes, `k` header updates; only when the store
/// answers [`Changes::Rescan`] (the first refresh, a backend without a feed, a feed that lost
/// track) does it call [`MemoryStore::scan`]. Each consumer keeps its own cache (a cursor is
/// cheap); a cache is `Send + Sync` and serialises its refreshes.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use memloop_store::{MemoryDoc, MemoryStore, MemoryType, ScanCache, WriteMode};
/// use memloop_testkit::MapStore;
/// use std::sync::Arc;
/// let store: Arc<dyn MemoryStore> = Arc::new(MapStore::new());
/// let cache = ScanCache::new(store.clone());
/// assert!(cache.headers().await?.is_empty());
/// let doc = MemoryDoc::new("Deploys", "when", MemoryType::Project, "Tuesdays.");
/// store.write("deploys.md", &doc, WriteMode::Overwrite).await?;
/// assert_eq!(cache.headers().await?[0].rel_path, "deploys.md");
/// # Ok(()) }
/// ```
pub struct ScanCache {
    store: Arc<dyn MemoryStore>,
    /// The lists, the journal and the cursor. Held only to read them or to apply an answer,
    /// never while a question is out to the store: a consumer that only needs the current
    /// list ([`ScanCache::follow`] with a list handed out) never waits on a round trip.
    state: Mutex<State>,
    /// Held by the one refresh whose question is out to the store (or that is deciding whether
    /// to ask), so refreshes ask one at a time and each applies its answer to the cursor it
    /// asked with. Taken before `state`, never after.
    asking: Mutex<()>,
    /// How many refreshes have asked the store so far (each takes its number while it holds
    /// `asking`, before it asks): a caller notes it on arrival, to know which answers are new
    /// enough.
    asked: AtomicU64,
    /// Memory texts read recently (by a consumer, a search, or carried by the feed), each
    /// for the header the cache lists now.
    bodies: std::sync::Mutex<Bodies>,
}

/// Changes the cache remembers for consumers that catch up ([`ScanCache::follow`]): enough for
/// a consumer one or a few turns behind; one further behind compares every header.
const JOURNAL: usize = 256;
/// Earlier header lists kept for reuse (see [`State::spares`]): about as many as searches of
/// one project run at once on a busy server, each holding the list it ranked against.
const SPARES: usize = 8;
/// Most memory texts kept read, and most bytes of text (body and whole text counted): a
/// project's recent changes and its most searched memories, a small part of its budget.
const BODIES: usize = 256;
const BODY_BYTES: usize = 1024 * 1024;

/// Memory texts kept read, by path, oldest kept first out. A text is kept only for the header the
/// cache lists (same mtime) and forgotten when a change names its path, so what is kept is what
/// a read would return as of the cache's last refresh.
#[derive(Debug, Default)]
struct Bodies {
    /// Each path's text and the number it was kept under.
    files: HashMap<String, (u64, Arc<MemoryFile>)>,
    /// Paths by the number they were kept under (an entry whose number is no longer its path's
    /// is skipped).
    order: std::collections::VecDeque<(u64, String)>,
    kept: u64,
    bytes: usize,
    /// What the kept entries own (paths, files, `order`'s paths), as
    /// [`ScanCache::approx_bytes`] counts it: added as each is kept, taken off as it goes, so
    /// an estimate never walks them.
    owned: usize,
}

fn text_bytes(f: &MemoryFile) -> usize {
    f.body.len() + f.raw.len()
}

/// What one kept text owns beyond its map entry: its path, its `Arc` and everything in it.
fn kept_bytes(path: &String, f: &MemoryFile) -> usize {
    use crate::heap::{arc, header, string};
    string(path) + arc::<MemoryFile>() + header(&f.header) + string(&f.body) + string(&f.raw)
}

/// What one journal entry owns beyond its slot.
fn journaled_bytes(written: &Vec<MemoryHeader>, removed: &Vec<String>) -> usize {
    use crate::heap::{header, string, vec};
    vec(written)
        + written.iter().map(header).sum::<usize>()
        + vec(removed)
        + removed.iter().map(string).sum::<usize>()
}

impl Bodies {
    fn get(&self, header: &MemoryHeader) -> Option<Arc<MemoryFile>> {
        self.files
            .get(&header.rel_path)
            .filter(|(_, f)| f.header.mtime == header.mtime)
            .map(|(_, f)| f.clone())
    }

    fn forget(&mut self, path: &str) {
        if let Some((key, (_, f))) = self.files.remove_entry(path) {
            self.bytes -= text_bytes(&f);
            self.owned -= kept_bytes(&key, &f);
        }
    }

    /// What is kept, as [`ScanCache::approx_bytes`] counts it (O(1)).
    fn approx_bytes(&self) -> usize {
        use crate::heap::{deque, map};
        map(&self.files) + deque(&self.order) + self.owned
    }

    fn keep(&mut self, file: Arc<MemoryFile>) {
        let size = text_bytes(&file);
        if size > BODY_BYTES {
            return;
        }
        let path = file.header.rel_path.clone();
        self.forget(&path);
        while self.files.len() >= BODIES || self.bytes + size > BODY_BYTES {
            let Some((n, oldest)) = self.order.pop_front() else {
                break;
            };
            self.owned -= crate::heap::string(&oldest);
            if self.files.get(&oldest).is_some_and(|(m, _)| *m == n) {
                self.forget(&oldest);
            }
        }
        if self.order.len() >= 2 * BODIES {
            let (files, owned) = (&self.files, &mut self.owned);
            self.order.retain(|(n, p)| {
                let live = files.get(p).is_some_and(|(m, _)| m == n);
                if !live {
                    *owned -= crate::heap::string(p);
                }
                live
            });
        }
        self.kept += 1;
        self.bytes += size;
        let listed = path.clone();
        self.owned += crate::heap::string(&listed) + kept_bytes(&path, &file);
        self.order.push_back((self.kept, listed));
        self.files.insert(path, (self.kept, file));
    }

    fn clear(&mut self) {
        *self = Self::default();
    }
}

impl std::fmt::Debug for ScanCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScanCache")
            .field("store", &self.store.describe().to_string())
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Default)]
struct State {
    /// `None` until the first refresh, and after [`ScanCache::invalidate`].
    cursor: Option<ChangeCursor>,
    loaded: bool,
    headers: Arc<Headers>,
    /// The versions made by a delta, oldest first, with what each wrote and removed (at most
    /// [`JOURNAL`]); a rescan clears it.
    journal: std::collections::VecDeque<(u64, Vec<MemoryHeader>, Vec<String>)>,
    /// The number ([`ScanCache::asked`]) of the newest refresh that asked the store and got its
    /// answer applied; 0 before any.
    answered: u64,
    /// Earlier lists (at most [`SPARES`], newest last) that searches may still hold. A delta
    /// that finds the current list held is applied to a spare no one holds any more, brought up
    /// to date from the journal, instead of to a copy of the current list: O(changes) instead
    /// of O(memories) while searches run.
    spares: Vec<Arc<Headers>>,
    /// What the journal's entries own ([`journaled_bytes`]): added as each is journaled, taken
    /// off as it goes.
    journaled: usize,
}

/// The sort key of the scan order: newest first, then by path.
fn key(h: &MemoryHeader) -> (Reverse<SystemTime>, &str) {
    (Reverse(h.mtime), h.rel_path.as_str())
}

impl State {
    fn replace(&mut self, list: Vec<MemoryHeader>) {
        self.headers = Arc::new(Headers::new(list, self.headers.version + 1));
        self.loaded = true;
        self.journal.clear();
        self.journaled = 0;
        // The journal no longer reaches them.
        self.spares.clear();
    }

    /// What changed after version `seen` (`None`: the consumer has seen nothing).
    fn since(&self, seen: Option<u64>) -> Since {
        let current = self.headers.version;
        let Some(seen) = seen else {
            return Since::Rescan;
        };
        if seen == current {
            return Since::Current;
        }
        // The journal must hold every version after `seen`, up to the current one.
        let reaches = self
            .journal
            .front()
            .is_some_and(|(first, ..)| *first <= seen + 1)
            && seen < current;
        if !reaches {
            return Since::Rescan;
        }
        let mut written: HashMap<&str, &MemoryHeader> = HashMap::new();
        let mut removed: Vec<&str> = Vec::new();
        for (_, w, r) in self.journal.iter().filter(|(v, ..)| *v > seen) {
            for p in r {
                written.remove(p.as_str());
                removed.push(p);
            }
            for h in w {
                written.insert(&h.rel_path, h);
            }
        }
        removed.retain(|p| !written.contains_key(p));
        removed.sort_unstable();
        removed.dedup();
        Since::Changed {
            written: written.into_values().cloned().collect(),
            removed: removed.into_iter().map(str::to_owned).collect(),
        }
    }

    /// Apply a delta as a new version, journaled. The current list is changed in place when no
    /// caller holds it; otherwise the delta goes to a list no caller holds ([`Self::unheld`]),
    /// which becomes the current one, and the list replaced becomes a spare.
    fn apply(&mut self, written: &[MemoryHeader], removed: &[String]) {
        if Arc::get_mut(&mut self.headers).is_none() {
            let next = self.unheld();
            let held = std::mem::replace(&mut self.headers, next);
            if self.spares.len() == SPARES {
                // The oldest still held goes (it is freed when its last caller lets go): a
                // spare no one holds is the one to keep for the next delta.
                let held = self.spares.iter().position(|s| Arc::strong_count(s) > 1);
                self.spares.remove(held.unwrap_or(0));
            }
            self.spares.push(held);
        }
        let version = self.headers.version + 1;
        if let Some(h) = Arc::get_mut(&mut self.headers) {
            h.apply(written, removed);
            h.version = version;
        }
        if self.journal.len() == JOURNAL
            && let Some((_, w, r)) = self.journal.pop_front()
        {
            self.journaled -= journaled_bytes(&w, &r);
        }
        let (written, removed) = (written.to_vec(), removed.to_vec());
        self.journaled += journaled_bytes(&written, &removed);
        self.journal.push_back((version, written, removed));
    }

    /// The header lists (the current one and the spares) and the journal, as
    /// [`ScanCache::approx_bytes`] counts them (O(spares)).
    fn approx_bytes(&self) -> usize {
        use crate::heap::{deque, vec};
        self.headers.approx_bytes()
            + vec(&self.spares)
            + self.spares.iter().map(|s| s.approx_bytes()).sum::<usize>()
            + deque(&self.journal)
            + self.journaled
    }

    /// The current list in one no caller holds: a spare no caller holds any more, brought up to
    /// date with the journal's deltas since its version (O(changes)), or else a copy of the
    /// current list (O(memories)).
    fn unheld(&mut self) -> Arc<Headers> {
        let journal = &self.journal;
        let reaches = |v: u64| journal.front().is_some_and(|(first, ..)| *first <= v + 1);
        // One the journal no longer reaches can never be brought up to date.
        self.spares.retain(|s| reaches(s.version));
        let free = self
            .spares
            .iter_mut()
            .position(|s| Arc::get_mut(s).is_some());
        if let Some(i) = free {
            let mut spare = self.spares.remove(i);
            if let Some(h) = Arc::get_mut(&mut spare) {
                let from = h.version;
                for (v, w, r) in journal.iter().filter(|(v, ..)| *v > from) {
                    h.apply(w, r);
                    h.version = *v;
                }
                return spare;
            }
        }
        Arc::new((*self.headers).clone())
    }
}

impl ScanCache {
    /// A cache over `store`; the first refresh scans.
    pub fn new(store: Arc<dyn MemoryStore>) -> Self {
        Self {
            store,
            state: Mutex::new(State::default()),
            asking: Mutex::new(()),
            asked: AtomicU64::new(0),
            bodies: std::sync::Mutex::new(Bodies::default()),
        }
    }

    /// The store this cache follows.
    pub fn store(&self) -> &Arc<dyn MemoryStore> {
        &self.store
    }

    /// Every header, current (newest first).
    pub async fn headers(&self) -> Result<Arc<Headers>, MemoryError> {
        Ok(self.refresh().await?.headers)
    }

    /// Catch a consumer (an index built from every memory) up with the store: the headers, and
    /// what changed since the version `seen` it last caught up with ([`Headers::version`] of
    /// what this returned then; `None` the first time). When `offered` is a list this cache
    /// handed out and the caller still holds (it refreshed this turn, as the recall hook and a
    /// search do before they rank), the store is not asked again: the current list is that one
    /// or a newer one, so it holds every write the caller's refresh saw. Otherwise this is a
    /// [`refresh`](Self::refresh).
    ///
    /// So a consumer that catches up under a lock of its own (the BM25 index) never waits on
    /// the store there because another request refreshed the cache in between.
    pub async fn follow(
        &self,
        seen: Option<u64>,
        offered: &[MemoryHeader],
    ) -> Result<Followed, MemoryError> {
        {
            let state = self.state.lock().await;
            let handed_out = |h: &Headers| {
                let list = h.as_slice();
                std::ptr::eq(list.as_ptr(), offered.as_ptr()) && list.len() == offered.len()
            };
            if state.loaded
                && (handed_out(&state.headers) || state.spares.iter().any(|s| handed_out(s)))
            {
                return Ok(Followed {
                    headers: state.headers.clone(),
                    since: state.since(seen),
                });
            }
        }
        let headers = self.refresh().await?.headers;
        let since = self.state.lock().await.since(seen);
        Ok(Followed { headers, since })
    }

    /// Read the memory `header` (one this cache listed) describes: its text as of the cache's
    /// last refresh. Texts read recently (by any consumer or search, or carried by the store's
    /// change feed) are kept, at most 256 of them and 1 MiB of text in all, and
    /// forgotten when a change names their path; any other is read from the store, and kept
    /// when what the store returns is still the version `header` describes.
    pub async fn read(&self, header: &MemoryHeader) -> Result<Arc<MemoryFile>, MemoryError> {
        self.read_many(std::slice::from_ref(header))
            .await
            .pop()
            .unwrap_or_else(|| Err(MemoryError::NotFound(header.rel_path.clone())))
    }

    /// Read the memories `headers` describe (ones this cache listed), each as [`Self::read`]
    /// reads it: the texts kept read come from memory, the others from one
    /// `read_many` of the store (one query on a database, not one per memory). One
    /// result per header, in order.
    pub async fn read_many(
        &self,
        headers: &[MemoryHeader],
    ) -> Vec<Result<Arc<MemoryFile>, MemoryError>> {
        let mut out: Vec<Option<Result<Arc<MemoryFile>, MemoryError>>> = match self.bodies.lock() {
            Ok(b) => headers.iter().map(|h| b.get(h).map(Ok)).collect(),
            Err(_) => headers.iter().map(|_| None).collect(),
        };
        let asked: Vec<usize> = (0..headers.len()).filter(|&i| out[i].is_none()).collect();
        let rels: Vec<&str> = asked
            .iter()
            .map(|&i| headers[i].rel_path.as_str())
            .collect();
        let read = self.store.read_many(&rels).await;
        for (i, file) in asked.into_iter().zip(read) {
            let file = file.map(Arc::new);
            if let Ok(f) = &file
                && f.header.mtime == headers[i].mtime
                && let Ok(mut b) = self.bodies.lock()
            {
                b.keep(f.clone());
            }
            out[i] = Some(file);
        }
        out.into_iter()
            .zip(headers)
            .map(|(file, h)| file.unwrap_or_else(|| Err(MemoryError::NotFound(h.rel_path.clone()))))
            .collect()
    }

    /// An estimate of the memory the cache holds, in bytes, counted as [`crate::heap`] counts
    /// (buffers by capacity, hash tables by buckets, each allocation as the allocator's block):
    /// the cache itself and its store ([`MemoryStore::approx_bytes`]), every header (its
    /// strings, its entry, its path in the lookup), the changes it remembers for consumers that
    /// catch up, and the memory texts it keeps read. `None` while another task holds it (ask
    /// again later): the estimate never waits.
    pub fn approx_bytes(&self) -> Option<usize> {
        use crate::heap::{arc, block};
        let state = self.state.try_lock().ok()?;
        let cursor = state.cursor.as_ref().map_or(0, |c| block(c.as_str().len()));
        let lists = state.approx_bytes();
        drop(state);
        let bodies = self.bodies.lock().map_or(0, |b| b.approx_bytes());
        Some(arc::<Self>() + self.store.approx_bytes() + lists + cursor + bodies)
    }

    /// A change was applied: forget the texts of every path it names, then keep the texts its
    /// answer carried (those matching its headers), so consumers taking the change in do not
    /// read them again.
    fn keep_read(&self, written: &[MemoryHeader], removed: &[String], files: Vec<MemoryFile>) {
        let Ok(mut b) = self.bodies.lock() else {
            return;
        };
        for path in removed {
            b.forget(path);
        }
        for h in written {
            b.forget(&h.rel_path);
        }
        let current = |f: &MemoryFile| {
            written
                .iter()
                .any(|h| h.rel_path == f.header.rel_path && h.mtime == f.header.mtime)
        };
        for f in files.into_iter().filter(current) {
            b.keep(Arc::new(f));
        }
    }

    /// Forget every text kept read (the headers were replaced).
    fn forget_read(&self) {
        if let Ok(mut b) = self.bodies.lock() {
            b.clear();
        }
    }

    /// Forget the cursor: the next refresh rescans.
    pub async fn invalidate(&self) {
        // After the question out, if any: its answer must not set a cursor again.
        let _asking = self.asking.lock().await;
        let mut state = self.state.lock().await;
        state.cursor = None;
        // No answer given so far may stand in for the rescan.
        state.answered = 0;
    }

    /// Bring the headers up to date and say what changed since the previous refresh.
    ///
    /// Up to date means: every change the store had made when this call began is in the
    /// answer. Concurrent callers share the store's answers: a caller that waited while
    /// another refresh asked the store, that refresh having begun after this call did, takes
    /// its answer (reported [`ScanChange::Unchanged`]: nothing changed since that refresh)
    /// instead of asking again, so however many callers arrive together, the store is asked
    /// at most twice (once for those that arrived before the first question went out, once
    /// for those that arrived while it was out).
    pub async fn refresh(&self) -> Result<ScanUpdate, MemoryError> {
        let arrived = self.asked.load(Ordering::SeqCst);
        let _asking = self.asking.lock().await;
        let (number, since) = {
            let state = self.state.lock().await;
            if state.loaded && state.answered > arrived {
                return Ok(ScanUpdate {
                    headers: state.headers.clone(),
                    change: ScanChange::Unchanged,
                });
            }
            let since = if state.loaded {
                state.cursor.clone()
            } else {
                None
            };
            (self.asked.fetch_add(1, Ordering::SeqCst) + 1, since)
        };
        // The question goes out with the lists unlocked: only `asking` is held.
        let answer = match self.store.changes(since.as_ref()).await? {
            Changes::Unchanged => Answer::Unchanged,
            Changes::Changed {
                cursor,
                written,
                removed,
                files,
            } => Answer::Delta {
                cursor,
                written,
                removed: removed.into_iter().map(|p| p.as_str().to_owned()).collect(),
                files,
            },
            // The cursor was taken before this scan: a change made during it is reported
            // again by the next refresh.
            Changes::Rescan { cursor } => Answer::Scan {
                cursor,
                headers: self.store.scan().await?,
            },
        };
        let mut state = self.state.lock().await;
        let change = match answer {
            Answer::Unchanged => ScanChange::Unchanged,
            Answer::Delta {
                cursor,
                written,
                removed,
                files,
            } => {
                state.apply(&written, &removed);
                state.cursor = Some(cursor);
                self.keep_read(&written, &removed, files);
                ScanChange::Changed { written, removed }
            }
            Answer::Scan { cursor, headers } => {
                state.replace(headers);
                self.forget_read();
                state.cursor = cursor;
                ScanChange::Rescanned
            }
        };
        state.answered = number;
        Ok(ScanUpdate {
            headers: state.headers.clone(),
            change,
        })
    }
}

/// The store's answer to a refresh's question, applied once it is back.
enum Answer {
    /// Nothing changed.
    Unchanged,
    /// A delta: the feed's new cursor, what it wrote and removed, and the texts it carried.
    Delta {
        cursor: ChangeCursor,
        written: Vec<MemoryHeader>,
        removed: Vec<String>,
        files: Vec<MemoryFile>,
    },
    /// A rescan: the cursor taken before it and every header.
    Scan {
        cursor: Option<ChangeCursor>,
        headers: Vec<MemoryHeader>,
    },
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A store that holds nothing: the cache's own bookkeeping is what these tests look at (its
    /// behaviour over a store with a change feed is tested with the memory dir, in
    /// `memloop-files`).
    struct Empty;

    #[async_trait::async_trait]
    impl MemoryStore for Empty {
        fn describe(&self) -> crate::StoreDescription {
            crate::StoreDescription {
                location: crate::StoreLocation::Database {
                    engine: "empty".into(),
                    url: "empty:".into(),
                    project: "empty".into(),
                },
                identity: "empty:".into(),
            }
        }
        async fn scan(&self) -> Result<Vec<MemoryHeader>, MemoryError> {
            Ok(Vec::new())
        }
        async fn read_path(&self, path: &crate::MemoryPath) -> Result<MemoryFile, MemoryError> {
            Err(MemoryError::NotFound(path.as_str().to_owned()))
        }
        async fn write_checked_if(
            &self,
            write: crate::CheckedWrite,
            _expected: &crate::ExpectedVersion,
        ) -> Result<crate::VersionedWrite, MemoryError> {
            Err(MemoryError::NotFound(write.path().as_str().to_owned()))
        }
        async fn delete_checked(&self, path: &crate::MemoryPath) -> Result<(), MemoryError> {
            Err(MemoryError::NotFound(path.as_str().to_owned()))
        }
        async fn clear(&self) -> Result<Vec<String>, MemoryError> {
            Ok(Vec::new())
        }
        async fn load_index(&self) -> Result<crate::LoadedIndex, MemoryError> {
            Ok(crate::LoadedIndex::default())
        }
        async fn index_entries(&self) -> Result<Vec<crate::IndexEntry>, MemoryError> {
            Ok(Vec::new())
        }
    }

    fn header(path: &str, secs: u64) -> MemoryHeader {
        MemoryHeader {
            rel_path: path.into(),
            name: None,
            description: None,
            memory_type: None,
            mtime: SystemTime::UNIX_EPOCH + Duration::from_secs(secs),
        }
    }

    #[test]
    fn a_delta_keeps_the_scan_order() {
        let mut s = State::default();
        s.replace(vec![
            header("c.md", 30),
            header("a.md", 20),
            header("b.md", 20),
        ]);
        // b moves to the front, c goes, d arrives in the middle.
        s.apply(
            &[header("b.md", 40), header("d.md", 25)],
            &["c.md".to_owned()],
        );
        let order: Vec<String> = s.headers.iter().map(|h| h.rel_path.clone()).collect();
        assert_eq!(order, ["b.md", "d.md", "a.md"]);
        assert_eq!(
            s.headers.get("d.md").unwrap().mtime,
            header("d.md", 25).mtime
        );
        assert!(s.headers.get("c.md").is_none() && !s.headers.contains("c.md"));
        // Applying the same delta again changes nothing (harmless duplicates).
        s.apply(&[header("b.md", 40)], &["c.md".to_owned()]);
        let again: Vec<String> = s.headers.iter().map(|h| h.rel_path.clone()).collect();
        assert_eq!(again, order);
    }

    /// The list a model of the scan order gives: every path's last header, newest first.
    fn modelled(model: &HashMap<String, u64>) -> Listed {
        let mut v: Vec<(String, u64)> = model.iter().map(|(p, t)| (p.clone(), *t)).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        v
    }

    /// Paths and mtimes (seconds), in list order.
    type Listed = Vec<(String, u64)>;

    fn listed(h: &Headers) -> Listed {
        h.iter()
            .map(|h| {
                let secs = h.mtime.duration_since(SystemTime::UNIX_EPOCH).unwrap();
                (h.rel_path.clone(), secs.as_secs())
            })
            .collect()
    }

    /// What a list's strings own, walked.
    fn walked(h: &Headers) -> usize {
        h.walk()
    }

    /// The views of `h` are what walking its list gives: paths in order after any cursor
    /// within any prefix, counts of prefixes, each folder newest first.
    fn views_match(h: &Headers, step: u64) {
        let mut by_path: Vec<&str> = h.iter().map(|x| x.rel_path.as_str()).collect();
        by_path.sort_unstable();
        for prefix in [
            "",
            "todos/",
            "todos/sub/",
            "decisions/",
            "1",
            "todos/1",
            "none/",
        ] {
            let all: Vec<&str> = by_path
                .iter()
                .copied()
                .filter(|p| p.starts_with(prefix))
                .collect();
            assert_eq!(h.count(prefix), all.len(), "count {prefix} (step {step})");
            let mut afters = vec![None];
            afters.extend(all.iter().step_by(7).map(|p| Some(*p)));
            afters.push(Some("todos/5"));
            for after in afters {
                let want: Vec<&str> = all
                    .iter()
                    .copied()
                    .filter(|p| after.is_none_or(|a| *p > a))
                    .collect();
                let got: Vec<&str> = h
                    .by_path(prefix, after)
                    .map(|x| x.rel_path.as_str())
                    .collect();
                assert_eq!(got, want, "{prefix} after {after:?} (step {step})");
            }
        }
        for folder in ["", "todos/", "decisions/", "none/"] {
            let want: Vec<&MemoryHeader> = h
                .iter()
                .filter(|x| folder_of(&x.rel_path) == folder)
                .collect();
            let got: Vec<&MemoryHeader> = h.newest_in(folder).collect();
            assert_eq!(got, want, "folder {folder} (step {step})");
        }
    }

    /// The path view's hints: a memory taken at the front (the newest, as every new memory
    /// is) leaves every hint true, so a page's headers are found with one comparison each; a
    /// rewrite or a removal behind the front makes newer hints stale, and every lookup still
    /// finds the right header (by a search of the list).
    #[test]
    fn hints_hold_while_memories_arrive_newest_and_lookups_survive_stale_ones() {
        let mut h = Headers::new(
            (0..300u64)
                .rev()
                .map(|i| header(&format!("знания/{i:03}.md"), i))
                .collect(),
            1,
        );
        for i in 300..700u64 {
            h.apply(&[header(&format!("知识/{i}.md"), i)], &[]);
        }
        let list = h.as_slice();
        for (p, mtime, from_end) in h.paths.iter() {
            let at = list.len() - 1 - *from_end as usize;
            assert_eq!(&list[at].rel_path, p, "the hint of {p}");
            assert_eq!(list[at].mtime, *mtime);
        }
        // Behind the front: a rewrite of an old memory, a removal, an old memory written late.
        h.apply(
            &[header("знания/010.md", 1000)],
            &["знания/200.md".to_owned()],
        );
        h.apply(&[header("знания/old.md", 150)], &[]);
        let stale = h
            .paths
            .iter()
            .filter(|(p, _, from_end)| {
                let list = h.as_slice();
                list.len()
                    .checked_sub(1 + *from_end as usize)
                    .is_none_or(|i| list[i].rel_path != *p)
            })
            .count();
        assert!(stale > 0, "the changes behind the front moved no header");
        for x in h.as_slice() {
            assert_eq!(h.get(&x.rel_path), Some(x));
        }
        views_match(&h, 0);
    }

    #[test]
    fn the_views_follow_writes_deletes_and_renames() {
        let mut s = State::default();
        s.replace(vec![
            header("todos/b.md", 30),
            header("a.md", 20),
            header("todos/a.md", 20),
        ]);
        views_match(&s.headers, 0);
        // A rename: the old path removed, the new one written, in one delta.
        s.apply(&[header("decisions/b.md", 30)], &["todos/b.md".to_owned()]);
        views_match(&s.headers, 1);
        assert_eq!(s.headers.count("todos/"), 1);
        assert_eq!(s.headers.newest_in("decisions/").count(), 1);
        // The same path written twice in one delta keeps its last header.
        s.apply(&[header("todos/c.md", 40), header("todos/c.md", 50)], &[]);
        views_match(&s.headers, 2);
        assert_eq!(s.headers.len(), 4);
        assert_eq!(
            s.headers.newest_in("todos/").next(),
            Some(&header("todos/c.md", 50))
        );
        // The last of a folder deleted: the folder goes.
        s.apply(&[], &["decisions/b.md".to_owned()]);
        views_match(&s.headers, 3);
        assert!(s.headers.folders.iter().all(|(f, _)| f != "decisions/"));
        let collected: Headers = s.headers.iter().cloned().collect();
        views_match(&collected, 4);
        assert_eq!(listed(&collected), listed(&s.headers));
        assert_eq!(collected.owned, walked(&collected));
    }

    #[test]
    fn deltas_while_callers_hold_lists_reuse_the_lists_they_let_go() {
        let mut s = State::default();
        s.replace(
            (0..50)
                .rev()
                .map(|i| header(&format!("{i}.md"), i))
                .collect(),
        );
        let mut model: HashMap<String, u64> = (0..50).map(|i| (format!("{i}.md"), i)).collect();
        // Callers hold lists (as searches do while they rank) and let them go in a pseudo-random
        // order; every list a caller got stays as it was, and the current one is the model's.
        let mut held: Vec<(Arc<Headers>, Listed)> = Vec::new();
        let mut x: u64 = 7;
        let mut copies = 0;
        for step in 0..2000u64 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let n = x >> 33;
            if n % 3 == 0 {
                held.push((s.headers.clone(), listed(&s.headers)));
            }
            if n % 5 < 2 && !held.is_empty() {
                let (list, was) = held.remove((n as usize) % held.len());
                assert_eq!(listed(&list), was, "a held list changed (step {step})");
            }
            // Paths in a few folders and at the top, so that the views have something to keep.
            let path = match n % 4 {
                0 => format!("{}.md", n % 80),
                1 => format!("todos/{}.md", n % 80),
                2 => format!("todos/sub/{}.md", n % 80),
                _ => format!("decisions/{}.md", n % 80),
            };
            let before = Arc::as_ptr(&s.headers);
            let shared = Arc::strong_count(&s.headers) > 1;
            let spares: Vec<*const Headers> = s.spares.iter().map(Arc::as_ptr).collect();
            if n % 7 == 0 {
                model.remove(&path);
                s.apply(&[], std::slice::from_ref(&path));
            } else {
                model.insert(path.clone(), 100 + step);
                s.apply(&[header(&path, 100 + step)], &[]);
            }
            let after = Arc::as_ptr(&s.headers);
            if shared && !spares.contains(&after) {
                copies += 1;
            }
            if !shared {
                assert_eq!(before, after, "a list no one holds is changed in place");
            }
            assert_eq!(listed(&s.headers), modelled(&model), "step {step}");
            views_match(&s.headers, step);
            for list in std::iter::once(&s.headers).chain(&s.spares) {
                assert_eq!(list.owned, walked(list), "kept bytes (step {step})");
            }
            for (p, t) in &model {
                assert_eq!(
                    s.headers.get(p).map(|h| h.mtime),
                    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(*t))
                );
            }
            assert!(s.spares.len() <= SPARES);
        }
        // Most deltas that found the list held went to a spare let go of, not to a copy.
        assert!(copies < 400, "{copies} copies in 2000 deltas");
        for (list, was) in held {
            assert_eq!(listed(&list), was);
        }
    }

    #[test]
    fn a_spare_the_journal_no_longer_reaches_is_dropped() {
        let mut s = State::default();
        s.replace(vec![header("a.md", 1)]);
        let old = s.headers.clone();
        s.apply(&[header("b.md", 2)], &[]);
        assert_eq!(s.spares.len(), 1, "the held list became a spare");
        for i in 0..(JOURNAL as u64 + 1) {
            s.apply(&[header("c.md", 10 + i)], &[]);
        }
        drop(old);
        let held = s.headers.clone();
        s.apply(&[header("d.md", 5000)], &[]);
        assert_eq!(s.spares.len(), 1, "only the list just replaced");
        assert!(Arc::ptr_eq(&s.spares[0], &held));
        assert_eq!(s.headers.len(), 4);
    }

    #[test]
    fn the_estimate_follows_every_change() {
        let cache = ScanCache::new(Arc::new(Empty));
        let bytes = |c: &ScanCache| c.approx_bytes().unwrap();
        let empty = bytes(&cache);
        assert_eq!(bytes(&cache), empty, "no change, the same estimate");
        {
            let mut state = cache.state.try_lock().unwrap();
            state.replace(vec![header("a.md", 1)]);
        }
        let one = bytes(&cache);
        assert!(one > empty);
        let held = cache.state.try_lock().unwrap().headers.clone();
        cache
            .state
            .try_lock()
            .unwrap()
            .apply(&[header("b.md", 2)], &[]);
        let two = bytes(&cache);
        assert!(two > one, "a delta (and the spare it left) is counted");
        drop(held);
        cache.bodies.lock().unwrap().keep(Arc::new(MemoryFile {
            header: header("b.md", 2),
            body: "x".repeat(1000),
            raw: "y".repeat(1000),
        }));
        let kept = bytes(&cache);
        assert!(kept >= two + 2000, "a text kept is counted");
        cache.bodies.lock().unwrap().forget("b.md");
        assert!(bytes(&cache) <= kept - 2000, "a text forgotten is not");
    }

    /// What the kept texts own, walked (the running sum must equal it).
    fn bodies_walked(b: &Bodies) -> usize {
        use crate::heap::{deque, map, string};
        map(&b.files)
            + deque(&b.order)
            + b.order.iter().map(|(_, p)| string(p)).sum::<usize>()
            + b.files
                .iter()
                .map(|(p, (_, f))| kept_bytes(p, f))
                .sum::<usize>()
    }

    /// What the lists and the journal own, walked.
    fn state_walked(s: &State) -> usize {
        use crate::heap::{deque, vec};
        s.headers.approx_bytes()
            + vec(&s.spares)
            + s.spares.iter().map(|h| h.approx_bytes()).sum::<usize>()
            + deque(&s.journal)
            + s.journal
                .iter()
                .map(|(_, w, r)| journaled_bytes(w, r))
                .sum::<usize>()
    }

    #[test]
    fn the_running_estimate_is_what_a_walk_counts() {
        let mut b = Bodies::default();
        let mut s = State::default();
        s.replace(vec![header("a.md", 1)]);
        let mut held = Vec::new();
        for i in 0..(3 * BODIES + JOURNAL) {
            // Paths of several scripts and lengths, some kept again, some forgotten.
            let path = format!(
                "заметки/{}-記録-{}.md",
                i % (BODIES + 7),
                "x".repeat(i % 13)
            );
            b.keep(Arc::new(MemoryFile {
                header: header(&path, i as u64),
                body: "текст ".repeat(i % 50),
                raw: "raw".repeat(i % 30),
            }));
            if i % 5 == 0 {
                b.forget(&format!(
                    "заметки/{}-記録-{}.md",
                    (i / 2) % (BODIES + 7),
                    "x"
                ));
            }
            assert_eq!(b.approx_bytes(), bodies_walked(&b), "texts, step {i}");
            if i % 3 == 0 {
                held.push(s.headers.clone());
            }
            if held.len() > 4 {
                held.remove(0);
            }
            s.apply(&[header(&path, i as u64)], &[format!("{}.md", i / 2)]);
            assert_eq!(s.approx_bytes(), state_walked(&s), "lists, step {i}");
        }
        // One path kept again and again: each time its old place in the order goes stale,
        // until the stale places are swept out.
        for i in 0..(2 * BODIES + 5) {
            b.keep(Arc::new(MemoryFile {
                header: header("同じ.md", i as u64),
                body: "b".repeat(i % 40),
                raw: String::new(),
            }));
            assert_eq!(
                b.approx_bytes(),
                bodies_walked(&b),
                "the same path, step {i}"
            );
        }
        b.clear();
        assert_eq!(b.approx_bytes(), bodies_walked(&b));
        s.replace(vec![header("b.md", 2)]);
        assert_eq!(s.approx_bytes(), state_walked(&s));
    }

    #[test]
    fn a_consumer_gets_every_change_since_its_version_once() {
        let mut s = State::default();
        s.replace(vec![header("a.md", 10), header("b.md", 10)]);
        let v0 = s.headers.version;
        assert_eq!(s.since(Some(v0)), Since::Current);
        assert_eq!(s.since(None), Since::Rescan);
        s.apply(&[header("c.md", 20)], &["a.md".to_owned()]);
        s.apply(&[header("a.md", 30)], &["c.md".to_owned()]);
        s.apply(&[header("b.md", 40)], &[]);
        // a came back, c came and went, b was rewritten: each path once, in its last state.
        let Since::Changed {
            mut written,
            removed,
        } = s.since(Some(v0))
        else {
            panic!("the journal reaches back")
        };
        written.sort_by(|x, y| x.rel_path.cmp(&y.rel_path));
        assert_eq!(written, [header("a.md", 30), header("b.md", 40)]);
        assert_eq!(removed, ["c.md"]);
        // A consumer further back than the journal, or from before a rescan, compares all.
        for _ in 0..JOURNAL {
            s.apply(&[header("b.md", 50)], &[]);
        }
        assert_eq!(s.since(Some(v0)), Since::Rescan);
        let v = s.headers.version;
        s.replace(vec![header("a.md", 60)]);
        assert_eq!(s.since(Some(v)), Since::Rescan);
    }

    /// However many texts are read, at most [`BODIES`] of them and [`BODY_BYTES`] in all are
    /// kept, the oldest kept going first.
    #[test]
    fn texts_kept_stay_under_their_bounds() {
        let file = |path: String, len: usize| {
            Arc::new(MemoryFile {
                header: header(&path, 1),
                body: "x".repeat(len),
                raw: String::new(),
            })
        };
        let mut b = Bodies::default();
        for i in 0..(3 * BODIES) {
            b.keep(file(format!("{i}.md"), 10));
            assert!(b.files.len() <= BODIES && b.order.len() <= 2 * BODIES + 1);
        }
        assert!(
            b.get(&header(&format!("{}.md", 3 * BODIES - 1), 1))
                .is_some()
        );
        assert!(b.get(&header("0.md", 1)).is_none(), "the oldest went first");
        for i in 0..40 {
            b.keep(file(format!("big{i}.md"), 100 * 1024));
            assert!(b.bytes <= BODY_BYTES);
            assert_eq!(
                b.bytes,
                b.files.values().map(|(_, f)| text_bytes(f)).sum::<usize>()
            );
        }
        // The same path kept again and again holds one entry.
        for _ in 0..(5 * BODIES) {
            b.keep(file("same.md".into(), 1));
        }
        assert!(b.order.len() <= 2 * BODIES + 1);
        b.keep(file("huge.md".into(), BODY_BYTES + 1));
        assert!(
            b.get(&header("huge.md", 1)).is_none(),
            "larger than the whole bound"
        );
    }
}
