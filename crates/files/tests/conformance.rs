//! The store conformance suite (`memloop_store::conformance`, feature `conformance`): the file
//! store passes it, and each of its checks fails on a store that breaks that check's rule. The
//! broken stores wrap the file store and break one rule each, the way a real backend would.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use async_trait::async_trait;
use memloop_files::FileMemoryStore;
use memloop_store::conformance::{self, CONCURRENT_WRITERS, Check, Report};
use memloop_store::{
    ChangeCursor, Changes, CheckedWrite, ExpectedVersion, IndexEntry, LoadedIndex, LocalDir,
    LocalPurpose, MemoryError, MemoryFile, MemoryHeader, MemoryPath, MemoryScope, MemoryStore,
    StoreDescription, VersionedWrite, WriteLimits, WriteReport,
};
use std::sync::{Arc, Mutex};
use tempfile::TempDir;

/// One way a backend gets a rule wrong.
#[derive(Clone)]
enum Fault {
    /// Keeps at most 64 KiB of a memory's text (a column too narrow for the size limit).
    TruncatesLargeText,
    /// Stores a raw memory file's parsed fields instead of its text.
    KeepsFieldsOnly,
    /// Writes whatever version is there.
    IgnoresExpectedVersion,
    /// Checks the version, then writes without holding anything: every writer of a round
    /// reads before any writes (the barrier holds the race window open for that many writers).
    CheckThenWrite(Arc<tokio::sync::Barrier>),
    /// Transliterates titles, descriptions and bodies to ASCII (`决定` → `Jue Ding`).
    DropsNonAscii,
    /// Refuses memory paths that are not ASCII.
    RefusesNonAsciiPaths,
    /// A delete leaves the memory's index entry behind.
    KeepsIndexEntryOnDelete,
    /// Answers every question with a cursor "unchanged".
    LosesChanges,
    /// Lists team memories in the index without their `team/` prefix.
    ForgetsTeamPrefix,
    /// Deletes with the path as a SQL `LIKE` pattern (`_` and `%` are wildcards).
    LikeWildcardDeletes,
}

/// The file store in a temp dir, with one fault.
struct Broken {
    inner: FileMemoryStore,
    fault: Option<Fault>,
    /// Index entries of deleted memories ([`Fault::KeepsIndexEntryOnDelete`]).
    ghosts: Mutex<Vec<IndexEntry>>,
    _dir: TempDir,
}

impl Broken {
    fn store(fault: Option<Fault>) -> Arc<dyn MemoryStore> {
        let dir = tempfile::tempdir().unwrap();
        Arc::new(Self {
            inner: FileMemoryStore::open(dir.path()).unwrap(),
            fault,
            ghosts: Mutex::new(Vec::new()),
            _dir: dir,
        })
    }

    fn has(&self, f: fn(&Fault) -> bool) -> bool {
        self.fault.as_ref().is_some_and(f)
    }
}

/// Whether `path` matches `pattern` as SQL `LIKE` does (`_` one character, `%` any text).
fn like(pattern: &[char], path: &[char]) -> bool {
    match (pattern.first(), path.first()) {
        (None, None) => true,
        (Some('%'), _) => {
            like(&pattern[1..], path) || (!path.is_empty() && like(pattern, &path[1..]))
        }
        (Some('_'), Some(_)) => like(&pattern[1..], &path[1..]),
        (Some(p), Some(c)) if p == c => like(&pattern[1..], &path[1..]),
        _ => false,
    }
}

#[async_trait]
impl MemoryStore for Broken {
    fn describe(&self) -> StoreDescription {
        self.inner.describe()
    }

    fn local_dir(&self, purpose: LocalPurpose) -> LocalDir {
        self.inner.local_dir(purpose)
    }

    fn write_limits(&self) -> WriteLimits {
        self.inner.write_limits()
    }

    async fn changes(&self, since: Option<&ChangeCursor>) -> Result<Changes, MemoryError> {
        if since.is_some() && self.has(|f| matches!(f, Fault::LosesChanges)) {
            return Ok(Changes::Unchanged);
        }
        self.inner.changes(since).await
    }

    async fn scan(&self) -> Result<Vec<MemoryHeader>, MemoryError> {
        self.inner.scan().await
    }

    async fn read_path(&self, path: &MemoryPath) -> Result<MemoryFile, MemoryError> {
        let mut file = self.inner.read_path(path).await?;
        if self.has(|f| matches!(f, Fault::TruncatesLargeText)) {
            let cut = |s: &mut String| {
                if s.len() > 64 * 1024 {
                    s.truncate(64 * 1024);
                }
            };
            cut(&mut file.raw);
            cut(&mut file.body);
        }
        Ok(file)
    }

