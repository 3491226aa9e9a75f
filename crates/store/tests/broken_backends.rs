//! The conformance suite proves its own power: a correct in-memory backend with a change feed
//! (the reference below) passes every check, and each of the bugs real backend authors make,
//! planted in it one at a time, fails the suite, at the check of the rule it breaks. The test
//! prints which checks caught each bug, so the output is the suite's coverage table.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use async_trait::async_trait;
use memloop_store::conformance::{self, Check, Report};
use memloop_store::{
    ChangeCursor, Changes, CheckedWrite, ExpectedVersion, IndexCaps, IndexEntry, LoadedIndex,
    MemoryDoc, MemoryError, MemoryFile, MemoryHeader, MemoryPath, MemoryScope, MemoryStore,
    StoreDescription, StoreLocation, TEAM_DIR, VersionedWrite, WriteMode, WriteReport,
    append_to_existing, content_version, file_stem, format_entry_line, is_daily_log, load_capped,
    replace_body,
};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};
use unicode_normalization::UnicodeNormalization;

/// One bug a backend author makes, planted in the reference backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bug {
    /// Scan lists the oldest memory first.
    ScanOldestFirst,
    /// Scan lists memories in path order, whatever their mtimes.
    ScanByPath,
    /// Scan lists the index file as a memory.
    ScanListsIndex,
    /// Scan keeps listing a deleted memory.
    ScanListsDeleted,
    /// Scan headers carry the title as the description.
    ScanWrongDescription,
    /// `load_index` without the 200-line cap.
    NoLineCap,
    /// `load_index` without the 25,000-byte cap.
    NoByteCap,
    /// Paths are folded to lower case on the way in.
    FoldsCase,
    /// Paths are normalised to Unicode NFC on the way in.
    NormalisesUnicode,
    /// `ReplaceBody` is treated as an overwrite.
    ReplaceBodyOverwrites,
    /// `Append` drops the old body.
    AppendDropsOldBody,
    /// A raw memory file is stored with CRLF line ends (neither as written nor canonical).
    RawNotByteForByte,
    /// The expected version is not checked.
    IgnoresExpectedVersion,
    /// The version check reads, awaits, then writes: another writer passes the same check.
    RacyCheckThenWrite,
    /// The reported version is not the content version of the text a read returns.
    VersionNotOfRead,
    /// `created` is reported for every write.
    CreatedAlwaysTrue,
    /// A read returns the memory's first text, not its latest.
    StaleRead,
    /// A cursor's store id is not compared: another store's cursor is taken as this one's.
    ForeignCursorAccepted,
    /// A cursor the store cannot read is answered "unchanged".
    GarbageCursorUnchanged,
    /// A rewrite of an existing memory is missing from the change feed.
    RewriteNotInFeed,
    /// An append is missing from the change feed.
    AppendNotInFeed,
    /// A delete is missing from the change feed.
    DeleteNotInFeed,
    /// A rename is missing from the change feed.
    RenameNotInFeed,
    /// A batch is missing from the change feed.
    BatchNotInFeed,
    /// `clear` is missing from the change feed.
    ClearNotInFeed,
    /// Deleting a memory that does not exist reports success.
    DeleteMissingOk,
    /// Reading several memories at once answers only those that exist (the rest shift up).
    ReadPathsSkipsMissing,
    /// A rename leaves the source behind (a copy).
    RenameLeavesSource,
    /// A rename overwrites an existing target.
    RenameOverwrites,
    /// A delete also removes every path its path is a prefix of (`a.md` takes `a.md.md`).
    DeletePrefix,
    /// A delete removes every memory with the same file name, in any folder.
    DeleteSameName,
    /// A memory's mtime is set when it is created and never moves.
    MtimeNeverMoves,
    /// Daily logs get an index line.
    DailyLogIndexed,
    /// A rewrite leaves the index line as it was.
    IndexLineNotUpdated,
    /// A delete leaves the index line behind.
    IndexLineKeptOnDelete,
    /// `clear` deletes the memories but leaves the index.
    ClearLeavesIndex,
    /// `clear` skips team memories.
    ClearMissesTeam,
    /// Team memories are also listed in the private index.
    TeamInPrivateIndex,
    /// A batch writes its memories one by one and keeps those before a conflict.
    BatchPartial,
}

