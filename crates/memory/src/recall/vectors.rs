//! The on-disk vector index behind [`HybridSelector`](super::HybridSelector): one embedding per
//! memory, kept in step with the store the way the BM25 index is, and cached in one file so a
//! new session does not embed everything again.
//!
//! **File format** (little-endian): the magic `MLVEC\x01\n\0`; a `u32` length and a JSON header
//! `{"model_id", "dimension", "count"}`; `count` entries of (`u32` path length, path bytes,
//! `i64` mtime seconds, `u32` mtime nanoseconds, 32-byte SHA-256 of the embedded text,
//! `dimension` × `f32`); and a SHA-256 of everything before it. A file whose checksum, magic or
//! lengths do not add up is torn or foreign: it is discarded with a warning and rebuilt. A file
//! written for another model (a different id or dimension) is rebuilt too.

use crate::changes::{ChangeCursor, Changes};
use crate::file_store::FileMemoryStore;
use crate::memory_store::{LocalPurpose, MemoryStore};
use crate::safety::atomic_write;
use crate::types::MemoryHeader;
use futures::StreamExt;
use memloop_core::embed::{EmbedError, Embedder, dot};
use sha2::{Digest, Sha256};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::time::Instant;

const MAGIC: &[u8; 8] = b"MLVEC\x01\n\0";
/// How many memory files are read at once while syncing.
const READ_CONCURRENCY: usize = 16;
/// At most this much of a memory is embedded (models read a few hundred tokens anyway).
const MAX_EMBED_BYTES: usize = 2_000;

/// Where the vectors of the memory dir `memory_dir` embedded by `model_id` are cached: a
/// `<dir name>.vectors/` directory beside it (never inside: the memory dir holds only
/// memories), one file per model.
pub fn vector_cache_path(memory_dir: &Path, model_id: &str) -> PathBuf {
    FileMemoryStore::vectors_dir_of(memory_dir).join(vector_file_name(model_id))
}

/// Where the vectors of `store` embedded by `model_id` are cached: one file per model in the
/// dir the store gives for [`LocalPurpose::VectorCache`] (beside a memory dir; for a database
/// store, a cache dir keyed by the store's identity). A store that keeps no local cache gets a
/// per-identity dir under the system temp dir, with a warning.
pub fn vector_cache_for(store: &dyn MemoryStore, model_id: &str) -> PathBuf {
    store
        .local_dir_or_temp(LocalPurpose::VectorCache)
        .join(vector_file_name(model_id))
}

