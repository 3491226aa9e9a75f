//! The interface between the agent loop and a compactor (implemented in `memloop-compact`).

use crate::context::HookContext;
pub use crate::error::CompactionError;
use crate::message::Message;
use crate::window::ContextWindow;
use async_trait::async_trait;

pub use crate::compaction_strategy::CompactionStrategy;

/// Why compaction is being considered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactionTrigger {
    /// The per-request check before a model call.
    Auto,
    /// The host asked (`/compact`).
    Manual,
    /// The provider said the prompt is too long.
    PromptTooLong,
}

/// A successful compaction.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionOutcome {
    /// The new conversation (boundary marker, summary, kept messages).
    pub messages: Vec<Message>,
    /// The strategy that produced it.
    pub strategy: CompactionStrategy,
    /// Tokens before.
    pub tokens_before: u64,
    /// Estimated tokens after.
    pub tokens_after: u64,
    /// Messages kept verbatim.
    pub messages_kept: usize,
}

/// Decides whether to compact and does it.
///
/// `ctx.messages` and `ctx.context_tokens` describe the conversation; returning `Ok(None)` means
/// "nothing to do". The agent replaces its conversation with the outcome, invalidates cached
/// system sections and calls every [`Hook::on_compacted`](crate::Hook::on_compacted).
#[async_trait]
pub trait ContextCompactor: Send + Sync {
    /// Consider compacting.
    async fn maybe_compact(
        &self,
        ctx: &HookContext,
        trigger: CompactionTrigger,
    ) -> Result<Option<CompactionOutcome>, CompactionError>;

    /// Whether a request with a context of `context_tokens` may be sent at all. Called after
    /// [`maybe_compact`](Self::maybe_compact), before every model request; `Err(reason)` stops
    /// the turn with [`crate::AgentError::ContextBlocked`] instead of sending a request that
    /// cannot fit. The default admits everything.
    fn admit(&self, context_tokens: u64) -> Result<(), String> {
        let _ = context_tokens;
        Ok(())
    }

    /// The context-window handle this compactor plans with, if it has one. An agent built
    /// without an explicit window ([`AgentBuilder::context_window`](crate::AgentBuilder::context_window))
    /// shares this handle, so a limit the agent learns moves the compactor's thresholds too.
    /// The default has none.
    fn context_window(&self) -> Option<ContextWindow> {
        None
    }
}
