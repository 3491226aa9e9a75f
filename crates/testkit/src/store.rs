//! An in-memory [`MemoryStore`] (feature `store`) and the outcome of a write under the rules.

use async_trait::async_trait;
use memloop_store::{
    CheckedWrite, ExpectedVersion, IndexCaps, IndexEntry, LoadedIndex, LocalDir, LocalPurpose,
    MemoryDoc, MemoryError, MemoryFile, MemoryHeader, MemoryPath, MemoryScope, MemoryStore,
    StoreDescription, StoreLocation, TEAM_DIR, VersionedWrite, WriteMode, WriteReport,
    append_to_existing, content_version, file_stem, format_entry_line, is_daily_log, load_capped,
    replace_body,
};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

/// Numbers the maps of this process, so each has an identity of its own.
static NEXT_MAP: AtomicU64 = AtomicU64::new(1);

/// A [`MemoryStore`] whose memories live in a map in memory, for tests of the parts above a
/// store (an agent, a setup, a selector) with no directory at all. It is also the smallest
/// complete backend: the recipe for a new one.
///
/// It keeps the whole store contract and passes the store conformance suite
/// (`memloop_store::conformance`, run in this crate's tests): versions are checked and written
/// in one step under its lock, a raw memory file is kept byte for byte, every memory has one
/// index entry. It checks no rule itself: every rule (paths, `MEMORY.md`, credentials, the team
/// rule, the size cap) runs in the write entry point (`dyn MemoryStore::write` and the others)
/// before a write reaches it, which is what a test of those rules over a store with no checks
/// relies on. It has no change feed (every question gets a rescan) and keeps no transcripts.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use memloop_store::{MemoryDoc, MemoryStore, MemoryType, WriteMode};
/// use memloop_testkit::MapStore;
/// use std::sync::Arc;
///
/// let store: Arc<dyn MemoryStore> = Arc::new(MapStore::new());
/// let doc = MemoryDoc::new("Deploys", "when we deploy", MemoryType::Project, "Tuesdays.");
/// store.write("deploy.md", &doc, WriteMode::Overwrite).await.unwrap();
/// assert_eq!(store.read("deploy.md").await.unwrap().body.trim_end(), "Tuesdays.");
/// // The rules run before the map sees a write.
/// assert!(store.write("MEMORY.md", &doc, WriteMode::Overwrite).await.is_err());
/// # }
/// ```
pub struct MapStore {
    id: u64,
    local: Option<PathBuf>,
    state: Mutex<State>,
}

/// The memories, by path, and the counter that orders them.
#[derive(Default)]
struct State {
    memories: HashMap<String, Stored>,
    /// Bumped by every write: orders the index (oldest first).
    clock: u64,
    /// The last mtime given: each write's is later (the wall clock, or a nanosecond past the
    /// last one when the clock has not moved), so a rewrite always moves to the front.
    last_mtime: Option<SystemTime>,
}

/// One memory: its text as stored and what parsing it gave.
struct Stored {
    text: String,
    doc: MemoryDoc,
    /// When it was first written (the index lists memories in that order).
    created: u64,
    mtime: SystemTime,
}

impl Stored {
    fn header(&self, rel: &str) -> MemoryHeader {
        MemoryHeader {
            rel_path: rel.to_owned(),
            name: Some(self.doc.name.clone()),
            description: Some(self.doc.description.clone()),
            memory_type: self.doc.memory_type,
            mtime: self.mtime,
        }
    }
}

impl Default for MapStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MapStore {
    /// An empty map with no local dir: whatever needs local disk (locks, session records, a
    /// consolidation lock) is told it lives elsewhere.
    pub fn new() -> Self {
        Self {
            id: NEXT_MAP.fetch_add(1, Ordering::Relaxed),
            local: None,
            state: Mutex::default(),
        }
    }

    /// An empty map whose local needs (locks, session records, the vector cache, ...) go under
    /// `dir`; it still keeps no transcripts.
    pub fn with_local_dir(dir: impl Into<PathBuf>) -> Self {
        Self {
            local: Some(dir.into()),
            ..Self::new()
        }
    }

    /// The paths of the memories it holds, sorted.
    pub fn paths(&self) -> Vec<String> {
        let mut paths: Vec<String> = self.lock().memories.keys().cloned().collect();
        paths.sort();
        paths
    }

