//! Forked agents: runs of the agent loop (the main agent's, `turn_loop.rs`) that share the
//! parent's system prompt, tools and message prefix (so the provider's prompt cache is reused)
//! but have their own permission gate and turn limit, and whose transcript is not kept.
//! What a fork may do is restricted by its gate, not by changing the tools: by default it
//! declares exactly the parent's tools and may call none of them ([`DenyAll`]).
//! Used by the memory extractor, the session-memory updater, the consolidator and summary
//! compaction. Their transcript is not kept in the parent.
//!
//! A fork's request always fits the shared [`ContextWindow`](crate::window::ContextWindow): the parent prefix it sends is
//! trimmed first (oldest user turns dropped, then the largest messages cut in the middle; see
//! [`crate::fit`]) and `max_tokens` is clamped to the room left. When the provider still rejects
//! the prompt and names a smaller window, the fork adopts it and refits once; when even the
//! trimmed prompt cannot fit, the fork is skipped with [`AgentEvent::ForkSkipped`] and ends with
//! [`AgentError::ContextBlocked`]. Nothing is retried in a loop.

use crate::config::AgentConfig;
use crate::context::HookContext;
use crate::error::AgentError;
use crate::events::{AgentEvent, EventSink, ScopedSink};
use crate::fit::fit_messages;
use crate::invariants::provider_view;
use crate::loop_step::{LoopStep, ToolOutcome};
use crate::message::{ContentBlock, Message, Role};
use crate::model::{ModelError, ModelResponse, RequestOptions};
use crate::tokens::{CharEstimator, TokenCounter, estimate_messages};
use crate::tool::{AgentKind, DenyAll, PermissionGate, Tool, ToolContext, ToolRegistry};
use crate::turn_loop::{Conversation, LoopSpec, Prepared, TurnStop, run_loop};
use async_trait::async_trait;
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

/// Forks start from a hook's snapshot of the parent: the [`HookContext`] is what a fork shares
/// with it (model, rendered system prompt, conversation, tools, session id, working directory,
/// event sink, context window, cancellation).
impl HookContext {
    /// Start building a forked agent for `purpose` from this point.
    pub fn fork(&self, purpose: impl Into<String>) -> ForkedAgentBuilder {
        ForkedAgentBuilder::new(self.clone(), purpose)
    }
}

/// Builds a [`ForkedAgent`].
#[derive(Debug)]
pub struct ForkedAgentBuilder {
    base: HookContext,
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
    /// Model calls a fork may make unless told otherwise.
    pub const DEFAULT_MAX_TURNS: u32 = 5;
    /// `max_tokens` of a fork's requests unless told otherwise.
    pub const DEFAULT_MAX_TOKENS: u32 = 4_096;

    /// A fork of the agent `base` describes (usually a hook's [`HookContext`], possibly with its
    /// messages replaced) for `purpose` (it names model requests, e.g. `extractor`). Defaults:
    /// the parent's tools (`base.tools`), a gate denying every call ([`DenyAll`]),
    /// [`DEFAULT_MAX_TURNS`](Self::DEFAULT_MAX_TURNS) turns,
    /// [`DEFAULT_MAX_TOKENS`](Self::DEFAULT_MAX_TOKENS) max tokens, parent prefix shared, and
    /// [`AgentConfig`]'s default tool timeout and output cap.
    pub fn new(base: HookContext, purpose: impl Into<String>) -> Self {
        Self {
            tools: base.tools.clone(),
            base,
            purpose: purpose.into(),
            gate: Arc::new(DenyAll),
            max_turns: Self::DEFAULT_MAX_TURNS,
            max_tokens: Self::DEFAULT_MAX_TOKENS,
            share_prefix: true,
            options: RequestOptions::default(),
            tool_timeout: AgentConfig::DEFAULT_TOOL_TIMEOUT,
            max_tool_output_bytes: AgentConfig::DEFAULT_MAX_TOOL_OUTPUT_BYTES,
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

    /// Model calls allowed (default [`DEFAULT_MAX_TURNS`](Self::DEFAULT_MAX_TURNS)).
    pub fn max_turns(mut self, n: u32) -> Self {
        self.max_turns = n;
        self
    }

    /// `max_tokens` per request (default [`DEFAULT_MAX_TOKENS`](Self::DEFAULT_MAX_TOKENS)).
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

    /// How long one tool call may run (default [`AgentConfig::DEFAULT_TOOL_TIMEOUT`]).
    pub fn tool_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.tool_timeout = timeout;
        self
    }

    /// Cap on one tool output, in bytes (default [`AgentConfig::DEFAULT_MAX_TOOL_OUTPUT_BYTES`]).
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
    /// Tool calls the gate allowed that returned an error (for a memory writer: mostly a write
    /// the store refused, a credential, a bad name, too big).
    pub failed_calls: u32,
    /// Files written by its tools, in order, without duplicates.
    pub files_written: Vec<PathBuf>,
}

/// A forked sub-agent. See the module docs.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use memloop_testkit::{hook_context, ScriptStep, ScriptedModel};
/// use memloop_core::{fork::ForkedAgentBuilder, message::Message, HookContext};
/// use std::sync::Arc;
///
/// let model = ScriptedModel::new().then(ScriptStep::text("noted"));
/// let messages = vec![Message::user("hi"), Message::assistant("hello")];
/// let base = HookContext {
///     system: Arc::new(vec!["You are helpful.".into()]),
///     ..hook_context(Arc::new(model), messages)
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
    let step = LoopStep {
        model: b.base.model.clone(),
        tools: b.tools.clone(),
        gate: b.gate.clone(),
        events: events.clone(),
        tool_ctx: ToolContext {
            session_id: b.base.session_id.clone(),
            cwd: b.base.cwd.clone(),
            agent: AgentKind::Forked(b.purpose.clone()),
            cancel: b.base.cancel.clone(),
        },
        purpose: b.purpose.clone(),
        max_tokens: b.max_tokens,
        options: b.options.clone(),
        tool_timeout: b.tool_timeout,
        max_tool_output_bytes: b.max_tool_output_bytes,
        spill_dir: None,
        window: b.base.window.clone(),
        background: b.base.background.clone(),
        depth: 0,
        withheld: std::collections::BTreeMap::new(),
        capture: b.base.capture.clone(),
    };
    // What is sent besides the parent's prefix: system sections, tool specs, the prompt.
    let fixed = step.request_overhead(&b.base.system) + CharEstimator.count(&prompt);
    let spec = LoopSpec {
        step,
        window: &b.base.window,
        max_iterations: b.max_turns,
        main: false,
    };
    let mut transcript = ForkConversation {
        b: &b,
        events,
        prefix,
        prompt,
        fixed,
        exchange: Vec::new(),
        out: ForkOutcome::default(),
        seen: HashSet::new(),
    };
    let end = run_loop(&spec, &mut transcript).await?;
    let mut out = transcript.out;
    out.turns = end.iterations;
    out.hit_max_turns = end.stop == TurnStop::MaxIterations;
    Ok(out)
}

