//! The hook that drives session memory from the agent loop.

use super::notes::SessionMemory;
use memloop_core::Hook;
use memloop_core::{HookContext, events::AgentEvent, message::MessageKind, model::ModelResponse};
use std::sync::Arc;

/// Post-sampling hook: after each main-agent response, checks the thresholds and, when due,
/// queues an update on `ctx.background` (it returns at once; updates run FIFO, one at a time).
/// Compaction listener: resets the baselines to the compacted conversation, so growth is measured
/// from its new size (otherwise updates would stall until the context grew past its old size).
///
/// Register the same value as both (see the crate README for the wiring).
#[derive(Clone)]
pub struct SessionNotesHook {
    memory: Arc<dyn SessionMemory>,
}

impl std::fmt::Debug for SessionNotesHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionNotesHook")
            .field("notes", &self.memory.notes_path())
            .finish()
    }
}

impl SessionNotesHook {
    /// A hook driving `memory`.
    pub fn new(memory: Arc<dyn SessionMemory>) -> Self {
        Self { memory }
    }

    /// The session memory it drives.
    pub fn memory(&self) -> &Arc<dyn SessionMemory> {
        &self.memory
    }
}

#[async_trait::async_trait]
impl Hook for SessionNotesHook {
    async fn after_sampling(&self, ctx: &HookContext, _response: &ModelResponse) {
        if !self.memory.should_update(ctx) {
            return;
        }
        let update = self.memory.update(ctx, super::notes::UpdateTrigger::Auto);
        let events = ctx.events.clone();
        ctx.background.spawn("session-memory-update", async move {
            if let Err(e) = update.await {
                tracing::warn!(error = %e, "session notes update failed");
                events.emit(AgentEvent::Warning {
                    message: format!("session notes update failed: {e}"),
                });
            }
        });
    }
    async fn on_compacted(&self, ctx: &HookContext) {
        let summary = ctx
            .messages
            .iter()
            .rev()
            .find(|m| m.meta.kind == MessageKind::CompactSummary)
            .map(|m| m.id.clone());
        self.memory.reset_baselines(ctx.context_tokens, summary);
    }
}
