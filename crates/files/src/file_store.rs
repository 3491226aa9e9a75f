//! [`FileMemoryStore`]: the embedded default [`MemoryStore`], a directory of Markdown files with
//! a `MEMORY.md` index, in Claude Code's format: atomic writes confined to the memory dir, index
//! updates under a cross-process lock, and the sensitive-data filter.

use crate::file_feed::{FeedMode, FileFeed};
use crate::index_file::{IndexLines, Upsert};
use crate::safety::{
    ContainmentGate, DirLock, atomic_write_with, has_temp_files, read_internal_file,
    remove_temp_files,
};
use crate::scan::{HeaderCache, ScanConfig, scan_dir_cached};
use async_trait::async_trait;
use memloop_paths::ResolvedMemoryDir;
use memloop_store::validate_rel_path;
use memloop_store::{ChangeCursor, Changes};
use memloop_store::{
    CheckedWrite, ExpectedVersion, LocalDir, LocalPurpose, MemoryPath, MemoryStore,
    StoreDescription, VersionedWrite, WriteLimits, content_version,
};
use memloop_store::{
    INDEX_FILE, IndexCaps, IndexRest, format_entry_line, load_capped_start, parse_entries,
    parse_entry_line, remove_entry, upsert_entry,
};
use memloop_store::{
    IndexEntry, LoadedIndex, MemoryDoc, MemoryError, MemoryFile, MemoryHeader, WriteMode,
    WriteReport,
};
use memloop_store::{MemoryScope, TEAM_DIR, TEAM_INDEX_FILE, team_relative};
use memloop_store::{append_to_existing, parse_memory, render_memory, replace_body};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Limits of a [`FileMemoryStore`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreConfig {
    /// Index caps (200 lines / 25,000 bytes / 150-char entry lines).
    pub index: IndexCaps,
    /// Scan limits (30 lines per file).
    pub scan: ScanConfig,
    /// Bytes of a memory file `read` returns (1 MiB); a bigger file is returned
    /// cut, with a note saying so.
    pub max_read_bytes: u64,
    /// What the write entry point enforces (bodies up to 1 MiB, the same as `max_read_bytes`).
    pub write: WriteLimits,
    /// How far each write is made durable before it returns. Default
    /// [`Durability::Process`](crate::safety::Durability::Process): atomic (never torn, nothing lost to
    /// a killed process), not fsync'd, as Claude Code writes its memory; `Durability::Power`
    /// fsyncs each file and its directory (several ms a write).
    pub durability: crate::safety::Durability,
    /// Watch the memory dir for changes (filesystem notifications) so the change feed
    /// ([`MemoryStore::changes`]) costs O(changes) per call. Default true. When false, or where
    /// watching cannot work (network and FUSE filesystems, a watcher error), the feed polls:
    /// each call compares every file's size, mtime, ctime and inode with the last call.
    pub watch: bool,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            index: IndexCaps::default(),
            scan: ScanConfig::default(),
            max_read_bytes: 1024 * 1024,
            write: WriteLimits::default(),
            durability: crate::safety::Durability::default(),
            watch: true,
        }
    }
}

/// How far past the start of `MEMORY.md` a load reads to count its lines, in lengths of the
/// start (the byte cap): an index whose lines are longer than that is not counted to its end.
const INDEX_READ_CAPS: usize = 4;

/// Writes: `Overwrite` renders a fresh file (`---`, name, description, type, `---`, blank line,
/// body); `Append` keeps the existing file's bytes, edits only the frontmatter fields the doc
/// changes, and appends the body. Either way the `MEMORY.md` line (`- [name](file) — description`,
/// at most 150 characters) is added or updated under the same cross-process lock, and nothing is
/// rewritten when the bytes would not change.
///
/// The file-backed memory store. Cheap to clone (clones share one header cache, so rescans only
/// `stat` unchanged files); share it as `Arc<dyn MemoryStore>`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use memloop_files::FileMemoryStore;
/// use memloop_store::{MemoryDoc, MemoryStore, MemoryType, WriteMode};
/// let dir = tempfile::tempdir()?;
/// let store = FileMemoryStore::open(dir.path())?;
/// let doc = MemoryDoc { name: "Testing".into(), description: "integration tests hit a real db".into(),
///     memory_type: Some(MemoryType::Feedback), body: "Never mock the database.\n".into() };
/// store.write("feedback_testing.md", &doc, WriteMode::Overwrite).await?;
/// assert_eq!(store.index_entries().await?[0].file, "feedback_testing.md");
/// assert_eq!(store.scan().await?[0].memory_type, Some(MemoryType::Feedback));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct FileMemoryStore {
    gate: ContainmentGate,
    config: StoreConfig,
    headers: Arc<HeaderCache>,
    feed: Arc<FileFeed>,
    /// What `MEMORY.md`'s entry lines link to, so a new line is appended, not a rewrite.
    index_lines: Arc<std::sync::Mutex<IndexLines>>,
    /// The same for `team/MEMORY.md`.
    team_index_lines: Arc<std::sync::Mutex<IndexLines>>,
}

/// What a memory's index line links to: its path relative to the dir of its scope's index
/// (`team/deploy.md` → `deploy.md` in `team/MEMORY.md`).
fn entry_link(rel: &str) -> &str {
    team_relative(rel).unwrap_or(rel)
}

/// The dir locks a write into `scope` holds: the memory dir's, and for team memory the team
/// dir's too (taken second, always in that order), which is the lock a store opened on the
/// team dir itself (the team sync) takes.
struct ScopeLocks {
    _root: DirLock,
    _team: Option<DirLock>,
}

fn join_err(e: tokio::task::JoinError) -> MemoryError {
    MemoryError::io("memory task failed", std::io::Error::other(e.to_string()))
}

/// The largest memory [`FileMemoryStore::read_path`] reads on the calling task (see there).
const INLINE_READ_BYTES: u64 = 64 * 1024;

/// The batch journal in the memory dir (a dot name: never scanned as a memory): the final text
/// of every memory of a batch being written ([`FileMemoryStore::write_batch_blocking`]).
pub const BATCH_JOURNAL: &str = ".memloop-batch.json";

/// Where a batch journal that may not be replayed is set aside (unreadable, not a regular file,
/// or an entry breaking a write rule), for a person to look at: one is kept, the last.
pub const REJECTED_BATCH_JOURNAL: &str = ".memloop-batch.rejected.json";

