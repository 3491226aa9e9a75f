//! The on-disk vector index behind [`HybridSelector`](super::HybridSelector): the embeddings of
//! every memory (its whole text, and each passage of a long one), kept in step with the store
//! the way the BM25 postings are, and cached in one file so a new session does not embed everything
//! again.
//!
//! **File format 2** (little-endian): the magic `MLVEC\x02\n\0`; a `u32` length and a JSON
//! header `{"model_id", "dimension", "count"}`; `count` entries of (`u32` path length, path
//! bytes, `i64` mtime seconds, `u32` mtime nanoseconds, 32-byte SHA-256 of the embedded texts,
//! `u32` vector count ≥ 1, that many × `dimension` × `f32`); and a SHA-256 of everything before
//! it. Format 1 (magic `MLVEC\x01\n\0`, one vector per entry and no count) is still read, so a
//! cache written before passages existed keeps the vectors of every short memory. A file whose
//! checksum, magic or lengths do not add up is torn or foreign: it is discarded with a warning
//! and rebuilt. A file written for another model (a different id or dimension) is rebuilt too.

use super::lift::BestTwo;
use memloop_core::embed::{EmbedError, Embedder, dot};
use memloop_files::FileMemoryStore;
use memloop_files::atomic_write;
use memloop_store::MemoryHeader;
use memloop_store::{LocalPurpose, MemoryStore};
use memloop_store::{ScanCache, Since};
use sha2::{Digest, Sha256};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::time::Instant;

const MAGIC: &[u8; 8] = b"MLVEC\x02\n\0";
/// Format 1: one vector per entry, no count.
const MAGIC_V1: &[u8; 8] = b"MLVEC\x01\n\0";
/// How many memory files are read at once while syncing (one `ScanCache::read_many`).
const READ_BATCH: usize = 256;
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
    /// The whole text's vector first, then one per passage (none for a short memory).
    vectors: Vec<Vec<f32>>,
}

impl Entry {
    /// The memory's similarity to `query`: that of its whole text or of its best passage,
    /// whichever is higher. A question about one fact of a long memory matches the passage
    /// stating it better than the average of everything the memory says.
    fn similarity(&self, query: &[f32]) -> f32 {
        self.vectors
            .iter()
            .map(|v| dot(query, v))
            .fold(f32::NEG_INFINITY, f32::max)
    }
}

/// The vectors of one store for one model, and the file they are cached in.
#[derive(Debug)]
pub(crate) struct VectorCache {
    path: PathBuf,
    model_id: String,
    dimension: usize,
    entries: HashMap<String, Entry>,
    dirty: bool,
    /// Whether long memories get a vector per passage (see [`embed_texts`]).
    passages: bool,
    /// Where the vectors stand in the store's change feed: set only after a sync that left
    /// nothing behind (no memory pending or unreadable), so the next one can apply just the
    /// changes since; `None` means the next sync compares every header.
    seen: Option<u64>,
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
    let text = memloop_text::nfkc(&text);
    memloop_text::truncate_utf8(&text, MAX_EMBED_BYTES).to_owned()
}

/// The hash a memory's vectors are kept under: of its one text (as caches of format 1 hold
/// it), or of every text, each after its length.
fn texts_hash(texts: &[String]) -> [u8; 32] {
    match texts {
        [one] => Sha256::digest(one.as_bytes()).into(),
        _ => {
            let mut digest = Sha256::new();
            for t in texts {
                digest.update((t.len() as u64).to_le_bytes());
                digest.update(t.as_bytes());
            }
            digest.finalize().into()
        }
    }
}

/// A passage holds whole sentences up to this many bytes (a sentence longer than this is a
/// passage of its own): one English sentence, or about fifty Han characters. On LoCoMo
/// (conversations 1–5) 150 bytes beat 300, and single sentences were no better for a third
/// more embedding work.
const PASSAGE_BYTES: usize = 150;

