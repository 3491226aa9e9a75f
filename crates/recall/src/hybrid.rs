//! [`HybridSelector`]: BM25 and dense (embedding) similarity, fused.
//!
//! BM25 finds the memories that share the query's words; an [`Embedder`] finds those that mean
//! the same thing in other words ("what does she do for work" → "she is a nurse"). The two
//! rankings are fused with [`Fusion`]. When the embedder fails or runs out of time, the
//! selector ranks with BM25 alone and reports an
//! [`RecallEvent::RecallDegraded`](crate::RecallEvent::RecallDegraded): recall never
//! depends on a model being up.

use super::bm25::Bm25Params;
use super::bm25_selector::Bm25Selector;
use super::selector::{SelectionContext, Selector, SelectorError};
use super::vectors::{VectorCache, VectorSyncReport};
use crate::events::RecallEvent;
use async_trait::async_trait;
use memloop_core::embed::{EmbedError, Embedder};
use memloop_store::MemoryHeader;
use memloop_store::MemoryStore;
use memloop_store::ScanCache;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;
use tokio::time::Instant;

/// How the BM25 and dense rankings are combined.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fusion {
    /// Reciprocal-rank fusion: a memory scores `(1 − w) / (k + bm25 rank) + w / (k + dense
    /// rank)` (ranks from 1; a list the memory is not in adds nothing). Robust to the two
    /// scores' different scales.
    Rrf {
        /// The rank offset `k` (60 in the original paper; smaller favours the top ranks).
        k: f32,
        /// The dense ranking's weight `w` in [0, 1].
        dense_weight: f32,
    },
    /// A weighted sum of scores, each scaled to [0, 1] over its candidates (min-max):
    /// `(1 − w) · bm25 + w · cosine`.
    Weighted {
        /// The dense score's weight `w` in [0, 1].
        dense_weight: f32,
    },
}

impl Default for Fusion {
    /// A weighted sum with the dense score at 0.3. On LoCoMo (conversations 1–5, mean
    /// Recall@5 over observations, session summaries and dialog turns) weighted sums beat RRF
    /// with `k` 5–60, and 0.4 edged 0.3 (68.0 against 67.7 with all-MiniLM-L6-v2 and passage
    /// vectors); on CMRC 2018 (Chinese) the English model's extra weight cost R@1 (95.7 →
    /// 95.1), so the default stays 0.3. [`HybridSelector`] raises it per query by how little of
    /// the query the memories contain ([`Fusion::fuse_for`]).
    fn default() -> Self {
        Fusion::Weighted { dense_weight: 0.3 }
    }
}

impl Fusion {
    /// [`fuse`](Self::fuse) for a query whose terms the memories contain in the share
    /// `coverage` ([`Bm25Selector::coverage`](crate::Bm25Selector::coverage)): the dense weight
    /// `w` grows to `w + (1 − w) · (1 − coverage)`. A query in the memories' language keeps the
    /// configured weights; one in another language, whose few lexical matches are names,
    /// numbers and loanwords, is ranked mostly by meaning, so a stray shared word cannot
    /// outrank the memory that answers it.
    pub fn fuse_for(
        &self,
        coverage: f32,
        bm25: &[(String, f32)],
        dense: &[(String, f32)],
    ) -> Vec<(String, f32)> {
        let missing = 1.0 - coverage.clamp(0.0, 1.0);
        let adapt = |w: f32| {
            let w = w.clamp(0.0, 1.0);
            w + (1.0 - w) * missing
        };
        let adapted = match *self {
            Fusion::Rrf { k, dense_weight } => Fusion::Rrf {
                k,
                dense_weight: adapt(dense_weight),
            },
            Fusion::Weighted { dense_weight } => Fusion::Weighted {
                dense_weight: adapt(dense_weight),
            },
        };
        adapted.fuse(bm25, dense)
    }

