//! What makes a `context_save` batch all-or-nothing and a retried save land once.
//!
//! - A store that can commit several writes in one transaction says so with [`AtomicBatches`]
//!   (the PostgreSQL team store does, with the `postgres` feature); the batch is then one
//!   transaction and its idempotency key is recorded in it.
//! - Any other store (the memory dir) gets the batch validated whole through the write rules
//!   before anything is written, then written entry by entry; a write that fails midway has the
//!   entries already written put back as they were. Its idempotency keys are files under the
//!   store's [`LocalPurpose::PendingWork`] dir (`.memloop-idempotency/`), read and written under a
//!   lock file there: the plan of a keyed batch is recorded before its first write, so a retry
//!   after the process was killed midway finishes the same writes (same paths) instead of
//!   writing them again elsewhere.

use memloop_store::{
    CheckedWrite, ExpectedVersion, LocalPurpose, MemoryDoc, MemoryError, MemoryStore, MemoryType,
    VersionedWrite,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Longest idempotency key accepted (characters).
pub const MAX_IDEMPOTENCY_KEY_CHARS: usize = 128;

/// How long an idempotency key is remembered: a retry within it replays the first outcome.
pub const IDEMPOTENCY_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// The name of the key dir inside the store's [`LocalPurpose::PendingWork`] dir.
const KEYS_DIR: &str = ".memloop-idempotency";

/// A `context_save`'s idempotency key, scoped to who asked and fingerprinted with what was asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaveKey {
    /// Who asked: a digest of the bearer token (`local` without one), never the token.
    pub caller: String,
    /// The client's key (1 to 128 visible ASCII characters, checked when the call arrives).
    pub key: String,
    /// SHA-256 (hex) of the request's entries: the same key with other entries is refused.
    pub request_sha256: String,
}

/// Check a client's idempotency key: 1 to [`MAX_IDEMPOTENCY_KEY_CHARS`] visible ASCII
/// characters (a UUID, a ULID, `retry-42`).
pub fn check_key(key: &str) -> Result<&str, String> {
    if key.is_empty() || key.chars().count() > MAX_IDEMPOTENCY_KEY_CHARS {
        return Err(format!(
            "idempotency_key must be 1 to {MAX_IDEMPOTENCY_KEY_CHARS} characters (e.g. a UUID)"
        ));
    }
    if !key.chars().all(|c| c.is_ascii_graphic()) {
        return Err(
            "idempotency_key must be visible ASCII characters only (letters, digits, \
             punctuation; no spaces or control characters)"
                .into(),
        );
    }
    Ok(key)
}

/// The caller scope of a bearer token's SHA-256 digest: a second digest of it, so the stored
/// value never equals what the server compares tokens with.
pub(crate) fn caller_of_digest(digest: &[u8; 32]) -> String {
    let mut h = Sha256::new();
    h.update(b"memloop idempotency caller v1\0");
    h.update(digest);
    hex(&h.finalize()[..16])
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Who a request is, for idempotency keys: put into the HTTP request's extensions by the
/// transport (from the bearer token); `local` otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Caller(pub(crate) String);

/// What a batch write did.
#[derive(Debug, Clone, PartialEq)]
pub enum Batched {
    /// Every write landed: each one's report and new version.
    Written(Vec<VersionedWrite>),
    /// The key was used before for the same request: nothing was written; the first answer.
    Replayed(Value),
    /// The key was used before for another request: nothing was written.
    KeyReused,
}

/// The future [`AtomicBatches::write_batch`] returns.
pub type BatchFuture<'a> = Pin<Box<dyn Future<Output = Result<Batched, MemoryError>> + Send + 'a>>;

/// Builds the answer a keyed batch records, from its writes.
pub type AnswerOf<'a> = &'a (dyn Fn(&[VersionedWrite]) -> Value + Sync);

/// A store that applies several checked writes in one transaction: all land or none does.
/// [`ProjectStores::open_store`](crate::ProjectStores::open_store) hands one to the server
/// beside the store it opened.
pub trait AtomicBatches: Send + Sync {
    /// Apply `writes` (each with the version it expects) at once, or none of them: a conflict
    /// is [`MemoryError::VersionConflict`] naming the memory. With `key`, the key is recorded
    /// in the same transaction with `answer(writes)`; a later call with the same key and
    /// request gets [`Batched::Replayed`] with it, with another request [`Batched::KeyReused`];
    /// concurrent calls with one key wait for each other, and one writes.
    fn write_batch<'a>(
        &'a self,
        writes: Vec<(CheckedWrite, ExpectedVersion)>,
        key: Option<&'a SaveKey>,
        answer: AnswerOf<'a>,
    ) -> BatchFuture<'a>;
}

#[cfg(feature = "postgres")]
impl AtomicBatches for memloop_pg::PgMemoryStore {
    fn write_batch<'a>(
        &'a self,
        writes: Vec<(CheckedWrite, ExpectedVersion)>,
        key: Option<&'a SaveKey>,
        answer: AnswerOf<'a>,
    ) -> BatchFuture<'a> {
        Box::pin(async move {
            let writes: Vec<memloop_pg::BatchWrite> = writes
                .into_iter()
                .map(|(write, expected)| memloop_pg::BatchWrite { write, expected })
                .collect();
            let key = key.map(|k| memloop_pg::IdempotencyKey {
                caller: k.caller.clone(),
                key: k.key.clone(),
                request_sha256: k.request_sha256.clone(),
                ttl: IDEMPOTENCY_TTL,
            });
            let outcome = |w: &[VersionedWrite]| answer(w).to_string();
            match memloop_pg::PgMemoryStore::write_batch(self, &writes, key.as_ref(), &outcome)
                .await?
            {
                memloop_pg::BatchOutcome::Written(w) => Ok(Batched::Written(w)),
                memloop_pg::BatchOutcome::Replayed(text) => Ok(Batched::Replayed(
                    serde_json::from_str(&text).unwrap_or_else(
                        |_| serde_json::json!({ "note": "the first answer could not be read" }),
                    ),
                )),
                memloop_pg::BatchOutcome::KeyReused => Ok(Batched::KeyReused),
            }
        })
    }
}

