//! [`AgentBuilder`] and the agent's settings ([`AgentConfig`]) and turn results.

use crate::agent::Agent;
use crate::background::BackgroundTasks;
use crate::compaction::ContextCompactor;
use crate::events::{EventSink, NullSink};
use crate::hooks::{CompactionListener, Hooks, PostSamplingHook, StopHook, TurnStartHook};
use crate::message::Message;
use crate::model::Model;
use crate::prompt::{SystemPrompt, SystemSection};
use crate::tokens::{CharEstimator, ConversationTokens, TokenCounter};
use crate::tool::{AllowAll, PermissionGate, Tool, ToolRegistry};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// A conversation repair pass the host may opt into (see `memloop-compact`'s repair passes).
pub type RepairFn = Arc<dyn Fn(Vec<Message>) -> Vec<Message> + Send + Sync>;

/// Agent settings.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// Session id (random by default).
    pub session_id: String,
    /// Working directory handed to tools.
    pub cwd: PathBuf,
    /// Model calls allowed in one user turn before the guard stops it. Default 25.
    pub max_iterations: u32,
    /// `max_tokens` of main-agent requests. Default 8,192.
    pub max_tokens: u32,
    /// Check conversation invariants before every request. Default true.
    pub validate_invariants: bool,
    /// Default timeout of [`Agent::drain`]. Default 60 s.
    pub drain_timeout: Duration,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            session_id: uuid::Uuid::new_v4().to_string(),
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
            max_iterations: 25,
            max_tokens: 8_192,
            validate_invariants: true,
            drain_timeout: Duration::from_secs(60),
        }
    }
}

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnStop {
    /// The model answered without tool calls.
    Completed,
    /// The iteration guard stopped the loop.
    MaxIterations,
}

/// The result of [`Agent::run_turn`].
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    /// Text of the final assistant response.
    pub text: String,
    /// Model calls made.
    pub iterations: u32,
    /// How it ended.
    pub stop: TurnStop,
}

/// Builds an [`Agent`].
pub struct AgentBuilder {
    model: Arc<dyn Model>,
    config: AgentConfig,
    tools: ToolRegistry,
    gate: Arc<dyn PermissionGate>,
    system: SystemPrompt,
    hooks: Hooks,
    compactor: Option<Arc<dyn ContextCompactor>>,
    events: Arc<dyn EventSink>,
    counter: Arc<dyn TokenCounter>,
    repair: Option<RepairFn>,
    background: BackgroundTasks,
    messages: Vec<Message>,
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
            hooks: Hooks::default(),
            compactor: None,
            events: Arc::new(NullSink),
            counter: Arc::new(CharEstimator),
            repair: None,
            background: BackgroundTasks::new(),
            messages: Vec::new(),
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

    /// Add a turn-start hook.
    pub fn turn_start_hook(mut self, hook: Arc<dyn TurnStartHook>) -> Self {
        self.hooks.turn_start.push(hook);
        self
    }

    /// Add a post-sampling hook.
    pub fn post_sampling_hook(mut self, hook: Arc<dyn PostSamplingHook>) -> Self {
        self.hooks.post_sampling.push(hook);
        self
    }

    /// Add a stop hook.
    pub fn stop_hook(mut self, hook: Arc<dyn StopHook>) -> Self {
        self.hooks.stop.push(hook);
        self
    }

    /// Add a compaction listener.
    pub fn compaction_listener(mut self, listener: Arc<dyn CompactionListener>) -> Self {
        self.hooks.compaction.push(listener);
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

    /// Build the agent.
    pub fn build(self) -> Agent {
        Agent {
            tokens: ConversationTokens::new(self.counter),
            model: self.model,
            config: self.config,
            tools: self.tools,
            gate: self.gate,
            system: self.system,
            hooks: self.hooks,
            compactor: self.compactor,
            events: self.events,
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
