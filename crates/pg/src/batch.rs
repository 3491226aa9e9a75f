//! Batch writes: several checked writes in one transaction (all land or none), optionally under
//! an idempotency key so a client that retries after losing the answer gets the first outcome
//! back instead of a second write.

use crate::error::{PgError, StoreError};
use crate::statement::Statements;
use crate::store::{Expected, PgMemoryStore, db};
use crate::store::{INSERT_ROW, LOCK_ROW, LockedRow, RowWrite, UPDATE_ROW};
use deadpool_postgres::{Client, GenericClient};
use futures::future::{join_all, try_join_all};
use memloop_store::{CheckedWrite, ExpectedVersion, VersionedWrite, WriteReport};
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;
use uuid::Uuid;

/// How long a key is kept by default (24 hours): a retry within it replays the first outcome.
pub const IDEMPOTENCY_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// One write of a batch: a write that passed the rules ([`CheckedWrite::check`]) and the version
/// it expects to find ([`ExpectedVersion`], content versions as every backend reports them).
#[derive(Debug)]
pub struct BatchWrite {
    /// The checked write.
    pub write: CheckedWrite,
    /// What must be there for it to apply.
    pub expected: ExpectedVersion,
}

/// A client-chosen key that makes a batch apply once per `(project, caller, key)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey {
    /// Who asked (a digest naming the client's credential, never the credential itself).
    pub caller: String,
    /// The client's key.
    pub key: String,
    /// SHA-256 (hex) of what was asked: the same key with another request is refused.
    pub request_sha256: String,
    /// How long the key is kept ([`IDEMPOTENCY_TTL`] by default).
    pub ttl: Duration,
}

/// What [`PgMemoryStore::write_batch`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchOutcome {
    /// Every write landed, in one transaction: each one's report and new content version. The
    /// key (if any) was recorded with the outcome text the caller made of them.
    Written(Vec<VersionedWrite>),
    /// The key was used before for the same request: nothing was written; this is the outcome
    /// text recorded then.
    Replayed(String),
    /// The key was used before for another request (its hash differs): nothing was written.
    KeyReused,
}

/// A key's row as recorded, and whether it is live (not past its expiry).
const RECORDED: &str = "SELECT request_sha256, outcome, expires_at >= now()
     FROM memloop_idempotency WHERE project_id = $1 AND caller = $2 AND key = $3";

/// A key taken with its batch's outcome, in the batch's transaction. No `ON CONFLICT`: a row
/// for the key fails the statement, and with it the batch (see [`PgMemoryStore::batch_attempt`]).
const RECORD: &str = "INSERT INTO memloop_idempotency
         (project_id, caller, key, request_sha256, outcome, expires_at)
     VALUES ($1, $2, $3, $4, $5, now() + make_interval(secs => $6))";

/// A key's row past its expiry, deleted so that the key can be taken afresh.
const FORGET_EXPIRED: &str = "DELETE FROM memloop_idempotency
     WHERE project_id = $1 AND caller = $2 AND key = $3 AND expires_at < now()";

/// A key's row: what was asked with it, what was answered, whether it is live.
struct Recorded {
    request_sha256: String,
    outcome: String,
    live: bool,
}

impl Recorded {
    /// What a call with `key` gets back when the key is recorded live.
    fn outcome_for(self, key: &IdempotencyKey) -> BatchOutcome {
        if self.request_sha256 == key.request_sha256 {
            BatchOutcome::Replayed(self.outcome)
        } else {
            BatchOutcome::KeyReused
        }
    }
}

/// The row of `key` in `project`, if there is one.
async fn recorded(
    sql: Statements<'_>,
    c: &impl GenericClient,
    project: &str,
    key: &IdempotencyKey,
) -> Result<Option<Recorded>, StoreError> {
    let row = sql
        .query_opt(c, RECORDED, &[&project, &key.caller, &key.key])
        .await
        .map_err(db)?;
    Ok(row.map(|r| Recorded {
        request_sha256: r.get(0),
        outcome: r.get(1),
        live: r.get(2),
    }))
}

/// How one attempt of a batch ended.
enum Attempt {
    Done(BatchOutcome),
    /// The key's row was past its expiry (now deleted), or another call recorded the key and
    /// its row is gone again: attempt again.
    Again,
}

/// Attempts of one batch on one connection before it gives up on a key that keeps changing.
const ATTEMPTS: usize = 4;

