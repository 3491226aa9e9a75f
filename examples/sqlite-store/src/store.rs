//! [`SqliteMemoryStore`]: memloop's [`MemoryStore`] over one SQLite database file.
//!
//! The recipe, for a backend of your own:
//! - implement the primitives ([`MemoryStore::read_path`], [`MemoryStore::write_checked`], ...)
//!   and take the [`MemoryPath`] and [`CheckedWrite`] you are given: memloop's write entry point
//!   has already applied every write rule (paths, `MEMORY.md`, credentials, size, the team rule)
//!   before a write reaches the backend, so the backend repeats none of them;
//! - make the version check and the write one step ([`MemoryStore::write_checked_if`]: here an
//!   `IMMEDIATE` transaction, which takes SQLite's write lock before reading);
//! - store the text the way memloop renders it ([`MemoryDoc::render`], [`append_to_existing`],
//!   or a raw file's own text) and report its [`content_version`];
//! - keep the index and the change feed in the same transaction as the memory.
//!
//! Tables: `memories` (one row per memory: its fields, its text, its version, when it changed
//! and its place in the index), `changes` (per path, the generation that last wrote or deleted
//! it) and `feed` (this database's id and its current generation: a change-feed cursor is
//! `sqlite-gen-1|<id>|<generation>`).