/// Every text embedded for a memory: the whole (see [`embed_text`]) and, when its body holds more
/// than one passage, each passage (consecutive whole sentences, UAX #29, up to
/// [`PASSAGE_BYTES`]) after the memory's name.
pub(crate) fn embed_texts(
    name: &str,
    description: &str,
    body: &str,
    passages: bool,
) -> Vec<String> {
    let whole = embed_text(name, description, body);
    let mut out = vec![whole];
    if !passages {
        return out;
    }
    let body = memloop_text::nfkc(body.trim());
    let body = memloop_text::truncate_utf8(&body, MAX_EMBED_BYTES);
    let mut passages: Vec<String> = Vec::new();
    let mut current = String::new();
    for sentence in unicode_segmentation::UnicodeSegmentation::unicode_sentences(body) {
        let sentence = sentence.trim();
        if sentence.is_empty() {
            continue;
        }
        if !current.is_empty() && current.len() + 1 + sentence.len() > PASSAGE_BYTES {
            passages.push(std::mem::take(&mut current));
        }
        if !current.is_empty() {
            current.push(' ');
        }
        current.push_str(sentence);
    }
    if !current.is_empty() {
        passages.push(current);
    }
    if passages.len() > 1 {
        let name = memloop_text::nfkc(name.trim());
        out.extend(passages.into_iter().map(|p| format!("{name}\n{p}")));
    }
    out
}

impl VectorCache {
    /// An estimate of the memory the vectors hold, in bytes, counted as the allocator holds
    /// them ([`memloop_store::heap`]): each memory's vectors (4 bytes a dimension), its entry
    /// and path, the table.
    pub(crate) fn approx_bytes(&self) -> usize {
        use memloop_store::heap::{block, map, string, vec};
        let own = string(&self.model_id) + block(self.path.capacity());
        own + map(&self.entries)
            + self
                .entries
                .iter()
                .map(|(path, e)| {
                    string(path) + vec(&e.vectors) + e.vectors.iter().map(vec).sum::<usize>()
                })
                .sum::<usize>()
    }

    /// The cache at `path` for `model_id`/`dimension`: what the file holds when it is intact
    /// and written for this model, otherwise empty (with a warning when the file was unusable).
    /// `passages`: embed each passage of a long memory as well as its whole text.
    pub(crate) fn open(path: PathBuf, model_id: &str, dimension: usize, passages: bool) -> Self {
        let mut cache = Self {
            path,
            model_id: model_id.to_owned(),
            dimension,
            entries: HashMap::new(),
            dirty: false,
            passages,
            seen: None,
        };
        match read_cache_file(&cache.path) {
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
        cache: &ScanCache,
        embedder: &dyn Embedder,
        headers: &[MemoryHeader],
        deadline: Option<Instant>,
        progress: Option<&(dyn Fn(usize, usize) + Send + Sync)>,
    ) -> Result<VectorSyncReport, EmbedError> {
        self.seen = None;
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
        self.embed_stale(cache, embedder, stale, deadline, progress, report)
            .await
    }

    /// Catch up with the store through the header cache it shares with the BM25 postings and the
    /// recall hook ([`ScanCache::follow`]): with no change since the last complete sync this
    /// costs no store call when the caller refreshed the cache this turn (no header is looked
    /// at); with `k` changes, `k` removals or reads (read once for every index, and embeddings
    /// of the texts that changed). When the cache cannot say what changed (its first scan, a
    /// rescan) every header's mtime is compared; when the store fails, `offered` is. `deadline`
    /// and `progress` as for `sync`.
    pub(crate) async fn follow(
        &mut self,
        cache: &ScanCache,
        embedder: &dyn Embedder,
        offered: &[MemoryHeader],
        deadline: Option<Instant>,
        progress: Option<&(dyn Fn(usize, usize) + Send + Sync)>,
    ) -> Result<VectorSyncReport, EmbedError> {
        // Taken, not borrowed: a sync cut short (an error, a time budget, a dropped future)
        // leaves no version, and the next call compares every header again.
        let seen = self.seen.take();
        let followed = match cache.follow(seen, offered).await {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(error = %e, "memory change feed failed; comparing every memory");
                return self
                    .sync_if_stale(cache, embedder, offered, deadline, progress)
                    .await;
            }
        };
        let version = followed.headers.version();
        let result = match followed.since {
            Since::Current => Ok(VectorSyncReport::default()),
            Since::Changed { written, removed } => {
                let mut report = VectorSyncReport::default();
                for p in &removed {
                    if self.entries.remove(p.as_str()).is_some() {
                        report.removed += 1;
                    }
                }
                self.dirty |= report.removed > 0;
                // Every written memory is read again, even with an unchanged mtime (a second
                // edit within one timestamp tick): its text hash decides whether to embed.
                self.embed_stale(cache, embedder, written, deadline, progress, report)
                    .await
            }
            Since::Rescan => {
                self.sync(cache, embedder, &followed.headers, deadline, progress)
                    .await
            }
        };
        if result
            .as_ref()
            .is_ok_and(|r| r.pending == 0 && r.failed == 0)
        {
            self.seen = Some(version);
        }
        result
    }

