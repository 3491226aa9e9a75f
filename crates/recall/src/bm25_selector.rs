//! [`Bm25Selector`]: the [`Bm25Postings`] kept in step with a [`MemoryStore`].

use super::bm25::{Analysed, Bm25Params, Bm25Postings, IndexText};
use super::keyword::display_name;
use super::selector::{SelectionContext, Selector, SelectorError};
use async_trait::async_trait;
use memloop_store::{MemoryFile, MemoryHeader, MemoryStore, ScanCache, Since};
use std::collections::HashSet;
use std::sync::Arc;
use tokio::sync::Mutex;

/// What one [`Bm25Selector::sync`] changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// Memories indexed for the first time.
    pub added: usize,
    /// Memories re-read because their mtime changed.
    pub updated: usize,
    /// Memories dropped because they are gone.
    pub removed: usize,
    /// Memories that could not be read (skipped, tried again next time).
    pub failed: usize,
}

/// BM25F over name, description and body of ALL memories (not only the newest 200).
///
/// The index follows the store through a [`ScanCache`], the one follower of the store's change
/// feed ([`MemoryStore::changes`]) that the recall hook and the vector cache of the same store
/// share: each selection takes what changed since the last one and reads only those memories
/// (read once for every index that takes them in), so a turn with no change costs no store call
/// when the caller refreshed the cache (the recall hook does), and one feed call otherwise. When
/// the cache cannot say what changed (its first scan, a rescan) the index is diffed against
/// every header by path and mtime.
pub struct Bm25Selector {
    cache: Arc<ScanCache>,
    index: Mutex<Synced>,
}

/// The index and the cache version it has caught up with.
#[derive(Debug, Default)]
struct Synced {
    index: Bm25Postings,
    /// The [`ScanCache`] version the index reflects (`None`: compare every header next time).
    seen: Option<u64>,
    /// Memories the cache reported that could not be read: tried again on the next selection.
    retry: Vec<MemoryHeader>,
}

impl Synced {
    /// Catch up with the cache; `offered` (the caller's headers) spares the store a feed call
    /// when it is the cache's current list, and is indexed as is when the store fails.
    async fn follow(&mut self, cache: &ScanCache, offered: &[MemoryHeader]) -> SyncReport {
        let followed = match cache.follow(self.seen, offered).await {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(error = %e, "memory change feed failed; indexing the caller's headers");
                self.seen = None;
                return sync_index(&mut self.index, cache, offered).await.0;
            }
        };
        let version = followed.headers.version();
        let (report, failed) = match followed.since {
            Since::Current if self.retry.is_empty() => return SyncReport::default(),
            Since::Current => {
                let retry = std::mem::take(&mut self.retry);
                let mut report = SyncReport::default();
                let failed = read_into(&mut self.index, cache, retry, &mut report).await;
                (report, failed)
            }
            Since::Changed { written, removed } => {
                let mut report = SyncReport::default();
                for p in &removed {
                    if self.index.mtime(p).is_some() {
                        self.index.remove(p);
                        report.removed += 1;
                    }
                }
                let mut stale = std::mem::take(&mut self.retry);
                stale.retain(|h| {
                    !removed.contains(&h.rel_path)
                        && !written.iter().any(|w| w.rel_path == h.rel_path)
                });
                stale.extend(written);
                let failed = read_into(&mut self.index, cache, stale, &mut report).await;
                (report, failed)
            }
            Since::Rescan => {
                self.retry.clear();
                sync_index(&mut self.index, cache, &followed.headers).await
            }
        };
        // A memory that could not be read is retried on the next selection.
        self.retry = failed;
        self.seen = Some(version);
        if report != SyncReport::default() {
            tracing::debug!(?report, "bm25 postings followed the store");
        }
        report
    }
}

impl std::fmt::Debug for Bm25Selector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bm25Selector")
            .field("store", &self.cache.store().describe().to_string())
            .finish_non_exhaustive()
    }
}

impl Bm25Selector {
    /// A selector over `store` with the default (LoCoMo-tuned) parameters.
    pub fn new(store: Arc<dyn MemoryStore>) -> Self {
        Self::with_params(store, Bm25Params::default())
    }

    /// A selector with explicit parameters.
    pub fn with_params(store: Arc<dyn MemoryStore>, params: Bm25Params) -> Self {
        Self::following(Arc::new(ScanCache::new(store)), params)
    }

    /// A selector that follows the store through `cache`, shared with whatever else follows the
    /// same store (the recall hook takes it from [`Selector::header_cache`]).
    pub fn following(cache: Arc<ScanCache>, params: Bm25Params) -> Self {
        Self {
            cache,
            index: Mutex::new(Synced {
                index: Bm25Postings::new(params),
                ..Synced::default()
            }),
        }
    }

    /// Bring the index in line with `headers` (the store's scan): re-read changed files, drop
    /// removed ones. The next selection then compares every header again before following the
    /// cache's changes.
    pub async fn sync(&self, headers: &[MemoryHeader]) -> SyncReport {
        let mut synced = self.index.lock().await;
        synced.seen = None;
        sync_index(&mut synced.index, &self.cache, headers).await.0
    }