impl PgMemoryStore {
    /// Apply `writes` in one transaction: every row is locked and its expected version checked,
    /// then all are written, or, when any check fails, none is (the error names the first
    /// conflicting memory: [`MemoryError::VersionConflict`](memloop_store::MemoryError::VersionConflict) with content versions). A lost
    /// connection is retried on a fresh one; a batch whose commit landed before the connection
    /// dropped is recognised by its rows' write ids and reported, never applied twice.
    ///
    /// With `key`, the key is recorded in the same transaction with `outcome(writes)` (the
    /// caller's answer, e.g. JSON): a later call with the same
    /// `(caller, key)` and the same `request_sha256` writes nothing and gets
    /// [`BatchOutcome::Replayed`] with that text; with another hash, [`BatchOutcome::KeyReused`].
    /// Concurrent calls with one key wait for each other: one writes, the others replay.
    pub async fn write_batch(
        &self,
        writes: &[BatchWrite],
        key: Option<&IdempotencyKey>,
        outcome: &(dyn Fn(&[VersionedWrite]) -> String + Sync),
    ) -> Result<BatchOutcome, StoreError> {
        let ids: Vec<Uuid> = writes.iter().map(|_| Uuid::new_v4()).collect();
        let project = self.project_id().to_owned();
        let result = self
            .retrying("batch", |client| {
                let (ids, project) = (&ids, &project);
                async move {
                    let mut tx = Pipelined::new(client);
                    for _ in 0..ATTEMPTS {
                        match self
                            .batch_attempt(&mut tx, writes, ids, project, key, outcome)
                            .await
                        {
                            Ok(Attempt::Done(done)) => return Ok(done),
                            Ok(Attempt::Again) => {}
                            Err(e) => {
                                tx.settle(self.sql()).await;
                                return Err(e);
                            }
                        }
                    }
                    Err(StoreError::Pg(PgError::Db(format!(
                        "the idempotency key changed under {ATTEMPTS} attempts of its batch"
                    ))))
                }
            })
            .await;
        if key.is_some() && self.sweep_due() {
            // Other keys' expired rows go in a statement of their own, after this batch and
            // off its path: at most once per `SWEEP_EVERY` per store.
            let store = self.clone();
            tokio::spawn(async move {
                let _ = store.sweep_expired_keys().await;
            });
        }
        match &result {
            Ok(BatchOutcome::Written(done)) => {
                tracing::info!(
                    entries = done.len(),
                    keyed = key.is_some(),
                    "team memory batch written"
                );
            }
            Ok(BatchOutcome::Replayed(_)) => {
                tracing::info!("team memory batch replayed for a known idempotency key");
            }
            Ok(BatchOutcome::KeyReused) => {
                tracing::info!("team memory batch refused: idempotency key reused");
            }
            Err(e) => tracing::warn!(error = %e, "team memory batch not written"),
        }
        result
    }

    /// Delete this project's idempotency keys past their expiry; how many went. A batch never
    /// reads an expired key's outcome (the next call with that key takes it afresh), so this
    /// only reclaims space. The store sweeps when it opens and then at most once an hour, in
    /// the background after a keyed [`write_batch`](Self::write_batch); call it to sweep now
    /// (e.g. from a maintenance job).
    pub async fn sweep_expired_keys(&self) -> Result<u64, StoreError> {
        let swept = self.delete_expired_keys().await;
        match &swept {
            Ok(n) => tracing::debug!(swept = n, "expired idempotency keys swept"),
            Err(e) => tracing::warn!(error = %e, "expired idempotency keys not swept"),
        }
        swept
    }

    /// The sweep of [`sweep_expired_keys`](Self::sweep_expired_keys), recorded as done now,
    /// without its log.
    pub(crate) async fn delete_expired_keys(&self) -> Result<u64, StoreError> {
        self.mark_swept();
        let project = self.project_id().to_owned();
        self.retrying("sweep", |client| {
            let project = &project;
            async move {
                self.sql()
                    .execute(
                        &client,
                        "DELETE FROM memloop_idempotency
                                 WHERE project_id = $1 AND expires_at < now()",
                        &[project],
                    )
                    .await
                    .map_err(db)
            }
        })
        .await
    }

