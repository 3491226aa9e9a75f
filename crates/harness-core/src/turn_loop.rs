//! The agent loop, the one used by the main agent ([`crate::Agent`]) and every fork
//! ([`crate::fork::ForkedAgent`]):
//!
//! ```text
//! loop {
//!     iteration guard          at most `max_iterations` model calls
//!     Conversation::prepare    the request's system sections and messages (the main agent
//!                              attaches, clears, compacts, admits and validates; a fork fits the
//!                              parent's prefix to the window)
//!     LoopStep::call_model     max_tokens clamped to the window
//!       a context error        the window learns the limit the provider named (once, and
//!                              ContextWindowLearned is emitted here only), then
//!                              Conversation::too_long decides: shrink and retry once, or end
//!     repair the response      ResponseRepaired events
//!     Conversation::keep_response
//!     no tool calls → done; else LoopStep::run_tools through the gate,
//!     Conversation::keep_results, stop if cancelled
//! }
//! ```
//!
//! What differs between the two is data: the [`LoopStep`] (its sink's origin, its gate, tools and
//! limits), [`LoopSpec`] (the iteration limit, whether it is the main agent) and where the
//! conversation lives (kept in the parent's or not), behind [`Conversation`] (the loop's view
//! of its messages; a session's transcript file is `memloop-memory`'s).

use crate::error::AgentError;
use crate::events::AgentEvent;
use crate::loop_step::{LoopStep, ToolOutcome, repair_response};
use crate::message::{Message, Usage};
use crate::model::{ModelError, ModelResponse, StopReason};
use crate::window::ContextWindow;
use async_trait::async_trait;

/// How a run of the loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnStop {
    /// The model answered without tool calls.
    Completed,
    /// The iteration guard stopped the loop.
    MaxIterations,
}

/// The loop's data besides the step.
pub(crate) struct LoopSpec<'a> {
    pub step: LoopStep,
    /// The shared window: it clamps `max_tokens` and learns a limit a provider names.
    pub window: &'a ContextWindow,
    /// Model calls allowed.
    pub max_iterations: u32,
    /// The main agent announces what the host shows (`AssistantText`, `MaxIterationsReached`);
    /// a fork reports only through its outcome.
    pub main: bool,
}

/// One request's content.
pub(crate) struct Prepared {
    pub system: Vec<String>,
    pub messages: Vec<Message>,
    /// Reported in the `ModelRequest` event.
    pub context_tokens: u64,
    /// Everything the request sends, estimated: what the window leaves the output.
    pub prompt_tokens: u64,
}

/// What the loop returns.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LoopOutcome {
    /// Text of the final response (empty when the iteration guard ended the loop).
    pub text: String,
    pub iterations: u32,
    pub stop: TurnStop,
    pub stop_reason: Option<StopReason>,
    pub usage: Usage,
}

/// Where the conversation a loop works on lives.
#[async_trait]
pub(crate) trait Conversation: Send {
    /// The next request's content, or why none may be sent.
    async fn prepare(&mut self, step: &LoopStep) -> Result<Prepared, AgentError>;

    /// The provider rejected the prompt as too long (`learned`: the window adopted the limit it
    /// named; `retried`: this run already retried once). `Ok` retries the call; `Err` ends the run.
    async fn too_long(
        &mut self,
        error: ModelError,
        learned: bool,
        retried: bool,
    ) -> Result<(), AgentError>;

    /// A repaired response and its message (never stored when empty).
    async fn keep_response(&mut self, response: &ModelResponse, assistant: &Message);

    /// The tool results answering the last response.
    fn keep_results(&mut self, results: Message, outcomes: Vec<ToolOutcome>);
}

/// Run the loop on `transcript` until a response has no tool calls, the iteration guard stops it,
/// or an error ends it.
pub(crate) async fn run_loop<T: Conversation>(
    spec: &LoopSpec<'_>,
    transcript: &mut T,
) -> Result<LoopOutcome, AgentError> {
    let step = &spec.step;
    let events = &step.events;
    let cancel = step.tool_ctx.cancel.clone();
    let mut iterations = 0u32;
    let mut retried = false;
    let mut usage = Usage::default();
    loop {
        if iterations >= spec.max_iterations {
            tracing::info!(
                purpose = %step.purpose,
                limit = spec.max_iterations,
                "iteration limit reached"
            );
            if spec.main {
                events.emit(AgentEvent::MaxIterationsReached {
                    limit: spec.max_iterations,
                });
            }
            return Ok(LoopOutcome {
                text: String::new(),
                iterations,
                stop: TurnStop::MaxIterations,
                stop_reason: None,
                usage,
            });
        }
        let prepared = transcript.prepare(step).await?;
        iterations += 1;
        let max_tokens = spec
            .window
            .output_budget(prepared.prompt_tokens, step.max_tokens);
        let result = step
            .call_model(
                max_tokens,
                prepared.system,
                prepared.messages,
                iterations,
                prepared.context_tokens,
            )
            .await;
        let mut response = match result {
            Ok(r) => r,
            Err(e @ ModelError::ContextTooLong { .. }) => {
                let learned = !retried && learn_window(spec, &e);
                transcript.too_long(e, learned, retried).await?;
                retried = true;
                iterations -= 1;
                continue;
            }
            Err(ModelError::Cancelled) => return Err(AgentError::Cancelled),
            Err(e) => return Err(AgentError::Model(e)),
        };
        usage = add_usage(usage, response.usage);
        for action in repair_response(&mut response) {
            tracing::warn!(%action, "response repaired");
            events.emit(AgentEvent::ResponseRepaired { action });
        }
        let assistant = response.clone().into_message();
        let text = assistant.text();
        if spec.main && !text.is_empty() {
            events.emit(AgentEvent::AssistantText { text: text.clone() });
        }
        transcript.keep_response(&response, &assistant).await;
        if !assistant.has_tool_use() {
            return Ok(LoopOutcome {
                text,
                iterations,
                stop: TurnStop::Completed,
                stop_reason: Some(response.stop_reason),
                usage,
            });
        }
        let (results, outcomes) = step.run_tools(&assistant).await;
        transcript.keep_results(results, outcomes);
        if cancel.is_cancelled() {
            return Err(AgentError::Cancelled);
        }
    }
}

/// Adopt the limit a context error names, if smaller; the one place `ContextWindowLearned` is
/// emitted.
fn learn_window(spec: &LoopSpec<'_>, error: &ModelError) -> bool {
    let ModelError::ContextTooLong {
        limit: Some(limit), ..
    } = error
    else {
        return false;
    };
    let learned = spec.window.learn(*limit);
    if learned {
        tracing::info!(limit, purpose = %spec.step.purpose, "context window learned from a provider error");
        spec.step.events.emit(AgentEvent::ContextWindowLearned {
            tokens: spec.window.tokens(),
        });
    }
    learned
}

fn add_usage(a: Usage, b: Usage) -> Usage {
    Usage {
        input_tokens: a.input_tokens + b.input_tokens,
        output_tokens: a.output_tokens + b.output_tokens,
        cache_creation_input_tokens: a.cache_creation_input_tokens + b.cache_creation_input_tokens,
        cache_read_input_tokens: a.cache_read_input_tokens + b.cache_read_input_tokens,
    }
}