    /// The map, also when a test panicked while holding it (the map stays consistent: every
    /// change is one insert or remove).
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The index entries of one scope, in the order the memories were created (daily logs have
    /// none).
    fn entries(&self, scope: MemoryScope) -> Vec<IndexEntry> {
        let state = self.lock();
        let mut stored: Vec<(&String, &Stored)> = state
            .memories
            .iter()
            .filter(|(rel, _)| MemoryScope::of(rel) == scope && !is_daily_log(rel))
            .collect();
        stored.sort_by_key(|(_, s)| s.created);
        stored
            .into_iter()
            .map(|(rel, s)| IndexEntry {
                title: s.doc.name.clone(),
                file: rel.clone(),
                hook: s.doc.description.clone(),
            })
            .collect()
    }

    /// The capped index text of one scope, links relative to `base`.
    fn index(&self, scope: MemoryScope, base: &str) -> LoadedIndex {
        let caps = IndexCaps::default();
        let text = self
            .entries(scope)
            .iter()
            .map(|e| {
                let link = e.file.strip_prefix(base).unwrap_or(&e.file);
                format_entry_line(&e.title, link, &e.hook, caps.max_entry_chars)
            })
            .collect::<Vec<_>>()
            .join("\n");
        load_capped(&text, caps)
    }
}

/// The text a write leaves: a raw file as given, an append after the old body, a new body in the
/// stored frontmatter, else the fields rendered (an empty title named after the file).
fn text_of(rel: &str, existing: Option<&str>, write: &CheckedWrite) -> String {
    match (existing, write.mode(), write.raw()) {
        (_, _, Some(raw)) => raw.to_owned(),
        (Some(old), WriteMode::Append, None) => append_to_existing(old, write.doc()),
        (Some(old), WriteMode::ReplaceBody, None) => replace_body(old, write.doc()),
        _ if write.doc().name.trim().is_empty() => MemoryDoc {
            name: file_stem(rel).to_owned(),
            ..write.doc().clone()
        }
        .render(),
        _ => write.doc().render(),
    }
}

#[async_trait]
impl MemoryStore for MapStore {
    fn describe(&self) -> StoreDescription {
        StoreDescription {
            location: StoreLocation::Memory {
                name: format!("map-{}", self.id),
            },
            identity: format!("map:{}", self.id),
        }
    }

    fn local_dir(&self, purpose: LocalPurpose) -> LocalDir {
        match (&self.local, purpose) {
            (_, LocalPurpose::Transcripts) => {
                LocalDir::Elsewhere("a MapStore keeps no transcripts".into())
            }
            (Some(dir), _) => LocalDir::Dir(dir.clone()),
            (None, _) => LocalDir::Elsewhere(
                "a MapStore has no local dir (MapStore::with_local_dir gives one)".into(),
            ),
        }
    }

    async fn scan(&self) -> Result<Vec<MemoryHeader>, MemoryError> {
        let state = self.lock();
        let mut stored: Vec<(&String, &Stored)> = state.memories.iter().collect();
        // Newest first; the same mtime in path order.
        stored.sort_by(|(a, x), (b, y)| y.mtime.cmp(&x.mtime).then_with(|| a.cmp(b)));
        Ok(stored.into_iter().map(|(rel, s)| s.header(rel)).collect())
    }

    async fn read_path(&self, path: &MemoryPath) -> Result<MemoryFile, MemoryError> {
        let state = self.lock();
        let stored = state
            .memories
            .get(path.as_str())
            .ok_or_else(|| MemoryError::NotFound(path.to_string()))?;
        Ok(MemoryFile {
            header: stored.header(path.as_str()),
            body: stored.doc.body.clone(),
            raw: stored.text.clone(),
        })
    }

    async fn write_checked(&self, write: CheckedWrite) -> Result<WriteReport, MemoryError> {
        self.write_checked_if(write, &ExpectedVersion::Any)
            .await
            .map(|w| w.report)
    }

