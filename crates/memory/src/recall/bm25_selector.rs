//! [`Bm25Selector`]: the [`Bm25Index`] kept in step with a [`MemoryStore`].

use super::bm25::{Bm25Index, Bm25Params, IndexText};
use super::keyword::display_name;
use super::selector::{SelectionContext, Selector, SelectorError};
use crate::memory_store::MemoryStore;
use crate::types::MemoryHeader;
use async_trait::async_trait;
use futures::StreamExt;
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
/// The index is updated incrementally on each selection: the headers are diffed by path and
/// mtime, only new or changed files are read through the store, and vanished ones are removed.
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
}

impl Synced {
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
                seen: Vec::new(),
            }),
        }
    }

    /// Bring the index in line with `headers` (the store's scan): re-read changed files, drop
    /// removed ones.
    pub async fn sync(&self, headers: &[MemoryHeader]) -> SyncReport {
        let mut synced = self.index.lock().await;
        synced.sync(self.store.as_ref(), headers).await
    }

    /// Number of indexed memories.
    pub async fn indexed(&self) -> usize {
        self.index.lock().await.index.len()
    }

    /// Sync with `headers`, then the best `limit` memories for `query` that `keep` accepts, with
    /// their BM25F scores, best first (what [`Selector::select`] returns, plus the scores).
    pub async fn scored(
        &self,
        query: &str,
        headers: &[MemoryHeader],
        limit: usize,
        keep: impl Fn(&str) -> bool + Send,
    ) -> Vec<(String, f32)> {
        let mut synced = self.index.lock().await;
        synced.sync(self.store.as_ref(), headers).await;
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
            }
        }
    }
    tracing::debug!(?report, "bm25 index synced");
    report
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
        synced.sync(self.store.as_ref(), headers).await;
        Ok(synced
            .index
            .search(query, ctx.limit, |p| !ctx.already_surfaced.contains(p))
            .into_iter()
            .map(|(p, _)| p)
            .collect())
    }
}