use memloop::memory::store::{
    ChangeCursor, Changes, CheckedWrite, ExpectedVersion, IndexCaps, IndexEntry, LoadedIndex,
    MemoryDoc, MemoryError, MemoryFile, MemoryHeader, MemoryPath, MemoryScope, MemoryType,
    StoreDescription, StoreLocation, TEAM_DIR, VersionedWrite, WriteLimits, WriteMode, WriteReport,
    append_to_existing, content_version, file_stem, format_entry_line, is_daily_log, load_capped,
    replace_body,
};
use memloop::{MemoryStore, async_trait};
use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The schema, created when a database is opened (idempotent).
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS memories (
    rel_path    TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    description TEXT NOT NULL,
    memory_type TEXT,
    body        TEXT NOT NULL,
    content     TEXT NOT NULL,
    version     TEXT NOT NULL,
    updated_at  INTEGER NOT NULL,
    seq         INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS changes (
    rel_path   TEXT PRIMARY KEY,
    deleted    INTEGER NOT NULL,
    generation INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS changes_by_generation ON changes (generation);
CREATE TABLE IF NOT EXISTS feed (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    store_id   TEXT NOT NULL,
    generation INTEGER NOT NULL
);
INSERT OR IGNORE INTO feed (id, store_id, generation) VALUES (1, lower(hex(randomblob(16))), 0);
";

/// The change-feed cursor's prefix: its format version.
const CURSOR_PREFIX: &str = "sqlite-gen-1";

/// How long a writer waits for another process's write lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// A project's memories in one SQLite database file. Cheap to clone (one connection, shared).
///
/// Several processes may open the same file: SQLite's locks order their writes, and each one's
/// change feed sees the others' writes.
#[derive(Clone)]
pub struct SqliteMemoryStore {
    inner: Arc<Inner>,
}

struct Inner {
    conn: Mutex<Connection>,
    path: PathBuf,
    limits: WriteLimits,
    caps: IndexCaps,
}

/// A SQLite failure as a memory error.
pub(crate) fn sqlite(e: rusqlite::Error) -> MemoryError {
    MemoryError::Backend {
        backend: "sqlite",
        source: Box::new(e),
    }
}

fn backend(message: String) -> MemoryError {
    MemoryError::Backend {
        backend: "sqlite",
        source: message.into(),
    }
}

/// `t` in nanoseconds since the Unix epoch (0 before it, saturating far after).
pub(crate) fn nanos_since_epoch(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

fn time_of(nanos: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(u64::try_from(nanos).unwrap_or(0))
}

/// The header columns, in the order [`header_of`] reads them.
const HEADER_COLUMNS: &str = "rel_path, name, description, memory_type, updated_at";

fn header_of(row: &rusqlite::Row<'_>) -> rusqlite::Result<MemoryHeader> {
    let description: String = row.get(2)?;
    let memory_type: Option<String> = row.get(3)?;
    Ok(MemoryHeader {
        rel_path: row.get(0)?,
        name: Some(row.get(1)?),
        description: (!description.is_empty()).then_some(description),
        memory_type: memory_type.as_deref().and_then(MemoryType::parse),
        mtime: time_of(row.get(4)?),
    })
}

impl SqliteMemoryStore {
    /// Open (or create) the database at `path`, with the default write limits (1 MiB of text
    /// per memory).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, MemoryError> {
        Self::open_with_limits(path, WriteLimits::default())
    }

    /// Open (or create) the database at `path`; the write entry point enforces `limits`.
    pub fn open_with_limits(
        path: impl AsRef<Path>,
        limits: WriteLimits,
    ) -> Result<Self, MemoryError> {
        let path = path.as_ref();
        let conn = Connection::open(path).map_err(sqlite)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(sqlite)?;
        // Readers do not wait for a writer (and the other way round).
        conn.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))
            .map_err(sqlite)?;
        conn.execute_batch(SCHEMA).map_err(sqlite)?;
        let path = std::fs::canonicalize(path)
            .map_err(|e| MemoryError::io(format!("resolving {}", path.display()), e))?;
        Ok(Self {
            inner: Arc::new(Inner {
                conn: Mutex::new(conn),
                path,
                limits,
                caps: IndexCaps::default(),
            }),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Run `f` on the connection on the blocking pool (SQLite calls block). The session notes
    /// ([`SqliteSessionNotes`](crate::SqliteSessionNotes)) share the connection through it.
    pub(crate) async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, MemoryError> + Send + 'static,
    ) -> Result<T, MemoryError> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            let mut conn = inner
                .conn
                .lock()
                .map_err(|_| backend("the connection's lock is poisoned".into()))?;
            f(&mut conn)
        })
        .await
        .map_err(|e| backend(format!("a database task failed: {e}")))?
    }

    /// The index entries of the memories whose paths `keep` accepts, in index order (daily
    /// logs have none).
    async fn entries(&self, keep: fn(&str) -> bool) -> Result<Vec<IndexEntry>, MemoryError> {
        self.blocking(move |conn| {
            let mut stmt = conn
                .prepare_cached("SELECT rel_path, name, description FROM memories ORDER BY seq")
                .map_err(sqlite)?;
            let rows = stmt
                .query_map([], |r| {
                    Ok(IndexEntry {
                        file: r.get(0)?,
                        title: r.get(1)?,
                        hook: r.get(2)?,
                    })
                })
                .map_err(sqlite)?;
            let mut entries = Vec::new();
            for entry in rows {
                let entry = entry.map_err(sqlite)?;
                if keep(&entry.file) && !is_daily_log(&entry.file) {
                    entries.push(entry);
                }
            }
            Ok(entries)
        })
        .await
    }

    /// The index text of `entries`, links relative to `base` (`""` or `team/`), capped.
    fn index_of(&self, entries: &[IndexEntry], base: &str) -> LoadedIndex {
        let text = entries
            .iter()
            .map(|e| {
                let link = e.file.strip_prefix(base).unwrap_or(&e.file);
                format_entry_line(&e.title, link, &e.hook, self.inner.caps.max_entry_chars)
            })
            .collect::<Vec<_>>()
            .join("\n");
        load_capped(&text, self.inner.caps)
    }
}

/// Bump the feed's generation (inside the writer's transaction) and return the new one.
fn next_generation(tx: &Transaction<'_>) -> Result<i64, MemoryError> {
    tx.query_row(
        "UPDATE feed SET generation = generation + 1 WHERE id = 1 RETURNING generation",
        [],
        |r| r.get(0),
    )
    .map_err(sqlite)
}

/// Record that `rel` was written (or deleted) at `generation`.
fn record_change(
    tx: &Transaction<'_>,
    rel: &str,
    deleted: bool,
    generation: i64,
) -> Result<(), MemoryError> {
    tx.execute(
        "INSERT INTO changes (rel_path, deleted, generation) VALUES (?1, ?2, ?3)
         ON CONFLICT (rel_path) DO UPDATE SET deleted = excluded.deleted,
                                              generation = excluded.generation",
        params![rel, deleted, generation],
    )
    .map_err(sqlite)?;
    Ok(())
}

/// The text a write stores: a raw file as given, an append onto the old text, a new body in the
/// stored frontmatter (replace-body), else the doc rendered (named after its file when it has no
/// name).
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

