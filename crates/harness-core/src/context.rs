//! [`HookContext`]: the snapshot of an agent handed to hooks, compactors and extractors.

use crate::background::BackgroundTasks;
use crate::events::{AgentEvent, EventSink};
use crate::message::Message;
use crate::model::Model;
use crate::tool::{AgentKind, ToolRegistry};
use crate::window::ContextWindow;
use std::path::PathBuf;
use std::sync::Arc;
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
    /// The agent's tools (what its requests declare). Forks inherit them so their request
    /// prefix matches the parent's and the provider's prompt cache is reused.
    pub tools: ToolRegistry,
    /// Conversation size in tokens: the newest response's reported usage plus an estimate of the
    /// messages after it.
    pub context_tokens: u64,
    /// Tools that succeeded at least once and never failed during the previous user turn.
    pub recent_tools: Vec<String>,
    /// The model's context window, shared with the agent (a limit learned from a provider error
    /// is seen by everyone holding it).
    pub window: ContextWindow,
    /// Where to report.
    pub events: Arc<dyn EventSink>,
    /// Tracked background tasks (spawn here so `drain` waits for them).
    pub background: BackgroundTasks,
    /// Fires when the turn (turn-start and post-sampling hooks) or the session (stop hooks,
    /// compaction listeners) is cancelled.
    pub cancel: CancellationToken,
    /// The agent's content capture ([`AgentConfig::capture_content`]), which its forks inherit:
    /// their `chat` spans record content exactly when the parent's do.
    ///
    /// [`AgentConfig::capture_content`]: crate::AgentConfig::capture_content
    pub capture: Option<crate::telemetry::ContentCapture>,
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
    /// Emit an event: one of core's, or a crate's own event type that converts into
    /// [`AgentEvent::Extension`].
    pub fn emit(&self, event: impl Into<AgentEvent>) {
        self.events.emit(event.into());
    }

    /// Whether this is the main agent.
    pub fn is_main(&self) -> bool {
        self.agent == AgentKind::Main
    }
}