impl Bug {
    const ALL: [Bug; 39] = [
        Bug::ScanOldestFirst,
        Bug::ScanByPath,
        Bug::ScanListsIndex,
        Bug::ScanListsDeleted,
        Bug::ScanWrongDescription,
        Bug::NoLineCap,
        Bug::NoByteCap,
        Bug::FoldsCase,
        Bug::NormalisesUnicode,
        Bug::ReplaceBodyOverwrites,
        Bug::AppendDropsOldBody,
        Bug::RawNotByteForByte,
        Bug::IgnoresExpectedVersion,
        Bug::RacyCheckThenWrite,
        Bug::VersionNotOfRead,
        Bug::CreatedAlwaysTrue,
        Bug::StaleRead,
        Bug::ForeignCursorAccepted,
        Bug::GarbageCursorUnchanged,
        Bug::RewriteNotInFeed,
        Bug::AppendNotInFeed,
        Bug::DeleteNotInFeed,
        Bug::RenameNotInFeed,
        Bug::BatchNotInFeed,
        Bug::ClearNotInFeed,
        Bug::DeleteMissingOk,
        Bug::ReadPathsSkipsMissing,
        Bug::RenameLeavesSource,
        Bug::RenameOverwrites,
        Bug::DeletePrefix,
        Bug::DeleteSameName,
        Bug::MtimeNeverMoves,
        Bug::DailyLogIndexed,
        Bug::IndexLineNotUpdated,
        Bug::IndexLineKeptOnDelete,
        Bug::ClearLeavesIndex,
        Bug::ClearMissesTeam,
        Bug::TeamInPrivateIndex,
        Bug::BatchPartial,
    ];

    /// The check of the rule the bug breaks: it must be among the checks that fail.
    fn rule(self) -> Check {
        match self {
            Bug::ScanOldestFirst | Bug::ScanByPath | Bug::ScanWrongDescription => Check::ScanOrder,
            Bug::ScanListsIndex => Check::MemoryIndex,
            Bug::ScanListsDeleted | Bug::CreatedAlwaysTrue | Bug::StaleRead => Check::RoundTrip,
            Bug::NoLineCap | Bug::NoByteCap => Check::IndexCaps,
            Bug::FoldsCase | Bug::NormalisesUnicode => Check::PathIdentity,
            Bug::ReplaceBodyOverwrites | Bug::AppendDropsOldBody => Check::WriteModes,
            Bug::RawNotByteForByte | Bug::IgnoresExpectedVersion | Bug::VersionNotOfRead => {
                Check::Versions
            }
            Bug::RacyCheckThenWrite => Check::ConcurrentWriters,
            Bug::ForeignCursorAccepted | Bug::GarbageCursorUnchanged => Check::CursorIdentity,
            Bug::RewriteNotInFeed
            | Bug::AppendNotInFeed
            | Bug::DeleteNotInFeed
            | Bug::RenameNotInFeed
            | Bug::BatchNotInFeed
            | Bug::ClearNotInFeed => Check::ChangeFeed,
            Bug::DeleteMissingOk
            | Bug::ReadPathsSkipsMissing
            | Bug::RenameLeavesSource
            | Bug::RenameOverwrites => Check::MissingMemories,
            Bug::DeletePrefix | Bug::DeleteSameName => Check::DeletePrecision,
            Bug::MtimeNeverMoves => Check::Mtimes,
            Bug::DailyLogIndexed => Check::DailyLogs,
            Bug::IndexLineNotUpdated | Bug::IndexLineKeptOnDelete => Check::MemoryIndex,
            Bug::ClearLeavesIndex | Bug::ClearMissesTeam => Check::Clear,
            Bug::TeamInPrivateIndex => Check::TeamRule,
            Bug::BatchPartial => Check::Batches,
        }
    }
}

/// Numbers the reference stores of this process: each store's cursors carry its id.
static NEXT_STORE: AtomicU64 = AtomicU64::new(1);

/// The reference backend: memories in a map, an index kept beside them, and a change feed of
/// generations. Correct unless a [`Bug`] is planted.
struct Reference {
    id: u64,
    bug: Option<Bug>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    memories: BTreeMap<String, Stored>,
    /// The index, in the order memories were first written (store paths).
    index: Vec<IndexEntry>,
    /// Deleted memories' last headers ([`Bug::ScanListsDeleted`]).
    tombstones: Vec<MemoryHeader>,
    last_mtime: Option<SystemTime>,
    /// The feed: each change's generation and path (removed or written).
    generation: u64,
    changes: Vec<(u64, String)>,
}

