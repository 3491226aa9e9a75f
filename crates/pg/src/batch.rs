//! Batch writes: several checked writes in one transaction (all land or none), optionally under
//! an idempotency key so a client that retries after losing the answer gets the first outcome
//! back instead of a second write.

use crate::error::{PgError, StoreError};
use crate::store::{Expected, PgMemoryStore, db};
use deadpool_postgres::Transaction;
use memloop_store::{CheckedWrite, ExpectedVersion, VersionedWrite, WriteReport};
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

/// What a keyed batch found when it claimed its key.
enum Claim {
    Claimed,
    Recorded {
        request_sha256: String,
        outcome: String,
    },
}

/// Claim `key` in `tx`: a new key, or one whose row is past its expiry (its old outcome no
/// longer counts), is taken for this batch; a live one is returned as recorded. Only the row of
/// `(project, caller, key)` is touched: other keys' expired rows are left to
/// [`PgMemoryStore::sweep_expired_keys`].
async fn claim(
    tx: &Transaction<'_>,
    project: &str,
    key: &IdempotencyKey,
) -> Result<Claim, StoreError> {
    // A concurrent batch with the same key waits here on the primary key until the first one
    // commits (then finds its row) or rolls back (then claims it). A row found is locked until
    // this transaction ends, whether it was taken afresh or not.
    let ttl = key.ttl.as_secs_f64();
    let claimed = tx
        .query_opt(
            &tx.prepare_cached(
                "INSERT INTO memloop_idempotency AS i
                 (project_id, caller, key, request_sha256, outcome, expires_at)
             VALUES ($1, $2, $3, $4, '', now() + make_interval(secs => $5))
             ON CONFLICT (project_id, caller, key) DO UPDATE
                 SET request_sha256 = EXCLUDED.request_sha256, outcome = '',
                     created_at = now(), expires_at = EXCLUDED.expires_at
                 WHERE i.expires_at < now()
             RETURNING 1",
            )
            .await
            .map_err(db)?,
            &[&project, &key.caller, &key.key, &key.request_sha256, &ttl],
        )
        .await
        .map_err(db)?;
    if claimed.is_some() {
        return Ok(Claim::Claimed);
    }
    let row = tx
        .query_one(
            &tx.prepare_cached(
                "SELECT request_sha256, outcome FROM memloop_idempotency
             WHERE project_id = $1 AND caller = $2 AND key = $3",
            )
            .await
            .map_err(db)?,
            &[&project, &key.caller, &key.key],
        )
        .await
        .map_err(db)?;
    Ok(Claim::Recorded {
        request_sha256: row.get(0),
        outcome: row.get(1),
    })
}

impl PgMemoryStore {
    /// Apply `writes` in one transaction: every row is locked and its expected version checked,
    /// then all are written, or, when any check fails, none is (the error names the first
    /// conflicting memory: [`MemoryError::VersionConflict`](memloop_store::MemoryError::VersionConflict) with content versions). A lost
    /// connection is retried on a fresh one; a batch whose commit landed before the connection
    /// dropped is recognised by its rows' write ids and reported, never applied twice.
    ///
    /// With `key`, the key is claimed in the same transaction and recorded with
    /// `outcome(writes)` (the caller's answer, e.g. JSON): a later call with the same
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
            .retrying("batch", |mut client| {
                let (ids, project) = (&ids, &project);
                async move {
                    let tx = client.transaction().await.map_err(db)?;
                    if let Some(key) = key {
                        match claim(&tx, project, key).await? {
                            Claim::Claimed => {}
                            Claim::Recorded {
                                request_sha256,
                                outcome,
                            } => {
                                // Ended now, not at the drop: the claim locked the key's row,
                                // and other calls with the key wait for it.
                                tx.rollback().await.map_err(db)?;
                                return Ok(if request_sha256 == key.request_sha256 {
                                    BatchOutcome::Replayed(outcome)
                                } else {
                                    BatchOutcome::KeyReused
                                });
                            }
                        }
                    }
                    let mut done = Vec::with_capacity(writes.len());
                    let mut numbers = Vec::with_capacity(writes.len());
                    for (w, id) in writes.iter().zip(ids) {
                        let (written, number) = self.batch_entry(&tx, w, *id).await?;
                        done.push(written);
                        numbers.push(number);
                    }
                    if let Some(key) = key {
                        tx.execute(
                            &tx.prepare_cached(
                                "UPDATE memloop_idempotency SET outcome = $4
                             WHERE project_id = $1 AND caller = $2 AND key = $3",
                            )
                            .await
                            .map_err(db)?,
                            &[project, &key.caller, &key.key, &outcome(&done)],
                        )
                        .await
                        .map_err(db)?;
                    }
                    tx.commit().await.map_err(db)?;
                    for (w, number) in done.iter().zip(numbers) {
                        self.remember(&w.report.rel_path, Some(number));
                    }
                    Ok(BatchOutcome::Written(done))
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
                client
                    .execute(
                        &client
                            .prepare_cached(
                                "DELETE FROM memloop_idempotency
                                 WHERE project_id = $1 AND expires_at < now()",
                            )
                            .await
                            .map_err(db)?,
                        &[project],
                    )
                    .await
                    .map_err(db)
            }
        })
        .await
    }

    /// One write of a batch inside its transaction: the row locked, its content version
    /// checked against `w.expected`, then written.
    async fn batch_entry(
        &self,
        tx: &Transaction<'_>,
        w: &BatchWrite,
        id: Uuid,
    ) -> Result<(VersionedWrite, i64), StoreError> {
        let rel = w.write.path().as_str();
        // One read of the row, locked: the check below and the write use it.
        let current = self.locked_row(tx, rel).await?;
        let landed = current.as_ref().is_some_and(|c| c.write_id == id);
        let expected = if landed {
            // Written by this very batch before a lost connection: reported by `write_in_tx`.
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
        let parts = (write.doc(), write.mode(), write.raw());
        let pg = match self
            .write_in_tx(tx, rel, current, parts, expected, id)
            .await
        {
            Ok(pg) => pg,
            // The row was checked under its lock above; a conflict here is a row another
            // writer created between the check and the insert.
            Err(StoreError::Pg(PgError::Conflict { .. })) => {
                let sha: Option<String> = tx
                    .query_opt(
                        &tx.prepare_cached("SELECT sha256 FROM memloop_memories WHERE project_id = $1 AND rel_path = $2").await.map_err(db)?,
                        &[&self.project_id(), &rel],
                    )
                    .await
                    .map_err(db)?
                    .map(|r| r.get(0));
                return Err(StoreError::Memory(w.expected.conflict(rel, sha.as_deref())));
            }
            Err(e) => return Err(e),
        };
        let written = VersionedWrite {
            report: WriteReport {
                path: PathBuf::from(&pg.rel_path),
                rel_path: pg.rel_path,
                created: pg.created,
            },
            // The row's `sha256`: the content version of the text a read returns as `raw`.
            version: pg.sha256,
        };
        Ok((written, pg.version))
    }
}