/// The conditional write, in one `IMMEDIATE` transaction: SQLite's write lock is taken before
/// the current version is read, so no writer (in this process or another) slips in between.
fn write_blocking(
    conn: &mut Connection,
    write: &CheckedWrite,
    expected: &ExpectedVersion,
) -> Result<VersionedWrite, MemoryError> {
    let rel = write.path().as_str();
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sqlite)?;
    let existing: Option<String> = tx
        .query_row(
            "SELECT content FROM memories WHERE rel_path = ?1",
            [rel],
            |r| r.get(0),
        )
        .optional()
        .map_err(sqlite)?;
    let current = existing.as_deref().map(content_version);
    if !expected.accepts(current.as_deref()) {
        return Err(expected.conflict(rel, current.as_deref()));
    }
    let text = text_of(rel, existing.as_deref(), write);
    let fields =
        MemoryDoc::parse(&text, file_stem(rel)).map_err(|reason| MemoryError::Unreadable {
            path: rel.to_owned(),
            reason,
        })?;
    let version = content_version(&text);
    let generation = next_generation(&tx)?;
    tx.execute(
        "INSERT INTO memories
             (rel_path, name, description, memory_type, body, content, version, updated_at, seq)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, (SELECT coalesce(max(seq), 0) + 1 FROM memories))
         ON CONFLICT (rel_path) DO UPDATE SET
             name = excluded.name, description = excluded.description,
             memory_type = excluded.memory_type, body = excluded.body,
             content = excluded.content, version = excluded.version,
             updated_at = excluded.updated_at",
        params![
            rel,
            fields.name,
            fields.description,
            fields.memory_type.map(MemoryType::as_str),
            fields.body,
            text,
            version,
            nanos_since_epoch(SystemTime::now()),
        ],
    )
    .map_err(sqlite)?;
    record_change(&tx, rel, false, generation)?;
    tx.commit().map_err(sqlite)?;
    Ok(VersionedWrite {
        report: WriteReport {
            rel_path: rel.to_owned(),
            path: PathBuf::from(rel),
            created: existing.is_none(),
        },
        version,
    })
}

