//! [`PgMemoryStore`]: a [`MemoryStore`] on PostgreSQL. One row per memory, keyed by
//! (project id, relative path), with a version for optimistic concurrency.

use crate::config::PgConfig;
use crate::content::{canonical_text, sha256_hex, stem};
use crate::error::{PgError, StoreError, VersionLabel};
use crate::migrations::migrate;
use crate::statement::Statements;
use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use deadpool_postgres::{Client, Manager, ManagerConfig, Pool, RecyclingMethod};
use memloop_store::{
    ChangeCursor, Changes, CheckedWrite, ExpectedVersion, IndexCaps, IndexEntry, IndexRest,
    LoadedIndex, LocalDir, LocalPurpose, MemoryDoc, MemoryError, MemoryFile, MemoryHeader,
    MemoryPath, MemoryStore, MemoryType, StoreDescription, StoreLocation, VersionedWrite,
    WriteMode, WriteReport, append_to_existing, format_entry_line, load_capped_start, replace_body,
    validate_rel_path,
};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio_postgres::Row;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tracing::Instrument;
use uuid::Uuid;

/// What a versioned write or delete expects to find, in row versions: each row has a version
/// number (1 on creation, +1 on every change) that [`PgMemoryStore::write_versioned`] and its
/// kin check in the same statement that writes.
///
/// The [`MemoryStore`] trait speaks content versions instead ([`ExpectedVersion`]: the SHA-256 of
/// the text a read returns, as every backend reports it). The two meet in one place,
/// [`Expected::from_content`]: a content version names the row whose `sha256` it is, and stands
/// for that row's version number, so a conditional write through the trait is one
/// check-and-write on the row version; the content version a write reports is the new row's
/// `sha256` ([`PgWrite::sha256`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expected {
    /// Whatever is there (a blind write: last writer wins).
    Any,
    /// No memory at that path (create only).
    Absent,
    /// Exactly this version (the one the caller read).
    Version(i64),
}

impl Expected {
    /// The row-version expectation a content-version one stands for, given the row at `rel` as
    /// it is now (`current`: its version and `sha256`, `None` when there is no row):
    ///
    /// - [`ExpectedVersion::Any`] is [`Expected::Any`] (`current` is not needed);
    /// - [`ExpectedVersion::Absent`] is [`Expected::Absent`] when no row is given, and a conflict
    ///   when one is;
    /// - [`ExpectedVersion::Is`] is [`Expected::Version`] of the row whose `sha256` it is, and
    ///   a conflict ([`MemoryError::VersionConflict`], with the current hash) for any other row
    ///   or none.
    ///
    /// The row may change after `current` was read: the write then fails its row-version check,
    /// so the pair is one atomic check-and-write.
    ///
    /// ```
    /// use memloop_pg::Expected;
    /// use memloop_store::{ExpectedVersion, content_version};
    /// let stored = content_version("v1");
    /// let fresh = ExpectedVersion::Is(stored.clone());
    /// assert_eq!(Expected::from_content(&fresh, "a.md", Some((7, &stored))).ok(), Some(Expected::Version(7)));
    /// let stale = ExpectedVersion::Is(content_version("v0"));
    /// assert!(Expected::from_content(&stale, "a.md", Some((7, &stored))).is_err());
    /// assert!(Expected::from_content(&ExpectedVersion::Absent, "a.md", Some((7, &stored))).is_err());
    /// assert_eq!(Expected::from_content(&ExpectedVersion::Any, "a.md", None).ok(), Some(Expected::Any));
    /// ```
    pub fn from_content(
        expected: &ExpectedVersion,
        rel: &str,
        current: Option<(i64, &str)>,
    ) -> Result<Self, MemoryError> {
        let sha = current.map(|(_, sha)| sha);
        match (expected, current) {
            (ExpectedVersion::Any, _) => Ok(Self::Any),
            (ExpectedVersion::Absent, None) => Ok(Self::Absent),
            (ExpectedVersion::Is(_), Some((version, sha))) if expected.accepts(Some(sha)) => {
                Ok(Self::Version(version))
            }
            _ => Err(expected.conflict(rel, sha)),
        }
    }

    fn label(self) -> VersionLabel {
        VersionLabel(match self {
            Self::Version(v) => Some(v),
            _ => None,
        })
    }

    fn accepts(self, current: Option<i64>) -> bool {
        match (self, current) {
            (Self::Any, _) | (Self::Absent, None) => true,
            (Self::Version(v), Some(c)) => v == c,
            _ => false,
        }
    }
}

/// One memory row as the team store holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgMemory {
    /// Relative path (the key within the project).
    pub rel_path: String,
    /// Frontmatter fields and body.
    pub doc: MemoryDoc,
    /// The canonical file text (what `sha256` hashes and reads return): known fields rendered,
    /// unknown frontmatter keys in one YAML form ([`canonical_text`](crate::canonical_text)).
    pub content: String,
    /// The file text as its writer had it (unknown frontmatter keys, comments, body bytes):
    /// what a team pull writes to disk.
    pub source: String,
    /// SHA-256 (hex) of `content`.
    pub sha256: String,
    /// Version: 1 on creation, +1 on every change.
    pub version: i64,
    /// Who wrote the current version.
    pub updated_by: String,
    /// When.
    pub updated_at: SystemTime,
}

/// A memory row as a write reads it, locked in the write's transaction.
#[derive(Clone)]
pub(crate) struct LockedRow {
    pub(crate) version: i64,
    pub(crate) content: String,
    pub(crate) sha256: String,
    pub(crate) write_id: Uuid,
    /// The text as its writer had it (`content` for rows older than that column).
    pub(crate) source: String,
}

/// The name at path `$2` of project `$1` ([`PgMemoryStore::names`] runs it once per path). One
/// path per run, not `= ANY($2)` with an array: the planner prices an array parameter as ten
/// elements, so with a known one- or two-path array a plan made for the values always looked
/// cheaper, and the statement was planned again on every save. With one path the plan the
/// connection keeps is as cheap, and is kept.
pub(crate) const NAME: &str =
    "SELECT name FROM memloop_memories WHERE project_id = $1 AND rel_path = $2";

/// The row a write reads, locked ([`PgMemoryStore::locked_row`]).
pub(crate) const LOCK_ROW: &str =
    "SELECT version, content, sha256, write_id, coalesce(source, content)
     FROM memloop_memories WHERE project_id = $1 AND rel_path = $2 FOR UPDATE";

/// The index's first lines (`$2` of them, memories outside `logs/` in creation order, through
/// their partial index) with the count of all of them on each row, and each row's marks (its
/// `seq` and the transaction that wrote its current version, `xmin`): one statement, one
/// snapshot.
pub(crate) const INDEX_START: &str = "SELECT rel_path, name, description,
     coalesce((SELECT lines FROM memloop_index_counts WHERE project_id = $1), 0),
     seq, xmin::text::bigint
     FROM memloop_memories WHERE project_id = $1 AND rel_path NOT LIKE 'logs/%'
     ORDER BY seq LIMIT $2";

