//! The [`Selector`] trait (the pluggable choice of memories for a query) and the one place that
//! enforces its contract.

use async_trait::async_trait;
use memloop_core::events::{EventSink, NullSink};
use memloop_core::{CancellationToken, model::ModelError};
use memloop_store::{Headers, ScanCache};
use memloop_store::{MemoryError, MemoryHeader};
use std::collections::HashSet;
use std::sync::Arc;

/// What a selector knows about the turn besides the query.
#[derive(Clone)]
pub struct SelectionContext {
    /// Tools that succeeded at least once and never failed since the previous user turn.
    pub recent_tools: Vec<String>,
    /// Relative paths already surfaced this session (never selected again).
    pub already_surfaced: HashSet<String>,
    /// At most this many paths are returned. Default 5.
    pub limit: usize,
    /// Fires when the turn is cancelled; selectors doing slow work should watch it.
    pub cancel: CancellationToken,
    /// Where a selector reports what the host should know (e.g.
    /// [`RecallEvent::RecallDegraded`](crate::RecallEvent::RecallDegraded)).
    /// Default: a sink that drops events.
    pub events: Arc<dyn EventSink>,
}

impl std::fmt::Debug for SelectionContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SelectionContext")
            .field("recent_tools", &self.recent_tools)
            .field("already_surfaced", &self.already_surfaced)
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

impl Default for SelectionContext {
    fn default() -> Self {
        Self {
            recent_tools: Vec::new(),
            already_surfaced: HashSet::new(),
            limit: 5,
            cancel: CancellationToken::new(),
            events: Arc::new(NullSink),
        }
    }
}

impl SelectionContext {
    /// A context with the given limit and nothing else.
    pub fn with_limit(limit: usize) -> Self {
        Self {
            limit,
            ..Self::default()
        }
    }
}

/// Why a selector could not choose. Recall treats every error as "nothing selected";
/// [`crate::FallbackSelector`] uses it to try its secondary selector.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SelectorError {
    /// The side-query model failed.
    #[error("selector model call failed: {0}")]
    Model(#[from] ModelError),
    /// The model answered, but no `{"selected_memories": [...]}` object could be found in it.
    #[error("selector response had no selected_memories list: {0}")]
    InvalidResponse(String),
    /// The selector took longer than its timeout.
    #[error("selector timed out after {0:?}")]
    Timeout(std::time::Duration),
    /// The turn was cancelled.
    #[error("selection cancelled")]
    Cancelled,
    /// Reading memories failed.
    #[error("selector could not read memories: {0}")]
    Store(#[from] MemoryError),
    /// Anything else a custom selector wants to report.
    #[error("{0}")]
    Other(String),
}

/// Chooses the memories relevant to a query. Object-safe: share it as `Arc<dyn Selector>`.
///
/// Implementations return relative paths, best first. `headers` holds every memory (so index
/// based selectors can stay in sync); a selector should skip `ctx.already_surfaced` so that it
/// does not waste its `limit` slots. Implementations need not enforce the contract (limit, known
/// paths, no duplicates, nothing already surfaced): callers go through
/// [`select_checked`](trait.Selector.html#method.select_checked), which does, in one place.
///
/// ```
/// use memloop_recall::{SelectionContext, Selector, SelectorError};
/// use memloop_store::MemoryHeader;
///
/// /// Picks the newest memories, whatever the query.
/// struct Newest;
///
/// #[async_trait::async_trait]
/// impl Selector for Newest {
///     async fn select(&self, _q: &str, headers: &[MemoryHeader], ctx: &SelectionContext)
///         -> Result<Vec<String>, SelectorError> {
///         Ok(headers.iter().take(ctx.limit).map(|h| h.rel_path.clone()).collect())
///     }
/// }
/// ```
#[async_trait]
pub trait Selector: Send + Sync {
    /// Choose memories for `query` among `headers` (newest first).
    async fn select(
        &self,
        query: &str,
        headers: &[MemoryHeader],
        ctx: &SelectionContext,
    ) -> Result<Vec<String>, SelectorError>;

    /// The header cache this selector follows its store through, if it keeps an index of the
    /// store (BM25, hybrid). The recall hook refreshes this same cache each turn instead of a
    /// cache of its own, so one turn asks the store once what changed. `None` (the default) for
    /// a selector that reads only the headers it is given.
    fn header_cache(&self) -> Option<Arc<ScanCache>> {
        None
    }

    /// A short name for traces and events (`bm25`, `hybrid`, `rerank`, ...): the recall span's
    /// `memloop.recall.selector`. Default `custom`.
    fn name(&self) -> &'static str {
        "custom"
    }
}