fn vector_file_name(model_id: &str) -> String {
    let digest = Sha256::digest(model_id.as_bytes());
    format!("{}.bin", hex(&digest[..8]))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What one sync of the vector index did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VectorSyncReport {
    /// Memories embedded (new, or their text changed).
    pub embedded: usize,
    /// Changed files whose embedded text was unchanged (the vector was kept).
    pub reused: usize,
    /// Vectors dropped because their memory is gone.
    pub removed: usize,
    /// Memories that could not be read (skipped, tried again next time).
    pub failed: usize,
    /// Memories left to embed when the time budget ran out (embedded on a later sync).
    pub pending: usize,
}

#[derive(Debug, Clone)]
struct Entry {
    mtime: SystemTime,
    hash: [u8; 32],
    vector: Vec<f32>,
}

/// The vectors of one store for one model, and the file they are cached in.
#[derive(Debug)]
pub(crate) struct VectorCache {
    path: PathBuf,
    model_id: String,
    dimension: usize,
    entries: HashMap<String, Entry>,
    dirty: bool,
    /// Where the vectors stand in the store's change feed: set only after a sync that left
    /// nothing behind (no memory pending or unreadable), so the next one can apply just the
    /// changes since; `None` means the next sync compares every header.
    cursor: Option<ChangeCursor>,
}

/// The text of a memory that gets embedded (NFKC): its name, its description, and the start of its
/// body (without repeating the description when the body begins with it).
pub(crate) fn embed_text(name: &str, description: &str, body: &str) -> String {
    let body = body.trim();
    let description = description.trim();
    let mut text = name.trim().to_owned();
    if !description.is_empty() && !body.starts_with(description) {
        text.push_str(": ");
        text.push_str(description);
    }
    if !body.is_empty() {
        text.push('\n');
        text.push_str(body);
    }
    // NFKC like the lexical side (case kept: the model decides about case).
    let text = super::analyzer::nfkc(&text);
    memloop_core::text::truncate_utf8(&text, MAX_EMBED_BYTES).to_owned()
}

impl VectorCache {
    /// The cache at `path` for `model_id`/`dimension`: what the file holds when it is intact
    /// and written for this model, otherwise empty (with a warning when the file was unusable).
    pub(crate) fn open(path: PathBuf, model_id: &str, dimension: usize) -> Self {
        let mut cache = Self {
            path,
            model_id: model_id.to_owned(),
            dimension,
            entries: HashMap::new(),
            dirty: false,
            cursor: None,
        };
        match std::fs::read(&cache.path) {
            Ok(bytes) => match decode(&bytes) {
                Ok((id, dim, entries)) if id == model_id && dim == dimension => {
                    cache.entries = entries;
                }
                Ok((id, dim, _)) => {
                    tracing::info!(
                        path = %cache.path.display(), cached = %id, cached_dimension = dim,
                        model = %model_id, "vector cache is for another model; rebuilding"
                    );
                    cache.dirty = true;
                }
                Err(why) => {
                    tracing::warn!(
                        path = %cache.path.display(), %why,
                        "vector cache is corrupt or foreign; discarded and rebuilt"
                    );
                    cache.dirty = true;
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(path = %cache.path.display(), error = %e, "cannot read the vector cache");
            }
        }
        cache
    }

    /// Number of cached vectors.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether every memory in `headers` has a vector for its current mtime.
    pub(crate) fn covers(&self, headers: &[MemoryHeader]) -> bool {
        headers.len() == self.entries.len()
            && headers.iter().all(|h| {
                self.entries
                    .get(&h.rel_path)
                    .is_some_and(|e| e.mtime == h.mtime)
            })
    }

    /// Bring the vectors in line with `headers`: drop the gone, read the new and changed, embed
    /// those whose text changed, in batches, until `deadline` (progress so far is kept and
    /// saved). An embedder error stops the sync and is returned, progress kept.
    async fn sync(
        &mut self,
        store: &dyn MemoryStore,
        embedder: &dyn Embedder,
        headers: &[MemoryHeader],
        deadline: Option<Instant>,
        progress: Option<&(dyn Fn(usize, usize) + Send + Sync)>,
    ) -> Result<VectorSyncReport, EmbedError> {
        self.cursor = None;
        let mut report = VectorSyncReport::default();
        let live: HashSet<&str> = headers.iter().map(|h| h.rel_path.as_str()).collect();
        let before = self.entries.len();
        self.entries.retain(|p, _| live.contains(p.as_str()));
        report.removed = before - self.entries.len();
        self.dirty |= report.removed > 0;

        let stale: Vec<MemoryHeader> = headers
            .iter()
            .filter(|h| self.entries.get(&h.rel_path).map(|e| e.mtime) != Some(h.mtime))
            .cloned()
            .collect();
        self.embed_stale(store, embedder, stale, deadline, progress, report)
            .await
    }

    /// Catch up with the store through its change feed ([`MemoryStore::changes`]): with no
    /// change since the last complete sync this costs one feed call (no header is looked at);
    /// with `k` changes, `k` removals or reads (and embeddings of the texts that changed).
    /// When the store cannot say what changed (the first sync, a feed that lost track) the
    /// vectors are synced against a fresh scan; a store without a feed is synced against
    /// `headers` (every header's mtime compared), as [`sync`](Self::sync) does. `deadline` and
    /// `progress` as for `sync`.
    pub(crate) async fn follow(
        &mut self,
        store: &dyn MemoryStore,
        embedder: &dyn Embedder,
        headers: &[MemoryHeader],
        deadline: Option<Instant>,
        progress: Option<&(dyn Fn(usize, usize) + Send + Sync)>,
    ) -> Result<VectorSyncReport, EmbedError> {
        // Taken, not borrowed: a sync cut short (an error, a time budget, a dropped future)
        // leaves no cursor, and the next call compares everything again.
        let since = self.cursor.take();
        let changes = match store.changes(since.as_ref()).await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "memory change feed failed; comparing every memory");
                Changes::Rescan { cursor: None }
            }
        };
        let (result, cursor) = match (changes, since) {
            (Changes::Unchanged, Some(since)) => {
                self.cursor = Some(since);
                return Ok(VectorSyncReport::default());
            }
            (
                Changes::Changed {
                    cursor,
                    written,
                    removed,
                },
                Some(_),
            ) => {
                let mut report = VectorSyncReport::default();
                for p in &removed {
                    if self.entries.remove(p.as_str()).is_some() {
                        report.removed += 1;
                    }
                }
                self.dirty |= report.removed > 0;
                // Every written memory is read again, even with an unchanged mtime (a second
                // edit within one timestamp tick): its text hash decides whether to embed.
                let result = self
                    .embed_stale(store, embedder, written, deadline, progress, report)
                    .await;
                (result, Some(cursor))
            }
            // The cursor was taken before this scan, so nothing made during it is lost.
            (
                Changes::Rescan {
                    cursor: Some(cursor),
                },
                _,
            ) => match store.scan().await {
                Ok(fresh) => (
                    self.sync(store, embedder, &fresh, deadline, progress).await,
                    Some(cursor),
                ),
                Err(e) => {
                    tracing::warn!(error = %e, "memory scan failed; syncing the caller's headers");
                    (
                        self.sync_if_stale(store, embedder, headers, deadline, progress)
                            .await,
                        None,
                    )
                }
            },
            // No feed (or an answer that does not fit the question): compare every header.
            _ => (
                self.sync_if_stale(store, embedder, headers, deadline, progress)
                    .await,
                None,
            ),
        };
        if result
            .as_ref()
            .is_ok_and(|r| r.pending == 0 && r.failed == 0)
        {
            self.cursor = cursor;
        }
        result
    }

    /// [`sync`](Self::sync) unless every memory in `headers` already has a current vector.
    async fn sync_if_stale(
        &mut self,
        store: &dyn MemoryStore,
        embedder: &dyn Embedder,
        headers: &[MemoryHeader],
        deadline: Option<Instant>,
        progress: Option<&(dyn Fn(usize, usize) + Send + Sync)>,
    ) -> Result<VectorSyncReport, EmbedError> {
        if self.covers(headers) {
            return Ok(VectorSyncReport::default());
        }
        self.sync(store, embedder, headers, deadline, progress)
            .await
    }

    /// Read `stale`, embed those whose text changed (in batches, until `deadline`), save.
    async fn embed_stale(
        &mut self,
        store: &dyn MemoryStore,
        embedder: &dyn Embedder,
        stale: Vec<MemoryHeader>,
        deadline: Option<Instant>,
        progress: Option<&(dyn Fn(usize, usize) + Send + Sync)>,
        mut report: VectorSyncReport,
    ) -> Result<VectorSyncReport, EmbedError> {
        let mut reads = futures::stream::iter(stale)
            .map(|h| async move {
                let read = store.read(&h.rel_path).await;
                (h, read)
            })
            .buffer_unordered(READ_CONCURRENCY);
        let mut todo: Vec<(MemoryHeader, String, [u8; 32])> = Vec::new();
        while let Some((h, read)) = reads.next().await {
            match read {
                Ok(file) => {
                    let text = embed_text(
                        super::keyword::display_name(&h),
                        h.description.as_deref().unwrap_or(""),
                        &file.body,
                    );
                    let hash: [u8; 32] = Sha256::digest(text.as_bytes()).into();
                    match self.entries.get_mut(&h.rel_path) {
                        Some(e) if e.hash == hash => {
                            e.mtime = h.mtime;
                            self.dirty = true;
                            report.reused += 1;
                        }
                        _ => todo.push((h, text, hash)),
                    }
                }
                Err(e) => {
                    tracing::warn!(path = %h.rel_path, error = %e, "cannot embed memory; skipped");
                    self.entries.remove(&h.rel_path);
                    report.failed += 1;
                }
            }
        }
        drop(reads);
        // Deterministic order, so a partial sync always makes the same progress; by length, so a
        // batch holds texts of similar length and a model pads little.
        todo.sort_by(|a, b| (a.1.len(), &a.0.rel_path).cmp(&(b.1.len(), &b.0.rel_path)));
        let batch = embedder.max_batch().max(1);
        let total = todo.len();
        if let Some(progress) = progress {
            progress(0, total);
        }
        let mut result = Ok(());
        let mut chunks = todo.chunks(batch);
        while let Some(chunk) = chunks.next() {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                report.pending = chunk.len() + chunks.by_ref().map(<[_]>::len).sum::<usize>();
                break;
            }
            let texts: Vec<String> = chunk.iter().map(|(_, t, _)| t.clone()).collect();
            let embedder: &dyn Embedder = embedder;
            match embedder.embed_checked(&texts).await {
                Ok(vectors) => {
                    for ((h, _, hash), vector) in chunk.iter().zip(vectors) {
                        self.entries.insert(
                            h.rel_path.clone(),
                            Entry {
                                mtime: h.mtime,
                                hash: *hash,
                                vector,
                            },
                        );
                        report.embedded += 1;
                    }
                    self.dirty = true;
                    if let Some(progress) = progress {
                        progress(report.embedded, total);
                    }
                }
                Err(e) => {
                    report.pending = chunk.len() + chunks.by_ref().map(<[_]>::len).sum::<usize>();
                    result = Err(e);
                    break;
                }
            }
        }
        self.save();
        tracing::debug!(?report, vectors = self.entries.len(), "vector index synced");
        result.map(|()| report)
    }

    /// The `limit` memories most similar to `query` (a normalised vector) that `keep` accepts,
    /// with their cosine similarity, best first (ties by path).
    pub(crate) fn nearest(
        &self,
        query: &[f32],
        limit: usize,
        keep: impl Fn(&str) -> bool,
    ) -> Vec<(String, f32)> {
        let mut scored: Vec<(&String, f32)> = self
            .entries
            .iter()
            .filter(|(p, _)| keep(p))
            .map(|(p, e)| (p, dot(query, &e.vector)))
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        scored.truncate(limit);
        scored.into_iter().map(|(p, s)| (p.clone(), s)).collect()
    }

    /// Write the cache file when something changed (atomically; a failure is logged: the
    /// vectors are recomputed next session).
    fn save(&mut self) {
        if !self.dirty {
            return;
        }
        let bytes = encode(&self.model_id, self.dimension, &self.entries);
        match atomic_write(&self.path, &bytes) {
            Ok(()) => self.dirty = false,
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "cannot save the vector cache")
            }
        }
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Header {
    model_id: String,
    dimension: usize,
    count: usize,
}

