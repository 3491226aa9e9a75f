//! Child agents: a tool call starts an agent of its own, on the one agent loop
//! (`turn_loop::run_loop`) with a conversation of its own, from the agent whose call it runs in
//! ([`Caller::current`]). This is how a sub-agent runs (the `agent` tool of `memloop-subagents`):
//!
//! - the child inherits what its caller has unless told otherwise: model and context window,
//!   tools, permission gate, background tasks (the parent's `drain` waits for a child started
//!   in the background), tool limits, content capture;
//! - its task is the first user message of its conversation; nothing of the parent's
//!   conversation reaches it, and only its final text comes back ([`ChildResult`]);
//! - its events reach the caller's sink stamped with
//!   [`EventAgent::SubAgent`](crate::events::EventAgent::SubAgent) (name, id, depth), between
//!   exactly one `SubAgentStarted` and one `SubAgentFinished`, also when the run is dropped
//!   half-way; its tool calls run as [`AgentKind::SubAgent`];
//! - it is bounded: model calls, a time limit, and the caller's cancellation (its token is a
//!   child of the calling tool call's).

pub use crate::caller::Caller;
use crate::error::AgentError;
use crate::events::{AgentEvent, EventSink, ScopedSink, SubAgentEnd};
use crate::loop_step::{LoopStep, ToolOutcome};
use crate::message::Message;
use crate::model::{Model, ModelError, ModelResponse, RequestOptions};
use crate::tokens::{CharEstimator, estimate_messages};
use crate::tool::{AgentKind, PermissionGate, ToolContext, ToolRegistry};
use crate::turn_loop::{Conversation, LoopSpec, Prepared, TurnStop, run_loop};
use crate::window::ContextWindow;
use async_trait::async_trait;
use memloop_text::truncate_utf8;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Bytes of the final text an `SubAgentFinished` event carries.
const EVENT_TEXT_BYTES: usize = 500;

/// What a child agent is made of. [`ChildSpec::new`] starts from its caller: the caller's
/// model, window, tools and gate; set the rest, then [`ChildRun::new`].
#[derive(Clone)]
pub struct ChildSpec {
    /// Its name (a sub-agent's definition name): in its events, its request purpose
    /// (`subagent:<name>`) and its tool calls' [`AgentKind::SubAgent`].
    pub name: String,
    /// Its task: the first user message of its conversation.
    pub prompt: String,
    /// Its system prompt sections.
    pub system: Vec<String>,
    /// The model it calls.
    pub model: Arc<dyn Model>,
    /// The context window of `model` (the caller's when it runs on the caller's model).
    pub window: ContextWindow,
    /// Its tools.
    pub tools: ToolRegistry,
    /// Its permission gate.
    pub gate: Arc<dyn PermissionGate>,
    /// Tools deliberately not given, each with the reason a call to it is refused with (a
    /// clause: "`memory_write` is not available: {reason}.") instead of as an unknown tool.
    pub withheld: BTreeMap<String, String>,
    /// Model calls the run may make.
    pub max_iterations: u32,
    /// `max_tokens` of its requests.
    pub max_tokens: u32,
    /// How long the run may take before it is stopped ([`SubAgentEnd::TimedOut`]).
    pub timeout: Duration,
    /// Whether it runs in the background (reported in its events; spawn it with
    /// [`Caller::background`]).
    pub background: bool,
}

impl std::fmt::Debug for ChildSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChildSpec")
            .field("name", &self.name)
            .field("system", &self.system.len())
            .field("tools", &self.tools.names())
            .field("withheld", &self.withheld)
            .field("max_iterations", &self.max_iterations)
            .field("max_tokens", &self.max_tokens)
            .field("timeout", &self.timeout)
            .field("background", &self.background)
            .finish_non_exhaustive()
    }
}

impl ChildSpec {
    /// A child named `name` with the task `prompt`, on its caller's model, window, tools and
    /// gate, no system prompt, 20 model calls of at most 8,192 tokens, 5 minutes, in the
    /// foreground.
    pub fn new(caller: &Caller, name: impl Into<String>, prompt: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            prompt: prompt.into(),
            system: Vec::new(),
            model: caller.model.clone(),
            window: caller.window.clone(),
            tools: caller.tools.clone(),
            gate: caller.gate.clone(),
            withheld: BTreeMap::new(),
            max_iterations: 20,
            max_tokens: 8_192,
            timeout: Duration::from_secs(300),
            background: false,
        }
    }
}

