//! Hook points of the agent loop: turn start (with background attachments), post-sampling, stop,
//! and compaction listeners.

use crate::background::BackgroundTasks;
use crate::events::{AgentEvent, EventSink};
use crate::fork::{ForkBase, ForkedAgentBuilder};
use crate::message::Message;
use crate::model::{Model, ModelResponse};
use crate::tool::AgentKind;
use async_trait::async_trait;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// What every hook sees: a snapshot of the agent at the hook point.
#[derive(Clone)]
pub struct HookContext {
    /// Session id.
    pub session_id: String,
    /// Current user turn (1-based).
    pub turn: u64,
    /// Main or forked agent.
    pub agent: AgentKind,
    /// Working directory.
    pub cwd: PathBuf,
    /// The model the agent uses.
    pub model: Arc<dyn Model>,
    /// The rendered system prompt (what forked agents share).
    pub system: Arc<Vec<String>>,
    /// The conversation at the hook point.
    pub messages: Arc<Vec<Message>>,
    /// Conversation size in tokens: the newest response's reported usage plus an estimate of the
    /// messages after it.
    pub context_tokens: u64,
    /// Tools that succeeded at least once and never failed during the previous user turn.
    pub recent_tools: Vec<String>,
    /// Where to report.
    pub events: Arc<dyn EventSink>,
    /// Tracked background tasks (spawn here so `drain` waits for them).
    pub background: BackgroundTasks,
    /// Fires when the turn (turn-start and post-sampling hooks) or the session (stop hooks,
    /// compaction listeners) is cancelled.
    pub cancel: CancellationToken,
}

impl std::fmt::Debug for HookContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookContext")
            .field("session_id", &self.session_id)
            .field("turn", &self.turn)
            .field("agent", &self.agent)
            .field("messages", &self.messages.len())
            .field("context_tokens", &self.context_tokens)
            .finish_non_exhaustive()
    }
}

impl HookContext {
    /// Emit an event.
    pub fn emit(&self, event: AgentEvent) {
        self.events.emit(event);
    }

    /// Whether this is the main agent.
    pub fn is_main(&self) -> bool {
        self.agent == AgentKind::Main
    }

    /// What a forked agent started from this point shares with the parent.
    pub fn fork_base(&self) -> ForkBase {
        ForkBase {
            model: self.model.clone(),
            system: self.system.clone(),
            messages: self.messages.clone(),
            session_id: self.session_id.clone(),
            cwd: self.cwd.clone(),
            events: self.events.clone(),
            cancel: self.cancel.clone(),
        }
    }

    /// Start building a forked agent for `purpose` from this point.
    pub fn fork(&self, purpose: impl Into<String>) -> ForkedAgentBuilder {
        ForkedAgentBuilder::new(self.fork_base(), purpose)
    }
}

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
    handle: JoinHandle<Option<Attachment>>,
    cancel: CancellationToken,
}

impl PendingAttachment {
    /// Spawn `fut` on the runtime; `cancel` is fired when the attachment is dropped unconsumed.
    pub fn spawn<F>(cancel: CancellationToken, fut: F) -> Self
    where
        F: std::future::Future<Output = Option<Attachment>> + Send + 'static,
    {
        Self {
            handle: tokio::spawn(fut),
            cancel,
        }
    }

    /// Whether the work has settled.
    pub fn is_ready(&self) -> bool {
        self.handle.is_finished()
    }

    /// Wait for the result (a panicked or aborted task yields `None`).
    pub async fn wait(mut self) -> Option<Attachment> {
        (&mut self.handle).await.ok().flatten()
    }
}

impl Drop for PendingAttachment {
    fn drop(&mut self) {
        if !self.handle.is_finished() {
            self.cancel.cancel();
            self.handle.abort();
        }
    }
}

/// Runs when a user message arrives, before the first model call.
#[async_trait]
pub trait TurnStartHook: Send + Sync {
    /// Start per-turn work. Return a pending attachment to have its result injected when it
    /// settles; never block here on slow work.
    async fn on_turn_start(&self, ctx: &HookContext, user_text: &str) -> Option<PendingAttachment>;
}

/// Runs after every model response of the main agent. Must return quickly: spawn slow work on
/// `ctx.background`.
#[async_trait]
pub trait PostSamplingHook: Send + Sync {
    /// Inspect the response.
    async fn after_sampling(&self, ctx: &HookContext, response: &ModelResponse);
}

/// Runs, fire-and-forget, when a main-agent turn ends with a response that has no tool calls.
/// The agent tracks the task so `drain` can wait for it; the next turn never waits for it.
#[async_trait]
pub trait StopHook: Send + Sync {
    /// Handle the end of a turn.
    async fn on_stop(&self, ctx: HookContext);
}

/// Told when the conversation was compacted (attachments are gone; baselines reset).
#[async_trait]
pub trait CompactionListener: Send + Sync {
    /// The conversation in `ctx.messages` is the compacted one.
    async fn on_compacted(&self, ctx: &HookContext);
}

/// All hooks of an agent.
#[derive(Clone, Default)]
pub struct Hooks {
    /// Turn-start hooks.
    pub turn_start: Vec<Arc<dyn TurnStartHook>>,
    /// Post-sampling hooks.
    pub post_sampling: Vec<Arc<dyn PostSamplingHook>>,
    /// Stop hooks.
    pub stop: Vec<Arc<dyn StopHook>>,
    /// Compaction listeners.
    pub compaction: Vec<Arc<dyn CompactionListener>>,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks")
            .field("turn_start", &self.turn_start.len())
            .field("post_sampling", &self.post_sampling.len())
            .field("stop", &self.stop.len())
            .field("compaction", &self.compaction.len())
            .finish()
    }
}