    async fn write_checked(&self, write: CheckedWrite) -> Result<WriteReport, MemoryError> {
        self.write_checked_if(write, &ExpectedVersion::Any)
            .await
            .map(|w| w.report)
    }

    async fn write_checked_if(
        &self,
        write: CheckedWrite,
        expected: &ExpectedVersion,
    ) -> Result<VersionedWrite, MemoryError> {
        let limits = self.inner.write_limits();
        let rel = write.path().as_str().to_owned();
        match &self.fault {
            Some(Fault::KeepsFieldsOnly) if write.raw().is_some() => {
                let fields = CheckedWrite::check(&rel, write.doc(), write.mode(), limits)?;
                self.inner.write_checked_if(fields, expected).await
            }
            Some(Fault::IgnoresExpectedVersion) => {
                self.inner
                    .write_checked_if(write, &ExpectedVersion::Any)
                    .await
            }
            Some(Fault::CheckThenWrite(window)) if *expected != ExpectedVersion::Any => {
                let current = match self.inner.read_path(write.path()).await {
                    Ok(f) => Some(memloop_store::content_version(&f.raw)),
                    Err(MemoryError::NotFound(_)) => None,
                    Err(e) => return Err(e),
                };
                if !expected.accepts(current.as_deref()) {
                    return Err(expected.conflict(&rel, current.as_deref()));
                }
                window.wait().await;
                self.inner
                    .write_checked_if(write, &ExpectedVersion::Any)
                    .await
            }
            Some(Fault::DropsNonAscii) => {
                let write = match write.raw() {
                    Some(raw) => CheckedWrite::check_raw(&rel, &deunicode::deunicode(raw), limits)?,
                    None => {
                        let mut doc = write.doc().clone();
                        for field in [&mut doc.name, &mut doc.description, &mut doc.body] {
                            *field = deunicode::deunicode(field);
                        }
                        CheckedWrite::check(&rel, &doc, write.mode(), limits)?
                    }
                };
                self.inner.write_checked_if(write, expected).await
            }
            _ => self.inner.write_checked_if(write, expected).await,
        }
    }

    async fn delete_checked(&self, path: &MemoryPath) -> Result<(), MemoryError> {
        if self.has(|f| matches!(f, Fault::KeepsIndexEntryOnDelete)) {
            let entries = self.inner.index_entries().await?;
            let mut ghosts = self.ghosts.lock().unwrap();
            ghosts.extend(entries.into_iter().filter(|e| e.file == path.as_str()));
        }
        if self.has(|f| matches!(f, Fault::LikeWildcardDeletes)) {
            let pattern: Vec<char> = path.as_str().chars().collect();
            for header in self.inner.scan().await? {
                let candidate: Vec<char> = header.rel_path.chars().collect();
                if like(&pattern, &candidate) {
                    self.inner
                        .delete_checked(&MemoryPath::new(&header.rel_path)?)
                        .await?;
                }
            }
            return Ok(());
        }
        self.inner.delete_checked(path).await
    }

    async fn clear(&self) -> Result<Vec<String>, MemoryError> {
        self.inner.clear().await
    }

    async fn load_index(&self) -> Result<LoadedIndex, MemoryError> {
        let mut index = self.inner.load_index().await?;
        for ghost in self.ghosts.lock().unwrap().iter() {
            index.content.push_str(&format!(
                "\n- [{}]({}) — {}",
                ghost.title, ghost.file, ghost.hook
            ));
        }
        Ok(index)
    }

    async fn load_scope_index(&self, scope: MemoryScope) -> Result<LoadedIndex, MemoryError> {
        self.inner.load_scope_index(scope).await
    }

    async fn index_entries(&self) -> Result<Vec<IndexEntry>, MemoryError> {
        let mut entries = self.inner.index_entries().await?;
        entries.extend(self.ghosts.lock().unwrap().iter().cloned());
        if self.has(|f| matches!(f, Fault::ForgetsTeamPrefix)) {
            for e in &mut entries {
                if let Some(rest) = e.file.strip_prefix("team/") {
                    e.file = rest.to_owned();
                }
            }
        }
        Ok(entries)
    }

    fn check_contained(&self, rel: &str) -> Result<MemoryPath, MemoryError> {
        if !rel.is_ascii() && self.has(|f| matches!(f, Fault::RefusesNonAsciiPaths)) {
            return Err(MemoryError::InvalidName {
                name: rel.to_owned(),
                reason: "only ASCII names are supported".into(),
            });
        }
        self.inner.check_contained(rel)
    }
}