/// A memory of a committed batch about to be written ([`FileMemoryStore::land_committed`]).
struct Landing<'a> {
    rel: &'a str,
    /// Its file, which passed the gate.
    path: &'a Path,
    /// Its text before the batch (`None`: absent).
    existing: Option<&'a str>,
    /// Its text in the batch.
    text: &'a str,
}

/// Each scope's index file as the gate passes it, checked the first time a scope is asked.
#[derive(Default)]
struct IndexPaths {
    private: Option<PathBuf>,
    team: Option<PathBuf>,
}

impl IndexPaths {
    fn of(&mut self, gate: &ContainmentGate, scope: MemoryScope) -> Result<&Path, MemoryError> {
        let slot = match scope {
            MemoryScope::Private => &mut self.private,
            MemoryScope::Team => &mut self.team,
        };
        if let Some(path) = slot {
            return Ok(path);
        }
        Ok(slot.insert(gate.check_write(Path::new(scope.index_file()))?))
    }
}

/// A batch's journal: each memory with its final text, in order.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Journal {
    entries: Vec<JournalEntry>,
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct JournalEntry {
    rel: String,
    text: String,
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, MemoryError> + Send + 'static,
) -> Result<T, MemoryError> {
    tokio::task::spawn_blocking(f).await.map_err(join_err)?
}