    /// The header cache the index follows the store through.
    pub(crate) fn cache(&self) -> &Arc<ScanCache> {
        &self.cache
    }

    /// An estimate of the memory its postings hold, in bytes
    /// (`Bm25Postings::approx_bytes`); `None` while a selection holds them (the estimate
    /// never waits). The header cache it follows is estimated apart
    /// ([`ScanCache::approx_bytes`]).
    pub fn approx_bytes(&self) -> Option<usize> {
        let synced = self.index.try_lock().ok()?;
        use memloop_store::heap::{arc, header, vec};
        let retry = vec(&synced.retry) + synced.retry.iter().map(header).sum::<usize>();
        Some(arc::<Self>() + synced.index.approx_bytes() + retry)
    }

    /// Number of indexed memories.
    pub async fn indexed(&self) -> usize {
        self.index.lock().await.index.len()
    }

    /// Catch up with the store (through the header cache; `headers` when the store fails),
    /// then the best `limit` memories for `query` that `keep` accepts, with their BM25F scores,
    /// best first (what [`Selector::select`] returns, plus the scores).
    pub async fn scored(
        &self,
        query: &str,
        headers: &[MemoryHeader],
        limit: usize,
        keep: impl Fn(&str) -> bool + Send,
    ) -> Vec<(String, f32)> {
        let mut synced = self.index.lock().await;
        synced.follow(&self.cache, headers).await;
        synced.index.search(query, limit, keep)
    }
}

impl Bm25Selector {
    /// The share of `query`'s distinct terms (analysed in the memories' language that matches
    /// best) that at least one indexed memory contains, in [0, 1]; 1 for a query with no terms.
    /// Near 1 for a question in the memories' language, near 0 for one in another language.
    pub async fn coverage(&self, query: &str) -> f32 {
        self.index.lock().await.index.coverage(query)
    }
}

/// Diff the index against `headers` by path and mtime: drop the gone, read the new and changed.
/// Returns the report and the memories that could not be read.
async fn sync_index(
    index: &mut Bm25Postings,
    cache: &ScanCache,
    headers: &[MemoryHeader],
) -> (SyncReport, Vec<MemoryHeader>) {
    let mut report = SyncReport::default();
    let stale: Vec<MemoryHeader> = headers
        .iter()
        .filter(|h| index.mtime(&h.rel_path) != Some(h.mtime))
        .cloned()
        .collect();
    // Headers are unique paths; when every indexed memory is still listed (count check), nothing
    // was deleted and the common case costs one map lookup per memory.
    let new = stale
        .iter()
        .filter(|h| index.mtime(&h.rel_path).is_none())
        .count();
    if headers.len() - new == index.len() {
        if stale.is_empty() {
            return (report, Vec::new());
        }
    } else {
        let live: HashSet<&str> = headers.iter().map(|h| h.rel_path.as_str()).collect();
        let gone: Vec<String> = index
            .paths()
            .filter(|p| !live.contains(p))
            .map(str::to_owned)
            .collect();
        for p in gone {
            index.remove(&p);
            report.removed += 1;
        }
    }
    if stale.is_empty() {
        return (report, Vec::new());
    }
    let failed = read_into(index, cache, stale, &mut report).await;
    tracing::debug!(?report, "bm25 postings synced");
    (report, failed)
}

/// Read (through the cache, so a memory another index read this turn is not read again) and
/// (re)index `stale`; returns the ones that could not be read (dropped from the index, counted
/// as failed).
///
/// A few memories (a turn's changes) are analysed on the calling task. More (a project's first
/// search, a rescan) are read and indexed in batches of [`ANALYSIS_BATCH`], each batch analysed
/// (language detection, tokenizing, stemming: most of indexing's work) on the blocking pool
/// while the task reads the next one, so the build keeps two cores busy and never holds an
/// async worker for longer than one batch's reads and insertions: other requests (another
/// project's) are served meanwhile.
async fn read_into(
    index: &mut Bm25Postings,
    cache: &ScanCache,
    stale: Vec<MemoryHeader>,
    report: &mut SyncReport,
) -> Vec<MemoryHeader> {
    let mut failed = Vec::new();
    if stale.len() <= INLINE_ANALYSIS {
        let read = read_batch(index, cache, stale, report, &mut failed).await;
        let analyser = index.analyser();
        let _span = tracing::debug_span!("bm25_analyse", memories = read.len()).entered();
        for (h, file) in read {
            let analysed = Analysed::of(&analyser, index_text(&h, &file));
            upsert(index, h, analysed, report);
        }
        return failed;
    }
    let mut stale = stale.into_iter().peekable();
    let mut analysing: Option<Analysing> = None;
    while stale.peek().is_some() {
        let batch: Vec<MemoryHeader> = stale.by_ref().take(ANALYSIS_BATCH).collect();
        let read = read_batch(index, cache, batch, report, &mut failed).await;
        let analyser = index.analyser();
        let headers = read.iter().map(|(h, _)| h.clone()).collect();
        let handle = tokio::task::spawn_blocking(move || {
            let _span = tracing::debug_span!("bm25_analyse", memories = read.len()).entered();
            read.iter()
                .map(|(h, file)| Analysed::of(&analyser, index_text(h, file)))
                .collect()
        });
        if let Some(previous) = analysing.replace((headers, handle)) {
            insert_all(index, previous, report, &mut failed).await;
        }
        // The reads of a page-cached dir never wait: let the runtime serve other tasks.
        tokio::task::yield_now().await;
    }
    if let Some(last) = analysing {
        insert_all(index, last, report, &mut failed).await;
    }
    failed
}

