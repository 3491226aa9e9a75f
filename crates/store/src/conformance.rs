//! A conformance suite any [`MemoryStore`] backend can run (feature `conformance`): the rules
//! every store keeps, checked through the same entry points the rest of memloop uses
//! (`dyn MemoryStore::write`, `write_if`, `write_raw_if`, `read`, `delete`, `scan`, the index and
//! the change feed).
//!
//! [`run`] takes a factory that makes a fresh, empty store and runs every [`Check`] on a store of
//! its own; the [`Report`] lists every failed check with its reason (a failing check does not
//! stop the others). The file store, the PostgreSQL store and the SQLite example
//! (`examples/sqlite-store/`) all pass it.
//!
//! ```
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! # async fn main() {
//! use memloop_store::{MemoryStore, conformance};
//! use memloop_testkit::MapStore;
//! use std::sync::Arc;
//!
//! // Each check gets an empty store of its own (here the test kit's in-memory backend).
//! let report = conformance::run(|| async { Arc::new(MapStore::new()) as Arc<dyn MemoryStore> })
//!     .await;
//! assert!(report.is_ok(), "{report}");
//! # }
//! ```
//!
//! Some rules ([`CheckedWrite`](crate::CheckedWrite): valid paths, never `MEMORY.md`, no
//! credential, no control character in a title, the `team/` rule, the size cap) run in the
//! write entry point before any backend sees a write, so a backend cannot skip them; the suite
//! still checks them (whatever an embedder's wrapper or a future entry point does, the rules
//! must hold) together with what the backend does own: a refused write leaves nothing behind,
//! a memory at the size cap is read back whole, refused paths cannot be read or deleted either.
//!
//! The checks need a Tokio runtime (each runs in a task of its own, so a store that panics fails
//! its check instead of the suite); [`Check::ConcurrentWriters`] wants a multi-threaded one to
//! exercise real parallelism.

/// `Err(message)` unless `cond`.
macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

mod checks;
mod interleave;
mod rules;
mod support;

use crate::memory_store::MemoryStore;
use std::fmt;
use std::future::Future;
use std::sync::Arc;

pub use checks::CONCURRENT_WRITERS;

