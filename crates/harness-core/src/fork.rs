//! Forked agents: sub-loops that share the parent's system prompt, tools and message prefix (so
//! the provider's prompt cache is reused) but have their own permission gate and turn limit.
//! What a fork may do is restricted by its gate, not by changing the tools: by default it
//! declares exactly the parent's tools and may call none of them ([`DenyAll`]).
//! Used by the memory extractor, the session-memory updater, the consolidator and summary
//! compaction. Their transcript is not kept in the parent.
//!
//! A fork's request always fits the shared [`ContextWindow`]: the parent prefix it sends is
//! trimmed first (oldest user turns dropped, then the largest messages cut in the middle; see
//! [`crate::fit`]) and `max_tokens` is clamped to the room left. When the provider still rejects
//! the prompt and names a smaller window, the fork adopts it and refits once; when even the
//! trimmed prompt cannot fit, the fork is skipped with [`AgentEvent::ForkSkipped`] and ends with
//! [`AgentError::ContextBlocked`]. Nothing is retried in a loop.

use crate::context::HookContext;
use crate::error::AgentError;
use crate::events::{AgentEvent, EventSink, ScopedSink};
use crate::fit::fit_messages;
use crate::invariants::provider_view;
use crate::loop_step::{LoopStep, repair_response};
use crate::message::{ContentBlock, Message, Role};
use crate::model::{Model, ModelError, RequestOptions};
use crate::tokens::{CharEstimator, TokenCounter, estimate_messages};
use crate::tool::{AgentKind, DenyAll, PermissionGate, Tool, ToolContext, ToolRegistry};
use crate::window::ContextWindow;
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// What a fork shares with its parent.
#[derive(Clone)]
pub struct ForkBase {
    /// The parent's model.
    pub model: Arc<dyn Model>,
    /// The parent's rendered system prompt.
    pub system: Arc<Vec<String>>,
    /// The parent's conversation at the fork point.
    pub messages: Arc<Vec<Message>>,
    /// The parent's tools: what the fork declares (see [`ForkedAgentBuilder::tool`]).
    pub tools: ToolRegistry,
    /// Session id.
    pub session_id: String,
    /// Working directory.
    pub cwd: PathBuf,
    /// Event sink.
    pub events: Arc<dyn EventSink>,
    /// The parent's context window (shared: a limit the fork learns is the parent's too).
    pub window: ContextWindow,
    /// Cancels the fork.
    pub cancel: CancellationToken,
}

impl std::fmt::Debug for ForkBase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ForkBase")
            .field("session_id", &self.session_id)
            .field("messages", &self.messages.len())
            .finish_non_exhaustive()
    }
}

/// Forks start from a hook's snapshot of the parent.
impl HookContext {
    /// What a forked agent started from this point shares with the parent.
    pub fn fork_base(&self) -> ForkBase {
        ForkBase {
            model: self.model.clone(),
            system: self.system.clone(),
            messages: self.messages.clone(),
            tools: self.tools.clone(),
            session_id: self.session_id.clone(),
            cwd: self.cwd.clone(),
            events: self.events.clone(),
            window: self.window.clone(),
            cancel: self.cancel.clone(),
        }
    }

    /// Start building a forked agent for `purpose` from this point.
    pub fn fork(&self, purpose: impl Into<String>) -> ForkedAgentBuilder {
        ForkedAgentBuilder::new(self.fork_base(), purpose)
    }
}

/// Builds a [`ForkedAgent`].
#[derive(Debug)]
pub struct ForkedAgentBuilder {
    base: ForkBase,
    purpose: String,
    tools: ToolRegistry,
    gate: Arc<dyn PermissionGate>,
    max_turns: u32,
    max_tokens: u32,
    share_prefix: bool,
    options: RequestOptions,
    tool_timeout: std::time::Duration,
    max_tool_output_bytes: usize,
}

impl ForkedAgentBuilder {
    /// A fork for `purpose` (it names model requests, e.g. `extractor`). Defaults: the parent's
    /// tools ([`ForkBase::tools`]), a gate denying every call ([`DenyAll`]), 5 turns, 4,096 max
    /// tokens, parent prefix shared.
    pub fn new(base: ForkBase, purpose: impl Into<String>) -> Self {
        Self {
            tools: base.tools.clone(),
            base,
            purpose: purpose.into(),
            gate: Arc::new(DenyAll),
            max_turns: 5,
            max_tokens: 4_096,
            share_prefix: true,
            options: RequestOptions::default(),
            tool_timeout: std::time::Duration::from_secs(600),
            max_tool_output_bytes: 100_000,
        }
    }