/// The marks of the rows [`INDEX_START`] reads (their `seq`s and `xmin`s, in its order) and
/// the count, without their text: every change of a row gives it a new `xmin`, and a row
/// deleted or added among the first changes the `seq`s, so equal marks are equal rows.
pub(crate) const INDEX_MARKS: &str = "SELECT coalesce(array_agg(seq ORDER BY seq), '{}'),
     coalesce(array_agg(x ORDER BY seq), '{}'),
     coalesce((SELECT lines FROM memloop_index_counts WHERE project_id = $1), 0)
     FROM (SELECT seq, xmin::text::bigint AS x FROM memloop_memories
           WHERE project_id = $1 AND rel_path NOT LIKE 'logs/%' ORDER BY seq LIMIT $2) AS start";

/// A row write's UPDATE ([`PgMemoryStore::send_row`]).
pub(crate) const UPDATE_ROW: &str = "UPDATE memloop_memories SET name = $3, description = $4,
     memory_type = $5, body = $6, content = $7, sha256 = $8, version = version + 1,
     updated_at = now(), updated_by = $9, write_id = $10, source = $11
     WHERE project_id = $1 AND rel_path = $2 RETURNING version";

/// A row write's INSERT ([`PgMemoryStore::send_row`]): no `ON CONFLICT`, so a row created since
/// the lock fails it and ends the transaction.
pub(crate) const INSERT_ROW: &str = "INSERT INTO memloop_memories (project_id, rel_path, name,
     description, memory_type, body, content, sha256, version, updated_by, write_id, source)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 1, $9, $10, $11) RETURNING version";

/// One row's write as [`PgMemoryStore::row_write`] worked it out.
pub(crate) enum RowWrite {
    /// Nothing to send: the row already is this write.
    Done(PgWrite),
    /// A statement to send ([`PgMemoryStore::send_row`]).
    Send(Box<RowStatement>),
}

impl RowWrite {
    /// The row as this write leaves it, given the row `before` it.
    pub(crate) fn after(&self, before: Option<LockedRow>) -> Option<LockedRow> {
        match self {
            Self::Done(_) => before,
            Self::Send(s) => Some(LockedRow {
                version: s.write.version,
                content: s.content.clone(),
                sha256: s.write.sha256.clone(),
                write_id: s.write_id,
                source: s.text.clone(),
            }),
        }
    }
}

/// The UPDATE or INSERT of a [`RowWrite`], with the write it makes.
pub(crate) struct RowStatement {
    /// An UPDATE of the locked row, else an INSERT.
    update: bool,
    /// The version the write expected (named by a conflict).
    expected: Expected,
    /// The document as stored (parsed back from `content`).
    doc: MemoryDoc,
    /// Its `memory_type` column.
    kind: Option<String>,
    /// The canonical text.
    content: String,
    /// The text as its writer had it (`source`).
    text: String,
    write_id: Uuid,
    /// The write, its version the one the statement is expected to give.
    pub(crate) write: PgWrite,
}

/// What a versioned write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgWrite {
    /// Relative path written.
    pub rel_path: String,
    /// The memory's version after the write.
    pub version: i64,
    /// Whether the memory was new.
    pub created: bool,
    /// Whether the content changed (an identical write keeps the version).
    pub changed: bool,
    /// SHA-256 (hex) of the stored content.
    pub sha256: String,
}

/// How a [`PgPool`]'s connections are used at one moment ([`PgPool::status`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolStatus {
    /// Connections lent out now.
    pub in_use: usize,
    /// Connections open and idle.
    pub idle: usize,
    /// Most connections the pool opens.
    pub max: usize,
    /// Callers waiting for a connection now.
    pub waiting: usize,
}

/// A pool of connections to one database (URL, TLS settings, schema, application name), for
/// [`PgMemoryStore::open_in`]: the stores of several projects share it. Cheap to clone.
#[derive(Clone)]
pub struct PgPool(Pool);

impl std::fmt::Debug for PgPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let status = self.0.status();
        f.debug_struct("PgPool")
            .field("max_size", &status.max_size)
            .field("size", &status.size)
            .finish()
    }
}

impl PgPool {
    /// A pool of at most `config.pool_size` connections with `config`'s connection settings
    /// (its project id is not used). Connects lazily: a wrong URL or a down server shows at
    /// the first store opened on it.
    pub fn new(config: &PgConfig) -> Result<Self, PgError> {
        let (driver, tls) = config.connection()?;
        tracing::debug!(sslmode = %tls.mode(), "team memory TLS mode");
        let manager = Manager::from_config(
            driver,
            tls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        Pool::builder(manager)
            .max_size(config.pool_size.max(1))
            .build()
            .map(Self)
            .map_err(|e| PgError::Connect(e.to_string()))
    }

    /// How the pool's connections are used now (for a server's metrics).
    pub fn status(&self) -> PoolStatus {
        let s = self.0.status();
        PoolStatus {
            in_use: s.size.saturating_sub(s.available),
            idle: s.available,
            max: s.max_size,
            waiting: s.waiting,
        }
    }

    /// Whether the database answers: a connection of the pool runs `SELECT 1`, all within
    /// `timeout` (a health check: a server that cannot reach its database is not ready).
    pub async fn ping(&self, timeout: Duration) -> Result<(), PgError> {
        let check = async {
            let client = self.0.get().await.map_err(|e| match e {
                deadpool_postgres::PoolError::Backend(e) => PgError::from_db(&e),
                other => PgError::Connect(other.to_string()),
            })?;
            client
                .simple_query("SELECT 1")
                .await
                .map_err(|e| PgError::from_db(&e))?;
            Ok(())
        };
        tokio::time::timeout(timeout, check)
            .await
            .map_err(|_| PgError::Connect(format!("no answer within {} ms", timeout.as_millis())))?
    }
}

/// The version an instance last read or wrote of each path, and the bytes its paths hold
/// (counted as [`memloop_store::heap`] counts, kept as they change).
#[derive(Debug, Default)]
struct Seen {
    versions: HashMap<String, i64>,
    keys: usize,
}

impl Seen {
    /// `rel` is at `version` now (`None`: it is gone).
    fn note(&mut self, rel: &str, version: Option<i64>) {
        use memloop_store::heap::string;
        match version {
            Some(v) => match self.versions.get_mut(rel) {
                Some(known) => *known = v,
                None => {
                    let key = rel.to_owned();
                    self.keys += string(&key);
                    self.versions.insert(key, v);
                }
            },
            None => {
                if let Some((key, _)) = self.versions.remove_entry(rel) {
                    self.keys = self.keys.saturating_sub(string(&key));
                }
            }
        }
    }
}

struct Inner {
    pool: Pool,
    config: PgConfig,
    description: StoreDescription,
    caps: IndexCaps,
    /// Last version this instance read or wrote, per path: what `MemoryStore::write` expects.
    seen: Mutex<Seen>,
    /// When this instance last swept its project's expired idempotency keys.
    swept_at: Mutex<Option<Instant>>,
    /// The index start this instance last rendered ([`MemoryStore::load_index`]): a load whose
    /// start has the same marks has the same lines, so its rows are read and formatted again
    /// only when a row of the index's start changed (new memories go to its end).
    rendered: Mutex<Option<RenderedIndex>>,
    /// `db.namespace` of its statements' spans ([`PgConfig::namespace`]).
    namespace: String,
}

/// The marks of an index start's rows, in its order: each row's `seq` and `xmin`
/// ([`INDEX_MARKS`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct IndexMarks {
    seqs: Vec<i64>,
    xmins: Vec<i64>,
}

