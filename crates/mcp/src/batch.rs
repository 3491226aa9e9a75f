//! What makes a `context_save` batch all-or-nothing and a retried save land once.
//!
//! - A store that can commit several writes in one transaction says so with [`AtomicBatches`]
//!   (the PostgreSQL team store does, with the `postgres` feature); the batch is then one
//!   transaction and its idempotency key is recorded in it.
//! - Any other store (the memory dir) gets the batch validated whole through the write rules
//!   before anything is written, then written as one batch of that store
//!   ([`MemoryStore::write_checked_batch`]; the memory dir journals it, so a process killed
//!   midway leaves a batch the next open finishes). Its idempotency keys are files under the
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
use std::collections::HashMap;
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

/// The file in the key dir whose modification time says when expired records were last swept.
const SWEPT_MARKER: &str = ".swept";

/// The lock file in the key dir.
const LOCK_FILE: &str = ".lock";

/// How often a store's expired key records are swept: a put sweeps when the last sweep is older
/// than this; otherwise a keyed save touches its own record only (O(1) in the keys held).
const SWEEP_EVERY: Duration = Duration::from_secs(60 * 60);

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

/// The future [`AtomicBatches::names`] returns: the names by path.
pub type NamesFuture<'a> =
    Pin<Box<dyn Future<Output = Result<HashMap<String, String>, MemoryError>> + Send + 'a>>;

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

    /// The name (title) of each memory at `rels` that exists, by path, in one round trip:
    /// what `context_save` checks before it names an entry's memory, without reading the
    /// memories themselves.
    fn names<'a>(&'a self, rels: &'a [&'a str]) -> NamesFuture<'a>;
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

    fn names<'a>(&'a self, rels: &'a [&'a str]) -> NamesFuture<'a> {
        Box::pin(async move {
            memloop_pg::PgMemoryStore::names(self, rels)
                .await
                .map_err(MemoryError::from)
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

/// The key files of one store, locked for the caller while it holds this. Every file and the
/// dir itself are memloop's own files in the memory dir: opened without following links
/// ([`memloop_files::internal_dir`], [`memloop_files::open_internal_file`]), so a link planted
/// there leads no record, lock, marker or deletion out of the key dir.
pub(crate) struct KeyFiles {
    dir: PathBuf,
    _lock: std::fs::File,
}

/// The error of a key file operation: it names the key dir relative to the memory dir, never
/// the memory dir's path (errors reach clients); the log has the whole path.
fn key_error(what: &str, e: std::io::Error) -> MemoryError {
    MemoryError::io(format!("{what} `{KEYS_DIR}`"), e)
}

impl KeyFiles {
    /// Take the store's key lock (waiting for another holder, in this process or another).
    pub(crate) async fn lock(store: &dyn MemoryStore) -> Result<Self, MemoryError> {
        let base = store.local_dir_or_temp(LocalPurpose::PendingWork);
        tokio::task::spawn_blocking(move || {
            let dir = memloop_files::internal_dir(&base, KEYS_DIR).map_err(|e| {
                tracing::warn!(dir = %base.join(KEYS_DIR).display(), error = %e, "idempotency key dir refused");
                key_error("opening", e)
            })?;
            let lock = memloop_files::open_internal_file(
                &base,
                &format!("{KEYS_DIR}/{LOCK_FILE}"),
                std::fs::OpenOptions::new()
                    .create(true)
                    .truncate(false)
                    .write(true),
            )
            .map_err(|e| key_error("opening the lock in", e))?;
            fs4::fs_std::FileExt::lock_exclusive(&lock).map_err(|e| key_error("locking", e))?;
            Ok(Self { dir, _lock: lock })
        })
        .await
        .map_err(|e| MemoryError::io("idempotency key lock", std::io::Error::other(e)))?
    }

    /// The record file name of `(caller, key)` in the key dir.
    fn name(caller: &str, key: &str) -> String {
        let mut h = Sha256::new();
        h.update(caller.as_bytes());
        h.update([0]);
        h.update(key.as_bytes());
        format!("{}.json", hex(&h.finalize()[..16]))
    }

    #[cfg(test)]
    fn file(&self, caller: &str, key: &str) -> PathBuf {
        self.dir.join(Self::name(caller, key))
    }

    /// The live record of `(caller, key)`, if any (an expired or unreadable one counts as none;
    /// so does one that is a link: it is not followed).
    pub(crate) fn get(&self, caller: &str, key: &str) -> Option<KeyRecord> {
        let text = memloop_files::read_internal_file(&self.dir, &Self::name(caller, key)).ok()?;
        let record: KeyRecord = serde_json::from_slice(&text).ok()?;
        (record.caller == caller && record.key == key && record.expires > now_secs())
            .then_some(record)
    }

    /// Write `record` (atomically: a temp file renamed into place, synced; the rename replaces
    /// a link there rather than following it), and, at most once per [`SWEEP_EVERY`], delete
    /// the expired records.
    pub(crate) fn put(&self, record: &KeyRecord) -> Result<(), MemoryError> {
        let io = |e| key_error("writing an idempotency key in", e);
        let text = serde_json::to_vec(record).map_err(|e| io(std::io::Error::other(e)))?;
        let mut tmp = tempfile::NamedTempFile::new_in(&self.dir).map_err(io)?;
        std::io::Write::write_all(&mut tmp, &text).map_err(io)?;
        tmp.as_file().sync_all().map_err(io)?;
        tmp.persist(self.dir.join(Self::name(&record.caller, &record.key)))
            .map_err(|e| io(e.error))?;
        if self.sweep_due() {
            // Marked first: a sweep that fails midway is not retried on every put. A marker
            // that cannot be written (a link planted there) defers the sweep: each put would
            // sweep otherwise.
            let marked = memloop_files::open_internal_file(
                &self.dir,
                SWEPT_MARKER,
                std::fs::OpenOptions::new()
                    .create(true)
                    .truncate(true)
                    .write(true),
            )
            .and_then(|f| f.set_modified(SystemTime::now()));
            match marked {
                Ok(()) => self.prune(),
                Err(e) => tracing::warn!(
                    error = %e,
                    "idempotency key sweep not marked; expired keys are kept until it can be"
                ),
            }
        }
        Ok(())
    }

    /// Whether the last sweep is [`SWEEP_EVERY`] old (or there was none). The marker's own
    /// time counts, never a link's target's.
    fn sweep_due(&self) -> bool {
        std::fs::symlink_metadata(self.dir.join(SWEPT_MARKER))
            .ok()
            .filter(std::fs::Metadata::is_file)
            .and_then(|m| m.modified().ok())
            .is_none_or(|t| {
                SystemTime::now()
                    .duration_since(t)
                    .is_ok_and(|age| age >= SWEEP_EVERY)
            })
    }

    /// Delete the records past their time: regular `*.json` files of the key dir only, read
    /// without following links; a link, a directory or anything else there is left alone, so
    /// the sweep never leaves the key dir.
    fn prune(&self) {
        let now = now_secs();
        if !std::fs::symlink_metadata(&self.dir).is_ok_and(|m| m.file_type().is_dir()) {
            return;
        }
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            let Some(name) = name.to_str() else { continue };
            if !name.ends_with(".json") || !e.file_type().is_ok_and(|t| t.is_file()) {
                continue;
            }
            let Ok(text) = memloop_files::read_internal_file(&self.dir, name) else {
                continue;
            };
            let expired = serde_json::from_slice::<KeyRecord>(&text)
                .ok()
                .is_none_or(|r| r.expires <= now);
            if expired {
                // Removing a name never follows a link: at worst a link swapped in goes.
                let _ = std::fs::remove_file(self.dir.join(name));
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn record(key: &str, expires: u64) -> KeyRecord {
        KeyRecord {
            caller: "local".into(),
            key: key.into(),
            request_sha256: sha256_hex(key.as_bytes()),
            expires,
            answer: Some(serde_json::json!({ "written": 1 })),
            plan: Vec::new(),
            pending_answer: Value::Null,
        }
    }

    fn records(dir: &std::path::Path) -> usize {
        std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
            .count()
    }

    #[tokio::test]
    async fn a_keyed_save_reads_only_its_own_record_and_expired_ones_are_swept_rarely() {
        let tmp = tempfile::tempdir().unwrap();
        let store = memloop_files::FileMemoryStore::open(tmp.path()).unwrap();
        let files = KeyFiles::lock(&store).await.unwrap();
        // The first put sweeps (none before) and marks it.
        files.put(&record("live", expiry())).unwrap();
        assert!(files.dir.join(SWEPT_MARKER).exists());
        // An expired record no longer counts, and the puts after it, within the sweep period,
        // leave it: a put touches its own record only, however many there are.
        files.put(&record("expired", 1)).unwrap();
        assert!(files.get("local", "expired").is_none());
        for n in 0..20 {
            files.put(&record(&format!("k{n}"), expiry())).unwrap();
        }
        assert_eq!(records(&files.dir), 22);
        assert!(files.file("local", "expired").exists());
        // The sweep period passed: the next put sweeps the expired record, and only it.
        let past = SystemTime::now() - SWEEP_EVERY - Duration::from_secs(1);
        std::fs::File::options()
            .write(true)
            .open(files.dir.join(SWEPT_MARKER))
            .unwrap()
            .set_modified(past)
            .unwrap();
        files.put(&record("after", expiry())).unwrap();
        assert!(!files.file("local", "expired").exists());
        assert_eq!(records(&files.dir), 22);
        assert!(files.get("local", "live").is_some());
        assert!(files.get("local", "k19").is_some());
    }

    /// A victim dir outside the memory dir: a file that must survive and a record that looks
    /// expired (a sweep that followed a link there would delete both).
    #[cfg(unix)]
    fn victim() -> tempfile::TempDir {
        let victim = tempfile::tempdir().unwrap();
        std::fs::write(
            victim.path().join("important.json"),
            "{\"данные\": \"важные\"}",
        )
        .unwrap();
        std::fs::write(
            victim.path().join("old.json"),
            serde_json::to_vec(&record("old", 1)).unwrap(),
        )
        .unwrap();
        victim
    }

    #[cfg(unix)]
    fn untouched(victim: &std::path::Path) {
        let mut names: Vec<_> = std::fs::read_dir(victim)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["important.json", "old.json"]);
        assert_eq!(
            std::fs::read_to_string(victim.join("important.json")).unwrap(),
            "{\"данные\": \"важные\"}"
        );
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn a_key_dir_that_is_a_link_is_refused_and_the_dir_it_points_at_untouched() {
        let tmp = tempfile::tempdir().unwrap();
        let victim = victim();
        let store = memloop_files::FileMemoryStore::open(tmp.path()).unwrap();
        std::os::unix::fs::symlink(victim.path(), tmp.path().join(KEYS_DIR)).unwrap();
        let err = KeyFiles::lock(&store).await.err().unwrap().to_string();
        assert!(
            err.contains("`.memloop-idempotency` in the memory dir is a symbolic link"),
            "{err}"
        );
        assert!(!err.contains(&*tmp.path().to_string_lossy()), "{err}");
        assert!(!err.contains(&*store.root().to_string_lossy()), "{err}");
        untouched(victim.path());
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn a_lock_or_marker_that_is_a_link_is_never_followed() {
        // The lock: refused, its target neither created nor truncated.
        let tmp = tempfile::tempdir().unwrap();
        let victim = victim();
        let store = memloop_files::FileMemoryStore::open(tmp.path()).unwrap();
        std::fs::create_dir(tmp.path().join(KEYS_DIR)).unwrap();
        std::os::unix::fs::symlink(
            victim.path().join("important.json"),
            tmp.path().join(KEYS_DIR).join(LOCK_FILE),
        )
        .unwrap();
        let err = KeyFiles::lock(&store).await.err().unwrap().to_string();
        assert!(
            err.contains("`.memloop-idempotency/.lock` in the memory dir is a symbolic link"),
            "{err}"
        );
        untouched(victim.path());

        // The sweep marker: the save lands, the sweep is deferred, the target is not truncated.
        let tmp = tempfile::tempdir().unwrap();
        let store = memloop_files::FileMemoryStore::open(tmp.path()).unwrap();
        std::fs::create_dir(tmp.path().join(KEYS_DIR)).unwrap();
        std::os::unix::fs::symlink(
            victim.path().join("important.json"),
            tmp.path().join(KEYS_DIR).join(SWEPT_MARKER),
        )
        .unwrap();
        let files = KeyFiles::lock(&store).await.unwrap();
        files.put(&record("expired", 1)).unwrap();
        files.put(&record("live", expiry())).unwrap();
        assert!(files.get("local", "live").is_some());
        untouched(victim.path());
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn the_sweep_deletes_expired_records_only_and_follows_no_link() {
        let tmp = tempfile::tempdir().unwrap();
        let victim = victim();
        let store = memloop_files::FileMemoryStore::open(tmp.path()).unwrap();
        let files = KeyFiles::lock(&store).await.unwrap();
        files.put(&record("expired", 1)).unwrap();
        // Links named like records, to an expired-looking record and to a whole dir.
        std::os::unix::fs::symlink(victim.path().join("old.json"), files.dir.join("a.json"))
            .unwrap();
        std::os::unix::fs::symlink(victim.path(), files.dir.join("b.json")).unwrap();
        // A record that is a link is not read through either.
        let linked = files.file("local", "linked");
        std::fs::write(
            victim.path().join("linked.json"),
            serde_json::to_vec(&record("linked", expiry())).unwrap(),
        )
        .unwrap();
        std::os::unix::fs::symlink(victim.path().join("linked.json"), &linked).unwrap();
        assert!(files.get("local", "linked").is_none());
        std::fs::remove_file(victim.path().join("linked.json")).unwrap();
        // A due sweep.
        let past = SystemTime::now() - SWEEP_EVERY - Duration::from_secs(1);
        std::fs::File::options()
            .write(true)
            .open(files.dir.join(SWEPT_MARKER))
            .unwrap()
            .set_modified(past)
            .unwrap();
        files.put(&record("live", expiry())).unwrap();
        assert!(
            !files.file("local", "expired").exists(),
            "expired record swept"
        );
        assert!(files.get("local", "live").is_some());
        for link in ["a.json", "b.json"] {
            assert!(
                std::fs::symlink_metadata(files.dir.join(link)).is_ok(),
                "{link}: a link is left alone"
            );
        }
        untouched(victim.path());
    }
}