    /// Bind one of the fork's own tools. When the parent declares a tool of that name with an
    /// identical spec, only the implementation changes (e.g. a writer bound to the fork's own
    /// store) and the request prefix stays byte-identical. Otherwise the declared tool list
    /// changes (a tool is added, or a declaration replaced): the tools come first in the cached
    /// prefix, so the fork's requests then miss the parent's prompt cache (logged at debug).
    /// Restrict what the fork may call with [`gate`](Self::gate), not by changing the tools.
    pub fn tool(mut self, tool: Arc<dyn Tool>) -> Self {
        let spec = tool.spec();
        match self.tools.get(&spec.name).map(|t| t.spec()) {
            Some(declared) if declared == spec => {}
            declared => tracing::debug!(
                purpose = %self.purpose,
                tool = %spec.name,
                change = if declared.is_some() { "replaces a declaration" } else { "adds a tool" },
                "the fork's tool list differs from the parent's: its requests miss the parent's \
                 cached prefix"
            ),
        }
        self.tools.register(tool);
        self
    }

    /// Set the gate: what the fork may call among its tools (default: nothing).
    pub fn gate(mut self, gate: Arc<dyn PermissionGate>) -> Self {
        self.gate = gate;
        self
    }

    /// Model calls allowed (default 5).
    pub fn max_turns(mut self, n: u32) -> Self {
        self.max_turns = n;
        self
    }

    /// `max_tokens` per request.
    pub fn max_tokens(mut self, n: u32) -> Self {
        self.max_tokens = n;
        self
    }

    /// Whether to send the parent's messages before the prompt (default true). Turn off for
    /// side queries that must not see the conversation.
    pub fn share_prefix(mut self, share: bool) -> Self {
        self.share_prefix = share;
        self
    }

    /// Temperature, tool choice, stop sequences and extra body fields of this fork's requests.
    pub fn request_options(mut self, options: RequestOptions) -> Self {
        self.options = options;
        self
    }

    /// How long one tool call may run (default 10 minutes).
    pub fn tool_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.tool_timeout = timeout;
        self
    }

    /// Cap on one tool output, in bytes (default 100,000).
    pub fn max_tool_output_bytes(mut self, bytes: usize) -> Self {
        self.max_tool_output_bytes = bytes;
        self
    }

    /// Build. The fork gets a unique id; its events carry its purpose and that id.
    pub fn build(self) -> ForkedAgent {
        let id = format!("fork_{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        ForkedAgent { b: self, id }
    }
}

/// What a forked run did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ForkOutcome {
    /// Text of the last response.
    pub final_text: String,
    /// Model calls made.
    pub turns: u32,
    /// Whether it stopped because of the turn limit.
    pub hit_max_turns: bool,
    /// Tool calls made (including denied ones).
    pub tool_calls: u32,
    /// Tool calls the gate denied.
    pub denied_calls: u32,
    /// Files written by its tools, in order, without duplicates.
    pub files_written: Vec<PathBuf>,
}

/// A forked sub-agent. See the module docs.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use memloop_core::testing::{ScriptStep, ScriptedModel};
/// use memloop_core::{fork::{ForkBase, ForkedAgentBuilder}, message::Message, events::NullSink};
/// use std::sync::Arc;
///
/// let model = ScriptedModel::new().then(ScriptStep::text("noted"));
/// let base = ForkBase {
///     model: Arc::new(model),
///     system: Arc::new(vec!["You are helpful.".into()]),
///     messages: Arc::new(vec![Message::user("hi"), Message::assistant("hello")]),
///     tools: Default::default(),
///     session_id: "s1".into(),
///     cwd: ".".into(),
///     events: Arc::new(NullSink),
///     window: Default::default(),
///     cancel: Default::default(),
/// };
/// let out = ForkedAgentBuilder::new(base, "notes").build().run("Summarise.").await.unwrap();
/// assert_eq!(out.final_text, "noted");
/// # }
/// ```
#[derive(Debug)]
pub struct ForkedAgent {
    b: ForkedAgentBuilder,
    id: String,
}

/// The parent prefix a fork may send: provider view, without a trailing assistant message whose
/// tool calls are still unanswered.
pub(crate) fn fork_prefix(messages: &[Message]) -> Vec<Message> {
    let mut view = provider_view(messages);
    if view
        .last()
        .is_some_and(|m| m.role == Role::Assistant && m.has_tool_use())
    {
        view.pop();
    }
    view
}

impl ForkedAgent {
    /// Run the fork with `prompt` as the new user message.
    pub async fn run(self, prompt: impl Into<String>) -> Result<ForkOutcome, AgentError> {
        let b = self.b;
        let span = tracing::info_span!("fork", purpose = %b.purpose, id = %self.id);
        tracing::Instrument::instrument(run_fork(b, self.id, prompt.into()), span).await
    }

    /// This fork's id (it appears in its events' origin).
    pub fn id(&self) -> &str {
        &self.id
    }
}

