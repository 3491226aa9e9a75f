//! [`Bm25Selector`]: the [`Bm25Index`] kept in step with a [`MemoryStore`].

use super::bm25::{Bm25Index, Bm25Params, IndexText};
use super::keyword::display_name;
use super::selector::{SelectionContext, Selector, SelectorError};
use async_trait::async_trait;
use futures::StreamExt;
use memloop_store::MemoryHeader;
use memloop_store::MemoryStore;
use memloop_store::{ChangeCursor, Changes};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::SystemTime;
use tokio::sync::Mutex;

/// How many memory files are read at once while (re)indexing.
const READ_CONCURRENCY: usize = 16;

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
/// The index follows the store's change feed ([`MemoryStore::changes`]): each selection asks
/// what changed since the last one and reads only those memories, so a turn with no change
/// costs one feed call, not a look at every header. When the store answers `Rescan` (the first
/// selection, a feed that lost track) the index is diffed against a fresh scan by path and
/// mtime; a store without a feed is diffed against the headers the caller passes.
pub struct Bm25Selector {
    store: Arc<dyn MemoryStore>,
    index: Mutex<Synced>,
}

/// The index and the (path, mtime) list it was last synced with: an unchanged scan is detected
/// by comparing lists, without hashing a single path.
#[derive(Debug, Default)]
struct Synced {
    index: Bm25Index,
    seen: Vec<(String, SystemTime)>,
    /// Where the index stands in the store's change feed (`None`: not following it).
    cursor: Option<ChangeCursor>,
    /// Memories the feed reported that could not be read: tried again on the next selection.
    retry: Vec<MemoryHeader>,
}

impl Synced {
    /// Catch up with the store through its change feed; `headers` (the caller's scan) is used
    /// only when the store has no feed.
    async fn follow(&mut self, store: &dyn MemoryStore, headers: &[MemoryHeader]) -> SyncReport {
        match store.changes(self.cursor.as_ref()).await {
            Ok(Changes::Unchanged) if self.retry.is_empty() => SyncReport::default(),
            Ok(Changes::Unchanged) => {
                let retry = std::mem::take(&mut self.retry);
                self.read(store, retry, SyncReport::default()).await
            }
            Ok(Changes::Changed {
                cursor,
                written,
                removed,
            }) => {
                let mut report = SyncReport::default();
                for p in &removed {
                    if self.index.mtime(p.as_str()).is_some() {
                        self.index.remove(p.as_str());
                        report.removed += 1;
                    }
                }
                let removed: HashSet<&str> = removed.iter().map(|p| p.as_str()).collect();
                let mut stale = std::mem::take(&mut self.retry);
                stale.retain(|h| {
                    !removed.contains(h.rel_path.as_str())
                        && !written.iter().any(|w| w.rel_path == h.rel_path)
                });
                stale.extend(written);
                self.cursor = Some(cursor);
                self.seen.clear();
                self.read(store, stale, report).await
            }
            Ok(Changes::Rescan {
                cursor: Some(cursor),
            }) => match store.scan().await {
                // The cursor was taken before this scan, so nothing made during it is lost.
                Ok(fresh) => {
                    self.retry.clear();
                    let report = self.sync(store, &fresh).await;
                    // A memory that could not be read is retried by the next rescan.
                    self.cursor = (report.failed == 0).then_some(cursor);
                    report
                }
                Err(e) => {
                    tracing::warn!(error = %e, "memory scan failed; indexing the caller's headers");
                    self.cursor = None;
                    self.sync(store, headers).await
                }
            },
            Ok(Changes::Rescan { cursor: None }) => {
                self.cursor = None;
                self.sync(store, headers).await
            }
            Err(e) => {
                tracing::warn!(error = %e, "memory change feed failed; indexing the caller's headers");
                self.cursor = None;
                self.sync(store, headers).await
            }
        }
    }

    /// Read and (re)index `stale`; unreadable ones go to `retry`.
    async fn read(
        &mut self,
        store: &dyn MemoryStore,
        stale: Vec<MemoryHeader>,
        mut report: SyncReport,
    ) -> SyncReport {
        let failed = read_into(&mut self.index, store, stale, &mut report).await;
        self.retry.extend(failed);
        if report != SyncReport::default() {
            tracing::debug!(?report, "bm25 index followed the change feed");
        }
        report
    }