/// One rule of the suite. Each is a documented function in the suite's source; [`Check::run`]
/// runs it on one store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Check {
    /// A memory written is read back as written (title, description, type, body), its reported
    /// version is the [`content_version`](crate::content_version) of the text a read returns,
    /// `created` says whether it was new, an append keeps the old body before the new one, scan
    /// lists it once, and a deleted memory is gone.
    RoundTrip,
    /// Nested relative paths ending in `.md` are memories; `..`, absolute paths, hidden
    /// segments, empty segments, backslashes and other extensions are refused for writes,
    /// reads and deletes, and nothing refused is stored.
    NamesAndPaths,
    /// `MEMORY.md` (at any depth) is the index, never a memory: it cannot be written, read or
    /// deleted as one and scan never lists it; every memory has exactly one index entry (its
    /// title and description), a rewrite updates it, a delete removes it and `clear` empties
    /// the store and its index.
    MemoryIndex,
    /// The store's [`WriteLimits::max_text_bytes`](crate::WriteLimits): a memory of exactly
    /// that many bytes of text is stored and read back whole; one byte more is refused with
    /// [`MemoryError::TooLarge`](crate::MemoryError::TooLarge) and leaves the memory there
    /// unchanged.
    SizeLimit,
    /// A credential in the body, title, description or anywhere in a raw memory file is refused
    /// with [`MemoryError::SensitiveData`](crate::MemoryError::SensitiveData), the error does
    /// not echo it, and the memory already there is unchanged.
    Secrets,
    /// The team rule: a `user` memory is never written into team memory (`team/…`), whether
    /// as fields or as a raw file; other memories are, and they are listed and indexed under
    /// their `team/` path, and loaded exactly once: in the team index when the store keeps one,
    /// else in the private index.
    TeamRule,
    /// Conditional writes ([`ExpectedVersion`](crate::ExpectedVersion)): create-only,
    /// exact-version and any-version writes; a stale expectation is a
    /// [`MemoryError::VersionConflict`](crate::MemoryError::VersionConflict) naming the current
    /// version and writes nothing; a raw memory file is stored byte for byte or as its
    /// canonical text ([`canonical_memory_text`](crate::canonical_memory_text): unknown
    /// frontmatter keys kept, formatting normalised), and its version is that text's.
    Versions,
    /// [`CONCURRENT_WRITERS`] writers released together by a barrier, and as many interleaved in
    /// one task (each runs until it awaits, then the next: a backend that awaits anything
    /// between its version check and its write is caught every time): with the same expected
    /// version exactly one wins and the others get a conflict; creating the same new memory,
    /// exactly one creates it; writing different memories, every one lands, in scan and in the
    /// index.
    ConcurrentWriters,
    /// The change feed ([`MemoryStore::changes`]), or its declared absence: without a cursor the
    /// answer is a rescan; from a cursor every kind of change (a create, rewrite, append,
    /// replace-body write, rename, batch, delete and `clear`) is reported with the paths it
    /// wrote and removed (or a rescan asked for), never "unchanged"; a cursor the store did not
    /// issue gets a rescan. A store without a feed answers every question with a rescan without
    /// a cursor.
    ChangeFeed,
    /// Paths, titles, descriptions and bodies in Chinese, Japanese, Arabic, Cyrillic,
    /// Devanagari, with emoji (ZWJ sequences included) and combining marks are stored, listed,
    /// indexed and read back exactly.
    NonAscii,
    /// Hostile input: NUL, control characters, `..`, drive and UNC forms and over-long segments
    /// in paths; control characters in titles and descriptions; NUL in bodies; a body many
    /// times the size cap. All refused with nothing stored. Text that is valid however odd it
    /// looks (SQL and `LIKE` metacharacters in paths, frontmatter inside a body, YAML and
    /// Markdown syntax in titles, terminal escapes in bodies) is stored exactly and cannot
    /// reach another memory.
    HostileInput,
    /// Scan lists every memory once, newest first by mtime (the same mtime: in path order),
    /// each header as a read gives it, never an index file or a deleted memory; a rewrite
    /// moves a memory to the front.
    ScanOrder,
    /// A write that changes a memory (overwrite, append or replace-body) moves its mtime
    /// forward, and a memory written later is never older.
    Mtimes,
    /// Paths are identities byte for byte: `Notes.md` and `notes.md`, the NFC and NFD forms
    /// of `é`, `Отчёт.md` and `отчёт.md` are different memories, each read, listed and indexed
    /// under its own bytes, and deleting one leaves the other.
    PathIdentity,
    /// [`WriteMode`](crate::WriteMode)s: replace-body keeps the stored frontmatter (title,
    /// description, type, unknown keys) and replaces only the body; append keeps the old body
    /// before the new one; overwrite replaces everything; on a missing memory, append and
    /// replace-body write as overwrite does.
    WriteModes,
    /// A memory that does not exist is [`MemoryError::NotFound`](crate::MemoryError::NotFound)
    /// to read, delete (a second delete too) and rename; reading several at once
    /// ([`read_paths`](crate::MemoryStore::read_paths)) answers each path in its place as
    /// reading it alone does, a missing one `NotFound` between two that are read; a rename onto
    /// an existing memory is refused and changes nothing; a rename moves the text and the index
    /// entry.
    MissingMemories,
    /// A delete removes exactly its memory and its index entry: not `a.md.md` or `ab.md` when
    /// deleting `a.md`, not `x/a.md` or `team/a.md`, not an index neighbour.
    DeletePrecision,
    /// Daily logs (`logs/…`, [`is_daily_log`](crate::is_daily_log)) are stored, listed and read
    /// like other memories but get no index entry in either index.
    DailyLogs,
    /// The index with more than 200 lines and more than 25,000 bytes: `load_index` keeps at
    /// most 200 lines and 25,000 bytes and warns ([`load_capped`](crate::load_capped));
    /// `index_entries` lists every entry, uncapped, in the order the memories were first
    /// written, a rewrite keeping its place.
    IndexCaps,
    /// [`MemoryStore::write_checked_batch`] writes all of its memories or none: a conflict names
    /// its memory and leaves every memory of the batch as it was.
    Batches,
    /// `clear` deletes every memory (team memories and daily logs too) and both indexes, and
    /// returns exactly the paths it deleted.
    Clear,
    /// A cursor the store did not issue, another store's (of the same backend) or garbage, gets
    /// [`Changes::Rescan`](crate::Changes::Rescan), never "unchanged".
    CursorIdentity,
}

impl Check {
    /// Every check, in the order [`run`] runs them.
    pub const ALL: [Check; 22] = [
        Check::RoundTrip,
        Check::NamesAndPaths,
        Check::MemoryIndex,
        Check::SizeLimit,
        Check::Secrets,
        Check::TeamRule,
        Check::Versions,
        Check::ConcurrentWriters,
        Check::ChangeFeed,
        Check::NonAscii,
        Check::HostileInput,
        Check::ScanOrder,
        Check::Mtimes,
        Check::PathIdentity,
        Check::WriteModes,
        Check::MissingMemories,
        Check::DeletePrecision,
        Check::DailyLogs,
        Check::IndexCaps,
        Check::Batches,
        Check::Clear,
        Check::CursorIdentity,
    ];