/// What changed since `since`, read in one transaction (one snapshot).
fn changes_blocking(
    conn: &mut Connection,
    since: Option<&ChangeCursor>,
) -> Result<Changes, MemoryError> {
    let tx = conn.transaction().map_err(sqlite)?;
    let (store_id, generation): (String, i64) = tx
        .query_row(
            "SELECT store_id, generation FROM feed WHERE id = 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(sqlite)?;
    let cursor = ChangeCursor::new(format!("{CURSOR_PREFIX}|{store_id}|{generation}"));
    // Only a cursor of this database, not ahead of it, says where to start.
    let from = since
        .and_then(|c| c.as_str().strip_prefix(CURSOR_PREFIX)?.strip_prefix('|'))
        .and_then(|rest| rest.rsplit_once('|'))
        .filter(|(id, _)| *id == store_id)
        .and_then(|(_, g)| g.parse::<i64>().ok())
        .filter(|g| *g <= generation);
    let Some(from) = from else {
        return Ok(Changes::Rescan {
            cursor: Some(cursor),
        });
    };
    if from == generation {
        return Ok(Changes::Unchanged);
    }
    let mut stmt = tx
        .prepare_cached(
            "SELECT c.rel_path, m.name, m.description, m.memory_type, m.updated_at, c.deleted
             FROM changes c LEFT JOIN memories m ON m.rel_path = c.rel_path
             WHERE c.generation > ?1 ORDER BY c.generation",
        )
        .map_err(sqlite)?;
    let mut rows = stmt.query([from]).map_err(sqlite)?;
    let (mut written, mut removed) = (Vec::new(), Vec::new());
    while let Some(row) = rows.next().map_err(sqlite)? {
        let deleted: bool = row.get(5).map_err(sqlite)?;
        if deleted {
            let rel: String = row.get(0).map_err(sqlite)?;
            removed.push(MemoryPath::new(&rel)?);
        } else {
            written.push(header_of(row).map_err(sqlite)?);
        }
    }
    Ok(Changes::Changed {
        cursor,
        written,
        removed,
        files: Vec::new(),
    })
}

#[async_trait]
impl MemoryStore for SqliteMemoryStore {
    fn describe(&self) -> StoreDescription {
        let path = self.inner.path.display();
        StoreDescription {
            location: StoreLocation::Database {
                engine: "sqlite".into(),
                url: format!("sqlite://{path}"),
                project: self
                    .inner
                    .path
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            },
            identity: format!("sqlite:{path}"),
        }
    }

    fn write_limits(&self) -> WriteLimits {
        self.inner.limits
    }

    /// The database's change feed: every write and delete bumps a generation in its own
    /// transaction, so a cursor sees every writer of the file, in any process.
    async fn changes(&self, since: Option<&ChangeCursor>) -> Result<Changes, MemoryError> {
        let since = since.cloned();
        self.blocking(move |conn| changes_blocking(conn, since.as_ref()))
            .await
    }

    async fn scan(&self) -> Result<Vec<MemoryHeader>, MemoryError> {
        self.blocking(|conn| {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {HEADER_COLUMNS} FROM memories ORDER BY updated_at DESC, rel_path"
                ))
                .map_err(sqlite)?;
            let headers = stmt
                .query_map([], header_of)
                .map_err(sqlite)?
                .collect::<rusqlite::Result<Vec<_>>>()
                .map_err(sqlite)?;
            Ok(headers)
        })
        .await
    }

    async fn read_path(&self, path: &MemoryPath) -> Result<MemoryFile, MemoryError> {
        let rel = path.as_str().to_owned();
        self.blocking(move |conn| {
            conn.query_row(
                &format!(
                    "SELECT {HEADER_COLUMNS}, body, content FROM memories WHERE rel_path = ?1"
                ),
                [&rel],
                |r| {
                    Ok(MemoryFile {
                        header: header_of(r)?,
                        body: r.get(5)?,
                        raw: r.get(6)?,
                    })
                },
            )
            .optional()
            .map_err(sqlite)?
            .ok_or(MemoryError::NotFound(rel))
        })
        .await
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
        let expected = expected.clone();
        self.blocking(move |conn| write_blocking(conn, &write, &expected))
            .await
    }

    async fn delete_checked(&self, path: &MemoryPath) -> Result<(), MemoryError> {
        let rel = path.as_str().to_owned();
        self.blocking(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sqlite)?;
            let deleted = tx
                .execute("DELETE FROM memories WHERE rel_path = ?1", [&rel])
                .map_err(sqlite)?;
            if deleted == 0 {
                return Err(MemoryError::NotFound(rel));
            }
            let generation = next_generation(&tx)?;
            record_change(&tx, &rel, true, generation)?;
            tx.commit().map_err(sqlite)
        })
        .await
    }

    async fn clear(&self) -> Result<Vec<String>, MemoryError> {
        self.blocking(|conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sqlite)?;
            let removed = tx
                .prepare("DELETE FROM memories RETURNING rel_path")
                .map_err(sqlite)?
                .query_map([], |r| r.get::<_, String>(0))
                .map_err(sqlite)?
                .collect::<rusqlite::Result<Vec<_>>>()
                .map_err(sqlite)?;
            if !removed.is_empty() {
                let generation = next_generation(&tx)?;
                for rel in &removed {
                    record_change(&tx, rel, true, generation)?;
                }
            }
            tx.commit().map_err(sqlite)?;
            Ok(removed)
        })
        .await
    }

    /// The private index: every memory outside `team/`, one line each, capped.
    async fn load_index(&self) -> Result<LoadedIndex, MemoryError> {
        let entries = self
            .entries(|rel| MemoryScope::of(rel) == MemoryScope::Private)
            .await?;
        Ok(self.index_of(&entries, ""))
    }

    /// The team index lists the `team/` memories, linked relative to `team/`.
    async fn load_scope_index(&self, scope: MemoryScope) -> Result<LoadedIndex, MemoryError> {
        match scope {
            MemoryScope::Private => self.load_index().await,
            MemoryScope::Team => {
                let entries = self
                    .entries(|rel| MemoryScope::of(rel) == MemoryScope::Team)
                    .await?;
                Ok(self.index_of(&entries, &format!("{TEAM_DIR}/")))
            }
        }
    }

    /// Every index entry, private then team, as store paths.
    async fn index_entries(&self) -> Result<Vec<IndexEntry>, MemoryError> {
        let mut entries = self
            .entries(|rel| MemoryScope::of(rel) == MemoryScope::Private)
            .await?;
        entries.extend(
            self.entries(|rel| MemoryScope::of(rel) == MemoryScope::Team)
                .await?,
        );
        Ok(entries)
    }
}
