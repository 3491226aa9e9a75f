//! The agent loop's extension point: one [`Hook`] trait whose six methods (turn start, after
//! sampling, stop, compacting, compacted, cleared) all default to no-ops; a turn-start hook
//! returns a [`PendingAttachment`] to inject text next to the user's message.

use crate::context::HookContext;
use crate::hooks::PendingAttachment;
use crate::model::ModelResponse;
use async_trait::async_trait;

/// Something that plugs into the agent loop. Implement only the methods you need; the others
/// are no-ops. Register it once with [`AgentBuilder::hook`](crate::AgentBuilder::hook).
///
/// | method | when | may block the turn? |
/// |---|---|---|
/// | [`on_turn_start`](Self::on_turn_start) | a user message arrived, before the first model call | no: return a [`PendingAttachment`] for slow work |
/// | [`after_sampling`](Self::after_sampling) | after every main-agent model response | no: spawn slow work on `ctx.background` |
/// | [`on_stop`](Self::on_stop) | the turn ended with an answer (no tool calls) | never: it runs as a tracked background task |
/// | [`on_compacting`](Self::on_compacting) | a compaction is about to replace the conversation (`ctx.messages` is the old one) | briefly |
/// | [`on_compacted`](Self::on_compacted) | the conversation was replaced by a compacted one | briefly |
/// | [`on_cleared`](Self::on_cleared) | the host cleared the conversation ([`Agent::clear`](crate::Agent::clear)) | briefly |
///
/// ```
/// use memloop_core::{Hook, HookContext};
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicU64, Ordering};
///
/// /// Counts finished turns.
/// #[derive(Default)]
/// struct TurnCounter(AtomicU64);
///
/// #[async_trait::async_trait]
/// impl Hook for TurnCounter {
///     async fn on_stop(&self, _ctx: HookContext) {
///         self.0.fetch_add(1, Ordering::Relaxed);
///     }
/// }
/// # let _: Arc<dyn Hook> = Arc::new(TurnCounter::default());
/// ```
#[async_trait]
pub trait Hook: Send + Sync {
    /// A user message arrived. Start per-turn work and return a pending attachment to have its
    /// result injected next to the message when it settles; never block here on slow work.
    async fn on_turn_start(&self, ctx: &HookContext, user_text: &str) -> Option<PendingAttachment> {
        let _ = (ctx, user_text);
        None
    }

    /// The main agent got a model response. Must return quickly: spawn slow work on
    /// `ctx.background`.
    async fn after_sampling(&self, ctx: &HookContext, response: &ModelResponse) {
        let _ = (ctx, response);
    }

    /// A main-agent turn ended with a response that has no tool calls. Runs fire-and-forget as
    /// a tracked background task (so [`Agent::drain`](crate::Agent::drain) can wait for it);
    /// the next turn never waits for it.
    async fn on_stop(&self, ctx: HookContext) {
        let _ = ctx;
    }

    /// A compaction succeeded and is about to replace the conversation: `ctx.messages` is the
    /// conversation before it, the last chance to see the messages it drops (extraction keeps
    /// the ones it has not processed yet). [`on_compacted`](Self::on_compacted) follows.
    async fn on_compacting(&self, ctx: &HookContext) {
        let _ = ctx;
    }

    /// The conversation in `ctx.messages` is a freshly compacted one (attachments are gone;
    /// reset per-conversation baselines here).
    async fn on_compacted(&self, ctx: &HookContext) {
        let _ = ctx;
    }

    /// The host cleared the conversation ([`Agent::clear`](crate::Agent::clear)); `ctx.messages`
    /// is empty. Reset per-conversation state here (what recall surfaced, a transcript's
    /// position).
    async fn on_cleared(&self, ctx: &HookContext) {
        let _ = ctx;
    }
}
