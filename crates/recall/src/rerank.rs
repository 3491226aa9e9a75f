//! [`RerankSelector`]: a fast selector's short list, re-ranked by a model ([`LlmSelector`]).

use super::llm::LlmSelector;
use super::selector::{SelectionContext, Selector, SelectorError};
use crate::events::RecallEvent;
use async_trait::async_trait;
use memloop_store::MemoryHeader;
use memloop_store::ScanCache;
use std::collections::HashMap;
use std::sync::Arc;

/// Settings of [`RerankSelector`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RerankConfig {
    /// How many candidates the first stage passes to the model. Default 20.
    pub shortlist: usize,
    /// After the model's picks, fill the remaining slots (up to the selection's limit) with the
    /// rest of the short list in first-stage order. Default true: the model moves memories to
    /// the front rather than deciding alone what is shown.
    pub backfill: bool,
}

impl Default for RerankConfig {
    fn default() -> Self {
        Self {
            shortlist: 20,
            backfill: true,
        }
    }
}

/// Two stages: `first` (e.g. [`Bm25Selector`](super::Bm25Selector) or
/// [`HybridSelector`](super::HybridSelector)) picks a short list over all memories, then a model
/// ([`LlmSelector`]) sees only that list and picks the memories that fit the query; those come
/// first, in the model's order, then (with [`RerankConfig::backfill`]) the rest of the list.
///
/// The model sees [`RerankConfig::shortlist`] memories instead of the newest 200, so its prompt
/// stays small and every memory can be reached. When the model fails, times out or answers
/// without a selection, the first stage's order is returned and an
/// [`RecallEvent::RecallDegraded`] is emitted: the short list is already a ranking. A cancelled turn is not retried.
pub struct RerankSelector {
    first: Arc<dyn Selector>,
    model: LlmSelector,
    config: RerankConfig,
}

impl std::fmt::Debug for RerankSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RerankSelector")
            .field("model", &self.model)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl RerankSelector {
    /// `first`'s short list (default settings), re-ranked by `model`.
    pub fn new(first: Arc<dyn Selector>, model: LlmSelector) -> Self {
        Self::with_config(first, model, RerankConfig::default())
    }

    /// With explicit settings.
    pub fn with_config(first: Arc<dyn Selector>, model: LlmSelector, config: RerankConfig) -> Self {
        Self {
            first,
            model,
            config,
        }
    }
}

#[async_trait]
impl Selector for RerankSelector {
    fn name(&self) -> &'static str {
        "rerank"
    }

    async fn select(
        &self,
        query: &str,
        headers: &[MemoryHeader],
        ctx: &SelectionContext,
    ) -> Result<Vec<String>, SelectorError> {
        let wide = SelectionContext {
            limit: self.config.shortlist.max(ctx.limit),
            ..ctx.clone()
        };
        let shortlist = self.first.select_checked(query, headers, &wide).await?;
        if shortlist.len() <= 1 {
            return Ok(shortlist);
        }
        let by_path: HashMap<&str, &MemoryHeader> =
            headers.iter().map(|h| (h.rel_path.as_str(), h)).collect();
        let listed: Vec<MemoryHeader> = shortlist
            .iter()
            .filter_map(|p| by_path.get(p.as_str()).map(|h| (*h).clone()))
            .collect();
        let model: &dyn Selector = &self.model;
        let picked = match model.select_checked(query, &listed, ctx).await {
            Ok(picked) => picked,
            Err(SelectorError::Cancelled) => return Err(SelectorError::Cancelled),
            Err(e) => {
                // The first stage's order is kept.
                RecallEvent::degraded(ctx, self.name(), format!("re-ranking model failed: {e}"));
                let mut out = shortlist;
                out.truncate(ctx.limit);
                return Ok(out);
            }
        };
        let mut out: Vec<String> = Vec::with_capacity(ctx.limit);
        for p in picked {
            if !out.contains(&p) {
                out.push(p);
            }
        }
        if self.config.backfill {
            for p in shortlist {
                if !out.contains(&p) {
                    out.push(p);
                }
            }
        }
        out.truncate(ctx.limit);
        Ok(out)
    }

    fn header_cache(&self) -> Option<Arc<ScanCache>> {
        self.first.header_cache()
    }
}