/// How many stale memories [`read_into`] analyses on the calling task; more go to the
/// blocking pool in batches.
const INLINE_ANALYSIS: usize = 32;

/// How many memories [`read_into`] reads, then analyses on the blocking pool, at a time.
const ANALYSIS_BATCH: usize = 256;

/// A batch being analysed on the blocking pool: its headers, and the task analysing them (in
/// the same order).
type Analysing = (Vec<MemoryHeader>, tokio::task::JoinHandle<Vec<Analysed>>);

/// What the index takes in of the memory `h` describes.
fn index_text<'a>(h: &'a MemoryHeader, file: &'a MemoryFile) -> IndexText<'a> {
    IndexText {
        name: display_name(h),
        description: h.description.as_deref().unwrap_or(""),
        body: &file.body,
    }
}

/// Read `batch` through the cache (one [`ScanCache::read_many`]: one query on a database): the
/// memories read, in order; each one that could not be read is dropped from the index, counted
/// and added to `failed`.
async fn read_batch(
    index: &mut Bm25Postings,
    cache: &ScanCache,
    batch: Vec<MemoryHeader>,
    report: &mut SyncReport,
    failed: &mut Vec<MemoryHeader>,
) -> Vec<(MemoryHeader, Arc<MemoryFile>)> {
    let mut out = Vec::with_capacity(batch.len());
    let reads = cache.read_many(&batch).await;
    for (h, read) in batch.into_iter().zip(reads) {
        match read {
            Ok(file) => out.push((h, file)),
            Err(e) => {
                tracing::warn!(path = %h.rel_path, error = %e, "cannot index memory; skipped");
                index.remove(&h.rel_path);
                report.failed += 1;
                failed.push(h);
            }
        }
    }
    out
}

/// Take in a batch analysed on the blocking pool; if its analysis failed (a panic), its
/// memories are dropped from the index and retried with the next selection.
async fn insert_all(
    index: &mut Bm25Postings,
    analysing: Analysing,
    report: &mut SyncReport,
    failed: &mut Vec<MemoryHeader>,
) {
    let (headers, task) = analysing;
    match task.await {
        Ok(analysed) => {
            for (h, a) in headers.into_iter().zip(analysed) {
                upsert(index, h, a, report);
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "analysing memories failed; they are retried");
            for h in headers {
                index.remove(&h.rel_path);
                report.failed += 1;
                failed.push(h);
            }
        }
    }
}

/// Index `h` as `analysed`, counted as added or updated.
fn upsert(index: &mut Bm25Postings, h: MemoryHeader, analysed: Analysed, report: &mut SyncReport) {
    if index.mtime(&h.rel_path).is_some() {
        report.updated += 1;
    } else {
        report.added += 1;
    }
    index.insert(&h.rel_path, h.mtime, analysed);
}

#[async_trait]
impl Selector for Bm25Selector {
    fn name(&self) -> &'static str {
        "bm25"
    }

    async fn select(
        &self,
        query: &str,
        headers: &[MemoryHeader],
        ctx: &SelectionContext,
    ) -> Result<Vec<String>, SelectorError> {
        let mut synced = self.index.lock().await;
        synced.follow(&self.cache, headers).await;
        let fresh = |p: &str| !ctx.already_surfaced.contains(p);
        let ranked = match candidates(headers, synced.index.len()) {
            Some(only) => synced
                .index
                .search(query, ctx.limit, |p| only.contains(p) && fresh(p)),
            None => synced.index.search(query, ctx.limit, fresh),
        };
        Ok(ranked.into_iter().map(|(p, _)| p).collect())
    }

    fn header_cache(&self) -> Option<Arc<ScanCache>> {
        Some(self.cache.clone())
    }
}

/// The candidates' paths when they are fewer than the index holds (a caller that leaves some
/// memories out, as the recall hook leaves out daily logs): the index follows the whole store,
/// so ranking must skip what the caller did not offer, or those memories take the result slots
/// and are dropped afterwards. `None` when every indexed memory is a candidate (no set to build).
pub(crate) fn candidates(headers: &[MemoryHeader], indexed: usize) -> Option<HashSet<&str>> {
    (headers.len() < indexed).then(|| headers.iter().map(|h| h.rel_path.as_str()).collect())
}