#[derive(Clone)]
struct Stored {
    text: String,
    first_text: String,
    doc: MemoryDoc,
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

const CURSOR: &str = "reference";

impl Reference {
    fn store(bug: Option<Bug>) -> Arc<dyn MemoryStore> {
        Arc::new(Self {
            id: NEXT_STORE.fetch_add(1, Ordering::Relaxed),
            bug,
            state: Mutex::default(),
        })
    }

    fn has(&self, bug: Bug) -> bool {
        self.bug == Some(bug)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap()
    }

    /// The key a path is stored under: the path itself.
    fn key(&self, rel: &str) -> String {
        if self.has(Bug::FoldsCase) {
            rel.to_lowercase()
        } else if self.has(Bug::NormalisesUnicode) {
            rel.nfc().collect()
        } else {
            rel.to_owned()
        }
    }

    fn record(&self, state: &mut State, rel: &str, skip: bool) {
        if !skip {
            state.generation += 1;
            let generation = state.generation;
            state.changes.push((generation, rel.to_owned()));
        }
    }

    fn cursor(&self, state: &State) -> ChangeCursor {
        ChangeCursor::new(format!("{CURSOR}|{}|{}", self.id, state.generation))
    }

    /// The generation a cursor names, if it is this store's.
    fn parse(&self, cursor: &ChangeCursor) -> Option<u64> {
        let rest = cursor.as_str().strip_prefix(CURSOR)?.strip_prefix('|')?;
        let (id, generation) = rest.split_once('|')?;
        if id != self.id.to_string() && !self.has(Bug::ForeignCursorAccepted) {
            return None;
        }
        generation.parse().ok()
    }

    fn next_mtime(&self, state: &mut State, existing: Option<SystemTime>) -> SystemTime {
        if let (Some(old), true) = (existing, self.has(Bug::MtimeNeverMoves)) {
            return old;
        }
        let wall = SystemTime::now();
        let mtime = match state.last_mtime {
            Some(last) if wall <= last => last + Duration::from_nanos(1),
            _ => wall,
        };
        state.last_mtime = Some(mtime);
        mtime
    }

    fn check_version(
        &self,
        state: &State,
        rel: &str,
        expected: &ExpectedVersion,
    ) -> Result<(), MemoryError> {
        let current = state.memories.get(rel).map(|s| content_version(&s.text));
        if !self.has(Bug::IgnoresExpectedVersion) && !expected.accepts(current.as_deref()) {
            return Err(expected.conflict(rel, current.as_deref()));
        }
        Ok(())
    }

    /// Apply a write (its version already checked) under the caller's lock.
    fn apply(
        &self,
        state: &mut State,
        write: &CheckedWrite,
        in_feed: bool,
    ) -> Result<VersionedWrite, MemoryError> {
        let rel = self.key(write.path().as_str());
        let existing = state.memories.get(&rel).cloned();
        let existed = existing.is_some();
        let doc = write.doc();
        let mode = match write.mode() {
            WriteMode::ReplaceBody if self.has(Bug::ReplaceBodyOverwrites) => WriteMode::Overwrite,
            WriteMode::Append if self.has(Bug::AppendDropsOldBody) => WriteMode::Overwrite,
            mode => mode,
        };
        let text = match (&existing, mode, write.raw()) {
            (_, _, Some(raw)) if self.has(Bug::RawNotByteForByte) => raw.replace('\n', "\r\n"),
            (_, _, Some(raw)) => raw.to_owned(),
            (Some(old), WriteMode::Append, None) => append_to_existing(&old.text, doc),
            (Some(old), WriteMode::ReplaceBody, None) => replace_body(&old.text, doc),
            _ if doc.name.trim().is_empty() => MemoryDoc {
                name: file_stem(&rel).to_owned(),
                ..doc.clone()
            }
            .render(),
            _ => doc.render(),
        };
        let parsed =
            MemoryDoc::parse(&text, file_stem(&rel)).map_err(|reason| MemoryError::Unreadable {
                path: rel.clone(),
                reason,
            })?;
        let mtime = self.next_mtime(state, existing.as_ref().map(|s| s.mtime));
        let skip = !in_feed
            || (existing.is_some()
                && match mode {
                    WriteMode::Overwrite => self.has(Bug::RewriteNotInFeed),
                    WriteMode::Append => self.has(Bug::AppendNotInFeed),
                    WriteMode::ReplaceBody => false,
                });
        self.record(state, &rel, skip);
        self.index_line(state, &rel, &parsed);
        let version = content_version(&text);
        state.memories.insert(
            rel.clone(),
            Stored {
                first_text: existing.map_or_else(|| text.clone(), |s| s.first_text),
                text,
                doc: parsed,
                mtime,
            },
        );
        Ok(VersionedWrite {
            report: WriteReport {
                rel_path: rel.clone(),
                path: PathBuf::from(&rel),
                created: !existed || self.has(Bug::CreatedAlwaysTrue),
            },
            version: if self.has(Bug::VersionNotOfRead) {
                content_version(&format!("{version}\n"))
            } else {
                version
            },
        })
    }