impl FileMemoryStore {
    /// Open (creating it if needed) the memory dir `dir`.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self, MemoryError> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir)
            .map_err(|e| MemoryError::io(format!("creating memory dir {}", dir.display()), e))?;
        let gate = ContainmentGate::new(dir)?;
        let feed = Arc::new(FileFeed::new(
            gate.root(),
            ScanConfig::default(),
            FeedMode::Watch,
        ));
        let store = Self {
            gate,
            config: StoreConfig::default(),
            headers: Arc::new(HeaderCache::default()),
            feed,
            index_lines: Arc::default(),
            team_index_lines: Arc::default(),
        };
        match store.sweep_temp_files() {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                removed = n,
                "removed temp files left by an interrupted write"
            ),
            Err(e) => tracing::warn!(error = %e, "could not sweep leftover temp files"),
        }
        store.finish_batch()?;
        Ok(store)
    }

    /// Finish the batch a killed writer left ([`BATCH_JOURNAL`]): every memory of it written
    /// with the text its journal holds, then the journal removed, so the batch lands whole.
    /// Runs on [`open`](Self::open), before anything reads the dir, and before every batch. A
    /// dir without a journal is left untouched (no lock is taken, no file created).
    fn finish_batch(&self) -> Result<(), MemoryError> {
        // The entry itself, not what a link there points at: a link is a journal to set aside.
        if std::fs::symlink_metadata(self.root().join(BATCH_JOURNAL)).is_err() {
            return Ok(());
        }
        let _locks = self.lock_all()?;
        self.finish_batch_locked()
    }

    /// [`finish_batch`](Self::finish_batch) with the locks held. A journal is data, not
    /// authority: anyone who can write to the memory dir can plant one. So it is read without
    /// following a link, and every entry must pass the rules of any write
    /// ([`journal_rule`](Self::journal_rule)) before any is applied: one that does not, or a
    /// journal that cannot be read or parsed or is not a regular file, is set aside whole
    /// ([`set_journal_aside`](Self::set_journal_aside), nothing of it applied) and the store
    /// stays usable.
    fn finish_batch_locked(&self) -> Result<(), MemoryError> {
        let text = match read_internal_file(self.root(), BATCH_JOURNAL) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return self.set_journal_aside(&format!("it cannot be read: {e}")),
        };
        // The journal is written whole (by a rename) before the batch's first memory, so one
        // that cannot be parsed is no journal of ours: nothing of a batch was written by it.
        let journal = match serde_json::from_slice::<serde_json::Value>(&text)
            .and_then(|v| {
                if v.is_object() {
                    Ok(v)
                } else {
                    Err(serde::de::Error::custom("it is not a JSON object"))
                }
            })
            .and_then(serde_json::from_value::<Journal>)
        {
            Ok(journal) => journal,
            Err(e) => return self.set_journal_aside(&format!("it is not a batch journal: {e}")),
        };
        // Every entry checked, and every memory it replaces read, before the first is written:
        // all or nothing.
        let mut planned: Vec<(&str, PathBuf, Option<String>)> =
            Vec::with_capacity(journal.entries.len());
        for e in &journal.entries {
            let checked = self.journal_rule(&e.rel, &e.text).and_then(|path| {
                if planned.iter().any(|(rel, _, _)| *rel == e.rel) {
                    return Err(MemoryError::InvalidName {
                        name: memloop_store::shown_name(&e.rel),
                        reason: "the journal writes this memory twice".into(),
                    });
                }
                match memloop_host::files::read_regular(&path) {
                    Ok(b) => Ok((path, Some(String::from_utf8_lossy(&b).into_owned()))),
                    Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok((path, None)),
                    Err(err) => Err(MemoryError::io(
                        format!("reading {}", memloop_store::shown_name(&e.rel)),
                        err,
                    )),
                }
            });
            match checked {
                Ok((path, existing)) => planned.push((&e.rel, path, existing)),
                Err(err) => {
                    return self.set_journal_aside(&format!("an entry breaks a write rule: {err}"));
                }
            }
        }
        let landing: Vec<Landing<'_>> = planned
            .iter()
            .zip(&journal.entries)
            .map(|((rel, path, existing), e)| Landing {
                rel,
                path,
                existing: existing.as_deref(),
                text: &e.text,
            })
            .collect();
        self.land_committed(&landing, &mut |_| {})?;
        tracing::info!(
            memories = journal.entries.len(),
            "finished a batch an interrupted writer left"
        );
        Ok(())
    }

    /// The rule every memory text of a batch journal passes, when the batch writes its journal
    /// and again when a journal is replayed: the rules of any write of a memory file as written
    /// ([`CheckedWrite::check_raw`]: a valid memory path, so never a dot name, an internal file
    /// or `MEMORY.md`; the text a memory file within [`StoreConfig::write`]'s size limit, with
    /// no credential and no control character in its title or description), and a target
    /// inside the memory dir. Returns the target.
    fn journal_rule(&self, rel: &str, text: &str) -> Result<PathBuf, MemoryError> {
        self.journal_text_rule(rel, text)?;
        self.gate.check(Path::new(rel))
    }

    /// [`journal_rule`](Self::journal_rule) for a target the gate has passed already: the
    /// rules of the text.
    fn journal_text_rule(&self, rel: &str, text: &str) -> Result<(), MemoryError> {
        CheckedWrite::check_raw(rel, text, self.config.write).map(|_| ())
    }

    /// Move a journal that may not be replayed out of the way, to [`REJECTED_BATCH_JOURNAL`]
    /// (the one kept before it goes; nothing is followed), with a warning: nothing of it is
    /// applied, and the store stays usable.
    fn set_journal_aside(&self, why: &str) -> Result<(), MemoryError> {
        let (from, to) = (
            self.root().join(BATCH_JOURNAL),
            self.root().join(REJECTED_BATCH_JOURNAL),
        );
        let io = |what: &str, e| MemoryError::io(format!("{what} `{BATCH_JOURNAL}`"), e);
        let old = match std::fs::symlink_metadata(&to) {
            Ok(m) if m.file_type().is_dir() => std::fs::remove_dir_all(&to),
            Ok(_) => std::fs::remove_file(&to),
            Err(_) => Ok(()),
        };
        old.map_err(|e| io("making room to set aside", e))?;
        std::fs::rename(&from, &to).map_err(|e| io("setting aside", e))?;
        if self.config.durability == crate::safety::Durability::Power {
            crate::safety::sync_parent_dir(&to);
        }
        tracing::warn!(
            reason = %why,
            kept_as = REJECTED_BATCH_JOURNAL,
            dir = %self.root().display(),
            "a batch journal that may not be replayed was set aside; nothing of it was applied"
        );
        Ok(())
    }

    /// Remove the journal of a batch whose memories are durable; the removal itself is fsync'd
    /// only with [`Durability::Power`](crate::safety::Durability::Power) (see
    /// [`write_batch_blocking`](Self::write_batch_blocking) on why).
    fn remove_journal(&self) -> Result<(), MemoryError> {
        match std::fs::remove_file(self.root().join(BATCH_JOURNAL)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(MemoryError::io(format!("removing {BATCH_JOURNAL}"), e)),
        }
        if self.config.durability == crate::safety::Durability::Power {
            crate::safety::sync_parent_dir(&self.root().join(BATCH_JOURNAL));
        }
        Ok(())
    }

    /// Land a batch whose journal is committed: each memory and its index line written without
    /// fsync (renamed into place, so never torn), calling `progress` with how many have landed;
    /// then, with `Durability::Power`, all of them made durable at once
    /// ([`make_durable`](crate::safety::make_durable): one `syncfs(2)` on Linux); then the
    /// journal removed. The caller holds the locks.
    fn land_committed(
        &self,
        planned: &[Landing<'_>],
        progress: &mut dyn FnMut(usize),
    ) -> Result<Vec<VersionedWrite>, MemoryError> {
        // The same store (shared caches and index pictures), writing without fsync.
        let unsynced = Self {
            config: StoreConfig {
                durability: crate::safety::Durability::Process,
                ..self.config
            },
            ..self.clone()
        };
        let mut written = Vec::with_capacity(planned.len());
        let mut touched = Vec::with_capacity(planned.len() + 2);
        // Each scope's index checked once for the batch.
        let mut indexes = IndexPaths::default();
        for l in planned {
            let index = indexes.of(&self.gate, MemoryScope::of(l.rel))?;
            let w = unsynced.write_locked(l.rel, l.path, index, l.existing, l.text)?;
            touched.push(w.report.path.clone());
            written.push(w);
            progress(written.len());
        }
        // The indexes a write may have changed (the team's, and the private one a team
        // memory's old line is dropped from).
        touched.push(self.root().join(INDEX_FILE));
        touched.push(self.root().join(TEAM_INDEX_FILE));
        if self.config.durability == crate::safety::Durability::Power {
            crate::safety::make_durable(&touched)?;
        }
        self.remove_journal()?;
        Ok(written)
    }

    /// Write `writes` whole, or none of them, through a killed process (and, with
    /// [`Durability::Power`](crate::safety::Durability::Power), through a power cut): under the
    /// dir lock every version is checked and every memory's final text worked out first (one
    /// conflict or unreadable file and nothing is written); then the texts go to the batch
    /// journal ([`BATCH_JOURNAL`]: a temp file renamed into place): that is the commit; then
    /// `progress(0)`; then each memory and its index line is written *without* fsync
    /// (atomically, by a rename), calling `progress` with how many have landed; then the journal
    /// is removed. With `Durability::Power` the journal is fsync'd (file and directory) before
    /// the first memory, all the memories are made durable together before the journal goes
    /// (one `syncfs(2)` on Linux, else an fsync of each file and directory), and the removal is
    /// fsync'd: four flushes a batch whatever its size, where single writes cost two or three a
    /// memory. With `Durability::Process` (the default) nothing is flushed: a batch costs its
    /// renames, as the page cache outlives a killed process. Blocking; returns each write's new
    /// version, in order, once the batch has landed (durably, with `Durability::Power`).
    ///
    /// Why nothing acknowledged is lost and nothing partial is seen, wherever the process is
    /// killed (or, with `Durability::Power`, the power cut):
    /// - No memory of the batch is written before the journal is in place (with `Power`: its
    ///   bytes and its name durable, both fsyncs returned). Before that point a kill or a cut
    ///   leaves at most a temp file (swept at the next open) and no memory of the batch: the
    ///   batch is absent, whole.
    /// - After it, whatever the kill or cut kept of the unsynced writes (the old file, the new
    ///   one, none, or an empty one), the journal is there, whole, and the next
    ///   [`open`](Self::open) (or batch) replays it under the lock before anything reads the
    ///   dir: every memory written with the journal's text, then the journal removed. The batch
    ///   lands whole.
    /// - With `Power`, the batch is acknowledged only after the flush of its memories and
    ///   indexes returned, and the journal goes only after that flush (its removal fsync'd
    ///   before the batch returns), so a removal that survives a cut implies memories that did.
    ///   With `Process` no write was promised to survive a cut, and a kill loses nothing the
    ///   kernel was handed.
    pub fn write_batch_blocking(
        &self,
        writes: &[(CheckedWrite, ExpectedVersion)],
        progress: &mut dyn FnMut(usize),
    ) -> Result<Vec<VersionedWrite>, MemoryError> {
        let _span = tracing::debug_span!("memory_batch", writes = writes.len()).entered();
        let team = writes
            .iter()
            .any(|(w, _)| MemoryScope::of(w.path().as_str()) == MemoryScope::Team);
        let _locks = self.lock_for(if team {
            MemoryScope::Team
        } else {
            MemoryScope::Private
        })?;
        self.finish_batch_locked()?;
        let mut planned = Vec::with_capacity(writes.len());
        for (w, expected) in writes {
            let rel = w.path().as_str();
            if planned
                .iter()
                .any(|(r, _, _, _): &(&str, _, _, _)| *r == rel)
            {
                return Err(MemoryError::InvalidName {
                    name: rel.to_owned(),
                    reason: "the batch writes this memory twice".into(),
                });
            }
            let path = self.gate.check_write(Path::new(rel))?;
            let (existing, text) =
                self.planned_text(rel, &path, w.doc(), w.mode(), w.raw(), expected)?;
            // The text the journal will hold passes the rule its replay checks (the target
            // passed the gate above), so a journal this writer leaves is always finished whole.
            self.journal_text_rule(rel, &text)?;
            planned.push((rel, path, existing, text));
        }
        let journal = Journal {
            entries: planned
                .iter()
                .map(|(rel, _, _, text)| JournalEntry {
                    rel: (*rel).to_owned(),
                    text: text.clone(),
                })
                .collect(),
        };
        let bytes = serde_json::to_vec(&journal)
            .map_err(|e| MemoryError::io("writing the batch journal", std::io::Error::other(e)))?;
        // The commit point: in place (and, with `Durability::Power`, durable: file and
        // directory fsync'd) before any memory of the batch is written.
        atomic_write_with(
            &self.root().join(BATCH_JOURNAL),
            &bytes,
            self.config.durability,
        )?;
        progress(0);
        let landing: Vec<Landing<'_>> = planned
            .iter()
            .map(|(rel, path, existing, text)| Landing {
                rel,
                path,
                existing: existing.as_deref(),
                text,
            })
            .collect();
        self.land_committed(&landing, progress)
    }

    /// Remove temp files (`.memloop-tmp-*`) left behind by a writer that was killed mid-write;
    /// returns how many went. Every store write holds the dir lock while its temp file exists,
    /// so taking the lock here guarantees no in-flight write is touched. Runs on [`open`](Self::open).
    /// A dir without temp files is left untouched (no lock file is created): opening a store to
    /// read it never creates a file.
    pub fn sweep_temp_files(&self) -> Result<usize, MemoryError> {
        if !has_temp_files(self.root()) {
            return Ok(0);
        }
        let _lock = DirLock::acquire(self.root())?;
        remove_temp_files(self.root())
    }

    /// Open the dir chosen by [`memloop_paths::MemoryDirResolver::resolve`].
    pub fn open_resolved(resolved: &ResolvedMemoryDir) -> Result<Self, MemoryError> {
        Self::open(&resolved.dir)
    }

    /// Replace the limits (builder style).
    pub fn with_config(mut self, config: StoreConfig) -> Self {
        self.config = config;
        let mode = if config.watch {
            FeedMode::Watch
        } else {
            FeedMode::Poll
        };
        self.feed = Arc::new(FileFeed::new(self.root(), config.scan, mode));
        self
    }

    /// The change feed (tests look at its source).
    #[cfg(test)]
    pub(crate) fn feed(&self) -> &FileFeed {
        &self.feed
    }

    /// The same store with a feed of the given kind (tests run the other platforms' watcher
    /// on Linux).
    #[cfg(test)]
    pub(crate) fn with_feed_mode(mut self, mode: FeedMode) -> Self {
        self.feed = Arc::new(FileFeed::new(self.root(), self.config.scan, mode));
        self
    }

    /// The memory dir (absolute, canonical).
    pub fn root(&self) -> &Path {
        self.gate.root()
    }

    /// Where the vector cache of the memory dir `memory_dir` lives: a `<dir name>.vectors/`
    /// directory beside it (never inside: the memory dir holds only memories).
    pub fn vectors_dir_of(memory_dir: &Path) -> PathBuf {
        let name = memory_dir
            .file_name()
            .map(|n| format!("{}.vectors", n.to_string_lossy()))
            .unwrap_or_else(|| "memory.vectors".to_owned());
        match memory_dir.parent() {
            Some(parent) => parent.join(name),
            None => memory_dir.join(".vectors"),
        }
    }

    /// Write a memory through the enforcing entry point (`dyn MemoryStore::write`).
    pub async fn write(
        &self,
        rel_path: &str,
        doc: &MemoryDoc,
        mode: WriteMode,
    ) -> Result<WriteReport, MemoryError> {
        (self as &dyn MemoryStore).write(rel_path, doc, mode).await
    }

    /// Write a memory file exactly as written, if it is at `expected`, through the enforcing
    /// entry point (`dyn MemoryStore::write_raw_if`: every rule of a write, the secret filter on
    /// the whole text).
    pub async fn write_raw_if(
        &self,
        rel_path: &str,
        text: &str,
        expected: &ExpectedVersion,
    ) -> Result<VersionedWrite, MemoryError> {
        (self as &dyn MemoryStore)
            .write_raw_if(rel_path, text, expected)
            .await
    }

    /// Delete a memory through the entry point (`dyn MemoryStore::delete`).
    pub async fn delete(&self, rel_path: &str) -> Result<(), MemoryError> {
        (self as &dyn MemoryStore).delete(rel_path).await
    }

    /// Read a memory through the entry point (`dyn MemoryStore::read`).
    pub async fn read(&self, rel_path: &str) -> Result<MemoryFile, MemoryError> {
        (self as &dyn MemoryStore).read(rel_path).await
    }

    /// The store's containment gate (the single gate every memory write passes).
    pub fn gate(&self) -> &ContainmentGate {
        &self.gate
    }

    /// Rename a memory and repoint its index line (title and hook kept), under the lock. The
    /// move is a write at the new path, so it passes the same rules as every write
    /// ([`CheckedWrite::check_raw`] of the file's text at the new path): a `user` memory cannot
    /// be moved into `team/`, and a file that would be refused where it goes (a secret, too
    /// large) is not moved.
    pub async fn rename(&self, from: &str, to: &str) -> Result<WriteReport, MemoryError> {
        let (from, to) = (
            MemoryPath::new(from)?.as_str().to_owned(),
            MemoryPath::new(to)?.as_str().to_owned(),
        );
        let (src, dst) = (
            self.gate.check_write(Path::new(&from))?,
            self.gate.check_write(Path::new(&to))?,
        );
        let this = self.clone();
        blocking(move || {
            let (from_scope, to_scope) = (MemoryScope::of(&from), MemoryScope::of(&to));
            let _locks = this.lock_for(if from_scope == to_scope {
                from_scope
            } else {
                MemoryScope::Team
            })?;
            if !src.is_file() {
                return Err(MemoryError::NotFound(from));
            }
            let text = memloop_host::files::read_regular_to_string(&src)
                .map_err(|e| MemoryError::io(format!("reading {from}"), e))?;
            CheckedWrite::check_raw(&to, &text, this.config.write)?;
            if dst.exists() {
                return Err(MemoryError::InvalidName {
                    name: to,
                    reason: "a memory with that name already exists".into(),
                });
            }
            if let Some(parent) = dst.parent() {
                std::fs::create_dir_all(parent).map_err(|e| MemoryError::io("creating dir", e))?;
            }
            std::fs::rename(&src, &dst)
                .map_err(|e| MemoryError::io(format!("renaming {from}"), e))?;
            // The line moves with the memory (title and hook kept), into the index of the new
            // path's scope when the rename crosses between private and team memory.
            let (from_link, to_link) = (entry_link(&from), entry_link(&to));
            let old = this
                .read_index_text(from_scope)?
                .lines()
                .filter_map(parse_entry_line)
                .find(|e| e.file == from_link);
            if let Some(e) = old {
                let line = format_entry_line(
                    &e.title,
                    to_link,
                    &e.hook,
                    this.config.index.max_entry_chars,
                );
                if from_scope == to_scope {
                    this.edit_index(from_scope, |text| upsert_entry(text, from_link, &line))?;
                } else {
                    this.edit_index(to_scope, |text| upsert_entry(text, to_link, &line))?;
                    this.edit_index(from_scope, |text| remove_entry(text, from_link).0)?;
                }
            }
            Ok(WriteReport {
                rel_path: to,
                path: dst,
                created: false,
            })
        })
        .await
    }

    /// Take the dir locks a change to `scope` needs (see [`ScopeLocks`]).
    fn lock_for(&self, scope: MemoryScope) -> Result<ScopeLocks, MemoryError> {
        let root = DirLock::acquire(self.root())?;
        let team = match scope {
            MemoryScope::Private => None,
            MemoryScope::Team => {
                // Through the containment gate: a `team` symlink leading out of the memory dir
                // gets no lock file (nor anything else) written outside.
                let index = self.gate.check_write(Path::new(TEAM_INDEX_FILE))?;
                let dir = index.parent().unwrap_or(self.root()).to_path_buf();
                std::fs::create_dir_all(&dir)
                    .map_err(|e| MemoryError::io(format!("creating {}", dir.display()), e))?;
                Some(DirLock::acquire(&dir)?)
            }
        };
        Ok(ScopeLocks {
            _root: root,
            _team: team,
        })
    }

    /// Take the locks of every scope the dir has: the memory dir's, and the team dir's when
    /// there is one.
    fn lock_all(&self) -> Result<ScopeLocks, MemoryError> {
        let team_dir = std::fs::symlink_metadata(self.root().join(TEAM_DIR));
        self.lock_for(if team_dir.is_ok_and(|m| m.is_dir()) {
            MemoryScope::Team
        } else {
            MemoryScope::Private
        })
    }

    fn index_lines(&self, scope: MemoryScope) -> &std::sync::Mutex<IndexLines> {
        match scope {
            MemoryScope::Private => &self.index_lines,
            MemoryScope::Team => &self.team_index_lines,
        }
    }

    fn read_index_text(&self, scope: MemoryScope) -> Result<String, MemoryError> {
        match memloop_host::files::read_regular(&self.root().join(scope.index_file())) {
            Ok(bytes) => Ok(match String::from_utf8(bytes) {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!("MEMORY.md is not valid UTF-8; invalid bytes replaced");
                    String::from_utf8_lossy(e.as_bytes()).into_owned()
                }
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
            Err(e) => Err(MemoryError::io("reading MEMORY.md", e)),
        }
    }

    /// The start of the index of `scope` that loading it needs (after its leading whitespace,
    /// the byte cap and a few bytes more, the last character whole) and what is known of the
    /// rest ([`IndexRest`]), for [`load_capped_start`]. Past the start, the file is read only
    /// to count its lines (their text is not kept), and only until the count passes the line
    /// cap, the file ends, or [`INDEX_READ_CAPS`] times the start has been read: a large index
    /// costs the caps' worth of reading, not its size.
    fn read_index_start(&self, scope: MemoryScope) -> Result<(String, IndexRest), MemoryError> {
        use std::io::Read;
        let io = |e| MemoryError::io("reading MEMORY.md", e);
        let path = self.root().join(scope.index_file());
        let mut file = match memloop_host::files::open_regular(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok((String::new(), IndexRest::Nothing));
            }
            Err(e) => return Err(io(e)),
        };
        let caps = self.config.index;
        // The cap, a character's bytes and one more: the last whole character ends after the
        // cap's byte, as loading needs.
        let want = caps.max_bytes + 4;
        let limit = want.saturating_mul(INDEX_READ_CAPS);
        let mut buf = Vec::with_capacity(want.min(1 << 20));
        let mut chunk = [0u8; 8192];
        // Bytes read after the leading whitespace, newlines among them, the lines up to the
        // last byte that is not whitespace, and whether such a byte came after the start.
        let (mut seen, mut newlines, mut lines, mut beyond) = (0usize, 0usize, 0usize, false);
        let rest = loop {
            let n = file.read(&mut chunk).map_err(io)?;
            if n == 0 {
                break if beyond {
                    IndexRest::Counted(lines)
                } else {
                    IndexRest::Nothing
                };
            }
            let mut read = &chunk[..n];
            if seen == 0 {
                // Leading whitespace is trimmed by the load: not kept.
                let lead = read.iter().take_while(|b| b.is_ascii_whitespace()).count();
                read = &read[lead..];
            }
            let taken = (want - buf.len()).min(read.len());
            buf.extend_from_slice(&read[..taken]);
            for (i, b) in read.iter().enumerate() {
                if *b == b'\n' {
                    newlines += 1;
                } else if !b.is_ascii_whitespace() {
                    lines = newlines + 1;
                    beyond |= i >= taken;
                }
            }
            seen += read.len();
            if beyond && lines > caps.max_lines {
                break IndexRest::OverLines;
            }
            if beyond && seen >= limit {
                break IndexRest::More;
            }
        };
        if rest != IndexRest::Nothing
            && let Err(e) = std::str::from_utf8(&buf)
            && e.error_len().is_none()
        {
            // The cut fell inside a character: it is left to the part not kept.
            buf.truncate(e.valid_up_to());
        }
        let text = match String::from_utf8(buf) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("MEMORY.md is not valid UTF-8; invalid bytes replaced");
                String::from_utf8_lossy(e.as_bytes()).into_owned()
            }
        };
        Ok((text, rest))
    }

    /// Rewrite the index of `scope` through `f` (caller holds the lock); untouched when `f`
    /// changes nothing.
    fn edit_index(
        &self,
        scope: MemoryScope,
        f: impl FnOnce(&str) -> String,
    ) -> Result<(), MemoryError> {
        let old = self.read_index_text(scope)?;
        let new = f(&old);
        if new != old {
            atomic_write_with(
                &self.gate.check_write(Path::new(scope.index_file()))?,
                new.as_bytes(),
                self.config.durability,
            )?;
        }
        Ok(())
    }

    /// Drop the line the private index may still hold for the team memory `rel` (written before
    /// `team/` had an index of its own); the caller holds both locks.
    fn drop_private_line(&self, rel: &str) -> Result<bool, MemoryError> {
        let index_path = self.gate.check_write(Path::new(INDEX_FILE))?;
        let mut lines = self
            .index_lines
            .lock()
            .map_err(|_| MemoryError::io("MEMORY.md", std::io::Error::other("poisoned")))?;
        if !lines.links_to(&index_path, rel)? {
            return Ok(false);
        }
        lines.invalidate();
        let mut removed = false;
        self.edit_index(MemoryScope::Private, |idx| {
            let (text, had) = remove_entry(idx, rel);
            removed = had;
            text
        })?;
        Ok(removed)
    }

    /// Delete every memory file the scan or the index names, then the index, all under one lock
    /// so no writer slips a memory in between.
    fn clear_blocking(&self) -> Result<Vec<String>, MemoryError> {
        let _span = tracing::debug_span!("memory_clear").entered();
        let mut files: std::collections::BTreeSet<String> =
            scan_dir_cached(self.root(), &self.config.scan, &self.headers)?
                .into_iter()
                .map(|h| h.rel_path)
                .collect();
        files.extend(
            parse_entries(&self.read_index_text(MemoryScope::Private)?)
                .into_iter()
                .map(|e| e.file),
        );
        files.extend(
            parse_entries(&self.read_index_text(MemoryScope::Team)?)
                .into_iter()
                .map(|e| format!("{TEAM_DIR}/{}", e.file)),
        );
        let _locks = self.lock_all()?;
        let mut removed = Vec::new();
        for rel in files {
            let Ok(valid) = validate_rel_path(&rel) else {
                tracing::warn!(entry = %rel, "index entry names no valid memory file; dropped with the index");
                continue;
            };
            let Ok(path) = self.gate.check_write(Path::new(valid)) else {
                continue;
            };
            match std::fs::remove_file(&path) {
                Ok(()) => removed.push(rel),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(MemoryError::io(format!("removing {rel}"), e)),
            }
        }
        for index in [INDEX_FILE, TEAM_INDEX_FILE] {
            match std::fs::remove_file(self.root().join(index)) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(MemoryError::io(format!("removing {index}"), e)),
            }
        }
        for lines in [&self.index_lines, &self.team_index_lines] {
            if let Ok(mut lines) = lines.lock() {
                lines.invalidate();
            }
        }
        Ok(removed)
    }

    /// Write under the dir lock when the file is at the `expected` version (checked under the
    /// same lock, so no other writer slips in between).
    fn write_blocking(
        &self,
        rel: &str,
        doc: &MemoryDoc,
        mode: WriteMode,
        raw: Option<&str>,
        expected: &ExpectedVersion,
    ) -> Result<VersionedWrite, MemoryError> {
        let _span = tracing::debug_span!("memory_write", rel, ?mode).entered();
        let scope = MemoryScope::of(rel);
        let _locks = self.lock_for(scope)?;
        let path = self.gate.check_write(Path::new(rel))?;
        let (existing, text) = self.planned_text(rel, &path, doc, mode, raw, expected)?;
        let index = self.gate.check_write(Path::new(scope.index_file()))?;
        self.write_locked(rel, &path, &index, existing.as_deref(), &text)
    }

    /// The memory `rel` (at `path`, which passed the gate) as it is (`None`: absent) and the
    /// text a write of `doc` (or `raw`) in `mode` makes of it, if it is at `expected`. The
    /// caller holds the lock.
    fn planned_text(
        &self,
        rel: &str,
        path: &Path,
        doc: &MemoryDoc,
        mode: WriteMode,
        raw: Option<&str>,
        expected: &ExpectedVersion,
    ) -> Result<(Option<String>, String), MemoryError> {
        let existing = match memloop_host::files::read_regular(path) {
            Ok(b) => Some(String::from_utf8(b).map_err(|_| MemoryError::Unreadable {
                path: rel.to_owned(),
                reason: "the existing file is not valid UTF-8; refusing to modify it".into(),
            })?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(MemoryError::io(format!("reading {rel}"), e)),
        };
        if *expected != ExpectedVersion::Any {
            let current = existing.as_deref().map(content_version);
            if !expected.accepts(current.as_deref()) {
                tracing::info!(rel, "memory write refused: version conflict");
                return Err(expected.conflict(rel, current.as_deref()));
            }
        }
        let stem = memloop_store::file_stem(rel);
        let text = match (&existing, mode, raw) {
            // A checked raw write: the file as written.
            (_, _, Some(raw)) => raw.to_owned(),
            (Some(old), WriteMode::Append, None) => append_to_existing(old, doc),
            (Some(old), WriteMode::ReplaceBody, None) => replace_body(old, doc),
            // A new or replaced file always gets a name: the file stem when none is given.
            _ if doc.name.trim().is_empty() => render_memory(&MemoryDoc {
                name: stem.to_owned(),
                ..doc.clone()
            }),
            _ => render_memory(doc),
        };
        Ok((existing, text))
    }

    /// Write `text` as the memory `rel` (at `path`, which holds `existing`) and its line in
    /// the index at `index_path` (its scope's); both paths passed the gate, and the caller
    /// holds the lock of the scope.
    fn write_locked(
        &self,
        rel: &str,
        path: &Path,
        index_path: &Path,
        existing: Option<&str>,
        text: &str,
    ) -> Result<VersionedWrite, MemoryError> {
        let scope = MemoryScope::of(rel);
        let created = existing.is_none();
        let stem = memloop_store::file_stem(rel);
        if existing != Some(text) {
            atomic_write_with(path, text.as_bytes(), self.config.durability)?;
        }
        // The line goes to the index of the memory's scope, linking relative to that index.
        let link = entry_link(rel);
        let mut lines = self
            .index_lines(scope)
            .lock()
            .map_err(|_| MemoryError::io("MEMORY.md", std::io::Error::other("poisoned")))?;
        if memloop_store::is_daily_log(rel) {
            // Daily logs are raw notes: no index line (the dream distils them).
            if lines.links_to(index_path, link)? {
                lines.invalidate();
                self.edit_index(scope, |idx| remove_entry(idx, link).0)?;
            }
        } else {
            let fm = parse_memory(text).frontmatter.unwrap_or_default();
            let line = format_entry_line(
                fm.name.as_deref().unwrap_or(stem),
                link,
                fm.description.as_deref().unwrap_or(""),
                self.config.index.max_entry_chars,
            );
            // A new line is appended, an unchanged one left alone, a changed one replaced in
            // place; only a memory with several lines rewrites the index through its rules.
            let upsert = lines.upsert(index_path, link, &line, self.config.durability);
            if !matches!(
                upsert,
                Ok(Upsert::Unchanged | Upsert::Appended | Upsert::Replaced)
            ) {
                lines.invalidate();
            }
            if upsert? == Upsert::Rewrite {
                self.edit_index(scope, |idx| upsert_entry(idx, link, &line))?;
            }
        }
        drop(lines);
        if scope == MemoryScope::Team {
            self.drop_private_line(rel)?;
        }
        tracing::info!(rel, created, bytes = text.len(), "memory written");
        Ok(VersionedWrite {
            report: WriteReport {
                rel_path: rel.to_owned(),
                path: path.to_path_buf(),
                created,
            },
            version: content_version(text),
        })
    }

    fn read_blocking(&self, rel: &str) -> Result<MemoryFile, MemoryError> {
        let (path, meta) = self.locate(rel)?;
        self.read_located(rel, &path, &meta)
    }

    /// The memory file `rel` (containment checked) and its metadata; `NotFound` when it is
    /// missing or not a file.
    fn locate(&self, rel: &str) -> Result<(PathBuf, std::fs::Metadata), MemoryError> {
        let path = self.gate.check(Path::new(rel))?;
        let meta = match std::fs::metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(MemoryError::NotFound(rel.to_owned()));
            }
            Err(e) => return Err(MemoryError::io(format!("reading {rel}"), e)),
        };
        if !meta.is_file() {
            return Err(MemoryError::NotFound(rel.to_owned()));
        }
        Ok((path, meta))
    }

    /// Read and parse the located memory file `rel` (at most `max_read_bytes` of it).
    fn read_located(
        &self,
        rel: &str,
        path: &Path,
        meta: &std::fs::Metadata,
    ) -> Result<MemoryFile, MemoryError> {
        let _span = tracing::debug_span!("memory_read", rel).entered();
        let unreadable = |reason: String| MemoryError::Unreadable {
            path: rel.to_owned(),
            reason,
        };
        let limit = self.config.max_read_bytes;
        let cut = meta.len() > limit;
        let mut bytes = Vec::with_capacity(meta.len().min(limit) as usize);
        std::fs::File::open(path)
            .and_then(|f| {
                std::io::Read::read_to_end(&mut std::io::Read::take(f, limit), &mut bytes)
            })
            .map_err(|e| MemoryError::io(format!("reading {rel}"), e))?;
        if bytes.contains(&0) {
            return Err(unreadable("it is binary (contains NUL bytes)".into()));
        }
        let mut raw = match String::from_utf8(bytes) {
            Ok(s) => s,
            // Cut mid-character by the size limit: drop the partial character.
            Err(e) if cut && e.utf8_error().error_len().is_none() => {
                let valid = e.utf8_error().valid_up_to();
                let mut b = e.into_bytes();
                b.truncate(valid);
                String::from_utf8_lossy(&b).into_owned()
            }
            Err(e) => {
                tracing::warn!(
                    rel,
                    "memory file is not valid UTF-8 (Latin-1?); read lossily, invalid bytes replaced"
                );
                String::from_utf8_lossy(e.as_bytes()).into_owned()
            }
        };
        if cut {
            tracing::debug!(rel, bytes = meta.len(), limit, "large memory read cut");
            raw.push_str(&format!(
                "\n\n[memory cut: the file is {} bytes; only the first {limit} are shown]\n",
                meta.len()
            ));
        }
        let parsed = parse_memory(&raw);
        let fm = parsed.frontmatter.clone().unwrap_or_default();
        let body = parsed.body.to_owned();
        Ok(MemoryFile {
            header: MemoryHeader {
                rel_path: rel.to_owned(),
                name: fm.name,
                description: fm.description,
                memory_type: fm.memory_type,
                mtime: meta.modified().map_err(|e| MemoryError::io("stat", e))?,
            },
            body,
            raw,
        })
    }

    fn delete_blocking(&self, rel: &str) -> Result<(), MemoryError> {
        let _span = tracing::debug_span!("memory_delete", rel).entered();
        let path = self.gate.check_write(Path::new(rel))?;
        let scope = MemoryScope::of(rel);
        let _locks = self.lock_for(scope)?;
        let existed = match std::fs::remove_file(&path) {
            Ok(()) => true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => return Err(MemoryError::io(format!("deleting {rel}"), e)),
        };
        let mut had_line = false;
        self.edit_index(scope, |idx| {
            let (text, removed) = remove_entry(idx, entry_link(rel));
            had_line = removed;
            text
        })?;
        if scope == MemoryScope::Team {
            had_line |= self.drop_private_line(rel)?;
        }
        if existed || had_line {
            tracing::info!(rel, "memory deleted");
            Ok(())
        } else {
            Err(MemoryError::NotFound(rel.to_owned()))
        }
    }
}