async fn suite(fault: Option<Fault>) -> Report {
    conformance::run(|| {
        let fault = fault.clone();
        async move { Broken::store(fault) }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_file_store_passes_every_check() {
    let dirs = Arc::new(Mutex::new(Vec::new()));
    let report = conformance::run(|| {
        let dirs = dirs.clone();
        async move {
            let dir = tempfile::tempdir().unwrap();
            let store = FileMemoryStore::open(dir.path()).unwrap();
            dirs.lock().unwrap().push(dir);
            Arc::new(store) as Arc<dyn MemoryStore>
        }
    })
    .await;
    assert!(report.is_ok(), "{report}");
    assert_eq!(report.passed, Check::ALL);
    // The wrapper without a fault is the file store: it passes too, so each fault below is what
    // fails its check.
    let report = suite(None).await;
    assert!(report.is_ok(), "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_broken_rule_fails_its_check() {
    let cases: Vec<(Fault, Vec<Check>)> = vec![
        (Fault::TruncatesLargeText, vec![Check::SizeLimit]),
        (Fault::KeepsFieldsOnly, vec![Check::Versions]),
        (
            Fault::IgnoresExpectedVersion,
            vec![Check::Versions, Check::ConcurrentWriters],
        ),
        (Fault::DropsNonAscii, vec![Check::NonAscii]),
        (Fault::RefusesNonAsciiPaths, vec![Check::NonAscii]),
        (Fault::KeepsIndexEntryOnDelete, vec![Check::MemoryIndex]),
        (Fault::LosesChanges, vec![Check::ChangeFeed]),
        (Fault::ForgetsTeamPrefix, vec![Check::TeamRule]),
        (Fault::LikeWildcardDeletes, vec![Check::HostileInput]),
    ];
    let mut wrong = Vec::new();
    for (fault, expected) in cases {
        let report = suite(Some(fault)).await;
        // Its own check fails; checks of rules that share the broken step may fail too.
        if !expected.iter().all(|c| report.failed().contains(c)) {
            wrong.push(format!(
                "expected {expected:?} among the failures: {report}"
            ));
        }
        assert_eq!(
            report.passed.len() + report.failures.len(),
            Check::ALL.len()
        );
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_check_then_write_race_fails_the_concurrent_writers_check() {
    // With one writer at a time the same store is correct: it passes every other check.
    let others: Vec<Check> = Check::ALL
        .into_iter()
        .filter(|c| *c != Check::ConcurrentWriters)
        .collect();
    let report = conformance::run_checks(&others, || async {
        Broken::store(Some(Fault::CheckThenWrite(Arc::new(
            tokio::sync::Barrier::new(1),
        ))))
    })
    .await;
    assert!(report.is_ok(), "{report}");
    // Every concurrent writer reads the version before any writes: all of them "win".
    let report = conformance::run_checks(&[Check::ConcurrentWriters], || async {
        Broken::store(Some(Fault::CheckThenWrite(Arc::new(
            tokio::sync::Barrier::new(CONCURRENT_WRITERS),
        ))))
    })
    .await;
    assert_eq!(report.failed(), [Check::ConcurrentWriters], "{report}");
    let reason = &report.failures[0].reason;
    assert!(
        reason.contains(&format!("exactly one must win, {CONCURRENT_WRITERS} did")),
        "{reason}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_panics_fails_its_check_and_the_suite_goes_on() {
    struct Panics;
    #[async_trait]
    impl MemoryStore for Panics {
        fn describe(&self) -> StoreDescription {
            StoreDescription::directory(std::path::Path::new("/nowhere"))
        }
        async fn scan(&self) -> Result<Vec<MemoryHeader>, MemoryError> {
            panic!("scan is not implemented")
        }
        async fn read_path(&self, path: &MemoryPath) -> Result<MemoryFile, MemoryError> {
            Err(MemoryError::NotFound(path.to_string()))
        }
        async fn write_checked_if(
            &self,
            _: CheckedWrite,
            _: &ExpectedVersion,
        ) -> Result<VersionedWrite, MemoryError> {
            panic!("write is not implemented")
        }
        async fn delete_checked(&self, path: &MemoryPath) -> Result<(), MemoryError> {
            Err(MemoryError::NotFound(path.to_string()))
        }
        async fn clear(&self) -> Result<Vec<String>, MemoryError> {
            Ok(Vec::new())
        }
        async fn load_index(&self) -> Result<LoadedIndex, MemoryError> {
            Ok(LoadedIndex::default())
        }
        async fn index_entries(&self) -> Result<Vec<IndexEntry>, MemoryError> {
            Ok(Vec::new())
        }
    }
    let report = conformance::run(|| async { Arc::new(Panics) as Arc<dyn MemoryStore> }).await;
    // Every check writes; every write panics; each check fails on its own.
    assert_eq!(report.failed(), Check::ALL, "{report}");
    assert!(
        report.failures[0]
            .reason
            .contains("write is not implemented"),
        "{report}"
    );
    assert!(report.to_string().starts_with(&format!(
        "store conformance: 0 passed, {} failed",
        Check::ALL.len()
    )));
}