/// An index start as read (its rows' marks, the lines formatted from the rows, and how many
/// lines the index has) and the index loaded from it.
struct RenderedIndex {
    /// The rows' marks ([`INDEX_MARKS`]).
    marks: IndexMarks,
    /// The rows' index lines, formatted.
    text: String,
    lines: usize,
    index: LoadedIndex,
}

/// How often a store sweeps its project's expired idempotency keys while it saves with keys
/// (besides once when it opens).
const SWEEP_EVERY: Duration = Duration::from_secs(60 * 60);

/// The PostgreSQL memory store. Cheap to clone (clones share the pool); share it as
/// `Arc<dyn MemoryStore>`.
///
/// Guarantees, the same as the file store's: paths are validated, content that looks like a
/// credential is refused, a write and its index line change in one transaction (the index view
/// is rendered from the rows, so it cannot drift), the index view has the same load caps. On
/// top: optimistic concurrency. Every row has a version; [`write_versioned`](Self::write_versioned)
/// refuses a write based on a stale version with [`PgError::Conflict`], and
/// `MemoryStore::write` expects the version this instance last read or wrote for that path
/// (blind only for a path it has never seen). A lost connection is retried on a fresh one; a
/// write that landed before the connection dropped is recognised by its write id, never applied
/// twice.
#[derive(Clone)]
pub struct PgMemoryStore {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for PgMemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgMemoryStore")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

pub(crate) fn db(e: tokio_postgres::Error) -> StoreError {
    StoreError::Pg(PgError::from_db(&e))
}

pub(crate) fn parse_type(s: Option<String>) -> Option<MemoryType> {
    s.as_deref().and_then(MemoryType::parse)
}

const COLUMNS: &str = "rel_path, name, description, memory_type, body, content, sha256, version, updated_by, updated_at, coalesce(source, content)";

fn row_to_memory(row: &Row) -> PgMemory {
    let updated_at: chrono::DateTime<chrono::Utc> = row.get(9);
    PgMemory {
        rel_path: row.get(0),
        doc: MemoryDoc {
            name: row.get(1),
            description: row.get(2),
            memory_type: parse_type(row.get(3)),
            body: row.get(4),
        },
        content: row.get(5),
        source: row.get(10),
        sha256: row.get(6),
        version: row.get(7),
        updated_by: row.get(8),
        updated_at: updated_at.into(),
    }
}

/// A memory row as the store's reads return it.
fn file_of(m: PgMemory) -> MemoryFile {
    MemoryFile {
        header: header_of(&m),
        body: m.doc.body,
        raw: m.content,
    }
}

/// Most paths one query of [`PgMemoryStore::get_many`] asks for.
const READ_PAGE: usize = 512;

fn header_of(m: &PgMemory) -> MemoryHeader {
    MemoryHeader {
        rel_path: m.rel_path.clone(),
        name: Some(m.doc.name.clone()),
        description: (!m.doc.description.is_empty()).then(|| m.doc.description.clone()),
        memory_type: m.doc.memory_type,
        mtime: m.updated_at,
    }
}

/// Move the memories stored under `config.legacy_project_id` (a dir's old base-name id, listed
/// by migration 6) to `config.project_id`, if no project claimed that id yet. One transaction:
/// the claim and the move land together, and a concurrent opener of the same name waits on the
/// alias row, then finds it claimed. A row whose path the new id already holds stays where it
/// is.
async fn claim_legacy_id(
    sql: Statements<'_>,
    client: &mut Client,
    config: &PgConfig,
) -> Result<(), PgError> {
    match config.legacy_project_id.as_deref() {
        Some(legacy) => claim_alias(sql, client, legacy, &config.project_id)
            .await
            .map(|_| ()),
        None => Ok(()),
    }
}

/// Claim the alias `legacy` for `project_id` and move its rows, if no project claimed it yet;
/// whether this call claimed it.
async fn claim_alias(
    sql: Statements<'_>,
    client: &mut Client,
    legacy: &str,
    project_id: &str,
) -> Result<bool, PgError> {
    if legacy == project_id {
        return Ok(false);
    }
    let db = |e: tokio_postgres::Error| PgError::from_db(&e);
    let tx = sql.begin(client).await.map_err(db)?;
    let claimed = sql
        .query_opt(
            &tx,
            "UPDATE memloop_project_aliases SET project_id = $2, claimed_at = now()
             WHERE legacy_id = $1 AND project_id IS NULL RETURNING legacy_id",
            &[&legacy, &project_id],
        )
        .await
        .map_err(db)?;
    if claimed.is_none() {
        // Ended here, not left to the drop: a dropped transaction's ROLLBACK waits for the
        // connection's next use, and the connection stays idle in the transaction until then.
        sql.rollback(tx).await.map_err(db)?;
        return Ok(false);
    }
    let moved = sql.execute(&tx, "UPDATE memloop_memories m SET project_id = $2
             WHERE m.project_id = $1 AND NOT EXISTS (
                 SELECT 1 FROM memloop_memories n WHERE n.project_id = $2 AND n.rel_path = m.rel_path)", &[&legacy, &project_id]).await
        .map_err(db)?;
    sql.commit(tx).await.map_err(db)?;
    tracing::info!(legacy, project = %project_id, moved, "old team project id claimed; its memories moved");
    Ok(true)
}

/// How long [`PgMemoryStore::open`] keeps retrying connections lost while opening, once the
/// server was reached: this many times [`PgConfig::connect_timeout`].
const OPEN_WINDOW_FACTOR: u32 = 4;

/// The longest pause between two attempts to open.
const OPEN_BACKOFF_MAX: Duration = Duration::from_millis(200);

/// How long an open retries lost connections after the server was first reached.
fn open_window(config: &PgConfig) -> Duration {
    config.connect_timeout.saturating_mul(OPEN_WINDOW_FACTOR)
}

/// The pause before attempt `attempt + 1` of an open: 20 ms more per attempt, at most
/// [`OPEN_BACKOFF_MAX`].
fn open_backoff(attempt: u32) -> Duration {
    Duration::from_millis(20)
        .saturating_mul(attempt)
        .min(OPEN_BACKOFF_MAX)
}

impl PgMemoryStore {
    /// Connect, run the migrations, and return the store for `config.project_id`. A wrong URL,
    /// a down server or a missing permission is a clear [`PgError`]. A connection lost while
    /// opening is retried on a fresh one, [`PgConfig::retries`] times, and, once the server was
    /// reached, for up to four times [`PgConfig::connect_timeout`]: each migration version
    /// commits on its own, so a retry resumes at the first one not yet applied. The store has
    /// a pool of its own ([`PgConfig::pool_size`] connections); a server holding many projects
    /// shares one with [`open_in`](Self::open_in).
    pub async fn open(config: PgConfig) -> Result<Self, PgError> {
        crate::validate_project_id(&config.project_id)?;
        let pool = PgPool::new(&config)?;
        Self::open_in(config, &pool).await
    }

    /// [`open`](Self::open) on `pool`'s connections, which other stores (other projects of the
    /// same database, schema and application name) share: a server serving many projects holds
    /// one pool, not one per project. `config` names the project; its connection settings must
    /// be the pool's (the pool's are used).
    pub async fn open_in(config: PgConfig, pool: &PgPool) -> Result<Self, PgError> {
        crate::validate_project_id(&config.project_id)?;
        let pool = pool.0.clone();
        let url = config.redacted_url();
        let description = StoreDescription {
            identity: format!(
                "postgres:{url}?schema={}#{}",
                config.schema.as_deref().unwrap_or(""),
                config.project_id
            ),
            location: StoreLocation::Database {
                engine: "postgres".into(),
                url,
                project: config.project_id.clone(),
            },
        };
        let store = Self {
            inner: Arc::new(Inner {
                pool,
                description,
                caps: IndexCaps::default(),
                seen: Mutex::new(Seen::default()),
                swept_at: Mutex::new(None),
                rendered: Mutex::new(None),
                namespace: config.namespace(),
                config,
            }),
        };
        // A connection lost while opening (a restarting server, a proxy dropping it, a killed
        // backend) is retried on a fresh one, like every operation: `retries` times in any
        // case, and, once the server was reached, until the open's deadline, since every
        // migration version that committed stays and the next attempt resumes after it.
        // `None`: a connect timeout too long to add to the clock, which means no deadline.
        let deadline = Instant::now().checked_add(open_window(&store.inner.config));
        let (mut attempt, mut reached) = (0u32, false);
        loop {
            let opened = async {
                let mut client = store.client().await?;
                reached = true;
                migrate(
                    store.sql(),
                    &mut client,
                    store.inner.config.schema.as_deref(),
                )
                .await?;
                claim_legacy_id(store.sql(), &mut client, &store.inner.config).await
            }
            .await;
            match opened {
                Ok(()) => break,
                Err(e)
                    if e.is_connection()
                        && (attempt < store.inner.config.retries
                            || (reached && deadline.is_none_or(|d| Instant::now() < d))) =>
                {
                    attempt += 1;
                    tracing::warn!(attempt, error = %e, "team memory connection lost while opening; retrying");
                    tokio::time::sleep(open_backoff(attempt)).await;
                }
                Err(e) => return Err(e),
            }
        }
        // Best effort: a role that may not delete keys still opens.
        match store.delete_expired_keys().await {
            Ok(swept) => tracing::debug!(swept, "expired idempotency keys swept"),
            Err(e) => tracing::debug!(error = %e, "expired idempotency keys not swept"),
        }
        tracing::info!(project = %store.inner.config.project_id, "team memory store opened");
        Ok(store)
    }

    /// Claim the pre-schema-6 id `legacy` (a directory's base name) for this store's project:
    /// its memories move here, once, if no project claimed it yet (`Ok(true)` when this call
    /// did). [`open`](Self::open) does it for [`PgConfig::legacy_project_id`]; a server that
    /// decides per request who may claim (only a writer for every project: any directory of
    /// that name maps to the old id) opens without it and calls this.
    pub async fn claim_legacy(&self, legacy: &str) -> Result<bool, PgError> {
        let mut client = self.client().await?;
        claim_alias(
            self.sql(),
            &mut client,
            legacy,
            &self.inner.config.project_id,
        )
        .await
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

    /// Delete a memory through the entry point (`dyn MemoryStore::delete`).
    pub async fn delete(&self, rel_path: &str) -> Result<(), MemoryError> {
        (self as &dyn MemoryStore).delete(rel_path).await
    }

    /// Read a memory through the entry point (`dyn MemoryStore::read`).
    pub async fn read(&self, rel_path: &str) -> Result<MemoryFile, MemoryError> {
        (self as &dyn MemoryStore).read(rel_path).await
    }

    /// The project this store serves.
    pub fn project_id(&self) -> &str {
        &self.inner.config.project_id
    }

    /// The configuration it was opened with.
    pub fn config(&self) -> &PgConfig {
        &self.inner.config
    }

    /// Runs this store's statements: every statement goes through it, inside its span.
    pub(crate) fn sql(&self) -> Statements<'_> {
        Statements::new(&self.inner.namespace)
    }

    pub(crate) async fn client(&self) -> Result<Client, PgError> {
        // A connection error names the server it tried (the URL without its password).
        let at = || format!("server: {}", self.inner.config.redacted_url());
        self.inner.pool.get().await.map_err(|e| match e {
            deadpool_postgres::PoolError::Backend(e) => match PgError::from_db(&e) {
                PgError::ConnectionLost(m) | PgError::Connect(m) => {
                    PgError::Connect(format!("{m} ({})", at()))
                }
                PgError::Tls(m) => PgError::Tls(format!("{m} ({})", at())),
                other => other,
            },
            other => PgError::Connect(format!("{other} ({})", at())),
        })
    }

    pub(crate) fn remember(&self, rel: &str, version: Option<i64>) {
        if let Ok(mut seen) = self.inner.seen.lock() {
            seen.note(rel, version);
        }
    }

    /// Whether a sweep of expired idempotency keys is due ([`SWEEP_EVERY`] since the last);
    /// when it is, the sweep is recorded as started, so concurrent callers see it as not due.
    pub(crate) fn sweep_due(&self) -> bool {
        let Ok(mut swept_at) = self.inner.swept_at.lock() else {
            return false;
        };
        let due = swept_at.is_none_or(|t| t.elapsed() >= SWEEP_EVERY);
        if due {
            *swept_at = Some(Instant::now());
        }
        due
    }

    /// Record that a sweep of expired idempotency keys starts now.
    pub(crate) fn mark_swept(&self) {
        if let Ok(mut swept_at) = self.inner.swept_at.lock() {
            *swept_at = Some(Instant::now());
        }
    }

    fn last_seen(&self, rel: &str) -> Expected {
        self.inner
            .seen
            .lock()
            .ok()
            .and_then(|s| s.versions.get(rel).copied())
            .map_or(Expected::Any, Expected::Version)
    }

    /// Run `op` with retries on connection loss (fresh connection each time, short backoff).
    pub(crate) async fn retrying<T, F, Fut>(&self, what: &str, mut op: F) -> Result<T, StoreError>
    where
        F: FnMut(Client) -> Fut,
        Fut: std::future::Future<Output = Result<T, StoreError>>,
    {
        let mut attempt = 0u32;
        loop {
            let result = match self.client().await {
                Ok(client) => op(client).await,
                Err(e) => Err(StoreError::Pg(e)),
            };
            match result {
                Err(StoreError::Pg(e))
                    if e.is_connection() && attempt < self.inner.config.retries =>
                {
                    attempt += 1;
                    tracing::warn!(what, attempt, error = %e, "team memory connection lost; retrying");
                    // The first retry goes at once (a backend that was terminated is gone, the
                    // next connection is fresh); later ones back off while the server recovers.
                    if attempt > 1 {
                        tokio::time::sleep(std::time::Duration::from_millis(
                            20 * u64::from(attempt - 1),
                        ))
                        .await;
                    }
                }
                other => return other,
            }
        }
    }

    /// One memory, with its version; `None` when absent.
    pub async fn get(&self, rel_path: &str) -> Result<Option<PgMemory>, StoreError> {
        let path = MemoryPath::new(rel_path)?;
        Ok(self
            .get_many(std::slice::from_ref(&path))
            .await?
            .remove(path.as_str()))
    }

    /// The memories at `paths` that exist, by path, in one query; each one's version is
    /// remembered as a read's is (and a missing one's absence).
    async fn get_many(
        &self,
        paths: &[MemoryPath],
    ) -> Result<HashMap<String, PgMemory>, StoreError> {
        let rels: Vec<&str> = paths.iter().map(MemoryPath::as_str).collect();
        let project = self.project_id().to_owned();
        let sql = format!(
            "SELECT {COLUMNS} FROM memloop_memories WHERE project_id = $1 AND rel_path = ANY($2)"
        );
        let found: HashMap<String, PgMemory> = self
            .retrying("get_many", |client| {
                let (sql, project, rels) = (&sql, &project, &rels);
                async move {
                    let rows = self
                        .sql()
                        .query(&client, sql.as_str(), &[project, rels])
                        .await
                        .map_err(db)?;
                    Ok(rows
                        .iter()
                        .map(row_to_memory)
                        .map(|m| (m.rel_path.clone(), m))
                        .collect())
                }
            })
            .await?;
        for rel in &rels {
            self.remember(rel, found.get(*rel).map(|m| m.version));
        }
        Ok(found)
    }

    /// The name (title) of each memory at `rel_paths` that exists, by path, in one round trip
    /// and without reading the memories' text: what a writer checks before naming a new
    /// memory. An invalid path holds nothing.
    pub async fn names(&self, rel_paths: &[&str]) -> Result<HashMap<String, String>, StoreError> {
        let rels: Vec<&str> = rel_paths
            .iter()
            .copied()
            .filter(|r| validate_rel_path(r).is_ok())
            .collect();
        if rels.is_empty() {
            return Ok(HashMap::new());
        }
        let project = self.project_id().to_owned();
        self.retrying("names", |client| {
            let (project, rels) = (&project, &rels);
            async move {
                // One run per path, all sent at once: the client pipelines them, so this is one
                // round trip (the statement is prepared once, then taken from the cache).
                let sql = self.sql();
                let names = rels.iter().map(|rel| {
                    let client = &client;
                    async move {
                        let row = sql.query_opt(client, NAME, &[project, rel]).await?;
                        Ok::<_, tokio_postgres::Error>(row.map(|r| ((*rel).to_owned(), r.get(0))))
                    }
                });
                let found = futures::future::try_join_all(names).await.map_err(db)?;
                Ok(found.into_iter().flatten().collect())
            }
        })
        .await
    }

    /// Every memory of the project (content included), in index order.
    pub async fn entries(&self) -> Result<Vec<PgMemory>, StoreError> {
        let project = self.project_id().to_owned();
        let sql =
            format!("SELECT {COLUMNS} FROM memloop_memories WHERE project_id = $1 ORDER BY seq");
        self.retrying("entries", |client| {
            let (sql, project) = (&sql, &project);
            async move {
                let rows = self
                    .sql()
                    .query(&client, sql.as_str(), &[project])
                    .await
                    .map_err(db)?;
                Ok(rows.iter().map(row_to_memory).collect())
            }
        })
        .await
    }

    /// Write `doc` at `rel_path` if the memory is at the `expected` version; otherwise nothing is
    /// written and the error is [`PgError::Conflict`]. The write is one transaction (row locked,
    /// version checked, content and index view changed together). Secret-checked and
    /// path-validated first, by the same rules as every store write ([`CheckedWrite::check`]:
    /// valid path, never `MEMORY.md`, no credential, the whole file text (frontmatter and body)
    /// within the size limit).
    pub async fn write_versioned(
        &self,
        rel_path: &str,
        doc: &MemoryDoc,
        mode: WriteMode,
        expected: Expected,
    ) -> Result<PgWrite, StoreError> {
        let checked = CheckedWrite::check(rel_path, doc, mode, self.write_limits())?;
        self.write_checked_versioned(&checked, expected).await
    }

    /// Write the memory file `text` exactly as written (unknown frontmatter keys, comments,
    /// body bytes) at `rel_path` if the memory is at the `expected` version: the row keeps
    /// `text` as its source and its canonical text as `content`. The rules run first
    /// ([`CheckedWrite::check_raw`]: the secret filter on the whole text, path, size).
    pub async fn write_versioned_raw(
        &self,
        rel_path: &str,
        text: &str,
        expected: Expected,
    ) -> Result<PgWrite, StoreError> {
        let checked = CheckedWrite::check_raw(rel_path, text, self.write_limits())?;
        self.write_checked_versioned(&checked, expected).await
    }

    /// [`write_versioned`](Self::write_versioned) of a write that already passed the rules.
    async fn write_checked_versioned(
        &self,
        checked: &CheckedWrite,
        expected: Expected,
    ) -> Result<PgWrite, StoreError> {
        let (rel, doc, mode, raw) = (
            checked.path().as_str().to_owned(),
            checked.doc(),
            checked.mode(),
            checked.raw(),
        );
        let write_id = Uuid::new_v4();
        let span = tracing::debug_span!("team_memory_write", rel = %rel, ?mode);
        let mut races = 0;
        let result = loop {
            let r = self
                .retrying("write", |client| {
                    let rel = &rel;
                    async move {
                        self.try_write(client, rel, (doc, mode, raw), expected, write_id)
                            .await
                    }
                })
                .instrument(span.clone())
                .await;
            // A blind write only conflicts when another writer created the row between our
            // read and our insert: run it again against the row that now exists.
            match r {
                Err(e) if expected == Expected::Any && e.as_conflict().is_some() && races < 3 => {
                    races += 1;
                }
                other => break other,
            }
        };
        match &result {
            Ok(w) => {
                self.remember(&rel, Some(w.version));
                tracing::info!(rel = %rel, version = w.version, created = w.created, "team memory written");
            }
            Err(e) => tracing::warn!(rel = %rel, error = %e, "team memory write refused"),
        }
        result
    }

    async fn try_write(
        &self,
        mut client: Client,
        rel: &str,
        parts: (&MemoryDoc, WriteMode, Option<&str>),
        expected: Expected,
        write_id: Uuid,
    ) -> Result<PgWrite, StoreError> {
        let tx = self.sql().begin(&mut client).await.map_err(db)?;
        let current = self.locked_row(&tx, rel).await?;
        let w = self
            .write_in_tx(&tx, rel, current, parts, expected, write_id)
            .await?;
        self.sql().commit(tx).await.map_err(db)?;
        Ok(w)
    }

    /// The row at `rel` in this project, locked until the caller's transaction ends; `None`
    /// when there is none.
    pub(crate) async fn locked_row(
        &self,
        tx: &impl GenericClient,
        rel: &str,
    ) -> Result<Option<LockedRow>, StoreError> {
        let row = self
            .sql()
            .query_opt(tx, LOCK_ROW, &[&self.project_id(), &rel])
            .await
            .map_err(db)?;
        Ok(row.map(|r| LockedRow {
            version: r.get(0),
            content: r.get(1),
            sha256: r.get(2),
            write_id: r.get(3),
            source: r.get(4),
        }))
    }

    /// One row's write inside the caller's transaction, given the row as
    /// [`locked_row`](Self::locked_row) read and locked it in that transaction (version
    /// checked, content and index view changed together); the caller commits. A row already
    /// carrying `write_id` is this very write, landed before a lost connection: reported, not
    /// redone.
    pub(crate) async fn write_in_tx(
        &self,
        tx: &impl GenericClient,
        rel: &str,
        locked: Option<LockedRow>,
        parts: (&MemoryDoc, WriteMode, Option<&str>),
        expected: Expected,
        write_id: Uuid,
    ) -> Result<PgWrite, StoreError> {
        let row = self.row_write(rel, locked, parts, expected, write_id)?;
        self.send_row(tx, row).await
    }

    /// What one row's write is, worked out from the row [`locked_row`](Self::locked_row) read
    /// (version checked, text made), without a round trip: nothing to send when the row is this
    /// very write (landed before a lost connection) or already holds the same canonical text.
    pub(crate) fn row_write(
        &self,
        rel: &str,
        locked: Option<LockedRow>,
        (doc, mode, raw): (&MemoryDoc, WriteMode, Option<&str>),
        expected: Expected,
        write_id: Uuid,
    ) -> Result<RowWrite, StoreError> {
        let current: Option<(i64, String, Uuid, String)> =
            locked.map(|r| (r.version, r.content, r.write_id, r.source));
        if let Some((version, content, id, _)) = &current {
            if *id == write_id {
                // This very write landed before the connection dropped: report it, once.
                return Ok(RowWrite::Done(PgWrite {
                    rel_path: rel.to_owned(),
                    version: *version,
                    created: *version == 1,
                    changed: true,
                    sha256: sha256_hex(content),
                }));
            }
        }
        let current_version = current.as_ref().map(|c| c.0);
        if !expected.accepts(current_version) {
            return Err(StoreError::Pg(PgError::Conflict {
                rel_path: rel.to_owned(),
                expected: expected.label(),
                actual: VersionLabel(current_version),
            }));
        }
        let named = if doc.name.trim().is_empty() {
            MemoryDoc {
                name: stem(rel).to_owned(),
                ..doc.clone()
            }
        } else {
            doc.clone()
        };
        let text = match (&current, mode, raw) {
            (_, _, Some(raw)) => raw.to_owned(),
            (Some((_, _, _, old)), WriteMode::Append, None) => append_to_existing(old, doc),
            // The text its writer stored (`source`), so its comments and formatting stay.
            (Some((_, _, _, old)), WriteMode::ReplaceBody, None) => replace_body(old, doc),
            _ => named.render(),
        };
        let content = canonical_text(&text, rel);
        let stored = MemoryDoc::parse(&content, stem(rel)).unwrap_or(named);
        let sha = sha256_hex(&content);
        if let Some((version, old, _, _)) = &current {
            // Same canonical text: no new version (a formatting-only difference is no change);
            // the source is kept as it was.
            if *old == content {
                return Ok(RowWrite::Done(PgWrite {
                    rel_path: rel.to_owned(),
                    version: *version,
                    created: false,
                    changed: false,
                    sha256: sha,
                }));
            }
        }
        Ok(RowWrite::Send(Box::new(RowStatement {
            update: current.is_some(),
            expected,
            kind: stored.memory_type.map(|t| t.as_str().to_owned()),
            doc: stored,
            content,
            text,
            write_id,
            write: PgWrite {
                rel_path: rel.to_owned(),
                version: current_version.map_or(1, |v| v + 1),
                created: current.is_none(),
                changed: true,
                sha256: sha,
            },
        })))
    }

    /// Send `row`'s statement, if it has one, in the caller's transaction; the write with the
    /// version the row has now. An INSERT that finds a row another writer created since
    /// [`locked_row`](Self::locked_row) looked fails (`unique_violation`, which ends the
    /// transaction: a COMMIT sent behind it rolls back) and is [`PgError::Conflict`].
    pub(crate) async fn send_row(
        &self,
        tx: &impl GenericClient,
        row: RowWrite,
    ) -> Result<PgWrite, StoreError> {
        let s = match row {
            RowWrite::Done(w) => return Ok(w),
            RowWrite::Send(s) => s,
        };
        let project = self.project_id();
        let writer = &self.inner.config.writer;
        let rel = s.write.rel_path.as_str();
        // $1..$11 of both the UPDATE and the INSERT below.
        let row_params: [&(dyn ToSql + Sync); 11] = [
            &project,
            &rel,
            &s.doc.name,
            &s.doc.description,
            &s.kind,
            &s.doc.body,
            &s.content,
            &s.write.sha256,
            writer,
            &s.write_id,
            &s.text,
        ];
        let sql = if s.update { UPDATE_ROW } else { INSERT_ROW };
        let row = self
            .sql()
            .query_one(tx, sql, &row_params)
            .await
            .map_err(|e| {
                if e.code() == Some(&SqlState::UNIQUE_VIOLATION) {
                    // Another writer created it between our read and our insert.
                    StoreError::Pg(PgError::Conflict {
                        rel_path: rel.to_owned(),
                        expected: s.expected.label(),
                        actual: VersionLabel(Some(1)),
                    })
                } else {
                    db(e)
                }
            })?;
        Ok(PgWrite {
            version: row.get(0),
            ..s.write
        })
    }

    /// Delete `rel_path` if it is at the `expected` version ([`PgError::Conflict`] otherwise,
    /// [`MemoryError::NotFound`] when absent).
    pub async fn delete_versioned(
        &self,
        rel_path: &str,
        expected: Expected,
    ) -> Result<(), StoreError> {
        let rel = validate_rel_path(rel_path)?.to_owned();
        let project = self.project_id().to_owned();
        let mut retried = false;
        let result = self
            .retrying("delete", |mut client| {
                let (rel, project) = (&rel, &project);
                let first = !retried;
                retried = true;
                async move {
                    let tx = self.sql().begin(&mut client).await.map_err(db)?;
                    let current: Option<i64> = self
                        .sql()
                        .query_opt(
                            &tx,
                            "SELECT version FROM memloop_memories
                             WHERE project_id = $1 AND rel_path = $2 FOR UPDATE",
                            &[project, rel],
                        )
                        .await
                        .map_err(db)?
                        .map(|r| r.get(0));
                    match current {
                        // Gone after a retry: the first attempt's delete landed.
                        None if !first => return Ok(()),
                        None => return Err(MemoryError::NotFound(rel.clone()).into()),
                        Some(v) if !expected.accepts(Some(v)) => {
                            return Err(StoreError::Pg(PgError::Conflict {
                                rel_path: rel.clone(),
                                expected: expected.label(),
                                actual: VersionLabel(Some(v)),
                            }));
                        }
                        Some(_) => {}
                    }
                    self.sql()
                        .execute(
                            &tx,
                            "DELETE FROM memloop_memories WHERE project_id = $1 AND rel_path = $2",
                            &[project, rel],
                        )
                        .await
                        .map_err(db)?;
                    self.sql().commit(tx).await.map_err(db)?;
                    Ok(())
                }
            })
            .await;
        if result.is_ok() {
            self.remember(&rel, None);
            tracing::info!(rel = %rel, "team memory deleted");
        }
        result
    }

    /// Full-text search: relative paths and ranks of the best `limit` memories for `query`
    /// (name weighted over description over body), skipping `exclude`.
    pub async fn search(
        &self,
        query: &str,
        limit: usize,
        exclude: &[String],
    ) -> Result<Vec<(String, f32)>, StoreError> {
        let Some(terms) = crate::search::query_terms(query) else {
            return Ok(Vec::new());
        };
        if limit == 0 {
            return Ok(Vec::new());
        }
        let sql = crate::search::search_sql(&terms);
        let project = self.project_id().to_owned();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.retrying("search", |client| {
            let (sql, terms, project) = (&sql, &terms, &project);
            async move {
                let mut params: Vec<&(dyn ToSql + Sync)> = vec![project, &exclude, &limit];
                params.extend(
                    [&terms.words, &terms.grams]
                        .into_iter()
                        .filter(|t| !t.is_empty())
                        .map(|t| t as &(dyn ToSql + Sync)),
                );
                let rows = self
                    .sql()
                    .query(&client, sql.as_str(), &params)
                    .await
                    .map_err(db)?;
                Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
            }
        })
        .await
    }

    fn index_text(&self, entries: &[(String, String, String)]) -> String {
        entries
            .iter()
            .map(|(rel, name, desc)| {
                format_entry_line(name, rel, desc, self.inner.caps.max_entry_chars)
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The first `limit` index lines' rows, in the index's order, their marks, and how many
    /// lines the index has (the count kept by migration 10's trigger), from one snapshot.
    async fn index_start(
        &self,
        limit: usize,
    ) -> Result<(Vec<(String, String, String)>, IndexMarks, usize), StoreError> {
        let project = self.project_id().to_owned();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.retrying("index", |client| {
            let project = &project;
            async move {
                let rows = client
                    .query(
                        &client.prepare_cached(INDEX_START).await.map_err(db)?,
                        &[project, &limit],
                    )
                    .await
                    .map_err(db)?;
                let lines = rows
                    .first()
                    .map_or(0, |r| usize::try_from(r.get::<_, i64>(3)).unwrap_or(0));
                let marks = IndexMarks {
                    seqs: rows.iter().map(|r| r.get(4)).collect(),
                    xmins: rows.iter().map(|r| r.get(5)).collect(),
                };
                Ok((
                    rows.iter()
                        .map(|r| (r.get(0), r.get(1), r.get(2)))
                        .collect(),
                    marks,
                    lines,
                ))
            }
        })
        .await
    }

    /// The marks of the first `limit` index lines' rows and how many lines the index has, from
    /// one snapshot, without their text ([`INDEX_MARKS`]).
    async fn index_marks(&self, limit: usize) -> Result<(IndexMarks, usize), StoreError> {
        let project = self.project_id().to_owned();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.retrying("index", |client| {
            let project = &project;
            async move {
                let row = client
                    .query_one(
                        &client.prepare_cached(INDEX_MARKS).await.map_err(db)?,
                        &[project, &limit],
                    )
                    .await
                    .map_err(db)?;
                let marks = IndexMarks {
                    seqs: row.get(0),
                    xmins: row.get(1),
                };
                Ok((marks, usize::try_from(row.get::<_, i64>(2)).unwrap_or(0)))
            }
        })
        .await
    }

    async fn index_rows(&self) -> Result<Vec<(String, String, String)>, StoreError> {
        let project = self.project_id().to_owned();
        self.retrying("index", |client| {
            let project = &project;
            async move {
                let rows = self
                    .sql()
                    .query(
                        &client,
                        "SELECT rel_path, name, description FROM memloop_memories
                         WHERE project_id = $1 ORDER BY seq",
                        &[project],
                    )
                    .await
                    .map_err(db)?;
                // Daily logs are raw notes: no index line (the dream distils them).
                Ok(rows
                    .iter()
                    .map(|r| (r.get(0), r.get(1), r.get(2)))
                    .filter(|(rel, _, _): &(String, String, String)| {
                        !memloop_store::is_daily_log(rel)
                    })
                    .collect())
            }
        })
        .await
    }
}

#[async_trait]
impl MemoryStore for PgMemoryStore {
    fn write_limits(&self) -> memloop_store::WriteLimits {
        self.inner.config.write
    }

    /// Its settings, description and the version it last saw of each path (one entry a
    /// memory read or written); the pool is the server's, shared by every store.
    fn approx_bytes(&self) -> usize {
        use memloop_store::heap::{arc, block, map, string, vec};
        let config = &self.inner.config;
        let strings = [
            &config.url,
            &config.project_id,
            &config.writer,
            &config.application_name,
            &self.inner.description.identity,
        ]
        .into_iter()
        .chain(config.legacy_project_id.as_ref())
        .chain(config.schema.as_ref())
        .map(string)
        .sum::<usize>();
        let location = match &self.inner.description.location {
            memloop_store::StoreLocation::Database {
                engine,
                url,
                project,
            } => string(engine) + string(url) + string(project),
            memloop_store::StoreLocation::Directory(p) => block(p.capacity()),
            // A location of a kind this version does not know: not the team store's.
            _ => 0,
        };
        let seen = self
            .inner
            .seen
            .lock()
            .map_or(0, |seen| map(&seen.versions) + seen.keys);
        let rendered = self.inner.rendered.lock().map_or(0, |r| {
            r.as_ref().map_or(0, |r| {
                vec(&r.marks.seqs)
                    + vec(&r.marks.xmins)
                    + string(&r.text)
                    + string(&r.index.content)
                    + r.index.warning.as_ref().map_or(0, string)
            })
        });
        arc::<Inner>() + strings + location + seen + rendered
    }

    fn describe(&self) -> StoreDescription {
        self.inner.description.clone()
    }

    fn local_dir(&self, purpose: LocalPurpose) -> LocalDir {
        self.inner
            .config
            .local_bases
            .local_dir(&self.inner.description, purpose)
    }

    async fn changes(&self, since: Option<&ChangeCursor>) -> Result<Changes, MemoryError> {
        Ok(self.changes_since(since).await?)
    }

    async fn scan(&self) -> Result<Vec<MemoryHeader>, MemoryError> {
        let project = self.project_id().to_owned();
        let rows = self
            .retrying("scan", |client| {
                let project = &project;
                async move {
                    let rows = self
                        .sql()
                        .query(
                            &client,
                            "SELECT rel_path, name, description, memory_type, updated_at, version
                             FROM memloop_memories WHERE project_id = $1
                             ORDER BY updated_at DESC, rel_path",
                            &[project],
                        )
                        .await
                        .map_err(db)?;
                    Ok(rows)
                }
            })
            .await?;
        let mut out = Vec::with_capacity(rows.len());
        if let Ok(mut seen) = self.inner.seen.lock() {
            for r in &rows {
                seen.note(r.get(0), Some(r.get(5)));
            }
        }
        for r in rows {
            let description: String = r.get(2);
            let updated_at: chrono::DateTime<chrono::Utc> = r.get(4);
            out.push(MemoryHeader {
                rel_path: r.get(0),
                name: Some(r.get(1)),
                description: (!description.is_empty()).then_some(description),
                memory_type: parse_type(r.get(3)),
                mtime: updated_at.into(),
            });
        }
        Ok(out)
    }

    async fn read_path(&self, path: &MemoryPath) -> Result<MemoryFile, MemoryError> {
        let m = self
            .get(path.as_str())
            .await?
            .ok_or_else(|| MemoryError::NotFound(path.as_str().to_owned()))?;
        Ok(file_of(m))
    }

    /// One query for all of them (`rel_path = ANY(..)`), 512 paths a query.
    async fn read_paths(&self, paths: &[MemoryPath]) -> Vec<Result<MemoryFile, MemoryError>> {
        let mut out = Vec::with_capacity(paths.len());
        for page in paths.chunks(READ_PAGE) {
            match self.get_many(page).await {
                Ok(mut found) => out.extend(page.iter().map(|p| {
                    found
                        .remove(p.as_str())
                        .map(file_of)
                        .ok_or_else(|| MemoryError::NotFound(p.as_str().to_owned()))
                })),
                Err(e) => {
                    // Each path then gets its own answer (and its own error).
                    tracing::warn!(error = %e, "reading memories in one query failed; reading them one by one");
                    for p in page {
                        out.push(self.read_path(p).await);
                    }
                }
            }
        }
        out
    }

    async fn write_checked(&self, write: CheckedWrite) -> Result<WriteReport, MemoryError> {
        let expected = self.last_seen(write.path().as_str());
        let w = self.write_checked_versioned(&write, expected).await?;
        Ok(WriteReport {
            path: PathBuf::from(&w.rel_path),
            rel_path: w.rel_path,
            created: w.created,
        })
    }

    /// The content version is the row's `sha256` (of the same text a read returns as `raw`).
    /// [`Expected::from_content`] matches the expected hash against the row, then the write
    /// expects that row's version number, so a writer slipping in between fails the version
    /// check: one atomic step.
    async fn write_checked_if(
        &self,
        write: CheckedWrite,
        expected: &ExpectedVersion,
    ) -> Result<VersionedWrite, MemoryError> {
        let rel = write.path().as_str().to_owned();
        // Only a content version needs the row; `Absent` is checked by the write itself.
        let current = match expected {
            ExpectedVersion::Is(_) => self.get(&rel).await?,
            ExpectedVersion::Any | ExpectedVersion::Absent => None,
        };
        let versioned = Expected::from_content(
            expected,
            &rel,
            current.as_ref().map(|m| (m.version, m.sha256.as_str())),
        )?;
        match self.write_checked_versioned(&write, versioned).await {
            Ok(w) => Ok(VersionedWrite {
                report: WriteReport {
                    path: PathBuf::from(&w.rel_path),
                    rel_path: w.rel_path,
                    created: w.created,
                },
                version: w.sha256,
            }),
            Err(e) if e.as_conflict().is_some() => {
                let current = self.get(&rel).await?.map(|m| m.sha256);
                Err(expected.conflict(&rel, current.as_deref()))
            }
            Err(e) => Err(e.into()),
        }
    }

    async fn delete_checked(&self, path: &MemoryPath) -> Result<(), MemoryError> {
        let rel = path.as_str();
        Ok(self.delete_versioned(rel, self.last_seen(rel)).await?)
    }

    async fn clear(&self) -> Result<Vec<String>, MemoryError> {
        let project = self.project_id().to_owned();
        let removed = self
            .retrying("clear", |client| {
                let project = &project;
                async move {
                    let rows = self
                        .sql()
                        .query(
                            &client,
                            "DELETE FROM memloop_memories WHERE project_id = $1 RETURNING rel_path",
                            &[project],
                        )
                        .await
                        .map_err(db)?;
                    Ok(rows
                        .iter()
                        .map(|r| r.get::<_, String>(0))
                        .collect::<Vec<_>>())
                }
            })
            .await?;
        if let Ok(mut seen) = self.inner.seen.lock() {
            *seen = Seen::default();
        }
        tracing::info!(removed = removed.len(), "team memory cleared");
        Ok(removed)
    }

    /// The first index lines (at most the line cap, in the index's order) and the count of
    /// all of them, kept at write time (migration 10): one row per line loaded, whatever the
    /// project's size.
    async fn load_index(&self) -> Result<LoadedIndex, MemoryError> {
        let caps = self.inner.caps;
        // The marks first: when they are those of the start formatted before, its rows are not
        // read again (the lock is never held while a query runs or lines are formatted).
        let (marks, lines) = self.index_marks(caps.max_lines).await?;
        let reused = self.inner.rendered.lock().ok().and_then(|kept| {
            let r = kept.as_ref().filter(|r| r.marks == marks)?;
            // The count alone moves on with every memory past the cap (the warning names it).
            Some(if r.lines == lines {
                Ok(r.index.clone())
            } else {
                Err(r.text.clone())
            })
        });
        let (marks, text, lines) = match reused {
            Some(Ok(index)) => return Ok(index),
            Some(Err(text)) => (marks, text, lines),
            None => {
                let (rows, marks, lines) = self.index_start(caps.max_lines).await?;
                (marks, self.index_text(&rows), lines)
            }
        };
        let rest = if lines > marks.seqs.len() {
            IndexRest::Counted(lines)
        } else {
            IndexRest::Nothing
        };
        let index = load_capped_start(&text, rest, caps);
        if let Ok(mut kept) = self.inner.rendered.lock() {
            *kept = Some(RenderedIndex {
                marks,
                text,
                lines,
                index: index.clone(),
            });
        }
        Ok(index)
    }

    async fn index_entries(&self) -> Result<Vec<IndexEntry>, MemoryError> {
        Ok(self
            .index_rows()
            .await?
            .into_iter()
            .map(|(file, title, hook)| IndexEntry { title, file, hook })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::Seen;
    use memloop_store::heap::string;

    #[test]
    fn the_bytes_of_the_paths_seen_are_kept_as_they_change() {
        let mut seen = Seen::default();
        let walked = |s: &Seen| s.versions.keys().map(string).sum::<usize>();
        for i in 0..500u32 {
            let rel = format!("notes/n{}.md", i % 37);
            seen.note(&rel, (i % 5 != 0).then_some(i64::from(i)));
            assert_eq!(seen.keys, walked(&seen), "after {i}");
        }
        assert!(seen.keys > 0);
        assert_eq!(seen.versions.get("notes/n1.md"), Some(&482));
    }
}