#[async_trait]
impl MemoryStore for FileMemoryStore {
    fn describe(&self) -> StoreDescription {
        StoreDescription::directory(self.root())
    }

    /// The vector cache beside the memory dir (`<dir name>.vectors/`); locks, session records
    /// and pending work in the memory dir (dot names, never scanned as memories); transcripts
    /// and session notes in its parent, the project dir (`<project dir>/memory/` is the default
    /// layout).
    fn local_dir(&self, purpose: LocalPurpose) -> LocalDir {
        let root = self.root();
        LocalDir::Dir(match purpose {
            LocalPurpose::VectorCache => Self::vectors_dir_of(root),
            LocalPurpose::Transcripts | LocalPurpose::SessionNotes => {
                root.parent().unwrap_or(root).to_path_buf()
            }
            _ => root.to_path_buf(),
        })
    }

    fn write_limits(&self) -> WriteLimits {
        self.config.write
    }

    /// The memory dir's change feed: filesystem notifications where they work, else polling
    /// (see [`StoreConfig::watch`]); it sees every writer, memloop or not. When nothing changed
    /// and the feed can tell without waiting (watching on Linux), the answer comes without
    /// leaving the calling task.
    async fn changes(&self, since: Option<&ChangeCursor>) -> Result<Changes, MemoryError> {
        if let Some(changes) = self.feed.changes_now(since) {
            return Ok(changes);
        }
        let feed = self.feed.clone();
        let since = since.cloned();
        blocking(move || feed.changes(since.as_ref())).await
    }