    /// One attempt of [`write_batch`](Self::write_batch) on one connection, in two round trips:
    /// BEGIN, the key's row (if any) and every row's lock sent together; then, once the rows are
    /// checked and the answer made, the key's row with that answer, every row's statement and
    /// COMMIT sent together. A statement that fails ends the transaction, so the COMMIT behind
    /// it rolls back.
    ///
    /// The key: a live row for it found first is answered from (nothing written); an expired one
    /// is deleted and the batch attempted again. Otherwise the key is inserted first in the second
    /// round trip, with no `ON CONFLICT`: a concurrent call with the same key that inserted it
    /// first makes this insert wait until that call ends, then fail if it committed (this batch
    /// rolls back and answers from the row that call recorded) or go on if it rolled back. So
    /// one call writes, and the others replay its answer.
    async fn batch_attempt(
        &self,
        tx: &mut Pipelined,
        writes: &[BatchWrite],
        ids: &[Uuid],
        project: &str,
        key: Option<&IdempotencyKey>,
        outcome: &(dyn Fn(&[VersionedWrite]) -> String + Sync),
    ) -> Result<Attempt, StoreError> {
        tx.begun();
        let c = tx.client()?;
        // Every statement of the attempt prepared first (a round trip on a connection's first
        // batch, cached after): a cached statement is sent at its future's first poll, so the
        // statements of each join below go out in the join's order, COMMIT last. (A statement
        // still to prepare would go out after the COMMIT, outside the transaction.)
        try_join_all(
            [RECORDED, LOCK_ROW, UPDATE_ROW, INSERT_ROW, RECORD].map(|sql| c.prepare_cached(sql)),
        )
        .await
        .map_err(db)?;
        let begin = async { self.sql().batch(c, "BEGIN").await.map_err(db) };
        let found = async {
            match key {
                Some(key) => recorded(self.sql(), c, project, key).await,
                None => Ok(None),
            }
        };
        // Sent in this order (`biased`: BEGIN, the key's row, then the locks in the batch's
        // order), and the server runs a connection's statements in the order they were sent.
        let locks = join_all(
            writes
                .iter()
                .map(|w| self.locked_row(c, w.write.path().as_str())),
        );
        let (began, found, locked) = tokio::join!(biased; begin, found, locks);
        began?;
        if let (Some(key), Some(found)) = (key, found?) {
            tx.rollback(self.sql()).await?;
            if found.live {
                return Ok(Attempt::Done(found.outcome_for(key)));
            }
            let c = tx.client()?;
            self.sql()
                .execute(c, FORGET_EXPIRED, &[&project, &key.caller, &key.key])
                .await
                .map_err(db)?;
            return Ok(Attempt::Again);
        }
        let mut rows = Vec::with_capacity(writes.len());
        // A path written twice in one batch: the second write finds the row the first leaves.
        let mut after: HashMap<&str, Option<LockedRow>> = HashMap::new();
        for (n, ((w, id), locked)) in writes.iter().zip(ids).zip(locked).enumerate() {
            let rel = w.write.path().as_str();
            let locked = locked?;
            let current = after.remove(rel).unwrap_or(locked);
            let again = writes[n + 1..]
                .iter()
                .any(|l| l.write.path().as_str() == rel);
            let before = again.then(|| current.clone()).flatten();
            let row = row_of(self, w, current, *id)?;
            if again {
                after.insert(rel, row.after(before));
            }
            rows.push(row);
        }
        let done: Vec<VersionedWrite> = rows.iter().map(versioned).collect();
        let recorded_text = key.map(|key| (key, outcome(&done)));
        let record = async {
            let Some((key, text)) = &recorded_text else {
                return Ok(());
            };
            let ttl = key.ttl.as_secs_f64();
            self.sql()
                .execute(
                    c,
                    RECORD,
                    &[
                        &project,
                        &key.caller,
                        &key.key,
                        &key.request_sha256,
                        text,
                        &ttl,
                    ],
                )
                .await
                .map(|_| ())
        };
        let sent = try_join_all(rows.into_iter().map(|row| self.send_row(c, row)));
        let commit = async { self.sql().batch(c, "COMMIT").await.map_err(db) };
        let (record, sent, commit) = tokio::join!(biased; record, sent, commit);
        // Answered: the transaction is over, committed or (after a failed statement) rolled
        // back. Not answered: the connection is lost, and leaves the pool at the drop.
        commit?;
        tx.ended();
        match record {
            Ok(()) => {}
            Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) => {
                // Another call recorded the key first and committed: its answer is this one's.
                let Some(key) = key else {
                    return Err(db(e));
                };
                return Ok(
                    match recorded(self.sql(), tx.client()?, project, key).await? {
                        Some(found) if found.live => Attempt::Done(found.outcome_for(key)),
                        _ => Attempt::Again,
                    },
                );
            }
            Err(e) => return Err(db(e)),
        }
        let written = match sent {
            Ok(w) => w,
            Err(StoreError::Pg(PgError::Conflict { rel_path, .. })) => {
                // A row another writer created between the lock and the insert.
                let sha = self.sha_of(tx.client()?, &rel_path).await?;
                let expected = writes
                    .iter()
                    .find(|w| w.write.path().as_str() == rel_path)
                    .map_or(&ExpectedVersion::Absent, |w| &w.expected);
                return Err(StoreError::Memory(
                    expected.conflict(&rel_path, sha.as_deref()),
                ));
            }
            Err(e) => return Err(e),
        };
        for w in &written {
            self.remember(&w.rel_path, Some(w.version));
        }
        Ok(Attempt::Done(BatchOutcome::Written(done)))
    }

    /// The content version (`sha256`) of the row at `rel` now.
    async fn sha_of(&self, c: &Client, rel: &str) -> Result<Option<String>, StoreError> {
        let row = self
            .sql()
            .query_opt(
                c,
                "SELECT sha256 FROM memloop_memories WHERE project_id = $1 AND rel_path = $2",
                &[&self.project_id(), &rel],
            )
            .await
            .map_err(db)?;
        Ok(row.map(|r| r.get(0)))
    }
}