    /// [`sync`](Self::sync) unless every memory in `headers` already has a current vector.
    async fn sync_if_stale(
        &mut self,
        cache: &ScanCache,
        embedder: &dyn Embedder,
        headers: &[MemoryHeader],
        deadline: Option<Instant>,
        progress: Option<&(dyn Fn(usize, usize) + Send + Sync)>,
    ) -> Result<VectorSyncReport, EmbedError> {
        if self.covers(headers) {
            return Ok(VectorSyncReport::default());
        }
        self.sync(cache, embedder, headers, deadline, progress)
            .await
    }

    /// Read `stale`, embed those whose text changed (in batches, until `deadline`), save.
    async fn embed_stale(
        &mut self,
        cache: &ScanCache,
        embedder: &dyn Embedder,
        stale: Vec<MemoryHeader>,
        deadline: Option<Instant>,
        progress: Option<&(dyn Fn(usize, usize) + Send + Sync)>,
        mut report: VectorSyncReport,
    ) -> Result<VectorSyncReport, EmbedError> {
        let mut todo: Vec<(MemoryHeader, Vec<String>, [u8; 32])> = Vec::new();
        for batch in stale.chunks(READ_BATCH) {
            let reads = cache.read_many(batch).await;
            for (h, read) in batch.iter().zip(reads) {
                match read {
                    Ok(file) => {
                        let texts = embed_texts(
                            super::keyword::display_name(h),
                            h.description.as_deref().unwrap_or(""),
                            &file.body,
                            self.passages,
                        );
                        let hash = texts_hash(&texts);
                        match self.entries.get_mut(&h.rel_path) {
                            Some(e) if e.hash == hash => {
                                e.mtime = h.mtime;
                                self.dirty = true;
                                report.reused += 1;
                            }
                            _ => todo.push((h.clone(), texts, hash)),
                        }
                    }
                    Err(e) => {
                        tracing::warn!(path = %h.rel_path, error = %e, "cannot embed memory; skipped");
                        self.entries.remove(&h.rel_path);
                        report.failed += 1;
                    }
                }
            }
        }
        // Deterministic order, so a partial sync always makes the same progress; by length, so a
        // batch holds texts of similar length and a model pads little.
        let whole_len = |texts: &[String]| texts.first().map_or(0, String::len);
        todo.sort_by(|a, b| {
            (whole_len(&a.1), &a.0.rel_path).cmp(&(whole_len(&b.1), &b.0.rel_path))
        });
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
            let texts: Vec<String> = chunk.iter().flat_map(|(_, t, _)| t.clone()).collect();
            let embedder: &dyn Embedder = embedder;
            match embedder.embed_checked(&texts).await {
                Ok(vectors) => {
                    let mut vectors = vectors.into_iter();
                    for (h, texts, hash) in chunk {
                        self.entries.insert(
                            h.rel_path.clone(),
                            Entry {
                                mtime: h.mtime,
                                hash: *hash,
                                vectors: vectors.by_ref().take(texts.len()).collect(),
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
        min_similarity: f32,
        dir_weight: f32,
        keep: impl Fn(&str) -> bool,
    ) -> Vec<(String, f32)> {
        let lift = dir_weight > 0.0;
        // Every memory's similarity, those below the floor dropped (without a lift, only
        // those the caller takes are scored).
        let similar: Vec<(&String, f32)> = self
            .entries
            .iter()
            .filter(|(p, _)| lift || keep(p))
            .map(|(p, e)| (p, e.similarity(query)))
            .filter(|(_, s)| *s >= min_similarity)
            .collect();
        let mut scored: Vec<(&String, f32)> = if lift {
            // The best and second-best similarity in each directory (memories the caller
            // will not take lift their siblings too: a session's summary lifts its notes).
            let mut best: HashMap<&str, BestTwo> = HashMap::new();
            for (p, s) in &similar {
                if let Some((dir, _)) = p.rsplit_once('/') {
                    best.entry(dir).or_default().offer(*s);
                }
            }
            similar
                .into_iter()
                .filter(|(p, _)| keep(p))
                .map(|(p, s)| {
                    let sibling = p
                        .rsplit_once('/')
                        .and_then(|(dir, _)| best.get(dir))
                        .map_or(0.0, |two| two.sibling_of(s));
                    (p, s + dir_weight * sibling)
                })
                .collect()
        } else {
            similar
        };
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
        // The cache's dir is memloop's own: created, or taken only when it is a real dir (a
        // link planted there would lead the write elsewhere).
        if let Some((parent, name)) = split(&self.path).and_then(|(dir, _)| split(dir)) {
            if let Err(e) = memloop_files::internal_dir(parent, name) {
                tracing::warn!(path = %self.path.display(), error = %e, "cannot save the vector cache");
                return;
            }
        }
        match atomic_write(&self.path, &bytes) {
            Ok(()) => self.dirty = false,
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "cannot save the vector cache")
            }
        }
    }
}

/// `path`'s dir and file name, when it has both (as UTF-8).
fn split(path: &Path) -> Option<(&Path, &str)> {
    Some((path.parent()?, path.file_name()?.to_str()?))
}

/// The cache file at `path`, read without following a link, neither the file nor its dir (both
/// are memloop's own, beside the memory dir, where anyone who can write there could plant one).
fn read_cache_file(path: &Path) -> std::io::Result<Vec<u8>> {
    let invalid = |why: &str| std::io::Error::new(std::io::ErrorKind::InvalidInput, why.to_owned());
    let (dir, name) = split(path).ok_or_else(|| invalid("the cache path has no file name"))?;
    let (base, dir_name) = split(dir).ok_or_else(|| invalid("the cache dir has no name"))?;
    let dir = memloop_files::existing_internal_dir(base, dir_name)?.ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::NotFound, "no vector cache dir yet")
    })?;
    memloop_files::read_internal_file(&dir, name)
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
        out.extend_from_slice(&(e.vectors.len() as u32).to_le_bytes());
        for x in e.vectors.iter().flatten() {
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
    if bytes.len() < MAGIC.len() + 32 {
        return Err("not a memloop vector cache".to_owned());
    }
    let v1 = match &bytes[..MAGIC.len()] {
        m if m == MAGIC => false,
        m if m == MAGIC_V1 => true,
        _ => return Err("not a memloop vector cache".to_owned()),
    };
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
        let count = if v1 { 1 } else { r.u32()? as usize };
        if count == 0 {
            return Err("an entry without a vector".to_owned());
        }
        let raw = r.take(
            header
                .dimension
                .checked_mul(4)
                .and_then(|n| n.checked_mul(count))
                .ok_or_else(|| "bad dimension".to_owned())?,
        )?;
        let vectors = raw
            .chunks_exact(header.dimension.max(1) * 4)
            .map(|v| {
                v.chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect()
            })
            .collect();
        entries.insert(
            path,
            Entry {
                mtime,
                hash,
                vectors,
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
            vectors: vec![v],
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
        assert_eq!(back["dir/é.md"].vectors, vec![vec![0.6, 0.8]]);
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

    #[cfg(unix)]
    #[test]
    fn a_cache_dir_or_file_that_is_a_link_is_neither_read_nor_written_through() {
        let tmp = tempfile::tempdir().unwrap();
        let mut entries = HashMap::new();
        entries.insert("知识/部署.md".to_owned(), entry(vec![1.0, 0.0]));
        let valid = encode("m", 2, &entries);
        // A dir elsewhere holding a valid cache, and the cache's dir planted as a link to it.
        let victim = tmp.path().join("victim");
        std::fs::create_dir_all(&victim).unwrap();
        std::fs::write(victim.join("m.bin"), &valid).unwrap();
        std::os::unix::fs::symlink(&victim, tmp.path().join("memory.vectors")).unwrap();
        let path = tmp.path().join("memory.vectors").join("m.bin");
        let mut cache = VectorCache::open(path, "m", 2, true);
        assert_eq!(cache.len(), 0, "read through a linked dir");
        cache
            .entries
            .insert("записка.md".to_owned(), entry(vec![0.0, 1.0]));
        cache.dirty = true;
        cache.save();
        assert_eq!(
            std::fs::read(victim.join("m.bin")).unwrap(),
            valid,
            "written through a link"
        );
        assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 1);
        // A real dir whose cache file is a link to a valid cache elsewhere: not read, and the
        // next save replaces the link, not its target.
        let real = tmp.path().join("other.vectors");
        std::fs::create_dir_all(&real).unwrap();
        std::os::unix::fs::symlink(victim.join("m.bin"), real.join("m.bin")).unwrap();
        let mut cache = VectorCache::open(real.join("m.bin"), "m", 2, true);
        assert_eq!(cache.len(), 0, "read through a linked file");
        cache
            .entries
            .insert("a.md".to_owned(), entry(vec![0.6, 0.8]));
        cache.dirty = true;
        cache.save();
        assert_eq!(std::fs::read(victim.join("m.bin")).unwrap(), valid);
        assert!(
            !std::fs::symlink_metadata(real.join("m.bin"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(VectorCache::open(real.join("m.bin"), "m", 2, true).len(), 1);
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

    fn cache_of(entries: &[(&str, Vec<Vec<f32>>)]) -> VectorCache {
        let mut cache = VectorCache::open(PathBuf::from("/nonexistent/v.bin"), "m", 2, true);
        for (p, vectors) in entries {
            cache.entries.insert(
                (*p).to_owned(),
                Entry {
                    vectors: vectors.clone(),
                    ..entry(vec![])
                },
            );
        }
        cache
    }

    fn paths(ranked: &[(String, f32)]) -> Vec<&str> {
        ranked.iter().map(|(p, _)| p.as_str()).collect()
    }

    #[test]
    fn a_memory_scores_its_best_vector() {
        let cache = cache_of(&[
            (
                "long.md",
                vec![vec![0.6, 0.8], vec![0.0, 1.0], vec![1.0, 0.0]],
            ),
            ("short.md", vec![vec![0.8, 0.6]]),
        ]);
        let ranked = cache.nearest(&[1.0, 0.0], 10, -1.0, 0.0, |_| true);
        assert_eq!(paths(&ranked), ["long.md", "short.md"]);
        assert!((ranked[0].1 - 1.0).abs() < 1e-6, "{ranked:?}");
    }

    #[test]
    fn the_directory_lift_adds_the_best_siblings_similarity() {
        let cache = cache_of(&[
            ("s1/summary.md", vec![vec![1.0, 0.0]]),
            ("s1/a.md", vec![vec![0.6, 0.8]]),
            ("s1/b.md", vec![vec![0.25, 0.968]]),
            ("s2/c.md", vec![vec![0.8, 0.6]]),
            ("top.md", vec![vec![0.7, 0.714]]),
            ("other.md", vec![vec![0.99, 0.141]]),
        ]);
        // The summary and a top-level memory are not to be returned, but the summary lifts.
        let keep = |p: &str| p != "s1/summary.md" && p != "other.md";
        let plain = cache.nearest(&[1.0, 0.0], 10, -1.0, 0.0, keep);
        assert_eq!(paths(&plain), ["s2/c.md", "top.md", "s1/a.md", "s1/b.md"]);
        let lifted = cache.nearest(&[1.0, 0.0], 10, -1.0, 0.5, keep);
        // a: 0.6 + 0.5·1.0; b: 0.25 + 0.5·1.0; c has no sibling; the top level is never lifted
        // (other.md, at the top, lifts nothing either).
        assert_eq!(paths(&lifted), ["s1/a.md", "s2/c.md", "s1/b.md", "top.md"]);
        assert!((lifted[0].1 - 1.1).abs() < 1e-5, "{lifted:?}");
        // Below the floor: not ranked, and lifts nothing.
        let floored = cache.nearest(&[1.0, 0.0], 10, 0.65, 0.5, keep);
        assert_eq!(paths(&floored), ["s2/c.md", "top.md"]);
        let floored = cache.nearest(&[0.0, 1.0], 10, 0.5, 0.5, |_| true);
        assert_eq!(
            paths(&floored),
            ["s1/b.md", "s1/a.md", "top.md", "s2/c.md"],
            "{floored:?}"
        );
        // a (0.8) is lifted by b (0.968), b by a; the summary (0.0) is below the floor.
        assert!((floored[0].1 - (0.968 + 0.4)).abs() < 1e-5, "{floored:?}");
    }

    #[test]
    fn tied_best_siblings_lift_each_other() {
        let cache = cache_of(&[
            ("d/a.md", vec![vec![1.0, 0.0]]),
            ("d/b.md", vec![vec![1.0, 0.0]]),
            ("d/c.md", vec![vec![0.0, 1.0]]),
        ]);
        let lifted = cache.nearest(&[1.0, 0.0], 10, -1.0, 0.5, |_| true);
        assert!((lifted[0].1 - 1.5).abs() < 1e-6 && (lifted[1].1 - 1.5).abs() < 1e-6);
        assert!((lifted[2].1 - 0.5).abs() < 1e-6, "{lifted:?}");
    }

    #[test]
    fn several_vectors_round_trip_and_format_1_is_still_read() {
        let mut entries = HashMap::new();
        entries.insert("a.md".to_owned(), entry(vec![1.0, 0.0]));
        entries.insert(
            "d/长.md".to_owned(),
            Entry {
                vectors: vec![vec![0.6, 0.8], vec![0.0, 1.0]],
                ..entry(vec![])
            },
        );
        let (_, _, back) = decode(&encode("m", 2, &entries)).unwrap();
        assert_eq!(
            back["d/长.md"].vectors,
            vec![vec![0.6, 0.8], vec![0.0, 1.0]]
        );
        assert_eq!(back["a.md"].vectors, vec![vec![1.0, 0.0]]);

        // Format 1: the same layout without the vector count.
        let one: HashMap<String, Entry> =
            entries.into_iter().filter(|(p, _)| p == "a.md").collect();
        let two = encode("m", 2, &one);
        let body = &two[..two.len() - 32];
        let count_at = body.len() - 2 * 4 - 4;
        let mut v1 = [
            &MAGIC_V1[..],
            &body[MAGIC.len()..count_at],
            &body[count_at + 4..],
        ]
        .concat();
        let sum = Sha256::digest(&v1);
        v1.extend_from_slice(&sum);
        let (_, _, back) = decode(&v1).unwrap();
        assert_eq!(back["a.md"].vectors, vec![vec![1.0, 0.0]]);
        assert_eq!(back["a.md"].hash, one["a.md"].hash);

        // An entry claiming no vector, or more vectors than the file holds, is refused (with a
        // valid checksum, so the count itself is what is checked).
        for count in [0u32, 2, u32::MAX] {
            let mut bad = body[..count_at].to_vec();
            bad.extend_from_slice(&count.to_le_bytes());
            bad.extend_from_slice(&body[count_at + 4..]);
            let sum = Sha256::digest(&bad);
            bad.extend_from_slice(&sum);
            assert!(decode(&bad).is_err(), "count {count}");
        }
    }

    /// The passages of `body` (without the name line each carries).
    fn passages_of(body: &str) -> Vec<String> {
        let texts = embed_texts("名前", "", body, true);
        assert_eq!(texts[0], embed_text("名前", "", body));
        texts[1..]
            .iter()
            .map(|t| {
                t.strip_prefix("名前\n")
                    .unwrap_or_else(|| panic!("no name line: {t:?}"))
                    .to_owned()
            })
            .collect()
    }

    #[test]
    fn long_bodies_split_into_passages_of_whole_sentences_in_every_script() {
        let chinese = "我在医院当护士，已经工作了整整七年，每天的夜班都让人非常疲惫。".repeat(2)
            + "周末我和朋友一起去公园散步，然后在河边的小餐馆吃一顿丰盛的晚饭。"
            + "最近我开始跟一位老师学习古典吉他，每天晚上都会练习一个小时左右。"
            + "我们家的小狗叫豆豆，它特别喜欢在院子里追着蝴蝶跑来跑去。";
        let japanese = "私は病院で看護師として働いていて、毎晩とても忙しいです。".repeat(3)
            + "最近ギターを習い始めて、毎晩一時間ぐらい練習しています。"
            + "週末には家族と一緒に近くの公園へ散歩に出かけるのが楽しみです。";
        let russian = "Мелани работает медсестрой в городской больнице уже семь лет. ".repeat(3)
            + "По выходным она учится играть на гитаре у старого преподавателя. "
            + "Её собака по кличке Макс любит гоняться за бабочками в саду.";
        let korean = "멜라니는 시립 병원에서 칠 년째 간호사로 일하고 있습니다. ".repeat(3)
            + "주말마다 그녀는 오래된 선생님에게 기타를 배우고 있습니다. "
            + "그녀의 개 맥스는 정원에서 나비를 쫓아다니는 것을 좋아합니다.";
        for (body, needle) in [
            (chinese.as_str(), "吉他"),
            (japanese.as_str(), "ギター"),
            (russian.as_str(), "гитаре"),
            (korean.as_str(), "기타를"),
        ] {
            let passages = passages_of(body);
            assert!(passages.len() > 1, "{passages:?}");
            for p in &passages {
                assert!(p.len() <= PASSAGE_BYTES, "{} bytes: {p}", p.len());
                let end = p.chars().last().unwrap();
                assert!(".。".contains(end), "a passage ends mid-sentence: {p}");
            }
            // Every sentence is in exactly one passage, in order.
            let joined: String = passages.concat();
            let plain: String = memloop_text::nfkc(body)
                .chars()
                .filter(|c| !c.is_whitespace())
                .collect();
            assert_eq!(
                joined
                    .chars()
                    .filter(|c| !c.is_whitespace())
                    .collect::<String>(),
                plain
            );
            assert_eq!(passages.iter().filter(|p| p.contains(needle)).count(), 1);
        }
    }

    #[test]
    fn short_memories_and_disabled_passages_get_one_text() {
        assert_eq!(
            embed_texts("n", "", "Одно короткое предложение. И ещё одно.", true).len(),
            1
        );
        let long = "这是一个很长的句子，用来测试。".repeat(40);
        assert!(embed_texts("n", "", &long, true).len() > 1);
        assert_eq!(
            embed_texts("n", "", &long, false),
            vec![embed_text("n", "", &long)]
        );
        // A single sentence longer than a passage is one passage (not cut mid-sentence), and
        // a body of one passage adds nothing to the whole text.
        let one = "あ".repeat(400) + "。";
        assert_eq!(embed_texts("n", "", &one, true).len(), 1);
        assert_eq!(embed_texts("n", "", "", true).len(), 1);
    }
}