    async fn scan(&self) -> Result<Vec<MemoryHeader>, MemoryError> {
        let this = self.clone();
        blocking(move || scan_dir_cached(this.root(), &this.config.scan, &this.headers)).await
    }

    /// A small memory (at most 64 KiB) in a watched dir (so on a local filesystem) is
    /// read on the calling task: the blocking pool's round trip, two thread wake-ups, costs
    /// more than reading a page-cached file of a few KiB. Larger files, and dirs on network or
    /// FUSE filesystems or not watched, are read on the blocking pool.
    async fn read_path(&self, path: &MemoryPath) -> Result<MemoryFile, MemoryError> {
        let rel = path.as_str().to_owned();
        let this = self.clone();
        if !self.feed.on_local_fs() {
            return blocking(move || this.read_blocking(&rel)).await;
        }
        let (file, meta) = self.locate(&rel)?;
        if meta.len() <= INLINE_READ_BYTES {
            return self.read_located(&rel, &file, &meta);
        }
        blocking(move || this.read_located(&rel, &file, &meta)).await
    }

    async fn write_checked(&self, write: CheckedWrite) -> Result<WriteReport, MemoryError> {
        self.write_checked_if(write, &ExpectedVersion::Any)
            .await
            .map(|w| w.report)
    }

    /// The version check and the write under one dir lock: atomic against every writer of the
    /// dir, in this process or another.
    async fn write_checked_if(
        &self,
        write: CheckedWrite,
        expected: &ExpectedVersion,
    ) -> Result<VersionedWrite, MemoryError> {
        let this = self.clone();
        let expected = expected.clone();
        blocking(move || {
            this.write_blocking(
                write.path().as_str(),
                write.doc(),
                write.mode(),
                write.raw(),
                &expected,
            )
        })
        .await
    }