/// One planned write of a keyed batch on a store without transactions, as its record keeps it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct PlannedWrite {
    /// Which store: the project's (`false`) or the global memory (`true`).
    pub(crate) global: bool,
    pub(crate) rel: String,
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) memory_type: Option<String>,
    pub(crate) body: String,
}

impl PlannedWrite {
    pub(crate) fn new(global: bool, rel: &str, doc: &MemoryDoc) -> Self {
        Self {
            global,
            rel: rel.to_owned(),
            name: doc.name.clone(),
            description: doc.description.clone(),
            memory_type: doc.memory_type.map(|t| t.as_str().to_owned()),
            body: doc.body.clone(),
        }
    }

    pub(crate) fn doc(&self) -> MemoryDoc {
        MemoryDoc {
            name: self.name.clone(),
            description: self.description.clone(),
            memory_type: self.memory_type.as_deref().and_then(MemoryType::parse),
            body: self.body.clone(),
        }
    }
}

/// A key's record on a store without transactions.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct KeyRecord {
    pub(crate) caller: String,
    pub(crate) key: String,
    pub(crate) request_sha256: String,
    /// Seconds since the Unix epoch after which the record no longer counts.
    pub(crate) expires: u64,
    /// The answer, once every write landed; `None` while the batch is being written (a record
    /// left so was interrupted: its plan is finished by the next call with the key).
    pub(crate) answer: Option<Value>,
    /// The writes, in order, with the answer they make (without versions).
    pub(crate) plan: Vec<PlannedWrite>,
    pub(crate) pending_answer: Value,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The key files of one store, locked for the caller while it holds this.
pub(crate) struct KeyFiles {
    dir: PathBuf,
    _lock: std::fs::File,
}

impl KeyFiles {
    /// Take the store's key lock (waiting for another holder, in this process or another).
    pub(crate) async fn lock(store: &dyn MemoryStore) -> Result<Self, MemoryError> {
        let dir = store
            .local_dir_or_temp(LocalPurpose::PendingWork)
            .join(KEYS_DIR);
        tokio::task::spawn_blocking(move || {
            let io = |what: &str, e| MemoryError::io(format!("{what} {}", dir.display()), e);
            std::fs::create_dir_all(&dir).map_err(|e| io("creating", e))?;
            let lock = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(dir.join(".lock"))
                .map_err(|e| io("opening the lock in", e))?;
            fs4::fs_std::FileExt::lock_exclusive(&lock).map_err(|e| io("locking", e))?;
            Ok(Self { dir, _lock: lock })
        })
        .await
        .map_err(|e| MemoryError::io("idempotency key lock", std::io::Error::other(e)))?
    }

    fn file(&self, caller: &str, key: &str) -> PathBuf {
        let mut h = Sha256::new();
        h.update(caller.as_bytes());
        h.update([0]);
        h.update(key.as_bytes());
        self.dir.join(format!("{}.json", hex(&h.finalize()[..16])))
    }

    /// The live record of `(caller, key)`, if any (an expired or unreadable one counts as none).
    pub(crate) fn get(&self, caller: &str, key: &str) -> Option<KeyRecord> {
        let text = std::fs::read_to_string(self.file(caller, key)).ok()?;
        let record: KeyRecord = serde_json::from_str(&text).ok()?;
        (record.caller == caller && record.key == key && record.expires > now_secs())
            .then_some(record)
    }

    /// Write `record` (atomically: a temp file renamed into place, synced), and delete expired
    /// records.
    pub(crate) fn put(&self, record: &KeyRecord) -> Result<(), MemoryError> {
        let io = |e| {
            MemoryError::io(
                format!("writing an idempotency key in {}", self.dir.display()),
                e,
            )
        };
        let text = serde_json::to_vec(record).map_err(|e| io(std::io::Error::other(e)))?;
        let mut tmp = tempfile::NamedTempFile::new_in(&self.dir).map_err(io)?;
        std::io::Write::write_all(&mut tmp, &text).map_err(io)?;
        tmp.as_file().sync_all().map_err(io)?;
        tmp.persist(self.file(&record.caller, &record.key))
            .map_err(|e| io(e.error))?;
        self.prune();
        Ok(())
    }

    /// Delete the records past their time.
    fn prune(&self) {
        let now = now_secs();
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for e in entries.flatten() {
            let path = e.path();
            if path.extension().is_none_or(|x| x != "json") {
                continue;
            }
            let expired = std::fs::read_to_string(&path)
                .ok()
                .and_then(|t| serde_json::from_str::<KeyRecord>(&t).ok())
                .is_none_or(|r| r.expires <= now);
            if expired {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
}

/// When a record made now expires.
pub(crate) fn expiry() -> u64 {
    now_secs() + IDEMPOTENCY_TTL.as_secs()
}

/// SHA-256 (hex) of `bytes`.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}
