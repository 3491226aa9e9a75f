//! Which selector a host gets, decided in one place for every host (`MemorySetup`, `memloop mcp`,
//! `memloop memory search`): BM25 over every memory, or, when the host has an embedder, BM25
//! fused with embeddings whose vectors are cached where [`vector_cache_for`] says (per store and
//! model). A model-backed selector on top (LLM, re-rank) is the host's choice and wraps this one.

use crate::bm25_selector::Bm25Selector;
use crate::hybrid::{HybridConfig, HybridSelector};
use crate::selector::Selector;
use crate::vectors::vector_cache_for;
use memloop_core::embed::Embedder;
use memloop_store::{MemoryStore, ScanCache};
use std::sync::Arc;

/// The selector a host starts from: [`Bm25Selector`], or [`HybridSelector`] when there is an
/// embedder. Either way there is one set of BM25 postings per store (the hybrid selector's own), so a host
/// that also searches lexically ([`DefaultSelector::bm25`]) does not keep a second one.
///
/// ```
/// # fn demo(store: std::sync::Arc<dyn memloop_store::MemoryStore>) {
/// use memloop_recall::DefaultSelector;
/// let recall = DefaultSelector::new(store, None);
/// assert!(recall.hybrid().is_none());
/// let selector = recall.selector(); // Arc<dyn Selector>, for RecallHook::new
/// # let _ = selector; }
/// ```
#[derive(Debug, Clone)]
pub enum DefaultSelector {
    /// BM25 alone (no embedder).
    Lexical(Arc<Bm25Selector>),
    /// BM25 fused with embeddings, vectors cached on disk.
    Hybrid(Arc<HybridSelector>),
}

impl DefaultSelector {
    /// The selector over `store`: hybrid when `embedder` is given, its vectors cached in
    /// [`vector_cache_for`]`(store, model)`; BM25 otherwise. Default settings.
    pub fn new(store: Arc<dyn MemoryStore>, embedder: Option<Arc<dyn Embedder>>) -> Self {
        Self::with_config(store, embedder, HybridConfig::default())
    }

    /// [`new`](Self::new) with explicit settings: the hybrid selector takes all of `config`;
    /// BM25 alone (no embedder) takes its BM25 parameters ([`HybridConfig::bm25`]: `k1`, `b`,
    /// field weights, the folder lift, ...), the rest being the dense half's.
    ///
    /// ```
    /// # fn demo(store: std::sync::Arc<dyn memloop_store::MemoryStore>) {
    /// use memloop_recall::{Bm25Params, DefaultSelector, HybridConfig};
    /// let lifted = HybridConfig {
    ///     bm25: Bm25Params { dir_weight: 0.5, ..Bm25Params::default() },
    ///     ..HybridConfig::default()
    /// };
    /// let recall = DefaultSelector::with_config(store, None, lifted);
    /// # let _ = recall; }
    /// ```
    pub fn with_config(
        store: Arc<dyn MemoryStore>,
        embedder: Option<Arc<dyn Embedder>>,
        config: HybridConfig,
    ) -> Self {
        match embedder {
            Some(embedder) => {
                let cache = vector_cache_for(store.as_ref(), embedder.model_id());
                Self::Hybrid(Arc::new(HybridSelector::with_config(
                    store, embedder, cache, config,
                )))
            }
            None => Self::Lexical(Arc::new(Bm25Selector::with_params(store, config.bm25))),
        }
    }

    /// The selector, for [`RecallHook`](crate::RecallHook) or `select_checked`.
    pub fn selector(&self) -> Arc<dyn Selector> {
        match self {
            Self::Lexical(bm25) => bm25.clone(),
            Self::Hybrid(hybrid) => hybrid.clone(),
        }
    }

    /// The BM25 selector: the lexical one, or the hybrid selector's own.
    pub fn bm25(&self) -> Arc<Bm25Selector> {
        match self {
            Self::Lexical(bm25) => bm25.clone(),
            Self::Hybrid(hybrid) => hybrid.bm25(),
        }
    }

    /// The header cache every index of this selector follows the store through: a host that
    /// lists or searches the store each request refreshes this one, so the indexes do not ask
    /// the store again.
    pub fn header_cache(&self) -> Arc<ScanCache> {
        self.bm25().cache().clone()
    }

    /// An estimate of the memory this selector's caches hold, in bytes: the header cache, the
    /// BM25 postings and, for the hybrid selector, the vectors. `None` while a selection holds
    /// one of them (the estimate never waits).
    pub fn approx_bytes(&self) -> Option<usize> {
        let headers = self.header_cache().approx_bytes()?;
        let indexes = match self {
            Self::Lexical(bm25) => bm25.approx_bytes()?,
            Self::Hybrid(hybrid) => hybrid.approx_bytes()?,
        };
        Some(headers + indexes)
    }

    /// The hybrid selector, when there is an embedder.
    pub fn hybrid(&self) -> Option<&Arc<HybridSelector>> {
        match self {
            Self::Lexical(_) => None,
            Self::Hybrid(hybrid) => Some(hybrid),
        }
    }
}