    /// The check's name (`snake_case`, the name of its function).
    pub fn name(self) -> &'static str {
        match self {
            Check::RoundTrip => "round_trip",
            Check::NamesAndPaths => "names_and_paths",
            Check::MemoryIndex => "memory_index",
            Check::SizeLimit => "size_limit",
            Check::Secrets => "secrets",
            Check::TeamRule => "team_rule",
            Check::Versions => "versions",
            Check::ConcurrentWriters => "concurrent_writers",
            Check::ChangeFeed => "change_feed",
            Check::NonAscii => "non_ascii",
            Check::HostileInput => "hostile_input",
            Check::ScanOrder => "scan_order",
            Check::Mtimes => "mtimes",
            Check::PathIdentity => "path_identity",
            Check::WriteModes => "write_modes",
            Check::MissingMemories => "missing_memories",
            Check::DeletePrecision => "delete_precision",
            Check::DailyLogs => "daily_logs",
            Check::IndexCaps => "index_caps",
            Check::Batches => "batches",
            Check::Clear => "clear",
            Check::CursorIdentity => "cursor_identity",
        }
    }

    /// The rule this check verifies, as the failure reasons name it (`scan order`).
    pub fn rule(self) -> String {
        self.name().replace('_', " ")
    }

    /// Run this check on `store` (which must be empty). `Err` says which rule broke and how.
    /// [`Check::CursorIdentity`] run this way has no second store to take a cursor from: it
    /// tries garbage cursors only ([`run`] gives it one).
    pub async fn run(self, store: Arc<dyn MemoryStore>) -> Result<(), String> {
        self.run_with(store, None).await
    }

    /// Run this check on `store` (which must be empty), with `other`, a second empty store of
    /// the same backend, for the checks that compare two stores ([`Check::CursorIdentity`]).
    pub async fn run_with(
        self,
        store: Arc<dyn MemoryStore>,
        other: Option<Arc<dyn MemoryStore>>,
    ) -> Result<(), String> {
        match self {
            Check::RoundTrip => checks::round_trip(store).await,
            Check::NamesAndPaths => checks::names_and_paths(store).await,
            Check::MemoryIndex => checks::memory_index(store).await,
            Check::SizeLimit => checks::size_limit(store).await,
            Check::Secrets => checks::secrets(store).await,
            Check::TeamRule => checks::team_rule(store).await,
            Check::Versions => checks::versions(store).await,
            Check::ConcurrentWriters => checks::concurrent_writers(store).await,
            Check::ChangeFeed => {
                checks::change_feed(store.clone()).await?;
                rules::every_change(store).await
            }
            Check::NonAscii => checks::non_ascii(store).await,
            Check::HostileInput => checks::hostile_input(store).await,
            Check::ScanOrder => rules::scan_order(store).await,
            Check::Mtimes => rules::mtimes(store).await,
            Check::PathIdentity => rules::path_identity(store).await,
            Check::WriteModes => rules::write_modes(store).await,
            Check::MissingMemories => rules::missing_memories(store).await,
            Check::DeletePrecision => rules::delete_precision(store).await,
            Check::DailyLogs => rules::daily_logs(store).await,
            Check::IndexCaps => rules::index_caps(store).await,
            Check::Batches => rules::batches(store).await,
            Check::Clear => rules::clear(store).await,
            Check::CursorIdentity => rules::cursor_identity(store, other).await,
        }
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A check that failed, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// Which check.
    pub check: Check,
    /// What the store did wrong (or that it panicked), starting with the rule in brackets
    /// (`[scan order] ...`).
    pub reason: String,
}

/// What a run found: the checks that passed and every one that failed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// The checks the store passed.
    pub passed: Vec<Check>,
    /// The checks it failed, each with the reason.
    pub failures: Vec<Failure>,
}

impl Report {
    /// Whether every check passed.
    pub fn is_ok(&self) -> bool {
        self.failures.is_empty()
    }

    /// The checks that failed, in the order they ran.
    pub fn failed(&self) -> Vec<Check> {
        self.failures.iter().map(|f| f.check).collect()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "store conformance: {} passed, {} failed",
            self.passed.len(),
            self.failures.len()
        )?;
        for failure in &self.failures {
            write!(f, "\n- {}: {}", failure.check, failure.reason)?;
        }
        Ok(())
    }
}

/// Run every check ([`Check::ALL`]), each on a fresh, empty store from `factory`.
pub async fn run<F, Fut>(factory: F) -> Report
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Arc<dyn MemoryStore>>,
{
    run_checks(&Check::ALL, factory).await
}

/// Run `checks`, each on a fresh, empty store from `factory` (a check comparing two stores,
/// [`Check::CursorIdentity`], gets a second one), in order; every failure is reported, its
/// reason starting with the rule in brackets (a check that panics fails with the panic's
/// message).
pub async fn run_checks<F, Fut>(checks: &[Check], mut factory: F) -> Report
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Arc<dyn MemoryStore>>,
{
    let mut report = Report::default();
    for &check in checks {
        let store = factory().await;
        let other = match check {
            Check::CursorIdentity => Some(factory().await),
            _ => None,
        };
        let outcome = match tokio::spawn(check.run_with(store, other)).await {
            Ok(outcome) => outcome,
            Err(e) => Err(format!("the check did not finish: {e}")),
        };
        match outcome {
            Ok(()) => report.passed.push(check),
            Err(reason) => {
                let reason = format!("[{}] {reason}", check.rule());
                tracing::debug!(%check, %reason, "store conformance check failed");
                report.failures.push(Failure { check, reason });
            }
        }
    }
    report
}