/// One write of a batch, checked against the row [`locked_row`](PgMemoryStore::locked_row)
/// read (its content version against `w.expected`), as the statement to send.
fn row_of(
    store: &PgMemoryStore,
    w: &BatchWrite,
    current: Option<LockedRow>,
    id: Uuid,
) -> Result<RowWrite, StoreError> {
    let rel = w.write.path().as_str();
    let landed = current.as_ref().is_some_and(|c| c.write_id == id);
    let expected = if landed {
        // Written by this very batch before a lost connection: reported by `row_write`.
        Expected::Any
    } else {
        Expected::from_content(
            &w.expected,
            rel,
            current.as_ref().map(|c| (c.version, c.sha256.as_str())),
        )
        .map_err(StoreError::Memory)?
    };
    let write = &w.write;
    store.row_write(
        rel,
        current,
        (write.doc(), write.mode(), write.raw()),
        expected,
        id,
    )
}

/// The write a row's statement makes, as the batch reports it.
fn versioned(row: &RowWrite) -> VersionedWrite {
    let w = match row {
        RowWrite::Done(w) => w,
        RowWrite::Send(s) => &s.write,
    };
    VersionedWrite {
        report: WriteReport {
            path: PathBuf::from(&w.rel_path),
            rel_path: w.rel_path.clone(),
            created: w.created,
        },
        // The row's `sha256`: the content version of the text a read returns as `raw`.
        version: w.sha256.clone(),
    }
}

/// A pooled connection in a transaction whose statements are sent without waiting for each
/// other's answers. Dropped while its transaction may be open (BEGIN sent, no COMMIT or
/// ROLLBACK answered: a lost connection, or a caller that gave up on the future), the
/// connection leaves the pool and closes, which ends the transaction on the server; otherwise
/// it goes back to the pool.
struct Pipelined {
    client: Option<Client>,
    open: bool,
}

impl Pipelined {
    fn new(client: Client) -> Self {
        Self {
            client: Some(client),
            open: true,
        }
    }

    fn client(&self) -> Result<&Client, StoreError> {
        // Taken only by the drop.
        self.client
            .as_ref()
            .ok_or_else(|| StoreError::Pg(PgError::ConnectionLost("connection released".into())))
    }

    /// BEGIN is about to be sent: until COMMIT or ROLLBACK is answered the transaction may be
    /// open.
    fn begun(&mut self) {
        self.open = true;
    }

    /// COMMIT or ROLLBACK was answered: the connection is out of the transaction.
    fn ended(&mut self) {
        self.open = false;
    }

    async fn rollback(&mut self, sql: Statements<'_>) -> Result<(), StoreError> {
        sql.batch(self.client()?, "ROLLBACK").await.map_err(db)?;
        self.ended();
        Ok(())
    }

    /// After a failed attempt: end the transaction if it may be open (on a lost connection
    /// this fails too, and the client leaves the pool at the drop).
    async fn settle(&mut self, sql: Statements<'_>) {
        if self.open {
            let _ = self.rollback(sql).await;
        }
    }
}

impl Drop for Pipelined {
    fn drop(&mut self) {
        if let Some(client) = self.client.take()
            && self.open
        {
            drop(Client::take(client));
        }
    }
}