/// A fork's conversation: the parent's prefix (fitted to the window before every request), the
/// prompt, and the fork's own exchange after it. Nothing of it enters the parent's conversation.
struct ForkConversation<'a> {
    b: &'a ForkedAgentBuilder,
    events: Arc<dyn EventSink>,
    prefix: Vec<Message>,
    prompt: String,
    /// Tokens sent besides the prefix and the exchange.
    fixed: u64,
    /// The fork's own assistant/tool-result exchange, after the prompt.
    exchange: Vec<Message>,
    out: ForkOutcome,
    seen: HashSet<PathBuf>,
}

#[async_trait]
impl Conversation for ForkConversation<'_> {
    async fn prepare(&mut self, _step: &LoopStep) -> Result<Prepared, AgentError> {
        let b = self.b;
        let counter = CharEstimator;
        let window = &b.base.window;
        let budget = window
            .prompt_budget(b.max_tokens)
            .saturating_sub(self.fixed + estimate_messages(&counter, &self.exchange));
        let Some(mut messages) = fit_messages(&self.prefix, budget, &counter, None) else {
            return Err(skip(
                b,
                &self.events,
                format!(
                    "its prompt cannot fit the {}-token context window even trimmed",
                    window.tokens()
                ),
            ));
        };
        match messages.last_mut() {
            Some(last) if last.role == Role::User => {
                last.content.push(ContentBlock::text(self.prompt.clone()))
            }
            _ => messages.push(Message::user(self.prompt.clone())),
        }
        messages.extend(self.exchange.iter().cloned());
        let prompt_tokens = self.fixed + estimate_messages(&counter, &messages);
        Ok(Prepared {
            system: b.base.system.to_vec(),
            messages,
            context_tokens: prompt_tokens,
            prompt_tokens,
        })
    }

    async fn too_long(
        &mut self,
        error: ModelError,
        learned: bool,
        retried: bool,
    ) -> Result<(), AgentError> {
        if retried {
            let message = match &error {
                ModelError::ContextTooLong { message, .. } => message.clone(),
                other => other.to_string(),
            };
            return Err(skip(
                self.b,
                &self.events,
                format!("the provider still rejects its trimmed prompt: {message}"),
            ));
        }
        if !learned {
            return Err(AgentError::Model(error));
        }
        // The provider named a smaller window: refit once.
        tracing::info!("fork prompt too long; refitting it once");
        Ok(())
    }

    async fn keep_response(&mut self, _response: &ModelResponse, assistant: &Message) {
        self.out.final_text = assistant.text();
        if assistant.has_tool_use() {
            self.exchange.push(assistant.clone());
        }
    }

    fn keep_results(&mut self, results: Message, outcomes: Vec<ToolOutcome>) {
        self.out.tool_calls += outcomes.len() as u32;
        self.out.denied_calls += outcomes.iter().filter(|o| o.denied).count() as u32;
        self.out.failed_calls += outcomes.iter().filter(|o| o.is_error && !o.denied).count() as u32;
        for f in &results.meta.files_written {
            if self.seen.insert(f.clone()) {
                self.out.files_written.push(f.clone());
            }
        }
        self.exchange.push(results);
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