    /// The version check and the write under one lock, so concurrent writers cannot both win.
    async fn write_checked_if(
        &self,
        write: CheckedWrite,
        expected: &ExpectedVersion,
    ) -> Result<VersionedWrite, MemoryError> {
        let rel = write.path().as_str();
        let mut state = self.lock();
        let existing = state.memories.get(rel);
        let current = existing.map(|s| content_version(&s.text));
        if !expected.accepts(current.as_deref()) {
            return Err(expected.conflict(rel, current.as_deref()));
        }
        let text = text_of(rel, existing.map(|s| s.text.as_str()), &write);
        let doc =
            MemoryDoc::parse(&text, file_stem(rel)).map_err(|reason| MemoryError::Unreadable {
                path: rel.to_owned(),
                reason,
            })?;
        let created = existing.map(|s| s.created);
        state.clock += 1;
        let now = state.clock;
        let wall = SystemTime::now();
        let mtime = match state.last_mtime {
            Some(last) if wall <= last => last + std::time::Duration::from_nanos(1),
            _ => wall,
        };
        state.last_mtime = Some(mtime);
        let version = content_version(&text);
        state.memories.insert(
            rel.to_owned(),
            Stored {
                text,
                doc,
                created: created.unwrap_or(now),
                mtime,
            },
        );
        Ok(VersionedWrite {
            report: WriteReport {
                rel_path: rel.to_owned(),
                path: PathBuf::from(rel),
                created: created.is_none(),
            },
            version,
        })
    }

    async fn delete_checked(&self, path: &MemoryPath) -> Result<(), MemoryError> {
        match self.lock().memories.remove(path.as_str()) {
            Some(_) => Ok(()),
            None => Err(MemoryError::NotFound(path.to_string())),
        }
    }

    async fn clear(&self) -> Result<Vec<String>, MemoryError> {
        let mut removed: Vec<String> = self.lock().memories.drain().map(|(rel, _)| rel).collect();
        removed.sort();
        Ok(removed)
    }

    /// The private index: every memory outside `team/`, one line each, capped.
    async fn load_index(&self) -> Result<LoadedIndex, MemoryError> {
        Ok(self.index(MemoryScope::Private, ""))
    }

    /// The team index lists the `team/` memories, linked relative to `team/`.
    async fn load_scope_index(&self, scope: MemoryScope) -> Result<LoadedIndex, MemoryError> {
        Ok(match scope {
            MemoryScope::Private => self.index(MemoryScope::Private, ""),
            MemoryScope::Team => self.index(MemoryScope::Team, &format!("{TEAM_DIR}/")),
        })
    }

    /// Every index entry, private then team, as store paths.
    async fn index_entries(&self) -> Result<Vec<IndexEntry>, MemoryError> {
        let mut entries = self.entries(MemoryScope::Private);
        entries.extend(self.entries(MemoryScope::Team));
        Ok(entries)
    }
}

/// What the write rules say of one write: the outcome every writer of a memory (a store's
/// `write`, `write_raw_if`, `rename`, a memory tool, an MCP save) must agree on for the same
/// memory. Tables of writers compare these.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteOutcome {
    /// The memory was written.
    Written,
    /// A name, path or scope the store refuses ([`MemoryError::InvalidName`]; the team rule
    /// names the path too).
    BadName,
    /// A credential in the text ([`MemoryError::SensitiveData`]).
    Secret,
    /// Over the size cap ([`MemoryError::TooLarge`]).
    TooLarge,
    /// Any other error, with its text: never what a rule says, so a table comparing outcomes
    /// fails on it and shows it.
    Other(String),
}

impl WriteOutcome {
    /// The outcome of a store write's result.
    ///
    /// ```
    /// use memloop_store::MemoryError;
    /// use memloop_testkit::WriteOutcome;
    ///
    /// assert_eq!(WriteOutcome::of(&Ok::<_, MemoryError>(())), WriteOutcome::Written);
    /// let missing: Result<(), _> = Err(MemoryError::NotFound("a.md".into()));
    /// assert!(matches!(WriteOutcome::of(&missing), WriteOutcome::Other(_)));
    /// ```
    pub fn of<T>(result: &Result<T, MemoryError>) -> Self {
        match result {
            Ok(_) => Self::Written,
            Err(MemoryError::InvalidName { .. }) => Self::BadName,
            Err(MemoryError::SensitiveData { .. }) => Self::Secret,
            Err(MemoryError::TooLarge { .. }) => Self::TooLarge,
            Err(e) => Self::Other(format!("{e:?}")),
        }
    }
}