fn encode(model_id: &str, dimension: usize, entries: &HashMap<String, Entry>) -> Vec<u8> {
    let mut paths: Vec<&String> = entries.keys().collect();
    paths.sort();
    let header = serde_json::json!({
        "model_id": model_id,
        "dimension": dimension,
        "count": entries.len(),
    })
    .to_string();
    let mut out = Vec::with_capacity(64 + entries.len() * (64 + dimension * 4));
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for p in paths {
        let e = &entries[p];
        out.extend_from_slice(&(p.len() as u32).to_le_bytes());
        out.extend_from_slice(p.as_bytes());
        let since = e.mtime.duration_since(UNIX_EPOCH).unwrap_or_default();
        out.extend_from_slice(&(since.as_secs() as i64).to_le_bytes());
        out.extend_from_slice(&since.subsec_nanos().to_le_bytes());
        out.extend_from_slice(&e.hash);
        for x in &e.vector {
            out.extend_from_slice(&x.to_le_bytes());
        }
    }
    let sum = Sha256::digest(&out);
    out.extend_from_slice(&sum);
    out
}

/// A cursor over the cache bytes; every read is bounds-checked.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| format!("truncated at byte {}", self.at))?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.array()?))
    }
}

type Decoded = (String, usize, HashMap<String, Entry>);