/// The memories a selection runs over, as [`select_checked`](trait.Selector.html#method.select_checked)
/// takes them: their headers (newest first) and a membership test for the contract check. A
/// plain slice or `Vec` is probed linearly; the [`Headers`] a
/// [`ScanCache`](memloop_store::ScanCache) keeps answer with a hash lookup, so checking a
/// selection costs the same with 20,000 memories as with 20.
pub trait HeaderList: Sync {
    /// The headers, newest first.
    fn headers(&self) -> &[MemoryHeader];

    /// Whether `path` is one of the headers.
    fn contains_path(&self, path: &str) -> bool {
        self.headers().iter().any(|h| h.rel_path == path)
    }
}

impl HeaderList for [MemoryHeader] {
    fn headers(&self) -> &[MemoryHeader] {
        self
    }
}

impl<const N: usize> HeaderList for [MemoryHeader; N] {
    fn headers(&self) -> &[MemoryHeader] {
        self
    }
}

impl HeaderList for Vec<MemoryHeader> {
    fn headers(&self) -> &[MemoryHeader] {
        self
    }
}

impl HeaderList for Headers {
    fn headers(&self) -> &[MemoryHeader] {
        self.as_slice()
    }

    fn contains_path(&self, path: &str) -> bool {
        self.contains(path)
    }
}

impl<T: HeaderList + ?Sized + Send> HeaderList for Arc<T> {
    fn headers(&self) -> &[MemoryHeader] {
        (**self).headers()
    }

    fn contains_path(&self, path: &str) -> bool {
        (**self).contains_path(path)
    }
}

impl<T: HeaderList + ?Sized> HeaderList for &T {
    fn headers(&self) -> &[MemoryHeader] {
        (**self).headers()
    }

    fn contains_path(&self, path: &str) -> bool {
        (**self).contains_path(path)
    }
}

impl dyn Selector + '_ {
    /// Run the selector and enforce the contract: only paths present in `headers`, none already
    /// surfaced, no duplicates, at most `ctx.limit`, in the selector's order.
    pub async fn select_checked<H: HeaderList + ?Sized>(
        &self,
        query: &str,
        headers: &H,
        ctx: &SelectionContext,
    ) -> Result<Vec<String>, SelectorError> {
        if ctx.limit == 0 {
            return Ok(Vec::new());
        }
        let list = headers.headers();
        if list
            .iter()
            .all(|h| ctx.already_surfaced.contains(&h.rel_path))
        {
            return Ok(Vec::new());
        }
        let chosen = self.select(query, list, ctx).await?;
        Ok(enforce(chosen, headers, ctx))
    }
}

/// Keep the chosen paths that are in `headers` and not yet surfaced, first occurrence only, at
/// most `ctx.limit`.
fn enforce<H: HeaderList + ?Sized>(
    chosen: Vec<String>,
    headers: &H,
    ctx: &SelectionContext,
) -> Vec<String> {
    let limit = ctx.limit;
    // One membership test per chosen path: a selector returns a handful. A selector returning
    // a flood of names gets one hashed set of every path instead of a flood of probes.
    let hashed: Option<HashSet<&str>> = (chosen.len() > 64).then(|| {
        headers
            .headers()
            .iter()
            .map(|h| h.rel_path.as_str())
            .collect()
    });
    let known = |p: &str| {
        !ctx.already_surfaced.contains(p)
            && match &hashed {
                Some(set) => set.contains(p),
                None => headers.contains_path(p),
            }
    };
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for path in chosen {
        if out.len() >= limit {
            break;
        }
        if !known(&path) {
            tracing::debug!(%path, "selector returned an unknown path; dropped");
            continue;
        }
        if seen.insert(path.clone()) {
            out.push(path);
        }
    }
    out
}
