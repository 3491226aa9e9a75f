//! The agent loop's extension point: one [`Hook`] trait whose six methods (turn start, after
//! sampling, stop, compacting, compacted, cleared) all default to no-ops, plus the attachments a turn-start hook can
//! inject next to the user's message.

use crate::context::HookContext;
use crate::model::ModelResponse;
use async_trait::async_trait;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Text injected next to the user's message as a `<system-reminder>` block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// Kind, e.g. `relevant_memories`.
    pub kind: String,
    /// The text (without the reminder tags).
    pub text: String,
}

impl Attachment {
    /// The text wrapped as a system reminder.
    pub fn render(&self) -> String {
        format!("<system-reminder>\n{}\n</system-reminder>", self.text)
    }
}

/// Background work started at turn start whose result is attached when it settles.
///
/// The loop consumes it at the first check after it finished; if the turn ends first it is
/// dropped, which cancels and aborts the work.
#[derive(Debug)]
pub struct PendingAttachment {
    state: Pending,
}

#[derive(Debug)]
enum Pending {
    /// Known at turn start: attached at the first check.
    Ready(Option<Attachment>),
    /// Work on the runtime.
    Spawned {
        handle: JoinHandle<Option<Attachment>>,
        cancel: CancellationToken,
    },
}

impl PendingAttachment {
    /// Spawn `fut` on the runtime; `cancel` is fired when the attachment is dropped unconsumed.
    pub fn spawn<F>(cancel: CancellationToken, fut: F) -> Self
    where
        F: std::future::Future<Output = Option<Attachment>> + Send + 'static,
    {
        Self {
            state: Pending::Spawned {
                handle: tokio::spawn(fut),
                cancel,
            },
        }
    }

    /// An attachment that is already known: the loop attaches it at its first check, before
    /// the first model call (nothing runs in the background).
    pub fn ready(attachment: Attachment) -> Self {
        Self {
            state: Pending::Ready(Some(attachment)),
        }
    }

    /// Whether the work has settled.
    pub fn is_ready(&self) -> bool {
        match &self.state {
            Pending::Ready(_) => true,
            Pending::Spawned { handle, .. } => handle.is_finished(),
        }
    }

    /// Wait for the result (a panicked or aborted task yields `None`).
    pub async fn wait(mut self) -> Option<Attachment> {
        match &mut self.state {
            Pending::Ready(attachment) => attachment.take(),
            Pending::Spawned { handle, .. } => handle.await.ok().flatten(),
        }
    }
}

impl Drop for PendingAttachment {
    fn drop(&mut self) {
        if let Pending::Spawned { handle, cancel } = &self.state {
            if !handle.is_finished() {
                cancel.cancel();
                handle.abort();
            }
        }
    }
}

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