async fn run_fork(
    b: ForkedAgentBuilder,
    id: String,
    prompt: String,
) -> Result<ForkOutcome, AgentError> {
    let events: Arc<dyn EventSink> =
        Arc::new(ScopedSink::fork(b.base.events.clone(), &b.purpose, &id));
    let prefix = if b.share_prefix {
        fork_prefix(&b.base.messages)
    } else {
        Vec::new()
    };
    let mut step = LoopStep {
        model: &b.base.model,
        tools: &b.tools,
        gate: &b.gate,
        events: &events,
        tool_ctx: ToolContext {
            session_id: b.base.session_id.clone(),
            cwd: b.base.cwd.clone(),
            agent: AgentKind::Forked(b.purpose.clone()),
            cancel: b.base.cancel.clone(),
        },
        purpose: &b.purpose,
        max_tokens: b.max_tokens,
        options: &b.options,
        tool_timeout: b.tool_timeout,
        max_tool_output_bytes: b.max_tool_output_bytes,
        spill_dir: None,
    };
    let counter = CharEstimator;
    let window = &b.base.window;
    // What is sent besides the parent's prefix: system sections, tool specs, the prompt.
    let fixed = step.request_overhead(&b.base.system) + counter.count(&prompt);
    let mut out = ForkOutcome::default();
    let mut seen = HashSet::new();
    // The fork's own assistant/tool-result exchange, after the prompt.
    let mut exchange: Vec<Message> = Vec::new();
    let mut retried = false;
    loop {
        if out.turns >= b.max_turns {
            out.hit_max_turns = true;
            tracing::info!(max_turns = b.max_turns, "fork reached its turn limit");
            return Ok(out);
        }
        let budget = window
            .prompt_budget(b.max_tokens)
            .saturating_sub(fixed + estimate_messages(&counter, &exchange));
        let Some(mut messages) = fit_messages(&prefix, budget, &counter, None) else {
            return Err(skip(
                &b,
                &events,
                format!(
                    "its prompt cannot fit the {}-token context window even trimmed",
                    window.tokens()
                ),
            ));
        };
        match messages.last_mut() {
            Some(last) if last.role == Role::User => {
                last.content.push(ContentBlock::text(prompt.clone()))
            }
            _ => messages.push(Message::user(prompt.clone())),
        }
        messages.extend(exchange.iter().cloned());
        let prompt_tokens = fixed + estimate_messages(&counter, &messages);
        step.max_tokens = window.output_budget(prompt_tokens, b.max_tokens);
        out.turns += 1;
        let mut response = match step
            .call_model(b.base.system.to_vec(), messages, out.turns, prompt_tokens)
            .await
        {
            Ok(r) => r,
            Err(ModelError::ContextTooLong { message, .. }) if retried => {
                return Err(skip(
                    &b,
                    &events,
                    format!("the provider still rejects its trimmed prompt: {message}"),
                ));
            }
            // The provider named a smaller window: adopt it and refit once.
            Err(ModelError::ContextTooLong {
                limit: Some(limit), ..
            }) if window.learn(limit) => {
                events.emit(AgentEvent::ContextWindowLearned {
                    tokens: window.tokens(),
                });
                tracing::info!(limit, "fork prompt too long; refitting it once");
                retried = true;
                out.turns -= 1;
                continue;
            }
            Err(ModelError::Cancelled) => return Err(AgentError::Cancelled),
            Err(e) => return Err(AgentError::Model(e)),
        };
        for action in repair_response(&mut response) {
            events.emit(AgentEvent::ResponseRepaired { action });
        }
        let assistant = response.into_message();
        out.final_text = assistant.text();
        if !assistant.has_tool_use() {
            return Ok(out);
        }
        let (results, outcomes) = step.run_tools(&assistant).await;
        out.tool_calls += outcomes.len() as u32;
        out.denied_calls += outcomes.iter().filter(|o| o.denied).count() as u32;
        for f in &results.meta.files_written {
            if seen.insert(f.clone()) {
                out.files_written.push(f.clone());
            }
        }
        exchange.push(assistant);
        exchange.push(results);
        if b.base.cancel.is_cancelled() {
            return Err(AgentError::Cancelled);
        }
    }
}

/// Report a fork that cannot fit and return the error it ends with (never retried).
fn skip(b: &ForkedAgentBuilder, events: &Arc<dyn EventSink>, reason: String) -> AgentError {
    tracing::warn!(purpose = %b.purpose, %reason, "fork skipped");
    events.emit(AgentEvent::ForkSkipped {
        purpose: b.purpose.clone(),
        reason: reason.clone(),
    });
    AgentError::ContextBlocked(format!("{} skipped: {reason}", b.purpose))
}
