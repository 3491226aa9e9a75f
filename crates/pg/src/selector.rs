//! [`PgFtsSelector`]: a [`Selector`] over PostgreSQL full-text search.

use crate::store::PgMemoryStore;
use async_trait::async_trait;
use memloop_recall::{SelectionContext, Selector, SelectorError};
use memloop_store::{MemoryError, MemoryHeader};

/// Chooses memories with the database's full-text search: a weighted `tsvector` (name over
/// description over body) of stemmed words (Snowball English for ASCII words, Russian for
/// Cyrillic) and character bigrams of Han, Kana, Hangul and Thai runs, under a GIN index, ranked
/// with `ts_rank`; the query is cut by the recall analyzer's tokens the same way, and any of its
/// terms may match. Memories already surfaced are excluded in the query, so the `limit` slots go
/// to new ones. Callers go through `select_checked` like for every selector.
#[derive(Debug, Clone)]
pub struct PgFtsSelector {
    store: PgMemoryStore,
}

impl PgFtsSelector {
    /// A selector over `store`'s project.
    pub fn new(store: PgMemoryStore) -> Self {
        Self { store }
    }
}

#[async_trait]
impl Selector for PgFtsSelector {
    fn name(&self) -> &'static str {
        "postgres_fts"
    }

    async fn select(
        &self,
        query: &str,
        _headers: &[MemoryHeader],
        ctx: &SelectionContext,
    ) -> Result<Vec<String>, SelectorError> {
        let exclude: Vec<String> = ctx.already_surfaced.iter().cloned().collect();
        let search = self.store.search(query, ctx.limit, &exclude);
        let found = tokio::select! {
            biased;
            () = ctx.cancel.cancelled() => return Err(SelectorError::Cancelled),
            r = search => r.map_err(|e| SelectorError::Store(MemoryError::from(e)))?,
        };
        Ok(found.into_iter().map(|(path, _)| path).collect())
    }
}