    fn index_line(&self, state: &mut State, rel: &str, doc: &MemoryDoc) {
        if is_daily_log(rel) && !self.has(Bug::DailyLogIndexed) {
            return;
        }
        let entry = IndexEntry {
            title: doc.name.clone(),
            file: rel.to_owned(),
            hook: doc.description.clone(),
        };
        match state.index.iter_mut().find(|e| e.file == rel) {
            Some(_) if self.has(Bug::IndexLineNotUpdated) => {}
            Some(line) => *line = entry,
            None => state.index.push(entry),
        }
    }

    fn remove(&self, state: &mut State, rel: &str, in_feed: bool) -> bool {
        let Some(stored) = state.memories.remove(rel) else {
            return false;
        };
        if self.has(Bug::ScanListsDeleted) {
            state.tombstones.push(stored.header(rel));
        }
        if !self.has(Bug::IndexLineKeptOnDelete) {
            state.index.retain(|e| e.file != rel);
        }
        self.record(state, rel, !in_feed);
        true
    }

    fn index_text(&self, scope: MemoryScope) -> LoadedIndex {
        let state = self.lock();
        let mut caps = IndexCaps::default();
        if self.has(Bug::NoLineCap) {
            caps.max_lines = usize::MAX;
        }
        if self.has(Bug::NoByteCap) {
            caps.max_bytes = usize::MAX;
        }
        let base = match scope {
            MemoryScope::Team => format!("{TEAM_DIR}/"),
            _ => String::new(),
        };
        let text = state
            .index
            .iter()
            .filter(|e| {
                MemoryScope::of(&e.file) == scope
                    || (scope == MemoryScope::Private && self.has(Bug::TeamInPrivateIndex))
            })
            .map(|e| {
                let link = e.file.strip_prefix(&base).unwrap_or(&e.file);
                format_entry_line(&e.title, link, &e.hook, caps.max_entry_chars)
            })
            .collect::<Vec<_>>()
            .join("\n");
        load_capped(&text, caps)
    }
}

#[async_trait]
impl MemoryStore for Reference {
    fn describe(&self) -> StoreDescription {
        StoreDescription {
            location: StoreLocation::Database {
                engine: "reference".into(),
                url: format!("memory://reference/{}", self.id),
                project: format!("reference-{}", self.id),
            },
            identity: format!("reference:{}", self.id),
        }
    }

    async fn changes(&self, since: Option<&ChangeCursor>) -> Result<Changes, MemoryError> {
        let state = self.lock();
        let cursor = self.cursor(&state);
        let Some(since) = since else {
            return Ok(Changes::Rescan {
                cursor: Some(cursor),
            });
        };
        let Some(from) = self.parse(since).filter(|g| *g <= state.generation) else {
            if self.has(Bug::GarbageCursorUnchanged) && self.parse(since).is_none() {
                return Ok(Changes::Unchanged);
            }
            return Ok(Changes::Rescan {
                cursor: Some(cursor),
            });
        };
        if from == state.generation {
            return Ok(Changes::Unchanged);
        }
        let (mut written, mut removed) = (Vec::new(), Vec::new());
        let mut seen = std::collections::BTreeSet::new();
        for (_, rel) in state.changes.iter().filter(|(g, _)| *g > from).rev() {
            if !seen.insert(rel.clone()) {
                continue;
            }
            match state.memories.get(rel) {
                Some(stored) => written.push(stored.header(rel)),
                None => removed.push(MemoryPath::new(rel)?),
            }
        }
        Ok(Changes::Changed {
            cursor,
            written,
            removed,
            files: Vec::new(),
        })
    }