/// One child agent run, ready to go: [`run`](Self::run) it in the tool call, or spawn it on
/// [`Caller::background`].
pub struct ChildRun {
    id: String,
    name: String,
    depth: u32,
    background: bool,
    prompt: String,
    system: Vec<String>,
    /// Its events go to `step.events`, stamped with the child's origin; its `tool_ctx.cancel`
    /// is its own token (a child of the calling tool call's).
    step: LoopStep,
    window: ContextWindow,
    max_iterations: u32,
    timeout: Duration,
}

impl std::fmt::Debug for ChildRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChildRun")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("depth", &self.depth)
            .field("background", &self.background)
            .finish_non_exhaustive()
    }
}

/// How a child run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildResult {
    /// Why it ended.
    pub end: SubAgentEnd,
    /// Its final answer; for a run stopped early, the last text it wrote.
    pub text: String,
    /// Model calls it made.
    pub turns: u32,
}

/// Emits `SubAgentFinished` once: when the run ends, or, if the run is dropped first (the
/// parent's tool call was cancelled and stopped), as cancelled; then cancels the sub-agent's
/// token so nothing it started outlives it.
struct EndGuard {
    id: String,
    name: String,
    background: bool,
    events: Arc<dyn EventSink>,
    cancel: CancellationToken,
    done: bool,
}

impl EndGuard {
    fn finish(&mut self, result: &ChildResult) {
        self.done = true;
        tracing::info!(agent = %self.name, id = %self.id, end = %result.end, turns = result.turns, "sub-agent finished");
        self.events.emit(AgentEvent::SubAgentFinished {
            id: self.id.clone(),
            name: self.name.clone(),
            background: self.background,
            end: result.end.clone(),
            turns: result.turns,
            text: truncate_utf8(&result.text, EVENT_TEXT_BYTES).to_owned(),
        });
    }
}

impl Drop for EndGuard {
    fn drop(&mut self) {
        if !self.done {
            self.finish(&ChildResult {
                end: SubAgentEnd::Cancelled,
                text: String::new(),
                turns: 0,
            });
        }
        self.cancel.cancel();
    }
}