    async fn sync(&mut self, store: &dyn MemoryStore, headers: &[MemoryHeader]) -> SyncReport {
        let unchanged = self.seen.len() == headers.len()
            && self
                .seen
                .iter()
                .zip(headers)
                .all(|((p, m), h)| *m == h.mtime && *p == h.rel_path);
        if unchanged {
            return SyncReport::default();
        }
        let report = sync_index(&mut self.index, store, headers).await;
        // Retried through the list compare below (or by the next rescan when following).
        self.seen = if report.failed == 0 {
            headers
                .iter()
                .map(|h| (h.rel_path.clone(), h.mtime))
                .collect()
        } else {
            Vec::new() // retry the unreadable ones next time
        };
        report
    }
}

impl std::fmt::Debug for Bm25Selector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bm25Selector")
            .field("store", &self.store.describe().to_string())
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
        Self {
            store,
            index: Mutex::new(Synced {
                index: Bm25Index::new(params),
                ..Synced::default()
            }),
        }
    }

    /// Bring the index in line with `headers` (the store's scan): re-read changed files, drop
    /// removed ones. The next selection then asks the store for a rescan before following its
    /// change feed again.
    pub async fn sync(&self, headers: &[MemoryHeader]) -> SyncReport {
        let mut synced = self.index.lock().await;
        synced.cursor = None;
        synced.sync(self.store.as_ref(), headers).await
    }

    /// Number of indexed memories.
    pub async fn indexed(&self) -> usize {
        self.index.lock().await.index.len()
    }

    /// Catch up with the store (its change feed; `headers` when it has none), then the best `limit` memories for `query` that `keep` accepts, with
    /// their BM25F scores, best first (what [`Selector::select`] returns, plus the scores).
    pub async fn scored(
        &self,
        query: &str,
        headers: &[MemoryHeader],
        limit: usize,
        keep: impl Fn(&str) -> bool + Send,
    ) -> Vec<(String, f32)> {
        let mut synced = self.index.lock().await;
        synced.follow(self.store.as_ref(), headers).await;
        synced.index.search(query, limit, keep)
    }
}

async fn sync_index(
    index: &mut Bm25Index,
    store: &dyn MemoryStore,
    headers: &[MemoryHeader],
) -> SyncReport {
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
            return report;
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
        return report;
    }
    read_into(index, store, stale, &mut report).await;
    tracing::debug!(?report, "bm25 index synced");
    report
}

/// Read and (re)index `stale` through the store; returns the ones that could not be read
/// (dropped from the index, counted as failed).
async fn read_into(
    index: &mut Bm25Index,
    store: &dyn MemoryStore,
    stale: Vec<MemoryHeader>,
    report: &mut SyncReport,
) -> Vec<MemoryHeader> {
    let mut failed = Vec::new();
    let mut reads = futures::stream::iter(stale)
        .map(|h| async move {
            let read = store.read(&h.rel_path).await;
            (h, read)
        })
        .buffer_unordered(READ_CONCURRENCY);
    while let Some((h, read)) = reads.next().await {
        match read {
            Ok(file) => {
                let was_indexed = index.mtime(&h.rel_path).is_some();
                let text = IndexText {
                    name: display_name(&h),
                    description: h.description.as_deref().unwrap_or(""),
                    body: &file.body,
                };
                index.upsert(&h.rel_path, h.mtime, text);
                if was_indexed {
                    report.updated += 1;
                } else {
                    report.added += 1;
                }
            }
            Err(e) => {
                tracing::warn!(path = %h.rel_path, error = %e, "cannot index memory; skipped");
                index.remove(&h.rel_path);
                report.failed += 1;
                failed.push(h);
            }
        }
    }
    failed
}

#[async_trait]
impl Selector for Bm25Selector {
    async fn select(
        &self,
        query: &str,
        headers: &[MemoryHeader],
        ctx: &SelectionContext,
    ) -> Result<Vec<String>, SelectorError> {
        let mut synced = self.index.lock().await;
        synced.follow(self.store.as_ref(), headers).await;
        let fresh = |p: &str| !ctx.already_surfaced.contains(p);
        let ranked = match candidates(headers, synced.index.len()) {
            Some(only) => synced
                .index
                .search(query, ctx.limit, |p| only.contains(p) && fresh(p)),
            None => synced.index.search(query, ctx.limit, fresh),
        };
        Ok(ranked.into_iter().map(|(p, _)| p).collect())
    }
}

/// The candidates' paths when they are fewer than the index holds (a caller that leaves some
/// memories out, as the recall hook leaves out daily logs): the index follows the whole store,
/// so ranking must skip what the caller did not offer, or those memories take the result slots
/// and are dropped afterwards. `None` when every indexed memory is a candidate (no set to build).
pub(crate) fn candidates(headers: &[MemoryHeader], indexed: usize) -> Option<HashSet<&str>> {
    (headers.len() < indexed).then(|| headers.iter().map(|h| h.rel_path.as_str()).collect())
}
