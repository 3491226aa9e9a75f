//! What recall tells hosts: memories surfaced, recall skipped, a selector degraded.

use memloop_core::events::{AgentEvent, ExtensionEvent};
use serde::Serialize;

/// What recall tells hosts: memories surfaced, recall skipped, a selector degraded.
///
/// Hosts see it as [`AgentEvent::Extension`] and get it back with
/// [`AgentEvent::extension`]`::<RecallEvent>()`; serialised as `{"event": "extension", "source":
/// "memloop-recall", "data": {"event": "<variant in snake_case>", ...}}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum RecallEvent {
    /// Memories were surfaced into the conversation.
    MemoriesSurfaced {
        /// Relative paths.
        paths: Vec<String>,
        /// Bytes surfaced this time.
        bytes: usize,
    },
    /// Recall did not run this turn.
    RecallSkipped {
        /// Why.
        reason: String,
    },
    /// A selector could not use part of its ranking this turn and chose with the rest (a
    /// hybrid selector whose embedder failed or timed out ranks with BM25 alone).
    RecallDegraded {
        /// The selector (`hybrid`, ...).
        selector: String,
        /// What failed.
        reason: String,
    },
}

impl RecallEvent {
    /// Report that `selector` chose with part of its ranking this turn because of `reason`: a
    /// [`RecallDegraded`](Self::RecallDegraded) event to the host, and
    /// `memloop.recall.degraded` on the recall span the selection runs in. Every selector that
    /// degrades says so through this one place.
    pub(crate) fn degraded(ctx: &crate::SelectionContext, selector: &str, reason: String) {
        tracing::warn!(selector, %reason, "recall degraded");
        tracing::Span::current().record(
            "memloop.recall.degraded",
            format!("{selector}: {reason}").as_str(),
        );
        ctx.events.emit(
            Self::RecallDegraded {
                selector: selector.to_owned(),
                reason,
            }
            .into(),
        );
    }
}

impl From<RecallEvent> for AgentEvent {
    fn from(event: RecallEvent) -> Self {
        ExtensionEvent::new("memloop-recall", event).into()
    }
}