    /// Fuse two rankings (best first, with scores) into one, best first; ties by path.
    pub fn fuse(&self, bm25: &[(String, f32)], dense: &[(String, f32)]) -> Vec<(String, f32)> {
        let mut fused: HashMap<&str, f32> = HashMap::new();
        match *self {
            Fusion::Rrf { k, dense_weight } => {
                let w = dense_weight.clamp(0.0, 1.0);
                for (list, weight) in [(bm25, 1.0 - w), (dense, w)] {
                    for (rank, (path, _)) in list.iter().enumerate() {
                        *fused.entry(path).or_default() += weight / (k + rank as f32 + 1.0);
                    }
                }
            }
            Fusion::Weighted { dense_weight } => {
                let w = dense_weight.clamp(0.0, 1.0);
                for (list, weight) in [(bm25, 1.0 - w), (dense, w)] {
                    let (lo, hi) = list.iter().fold((f32::MAX, f32::MIN), |(lo, hi), (_, s)| {
                        (lo.min(*s), hi.max(*s))
                    });
                    let span = hi - lo;
                    for (path, score) in list {
                        let scaled = if span > 0.0 { (score - lo) / span } else { 1.0 };
                        *fused.entry(path).or_default() += weight * scaled;
                    }
                }
            }
        }
        let mut out: Vec<(String, f32)> =
            fused.into_iter().map(|(p, s)| (p.to_owned(), s)).collect();
        out.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        out
    }
}

/// Settings of a [`HybridSelector`].
#[derive(Debug, Clone)]
pub struct HybridConfig {
    /// How the rankings are fused. Default: see [`HybridConfig::default`].
    pub fusion: Fusion,
    /// How deep each ranking goes before fusion. Default 50.
    pub candidates: usize,
    /// Time for the embedding work of one selection (the query, and memories not embedded yet).
    /// Past it, memories still unembedded wait for the next selection and rank by BM25 only;
    /// a query that cannot be embedded in time falls back to BM25. Default 2 s.
    pub embed_budget: Duration,
    /// BM25 parameters. Default [`Bm25Params::default`].
    pub bm25: Bm25Params,
    /// Memories whose cosine similarity to the query is below this take no part in the dense
    /// ranking, so a query unrelated to every memory ("thanks!") surfaces nothing rather than
    /// the least unrelated ones. Model-dependent; default 0.2 (unrelated sentences score about
    /// 0–0.15 with all-MiniLM-L6-v2).
    pub min_similarity: f32,
    /// The dense half's directory lift, as [`Bm25Params::dir_weight`] is BM25's: every memory
    /// in a folder (not at the top of the memory dir) gains this × the similarity of the most
    /// similar other memory in its folder. A sibling below `min_similarity` lifts nothing, and
    /// a memory below it is not lifted into the ranking. Memories the selection may not return
    /// (already surfaced, not offered) still lift their siblings: a session's summary lifts
    /// its notes. 0 disables it. Default 0.0, like BM25's: turn both on for layouts that file
    /// related memories together.
    pub dense_dir_weight: f32,
    /// Embed each passage of a long memory (consecutive whole sentences of its body, up to
    /// 150 bytes each unless one sentence is longer) besides its whole text; the memory's
    /// similarity is the best of them. A memory of one passage gets one vector either way.
    /// Costs about twice the embedding work for long memories. Changing it re-embeds the long
    /// memories. Default on.
    pub passages: bool,
}

impl Default for HybridConfig {
    /// [`Fusion::default`] (weighted, dense 0.3), 50 candidates per ranking, a 2-second
    /// embedding budget, a minimum similarity of 0.2, no directory lift, passages on.
    fn default() -> Self {
        Self {
            fusion: Fusion::default(),
            candidates: 50,
            embed_budget: Duration::from_secs(2),
            bm25: Bm25Params::default(),
            min_similarity: 0.2,
            dense_dir_weight: 0.0,
            passages: true,
        }
    }
}