    async fn scan(&self) -> Result<Vec<MemoryHeader>, MemoryError> {
        let state = self.lock();
        let mut headers: Vec<MemoryHeader> = state
            .memories
            .iter()
            .map(|(rel, s)| s.header(rel))
            .chain(state.tombstones.iter().cloned())
            .collect();
        if self.has(Bug::ScanWrongDescription) {
            for h in &mut headers {
                h.description = h.name.clone();
            }
        }
        if self.has(Bug::ScanListsIndex) && !headers.is_empty() {
            headers.push(MemoryHeader {
                rel_path: "MEMORY.md".into(),
                name: Some("MEMORY".into()),
                description: None,
                memory_type: None,
                mtime: SystemTime::now(),
            });
        }
        if self.has(Bug::ScanByPath) {
            headers.sort_by(|a, b| a.rel_path.cmp(&b.rel_path));
        } else if self.has(Bug::ScanOldestFirst) {
            headers.sort_by(|a, b| a.mtime.cmp(&b.mtime).then(a.rel_path.cmp(&b.rel_path)));
        } else {
            headers.sort_by(|a, b| b.mtime.cmp(&a.mtime).then(a.rel_path.cmp(&b.rel_path)));
        }
        Ok(headers)
    }

    async fn read_path(&self, path: &MemoryPath) -> Result<MemoryFile, MemoryError> {
        let rel = self.key(path.as_str());
        let state = self.lock();
        let stored = state
            .memories
            .get(&rel)
            .ok_or_else(|| MemoryError::NotFound(rel.clone()))?;
        let text = if self.has(Bug::StaleRead) {
            &stored.first_text
        } else {
            &stored.text
        };
        let doc =
            MemoryDoc::parse(text, file_stem(&rel)).map_err(|reason| MemoryError::Unreadable {
                path: rel.clone(),
                reason,
            })?;
        Ok(MemoryFile {
            header: MemoryHeader {
                rel_path: rel.clone(),
                name: Some(doc.name),
                description: Some(doc.description),
                memory_type: doc.memory_type,
                mtime: stored.mtime,
            },
            body: doc.body,
            raw: text.clone(),
        })
    }

    /// Each path as `read_path` answers it, or with [`Bug::ReadPathsSkipsMissing`] only those
    /// that exist.
    async fn read_paths(&self, paths: &[MemoryPath]) -> Vec<Result<MemoryFile, MemoryError>> {
        let mut out = Vec::new();
        for p in paths {
            let read = self.read_path(p).await;
            if read.is_ok() || !self.has(Bug::ReadPathsSkipsMissing) {
                out.push(read);
            }
        }
        out
    }

    /// The check and the write under one lock; with [`Bug::RacyCheckThenWrite`], the lock is
    /// let go and the task yields between them, as a backend awaiting its database would.
    async fn write_checked_if(
        &self,
        write: CheckedWrite,
        expected: &ExpectedVersion,
    ) -> Result<VersionedWrite, MemoryError> {
        let rel = self.key(write.path().as_str());
        if self.has(Bug::RacyCheckThenWrite) {
            self.check_version(&self.lock(), &rel, expected)?;
            tokio::task::yield_now().await;
            return self.apply(&mut self.lock(), &write, true);
        }
        let mut state = self.lock();
        self.check_version(&state, &rel, expected)?;
        self.apply(&mut state, &write, true)
    }

    /// All expectations checked first, then every write, under one lock.
    async fn write_checked_batch(
        &self,
        writes: Vec<(CheckedWrite, ExpectedVersion)>,
    ) -> Result<Vec<VersionedWrite>, MemoryError> {
        let mut state = self.lock();
        let in_feed = !self.has(Bug::BatchNotInFeed);
        if self.has(Bug::BatchPartial) {
            let mut done = Vec::new();
            for (write, expected) in &writes {
                self.check_version(&state, &self.key(write.path().as_str()), expected)?;
                done.push(self.apply(&mut state, write, in_feed)?);
            }
            return Ok(done);
        }
        for (write, expected) in &writes {
            self.check_version(&state, &self.key(write.path().as_str()), expected)?;
        }
        writes
            .iter()
            .map(|(write, _)| self.apply(&mut state, write, in_feed))
            .collect()
    }