    /// Whole even through a killed process: [`FileMemoryStore::write_batch_blocking`].
    async fn write_checked_batch(
        &self,
        writes: Vec<(CheckedWrite, ExpectedVersion)>,
    ) -> Result<Vec<VersionedWrite>, MemoryError> {
        let this = self.clone();
        blocking(move || this.write_batch_blocking(&writes, &mut |_| {})).await
    }

    async fn delete_checked(&self, path: &MemoryPath) -> Result<(), MemoryError> {
        let rel = path.as_str().to_owned();
        let this = self.clone();
        blocking(move || this.delete_blocking(&rel)).await
    }

    /// One `rename(2)` under the store's lock, the index line moved with the memory
    /// ([`FileMemoryStore::rename`], which checks the text at the new path again under the
    /// lock).
    async fn rename_checked(
        &self,
        from: &MemoryPath,
        to: CheckedWrite,
    ) -> Result<WriteReport, MemoryError> {
        FileMemoryStore::rename(self, from.as_str(), to.path().as_str()).await
    }

    async fn clear(&self) -> Result<Vec<String>, MemoryError> {
        let this = self.clone();
        blocking(move || this.clear_blocking()).await
    }

    async fn load_index(&self) -> Result<LoadedIndex, MemoryError> {
        let this = self.clone();
        blocking(move || {
            let (start, rest) = this.read_index_start(MemoryScope::Private)?;
            Ok(load_capped_start(&start, rest, this.config.index))
        })
        .await
    }