/// BM25 plus dense similarity over every memory, fused; vectors cached on disk.
///
/// ```no_run
/// # async fn demo(store: std::sync::Arc<dyn memloop_store::MemoryStore>,
/// #               embedder: std::sync::Arc<dyn memloop_core::embed::Embedder>) {
/// use memloop_recall::{HybridSelector, vector_cache_for};
/// let cache = vector_cache_for(&*store, embedder.model_id());
/// let selector = HybridSelector::new(store, embedder, cache);
/// # }
/// ```
pub struct HybridSelector {
    embedder: Arc<dyn Embedder>,
    bm25: Arc<Bm25Selector>,
    vectors: Mutex<VectorCache>,
    config: HybridConfig,
}

impl std::fmt::Debug for HybridSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HybridSelector")
            .field("model", &self.embedder.model_id())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl HybridSelector {
    /// A selector over `store` embedding with `embedder`, caching vectors in the file
    /// `cache_path` (see [`vector_cache_path`](super::vector_cache_path)); default settings.
    pub fn new(
        store: Arc<dyn MemoryStore>,
        embedder: Arc<dyn Embedder>,
        cache_path: PathBuf,
    ) -> Self {
        Self::with_config(store, embedder, cache_path, HybridConfig::default())
    }

    /// Its BM25 selector (the lexical half), shared: a host that also searches lexically uses
    /// this one rather than keeping a second index of the same store.
    pub fn bm25(&self) -> Arc<Bm25Selector> {
        self.bm25.clone()
    }

    /// A selector with explicit settings.
    pub fn with_config(
        store: Arc<dyn MemoryStore>,
        embedder: Arc<dyn Embedder>,
        cache_path: PathBuf,
        config: HybridConfig,
    ) -> Self {
        let vectors = VectorCache::open(
            cache_path,
            embedder.model_id(),
            embedder.dimension(),
            config.passages,
        );
        Self {
            bm25: Arc::new(Bm25Selector::with_params(store, config.bm25)),
            embedder,
            vectors: Mutex::new(vectors),
            config,
        }
    }

    /// Get the embedder ready ([`Embedder::ready`]: a local model loads its weights), then embed
    /// every memory that has no current vector, with no time budget (before a session, or from
    /// the CLI), and save the cache. On a store with a change feed the vectors follow
    /// the whole store (a fresh scan the first time, then only the changes since the last
    /// call); `headers` are used by a store without one.
    pub async fn warm(&self, headers: &[MemoryHeader]) -> Result<VectorSyncReport, EmbedError> {
        self.embedder.ready().await?;
        let mut vectors = self.vectors.lock().await;
        vectors
            .follow(
                self.bm25.cache(),
                self.embedder.as_ref(),
                headers,
                None,
                None,
            )
            .await
    }

    /// [`warm`](Self::warm), telling `progress` how far it is: `progress(embedded, total)` once
    /// before the first batch (`embedded` = 0; `total` = the memories whose vector is missing or
    /// stale, after the cache's hash check) and after every batch the embedder answers; not at
    /// all when nothing changed since the last sync. For a
    /// progress bar over a cold index (thousands of memories take a minute on a CPU).
    ///
    /// ```
    /// # use std::sync::{Arc, Mutex};
    /// # async fn demo(hybrid: &memloop_recall::HybridSelector,
    /// #     headers: &[memloop_store::MemoryHeader]) {
    /// let seen = Mutex::new(Vec::new());
    /// let report = hybrid
    ///     .warm_with_progress(headers, &|done, total| seen.lock().unwrap().push((done, total)))
    ///     .await;
    /// # }
    /// ```
    pub async fn warm_with_progress(
        &self,
        headers: &[MemoryHeader],
        progress: &(dyn Fn(usize, usize) + Send + Sync),
    ) -> Result<VectorSyncReport, EmbedError> {
        self.embedder.ready().await?;
        let mut vectors = self.vectors.lock().await;
        vectors
            .follow(
                self.bm25.cache(),
                self.embedder.as_ref(),
                headers,
                None,
                Some(progress),
            )
            .await
    }

    /// An estimate of the memory its vectors and BM25 postings hold, in bytes; `None` while a
    /// selection holds either (the estimate never waits).
    pub fn approx_bytes(&self) -> Option<usize> {
        let vectors = self.vectors.try_lock().ok()?.approx_bytes();
        Some(memloop_store::heap::arc::<Self>() + vectors + self.bm25().approx_bytes()?)
    }

    /// Number of memories with a cached vector.
    pub async fn embedded(&self) -> usize {
        self.vectors.lock().await.len()
    }

    /// The fused ranking for `query`: the best `limit` memories that `keep` accepts, with their
    /// fused scores, best first. `Err` carries the BM25-only ranking and why the dense half
    /// was not used.
    async fn ranked(
        &self,
        query: &str,
        headers: &[MemoryHeader],
        limit: usize,
        keep: &(dyn Fn(&str) -> bool + Sync),
    ) -> Result<Vec<(String, f32)>, (Vec<(String, f32)>, String)> {
        let depth = self.config.candidates.max(limit);
        let bm25 = self.bm25.scored(query, headers, depth, keep).await;
        let deadline = Instant::now() + self.config.embed_budget;
        let embedder: &dyn Embedder = self.embedder.as_ref();
        // NFKC like the memories' embedded text (`embed_text`), so full-width and half-width
        // forms reach the model as the memories' text does.
        let query_text = memloop_text::nfkc(query).into_owned();
        let query_vec =
            match tokio::time::timeout_at(deadline, embedder.embed_queries_checked(&[query_text]))
                .await
            {
                Ok(Ok(mut v)) => v.pop().unwrap_or_default(),
                Ok(Err(e)) => return Err((bm25, format!("embedding the query failed: {e}"))),
                Err(_) => return Err((bm25, "embedding the query timed out".to_owned())),
            };
        let mut vectors = self.vectors.lock().await;
        // Only what changed since the last selection (the store's change feed). Memories not
        // embedded in time rank by BM25 alone this turn; the vectors made so far are kept and
        // the rest follow on later selections.
        let sync = tokio::time::timeout_at(
            deadline,
            vectors.follow(self.bm25.cache(), embedder, headers, Some(deadline), None),
        )
        .await;
        match sync {
            Ok(Ok(report)) if report.pending > 0 => {
                tracing::info!(pending = report.pending, "memories not embedded yet");
            }
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err((bm25, format!("embedding memories failed: {e}"))),
            Err(_) => tracing::info!("embedding memories ran out of time; continuing later"),
        }
        let dense = vectors.nearest(
            &query_vec,
            depth,
            self.config.min_similarity,
            self.config.dense_dir_weight,
            keep,
        );
        drop(vectors);
        let coverage = self.bm25.coverage(query).await;
        let mut fused = self.config.fusion.fuse_for(coverage, &bm25, &dense);
        fused.truncate(limit);
        Ok(fused)
    }
}