    async fn delete_checked(&self, path: &MemoryPath) -> Result<(), MemoryError> {
        let rel = self.key(path.as_str());
        let mut state = self.lock();
        let in_feed = !self.has(Bug::DeleteNotInFeed);
        let name = rel.rsplit('/').next().unwrap_or(&rel).to_owned();
        let also: Vec<String> = state
            .memories
            .keys()
            .filter(|k| {
                **k != rel
                    && ((self.has(Bug::DeletePrefix) && k.starts_with(&rel))
                        || (self.has(Bug::DeleteSameName) && k.rsplit('/').next() == Some(&name)))
            })
            .cloned()
            .collect();
        for k in also {
            self.remove(&mut state, &k, in_feed);
        }
        if self.remove(&mut state, &rel, in_feed) || self.has(Bug::DeleteMissingOk) {
            Ok(())
        } else {
            Err(MemoryError::NotFound(rel))
        }
    }

    /// One step under the lock: the target written, the source removed, both in the feed.
    async fn rename_checked(
        &self,
        from: &MemoryPath,
        to: CheckedWrite,
    ) -> Result<WriteReport, MemoryError> {
        let (from, target) = (self.key(from.as_str()), self.key(to.path().as_str()));
        let mut state = self.lock();
        if !state.memories.contains_key(&from) {
            return Err(MemoryError::NotFound(from));
        }
        if !self.has(Bug::RenameOverwrites) {
            self.check_version(&state, &target, &ExpectedVersion::Absent)?;
        }
        let in_feed = !self.has(Bug::RenameNotInFeed);
        let written = self.apply(&mut state, &to, in_feed)?;
        if !self.has(Bug::RenameLeavesSource) {
            self.remove(&mut state, &from, in_feed);
        }
        Ok(written.report)
    }

    async fn clear(&self) -> Result<Vec<String>, MemoryError> {
        let mut state = self.lock();
        let in_feed = !self.has(Bug::ClearNotInFeed);
        let doomed: Vec<String> = state
            .memories
            .keys()
            .filter(|k| {
                !(self.has(Bug::ClearMissesTeam) && MemoryScope::of(k) == MemoryScope::Team)
            })
            .cloned()
            .collect();
        let index = state.index.clone();
        for rel in &doomed {
            self.remove(&mut state, rel, in_feed);
        }
        if self.has(Bug::ClearLeavesIndex) {
            state.index = index;
        }
        Ok(doomed)
    }

    async fn load_index(&self) -> Result<LoadedIndex, MemoryError> {
        Ok(self.index_text(MemoryScope::Private))
    }

    async fn load_scope_index(&self, scope: MemoryScope) -> Result<LoadedIndex, MemoryError> {
        Ok(self.index_text(scope))
    }

    /// Every entry, private then team, as store paths.
    async fn index_entries(&self) -> Result<Vec<IndexEntry>, MemoryError> {
        let state = self.lock();
        let (private, team): (Vec<IndexEntry>, Vec<IndexEntry>) = state
            .index
            .iter()
            .cloned()
            .partition(|e| MemoryScope::of(&e.file) == MemoryScope::Private);
        Ok(private.into_iter().chain(team).collect())
    }
}

async fn suite(bug: Option<Bug>) -> Report {
    conformance::run(|| async move { Reference::store(bug) }).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_backend_passes_every_check() {
    let report = suite(None).await;
    assert!(report.is_ok(), "{report}");
    assert_eq!(report.passed, Check::ALL);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_planted_bug_fails_the_check_of_its_rule() {
    assert!(Bug::ALL.len() >= 30);
    let mut missed = Vec::new();
    let mut table = Vec::new();
    for bug in Bug::ALL {
        let report = suite(Some(bug)).await;
        let failed = report.failed();
        table.push(format!(
            "{bug:?} -> {}",
            failed
                .iter()
                .map(|c| c.name())
                .collect::<Vec<_>>()
                .join(", ")
        ));
        if !failed.contains(&bug.rule()) {
            missed.push(format!(
                "{bug:?} must fail {} ({}): {report}",
                bug.rule(),
                bug.rule().rule()
            ));
        }
        // The reason names the rule it broke.
        for failure in &report.failures {
            assert!(
                failure
                    .reason
                    .starts_with(&format!("[{}] ", failure.check.rule())),
                "{}",
                failure.reason
            );
        }
    }
    // The coverage table: which checks caught each bug.
    println!("{}", table.join("\n"));
    assert!(missed.is_empty(), "{}", missed.join("\n\n"));
}