fn decode(bytes: &[u8]) -> Result<Decoded, String> {
    if bytes.len() < MAGIC.len() + 32 || &bytes[..MAGIC.len()] != MAGIC {
        return Err("not a memloop vector cache".to_owned());
    }
    let (body, sum) = bytes.split_at(bytes.len() - 32);
    if Sha256::digest(body).as_slice() != sum {
        return Err("checksum mismatch (torn or edited file)".to_owned());
    }
    let mut r = Reader {
        bytes: body,
        at: MAGIC.len(),
    };
    let header_len = r.u32()? as usize;
    let header: Header =
        serde_json::from_slice(r.take(header_len)?).map_err(|e| format!("bad header: {e}"))?;
    let mut entries = HashMap::with_capacity(header.count.min(1 << 20));
    for _ in 0..header.count {
        let len = r.u32()? as usize;
        let path = std::str::from_utf8(r.take(len)?)
            .map_err(|_| "a path is not UTF-8".to_owned())?
            .to_owned();
        let secs = i64::from_le_bytes(r.array()?);
        let nanos = r.u32()?;
        let mtime = u64::try_from(secs)
            .ok()
            .and_then(|s| UNIX_EPOCH.checked_add(Duration::new(s, nanos.min(999_999_999))))
            .ok_or_else(|| "bad mtime".to_owned())?;
        let hash = r.array::<32>()?;
        let raw = r.take(
            header
                .dimension
                .checked_mul(4)
                .ok_or_else(|| "bad dimension".to_owned())?,
        )?;
        let vector = raw
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        entries.insert(
            path,
            Entry {
                mtime,
                hash,
                vector,
            },
        );
    }
    if r.at != body.len() {
        return Err("trailing bytes after the entries".to_owned());
    }
    Ok((header.model_id, header.dimension, entries))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(v: Vec<f32>) -> Entry {
        Entry {
            mtime: UNIX_EPOCH + Duration::new(1_700_000_000, 42),
            hash: [7; 32],
            vector: v,
        }
    }

    #[test]
    fn encode_decode_round_trip() {
        let mut entries = HashMap::new();
        entries.insert("a.md".to_owned(), entry(vec![1.0, 0.0]));
        entries.insert("dir/é.md".to_owned(), entry(vec![0.6, 0.8]));
        let bytes = encode("m", 2, &entries);
        let (id, dim, back) = decode(&bytes).unwrap();
        assert_eq!((id.as_str(), dim), ("m", 2));
        assert_eq!(back.len(), 2);
        assert_eq!(back["dir/é.md"].vector, vec![0.6, 0.8]);
        assert_eq!(back["a.md"].mtime, entries["a.md"].mtime);
    }

    #[test]
    fn every_truncation_and_every_flipped_byte_is_rejected() {
        let mut entries = HashMap::new();
        entries.insert("a.md".to_owned(), entry(vec![1.0, 0.0, 0.5]));
        let bytes = encode("model", 3, &entries);
        for n in 0..bytes.len() {
            assert!(decode(&bytes[..n]).is_err(), "truncated to {n}");
        }
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x40;
            assert!(decode(&b).is_err(), "flipped byte {i}");
        }
    }

    #[test]
    fn cache_path_is_beside_the_memory_dir_and_per_model() {
        let dir = Path::new("/home/u/.claude/projects/x/memory");
        let a = vector_cache_path(dir, "model-a");
        let b = vector_cache_path(dir, "model-b");
        assert!(a.starts_with("/home/u/.claude/projects/x/memory.vectors"));
        assert_ne!(a, b);
        assert!(!a.starts_with(dir));
    }

    #[test]
    fn embed_text_does_not_repeat_the_description() {
        assert_eq!(
            embed_text(
                "nurse",
                "Melanie is a nurse",
                "Melanie is a nurse.\n\nSaid on May 1."
            ),
            "nurse\nMelanie is a nurse.\n\nSaid on May 1."
        );
        assert_eq!(
            embed_text("n", "the description", "body"),
            "n: the description\nbody"
        );
    }
}
