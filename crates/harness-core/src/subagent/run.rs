//! One sub-agent run: the agent loop (`turn_loop::run_loop`, the one loop) on the sub-agent's
//! own conversation, under its time limit, reporting its start and end exactly once.

use crate::error::AgentError;
use crate::events::{AgentEvent, EventSink, SubAgentEnd};
use crate::loop_step::{LoopStep, ToolOutcome};
use crate::message::Message;
use crate::model::{ModelError, ModelResponse};
use crate::tokens::{CharEstimator, estimate_messages};
use crate::turn_loop::{Conversation, LoopSpec, Prepared, TurnStop, run_loop};
use crate::window::ContextWindow;
use async_trait::async_trait;
use memloop_text::truncate_utf8;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Bytes of the final text an `SubAgentFinished` event carries.
const EVENT_TEXT_BYTES: usize = 500;

/// Everything one run needs, ready to go.
pub(crate) struct ChildRun {
    pub id: String,
    pub name: String,
    pub depth: u32,
    pub background: bool,
    pub prompt: String,
    pub system: Vec<String>,
    /// Its events go to `step.events`, stamped with the sub-agent's origin; its
    /// `tool_ctx.cancel` is its own token (a child of the parent's).
    pub step: LoopStep,
    pub window: ContextWindow,
    pub max_iterations: u32,
    pub timeout: Duration,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ChildResult {
    pub end: SubAgentEnd,
    /// Its final answer; for a run stopped early, the last text it wrote.
    pub text: String,
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