    /// The private index (`MEMORY.md`) or the team's (`team/MEMORY.md`), capped.
    async fn load_scope_index(&self, scope: MemoryScope) -> Result<LoadedIndex, MemoryError> {
        let this = self.clone();
        blocking(move || {
            let (start, rest) = this.read_index_start(scope)?;
            Ok(load_capped_start(&start, rest, this.config.index))
        })
        .await
    }

    /// Every entry of both indexes, as store paths: `MEMORY.md`'s, then `team/MEMORY.md`'s
    /// with `team/` put before their links.
    async fn index_entries(&self) -> Result<Vec<IndexEntry>, MemoryError> {
        let this = self.clone();
        blocking(move || {
            let mut entries = parse_entries(&this.read_index_text(MemoryScope::Private)?);
            entries.extend(
                parse_entries(&this.read_index_text(MemoryScope::Team)?)
                    .into_iter()
                    .map(|e| IndexEntry {
                        file: format!("{TEAM_DIR}/{}", e.file),
                        ..e
                    }),
            );
            Ok(entries)
        })
        .await
    }

    /// A valid memory path whose file, once symlinks are resolved, is inside the memory dir.
    fn check_contained(&self, rel: &str) -> Result<MemoryPath, MemoryError> {
        let path = MemoryPath::new(rel)?;
        self.gate.check(Path::new(path.as_str()))?;
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_team_change_holds_the_team_dirs_lock_too() {
        let tmp = tempfile::tempdir().unwrap();
        let store = FileMemoryStore::open(tmp.path()).unwrap();
        let team_dir = tmp.path().join(TEAM_DIR);
        // The team dir's lock is the one a store opened on `team/` (the team sync) takes.
        let locks = store.lock_for(MemoryScope::Team).unwrap();
        assert!(DirLock::acquire_within(&team_dir, Duration::ZERO).is_err());
        assert!(DirLock::acquire_within(tmp.path(), Duration::ZERO).is_err());
        drop(locks);
        let private = store.lock_for(MemoryScope::Private).unwrap();
        assert!(DirLock::acquire_within(&team_dir, Duration::ZERO).is_ok());
        drop(private);
    }
}
