//! [`AgentBuilder`]: how an [`Agent`] is put together.

use crate::Hook;
use crate::agent::Agent;
use crate::background::BackgroundTasks;
use crate::compaction::ContextCompactor;
use crate::config::AgentConfig;
use crate::events::{EventSink, NullSink};
use crate::invariants::RepairFn;
use crate::message::Message;
use crate::model::Model;
use crate::prompt::{SystemPrompt, SystemSection};
use crate::tokens::{CharEstimator, ConversationTokens, TokenCounter};
use crate::tool::{AllowAll, PermissionGate, Tool, ToolRegistry};
use crate::window::ContextWindow;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

impl Agent {
    /// Shortcut for [`AgentBuilder::new`].
    pub fn builder(model: Arc<dyn Model>) -> AgentBuilder {
        AgentBuilder::new(model)
    }
}

/// Builds an [`Agent`].
pub struct AgentBuilder {
    model: Arc<dyn Model>,
    config: AgentConfig,
    tools: ToolRegistry,
    gate: Arc<dyn PermissionGate>,
    system: SystemPrompt,
    hooks: Vec<Arc<dyn Hook>>,
    compactor: Option<Arc<dyn ContextCompactor>>,
    events: Arc<dyn EventSink>,
    counter: Arc<dyn TokenCounter>,
    repair: Option<RepairFn>,
    background: BackgroundTasks,
    messages: Vec<Message>,
    window: Option<ContextWindow>,
}

impl std::fmt::Debug for AgentBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentBuilder")
            .field("config", &self.config)
            .field("tools", &self.tools)
            .finish_non_exhaustive()
    }
}

impl AgentBuilder {
    /// Start with a model; everything else has defaults (no tools, allow-all gate, chars/4 token
    /// estimate, no hooks, events dropped).
    pub fn new(model: Arc<dyn Model>) -> Self {
        Self {
            model,
            config: AgentConfig::default(),
            tools: ToolRegistry::new(),
            gate: Arc::new(AllowAll),
            system: SystemPrompt::new(),
            hooks: Vec::new(),
            compactor: None,
            events: Arc::new(NullSink),
            counter: Arc::new(CharEstimator),
            repair: None,
            background: BackgroundTasks::new(),
            messages: Vec::new(),
            window: None,
        }
    }

    /// The session id the agent will have (from the config).
    pub fn session_id(&self) -> &str {
        &self.config.session_id
    }

    /// Replace the config.
    pub fn config(mut self, config: AgentConfig) -> Self {
        self.config = config;
        self
    }

    /// Add a tool.
    pub fn tool(mut self, tool: Arc<dyn Tool>) -> Self {
        self.tools.register(tool);
        self
    }

    /// Replace the tool registry.
    pub fn tools(mut self, tools: ToolRegistry) -> Self {
        self.tools = tools;
        self
    }

    /// Set the permission gate.
    pub fn gate(mut self, gate: Arc<dyn PermissionGate>) -> Self {
        self.gate = gate;
        self
    }

    /// Append a system-prompt section.
    pub fn section(mut self, section: Arc<dyn SystemSection>) -> Self {
        self.system.push(section);
        self
    }

    /// Register a [`Hook`] (recall, session notes, extraction, consolidation, or your own).
    /// Hooks run in registration order at each hook point.
    pub fn hook(mut self, hook: Arc<dyn Hook>) -> Self {
        self.hooks.push(hook);
        self
    }

    /// Keep the full text of cut tool outputs under `dir` (see [`AgentConfig::spill_dir`]).
    pub fn spill_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.config.spill_dir = Some(dir.into());
        self
    }

    /// Record message content on the `chat` spans (see [`AgentConfig::capture_content`]).
    pub fn capture_content(mut self, capture: crate::telemetry::ContentCapture) -> Self {
        self.config.capture_content = Some(capture);
        self
    }

    /// Set the compactor.
    pub fn compactor(mut self, compactor: Arc<dyn ContextCompactor>) -> Self {
        self.compactor = Some(compactor);
        self
    }

    /// Set the event sink.
    pub fn events(mut self, events: Arc<dyn EventSink>) -> Self {
        self.events = events;
        self
    }

    /// The token estimator the agent will use (compactors should measure with the same one).
    pub fn counter(&self) -> Arc<dyn TokenCounter> {
        self.counter.clone()
    }

    /// Set the token estimator.
    pub fn token_counter(mut self, counter: Arc<dyn TokenCounter>) -> Self {
        self.counter = counter;
        self
    }

    /// Opt into a repair pass applied when the invariant check fails (then re-checked).
    pub fn repair(mut self, repair: RepairFn) -> Self {
        self.repair = Some(repair);
        self
    }

    /// Share a background task set (e.g. with other agents of the host).
    pub fn background(mut self, background: BackgroundTasks) -> Self {
        self.background = background;
        self
    }

    /// Resume from an existing conversation.
    pub fn messages(mut self, messages: Vec<Message>) -> Self {
        self.messages = messages;
        self
    }

    /// Share this context-window handle (e.g. `ContextWindow::new(8_192)` for a small local
    /// model). Without one the agent shares its compactor's handle
    /// ([`ContextCompactor::context_window`]), else assumes
    /// [`DEFAULT_CONTEXT_WINDOW`](crate::window::DEFAULT_CONTEXT_WINDOW). Either way it narrows
    /// the window when a provider's context error names the real limit.
    pub fn context_window(mut self, window: ContextWindow) -> Self {
        self.window = Some(window);
        self
    }

    /// Build the agent.
    pub fn build(self) -> Agent {
        let from_compactor = self.compactor.as_ref().and_then(|c| c.context_window());
        let window = match (self.window, from_compactor) {
            (Some(w), Some(c)) => {
                // Two handles: keep them agreeing on the smaller window.
                c.learn(w.tokens());
                w.learn(c.tokens());
                w
            }
            (Some(w), None) => w,
            (None, Some(c)) => c,
            (None, None) => ContextWindow::default(),
        };
        let run_span = crate::telemetry::agent_span("main", &self.config.session_id);
        Agent {
            run_span,
            window,
            tokens: ConversationTokens::new(self.counter),
            model: self.model,
            config: self.config,
            tools: self.tools,
            gate: self.gate,
            system: self.system,
            hooks: self.hooks,
            compactor: self.compactor,
            events: self.events.clone(),
            host_events: self.events,
            rollback_point: None,
            repair: self.repair,
            background: self.background,
            messages: Arc::new(self.messages),
            turn: 0,
            recent_tools: Vec::new(),
            last_system: Arc::new(Vec::new()),
            session_cancel: CancellationToken::new(),
        }
    }
}