#[async_trait]
impl Selector for HybridSelector {
    fn name(&self) -> &'static str {
        "hybrid"
    }

    async fn select(
        &self,
        query: &str,
        headers: &[MemoryHeader],
        ctx: &SelectionContext,
    ) -> Result<Vec<String>, SelectorError> {
        // Only the offered candidates compete (see `bm25_selector::candidates`).
        let only = super::bm25_selector::candidates(headers, self.bm25.indexed().await);
        let keep = |p: &str| {
            !ctx.already_surfaced.contains(p) && only.as_ref().is_none_or(|o| o.contains(p))
        };
        let ranked = tokio::select! {
            r = self.ranked(query, headers, ctx.limit, &keep) => r,
            () = ctx.cancel.cancelled() => return Err(SelectorError::Cancelled),
        };
        let chosen = match ranked {
            Ok(fused) => fused,
            Err((mut bm25, reason)) => {
                // Ranked by BM25 alone this turn.
                RecallEvent::degraded(ctx, self.name(), reason);
                bm25.truncate(ctx.limit);
                bm25
            }
        };
        Ok(chosen.into_iter().map(|(p, _)| p).collect())
    }

    fn header_cache(&self) -> Option<Arc<ScanCache>> {
        self.bm25.header_cache()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(paths: &[&str]) -> Vec<(String, f32)> {
        paths
            .iter()
            .enumerate()
            .map(|(i, p)| ((*p).to_owned(), 10.0 - i as f32))
            .collect()
    }

    #[test]
    fn rrf_rewards_agreement_and_weights_shift_it() {
        let bm25 = list(&["a", "b", "c"]);
        let dense = list(&["d", "b", "c"]);
        let even = Fusion::Rrf {
            k: 60.0,
            dense_weight: 0.5,
        }
        .fuse(&bm25, &dense);
        assert_eq!(even[0].0, "b", "second in both lists: {even:?}");
        let dense_only = Fusion::Rrf {
            k: 60.0,
            dense_weight: 1.0,
        }
        .fuse(&bm25, &dense);
        assert_eq!(dense_only[0].0, "d");
        let bm25_only = Fusion::Rrf {
            k: 60.0,
            dense_weight: 0.0,
        }
        .fuse(&bm25, &dense);
        assert_eq!(bm25_only[0].0, "a");
    }

    #[test]
    fn weighted_scales_each_list_to_unit_range() {
        let bm25 = vec![("a".to_owned(), 30.0), ("b".to_owned(), 10.0)];
        let dense = vec![("b".to_owned(), 0.9), ("a".to_owned(), 0.1)];
        let f = Fusion::Weighted { dense_weight: 0.5 }.fuse(&bm25, &dense);
        // a = 0.5·1 + 0.5·0, b = 0.5·0 + 0.5·1: tie, broken by path.
        assert_eq!(f[0].0, "a");
        assert!((f[0].1 - f[1].1).abs() < 1e-6);
        let f = Fusion::Weighted { dense_weight: 0.7 }.fuse(&bm25, &dense);
        assert_eq!(f[0].0, "b");
    }

    #[test]
    fn a_query_the_memories_cannot_match_is_ranked_by_meaning() {
        // A stray shared word puts `stray.md` first for BM25; meaning puts `answer.md` first.
        let bm25 = vec![("stray.md".to_owned(), 4.0), ("answer.md".to_owned(), 0.5)];
        let dense = vec![
            ("answer.md".to_owned(), 0.86),
            ("stray.md".to_owned(), 0.80),
        ];
        let fusion = Fusion::default();
        let first = |v: Vec<(String, f32)>| v[0].0.clone();
        // Every query term is in the memories: the configured weights, BM25's order wins.
        assert_eq!(first(fusion.fuse_for(1.0, &bm25, &dense)), "stray.md");
        assert_eq!(
            fusion.fuse_for(1.0, &bm25, &dense),
            fusion.fuse(&bm25, &dense)
        );
        // A question in another language (one term in ten known): meaning decides.
        assert_eq!(first(fusion.fuse_for(0.1, &bm25, &dense)), "answer.md");
        assert_eq!(first(fusion.fuse_for(0.0, &bm25, &dense)), "answer.md");
        // Out-of-range coverage is clamped, for RRF too.
        let rrf = Fusion::Rrf {
            k: 60.0,
            dense_weight: 0.3,
        };
        assert_eq!(first(rrf.fuse_for(-3.0, &bm25, &dense)), "answer.md");
        assert_eq!(rrf.fuse_for(7.0, &bm25, &dense), rrf.fuse(&bm25, &dense));
    }

    #[test]
    fn empty_lists_fuse_to_nothing() {
        assert!(Fusion::default().fuse(&[], &[]).is_empty());
        assert!(
            Fusion::Rrf {
                k: 60.0,
                dense_weight: 0.5
            }
            .fuse(&[], &[])
            .is_empty()
        );
        let only = Fusion::Weighted { dense_weight: 0.5 }.fuse(&list(&["a"]), &[]);
        assert_eq!(only.len(), 1);
    }
}