impl ChildRun {
    /// The run of `spec`, one level deeper than `caller`, for the tool call `ctx` of the
    /// caller (its session and working directory; the child's cancellation token is a child of
    /// `ctx`'s). Its id is new (`agent_<12 hex digits>`).
    pub fn new(spec: ChildSpec, caller: &Caller, ctx: &ToolContext) -> Self {
        let depth = caller.depth + 1;
        let id = format!("agent_{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        let events: Arc<dyn EventSink> = Arc::new(ScopedSink::subagent(
            caller.events.clone(),
            &spec.name,
            &id,
            depth,
        ));
        let step = LoopStep {
            model: spec.model,
            tools: spec.tools,
            gate: spec.gate,
            events,
            tool_ctx: ToolContext {
                session_id: ctx.session_id.clone(),
                cwd: ctx.cwd.clone(),
                agent: AgentKind::SubAgent(spec.name.clone()),
                cancel: ctx.cancel.child_token(),
            },
            purpose: format!("subagent:{}", spec.name),
            max_tokens: spec.max_tokens,
            options: RequestOptions::default(),
            tool_timeout: caller.tool_timeout,
            max_tool_output_bytes: caller.max_tool_output_bytes,
            spill_dir: caller.spill_dir.clone(),
            window: spec.window.clone(),
            background: caller.background.clone(),
            depth,
            withheld: spec.withheld,
            capture: caller.capture.clone(),
        };
        Self {
            id,
            name: spec.name,
            depth,
            background: spec.background,
            prompt: spec.prompt,
            system: spec.system,
            step,
            window: spec.window,
            max_iterations: spec.max_iterations,
            timeout: spec.timeout,
        }
    }

    /// Its id, as its events carry it.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Run it to its end. Exactly one `SubAgentStarted` and one `SubAgentFinished` are emitted,
    /// also when the future is dropped half-way.
    pub async fn run(self) -> ChildResult {
        let span = crate::telemetry::agent_span(&self.name, &self.id);
        span.record("memloop.depth", self.depth);
        tracing::Instrument::instrument(self.run_inner(), span).await
    }

    async fn run_inner(self) -> ChildResult {
        self.step.events.emit(AgentEvent::SubAgentStarted {
            id: self.id.clone(),
            name: self.name.clone(),
            background: self.background,
            depth: self.depth,
        });
        let mut guard = EndGuard {
            id: self.id.clone(),
            name: self.name.clone(),
            background: self.background,
            events: self.step.events.clone(),
            cancel: self.step.tool_ctx.cancel.clone(),
            done: false,
        };
        let spec = LoopSpec {
            step: self.step,
            window: &self.window,
            max_iterations: self.max_iterations,
            main: false,
        };
        let mut transcript = ChildConversation {
            system: self.system,
            messages: vec![Message::user(self.prompt)],
            last_text: String::new(),
        };
        let ended = tokio::time::timeout(self.timeout, run_loop(&spec, &mut transcript)).await;
        let last_text = std::mem::take(&mut transcript.last_text);
        let turns = transcript.turns();
        let result = match ended {
            Ok(Ok(out)) if out.stop == TurnStop::Completed => ChildResult {
                end: SubAgentEnd::Completed,
                text: out.text,
                turns: out.iterations,
            },
            Ok(Ok(out)) => ChildResult {
                end: SubAgentEnd::MaxIterations,
                text: last_text,
                turns: out.iterations,
            },
            Ok(Err(AgentError::Cancelled)) => ChildResult {
                end: SubAgentEnd::Cancelled,
                text: last_text,
                turns,
            },
            Ok(Err(e)) => ChildResult {
                end: SubAgentEnd::Failed {
                    error: e.to_string(),
                },
                text: last_text,
                turns,
            },
            Err(_) => {
                tracing::warn!(agent = %self.name, timeout = ?self.timeout, "sub-agent timed out");
                ChildResult {
                    end: SubAgentEnd::TimedOut,
                    text: last_text,
                    turns,
                }
            }
        };
        guard.finish(&result);
        result
    }
}

/// A sub-agent's conversation: its task as the first user message, then its own exchange.
/// Nothing of it enters the parent's conversation but the final answer (as the tool result).
struct ChildConversation {
    system: Vec<String>,
    messages: Vec<Message>,
    /// The newest non-empty text the sub-agent wrote.
    last_text: String,
}

impl ChildConversation {
    /// Model calls answered so far (one assistant message each; an empty reply is not kept).
    fn turns(&self) -> u32 {
        self.messages
            .iter()
            .filter(|m| m.role == crate::message::Role::Assistant)
            .count() as u32
    }
}

#[async_trait]
impl Conversation for ChildConversation {
    async fn prepare(&mut self, step: &LoopStep) -> Result<Prepared, AgentError> {
        let context_tokens = estimate_messages(&CharEstimator, &self.messages);
        Ok(Prepared {
            prompt_tokens: step.request_overhead(&self.system) + context_tokens,
            system: self.system.clone(),
            messages: self.messages.clone(),
            context_tokens,
        })
    }

    async fn too_long(
        &mut self,
        error: ModelError,
        learned: bool,
        retried: bool,
    ) -> Result<(), AgentError> {
        // Its conversation is not compacted: only a window learned from the error (a smaller
        // output budget) can change the next request, once.
        if learned && !retried {
            Ok(())
        } else {
            Err(AgentError::Model(error))
        }
    }

    async fn keep_response(&mut self, _response: &ModelResponse, assistant: &Message) {
        let text = assistant.text();
        if !text.is_empty() {
            self.last_text = text;
        }
        if !assistant.content.is_empty() {
            self.messages.push(assistant.clone());
        }
    }

    fn keep_results(&mut self, results: Message, _outcomes: Vec<ToolOutcome>) {
        self.messages.push(results);
    }
}
