//! One step of the model → tools loop, shared by [`crate::Agent`] and [`crate::fork::ForkedAgent`]:
//! stream a request (emitting deltas as they arrive), then run the response's tool calls through
//! the gate: consecutive read-only calls concurrently, every call under a timeout, every output
//! capped.

use crate::background::BackgroundTasks;
use crate::caller::{self, Caller};
use crate::events::{AgentEvent, EventSink};
use crate::fit::{cut_middle, spill};
use crate::message::{ContentBlock, Message, Role, ToolResultContent};
use crate::model::{
    Model, ModelError, ModelRequest, ModelResponse, RequestOptions, StopReason, StreamEvent,
};
use crate::tokens::{CharEstimator, TokenCounter};
use crate::tool::{
    PermissionDecision, PermissionGate, ToolCallRequest, ToolContext, ToolEffect, ToolOutput,
    ToolRegistry,
};
use crate::window::ContextWindow;
use futures::StreamExt;
use memloop_text::truncate_utf8;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// How one tool call ended (for the "recently used tools" rule).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ToolOutcome {
    pub name: String,
    pub is_error: bool,
    pub denied: bool,
}

/// What one model call and its tool run use: the data that differs between the main agent and a
/// fork (its sink says whose events they are, its gate what it may call, its limits).
pub(crate) struct LoopStep {
    pub model: Arc<dyn Model>,
    pub tools: ToolRegistry,
    pub gate: Arc<dyn PermissionGate>,
    /// Stamped with the agent's origin (main and turn, or the fork's purpose and id).
    pub events: Arc<dyn EventSink>,
    pub tool_ctx: ToolContext,
    pub purpose: String,
    /// The configured cap; each request's is clamped to the window.
    pub max_tokens: u32,
    pub options: RequestOptions,
    pub tool_timeout: Duration,
    pub max_tool_output_bytes: usize,
    /// Where the full text of a cut output is kept (see `AgentConfig::spill_dir`).
    pub spill_dir: Option<std::path::PathBuf>,
    /// The agent's context window (a sub-agent on the same model shares it).
    pub window: ContextWindow,
    /// Where a background sub-agent is spawned (so `drain` waits for it).
    pub background: BackgroundTasks,
    /// Sub-agent nesting depth: 0 for the main agent and its forks.
    pub depth: u32,
    /// Tools this agent was deliberately not given, with the reason a call to one is refused
    /// (a sub-agent without memory has no memory tools).
    pub withheld: BTreeMap<String, String>,
    /// Message content recorded on the `chat` spans, if the host asked for it.
    pub capture: Option<crate::telemetry::ContentCapture>,
}

const EVENT_OUTPUT_BYTES: usize = 500;

/// Make a response storable. Tool calls cut off by the output cap are removed (never executed);
/// empty text blocks are dropped. Returns what was repaired, for a `ResponseRepaired` event.
/// The caller must not store a response left with no content.
pub(crate) fn repair_response(response: &mut ModelResponse) -> Vec<String> {
    let mut actions = Vec::new();
    if response.stop_reason == StopReason::MaxTokens {
        let before = response.content.len();
        response
            .content
            .retain(|b| !matches!(b, ContentBlock::ToolUse { .. }));
        let cut = before - response.content.len();
        if cut > 0 {
            actions.push(format!(
                "removed {cut} tool call(s) cut off by max_tokens; they were not executed"
            ));
        }
    }
    response
        .content
        .retain(|b| !matches!(b, ContentBlock::Text { text } if text.is_empty()));
    if response.content.is_empty() {
        actions.push("the model returned no content; the empty reply was not stored".to_owned());
    }
    actions
}

impl LoopStep {
    /// Estimated tokens a request spends besides its messages: system sections and tool specs.
    pub fn request_overhead(&self, system: &[String]) -> u64 {
        let counter = CharEstimator;
        let system_tokens: u64 = system.iter().map(|s| counter.count(s)).sum();
        let tool_tokens: u64 = self
            .tools
            .specs()
            .iter()
            .map(|t| counter.count(&serde_json::to_string(t).unwrap_or_default()))
            .sum();
        system_tokens + tool_tokens
    }

    /// Stream one request of at most `max_tokens` output tokens, emitting the deltas as they
    /// arrive.
    pub async fn call_model(
        &self,
        max_tokens: u32,
        system: Vec<String>,
        messages: Vec<Message>,
        iteration: u32,
        context_tokens: u64,
    ) -> Result<ModelResponse, ModelError> {
        let mut req = ModelRequest::new(&self.purpose, messages);
        req.system = system;
        req.tools = self.tools.specs();
        req.max_tokens = max_tokens;
        self.options.apply(&mut req);
        self.events.emit(AgentEvent::ModelRequest {
            purpose: self.purpose.clone(),
            iteration,
            context_tokens,
        });
        let span = crate::telemetry::chat_span(
            self.model.provider(),
            self.model.name(),
            &self.purpose,
            max_tokens,
        );
        if let Some(capture) = &self.capture {
            capture.record_request(&span, &req);
        }
        let started = std::time::Instant::now();
        let response =
            tracing::Instrument::instrument(self.stream_response(req), span.clone()).await;
        match &response {
            Ok(r) => {
                crate::telemetry::record_response(&span, r);
                if let Some(capture) = &self.capture {
                    capture.record_response(&span, r);
                }
            }
            Err(e) => crate::telemetry::record_error(&span, e),
        }
        crate::telemetry::record_chat_metrics(
            self.model.provider(),
            self.model.name(),
            started.elapsed(),
            response.as_ref(),
        );
        let response = response?;
        self.events.emit(AgentEvent::ModelResponse {
            purpose: self.purpose.clone(),
            stop_reason: response.stop_reason,
            usage: response.usage,
        });
        Ok(response)
    }

    /// Send `req` and collect the streamed answer, emitting its deltas.
    async fn stream_response(&self, req: ModelRequest) -> Result<ModelResponse, ModelError> {
        let cancel = self.tool_ctx.cancel.clone();
        let mut stream = self.model.stream(req, cancel.clone());
        loop {
            let item = tokio::select! {
                biased;
                _ = cancel.cancelled() => break Err(ModelError::Cancelled),
                item = stream.next() => item,
            };
            let event = match item {
                Some(Ok(StreamEvent::Finished(r))) => break Ok(r),
                Some(Ok(e)) => e,
                Some(Err(e)) => break Err(e),
                None => {
                    break Err(ModelError::Stream {
                        message: "the stream ended without a final response".into(),
                        emitted: 0,
                        retryable: false,
                    });
                }
            };
            self.events.emit(match event {
                StreamEvent::TextDelta { index, text } => AgentEvent::TextDelta { index, text },
                StreamEvent::ThinkingDelta { index, thinking } => {
                    AgentEvent::ThinkingDelta { index, thinking }
                }
                StreamEvent::ToolUseStart { index, id, name } => {
                    AgentEvent::ToolUseStarted { index, id, name }
                }
                StreamEvent::ToolInputDelta {
                    index,
                    partial_json,
                } => AgentEvent::ToolInputDelta {
                    index,
                    partial_json,
                },
                _ => continue,
            });
        }
    }

    /// Run every tool call of `assistant` through the gate and build the user message holding
    /// the results (one per call, in call order, even when cancelled). Consecutive calls of
    /// read-only tools run concurrently; any other call runs alone, in order.
    pub async fn run_tools(&self, assistant: &Message) -> (Message, Vec<ToolOutcome>) {
        let calls: Vec<(&str, &str, &serde_json::Value)> = assistant.tool_uses().collect();
        let mut results: Vec<(ToolOutput, bool)> = Vec::with_capacity(calls.len());
        let mut i = 0;
        while i < calls.len() {
            let mut j = i + 1;
            if self.is_read_only(calls[i].1) {
                while j < calls.len() && self.is_read_only(calls[j].1) {
                    j += 1;
                }
            }
            let batch = calls[i..j]
                .iter()
                .map(|(id, name, input)| self.run_one(id, name, input));
            results.extend(futures::future::join_all(batch).await);
            i = j;
        }
        let mut blocks = Vec::new();
        let mut outcomes = Vec::new();
        let mut files = Vec::new();
        for ((id, name, _), (output, denied)) in calls.iter().zip(results) {
            outcomes.push(ToolOutcome {
                name: (*name).to_owned(),
                is_error: output.is_error,
                denied,
            });
            files.extend(output.files_written.iter().cloned());
            let content = if output.media.is_empty() {
                ToolResultContent::Text(output.content)
            } else {
                let mut parts = vec![ContentBlock::text(output.content)];
                parts.extend(output.media);
                ToolResultContent::Blocks(parts)
            };
            blocks.push(ContentBlock::ToolResult {
                tool_use_id: (*id).to_owned(),
                content,
                is_error: output.is_error,
            });
        }
        let mut msg = Message::new(Role::User, blocks);
        msg.meta.files_written = files;
        (msg, outcomes)
    }

    /// This agent as the caller of its tools (see [`crate::caller`]).
    fn caller(&self) -> Caller {
        Caller {
            model: self.model.clone(),
            tools: self.tools.clone(),
            gate: self.gate.clone(),
            events: self.events.clone(),
            window: self.window.clone(),
            background: self.background.clone(),
            depth: self.depth,
            tool_timeout: self.tool_timeout,
            max_tool_output_bytes: self.max_tool_output_bytes,
            spill_dir: self.spill_dir.clone(),
            capture: self.capture.clone(),
        }
    }

    fn is_read_only(&self, name: &str) -> bool {
        self.tools
            .get(name)
            .is_some_and(|t| t.spec().effect == ToolEffect::ReadOnly)
    }

    /// Cut output beyond the cap in the middle (the head and the tail of a log matter most),
    /// saying how much was elided and, when the agent has a spill dir, where the full text is.
    fn cap(&self, id: &str, mut output: ToolOutput) -> ToolOutput {
        if output.content.len() > self.max_tool_output_bytes {
            let note = match self
                .spill_dir
                .as_deref()
                .and_then(|dir| spill(dir, id, &output.content))
            {
                Some(path) => format!("; the full output is in {}", path.display()),
                None => String::new(),
            };
            output.content = cut_middle(&output.content, self.max_tool_output_bytes, &note);
        }
        output
    }

    async fn run_one(&self, id: &str, name: &str, input: &serde_json::Value) -> (ToolOutput, bool) {
        if self.tool_ctx.cancel.is_cancelled() {
            return (
                ToolOutput::error("Cancelled by the user before this tool ran."),
                false,
            );
        }
        let Some(tool) = self.tools.get(name) else {
            let why = match self.withheld.get(name) {
                Some(reason) => format!("`{name}` is not available: {reason}."),
                None => format!("Unknown tool `{name}`."),
            };
            let known = match self.tools.names() {
                names if names.is_empty() => "This agent has no tools.".to_owned(),
                names => format!("Available tools: {}.", names.join(", ")),
            };
            return (ToolOutput::error(format!("{why} {known}")), false);
        };
        let spec = tool.spec();
        let call = ToolCallRequest {
            name: name.to_owned(),
            input: input.clone(),
            effect: spec.effect,
            write_targets: tool.write_targets(input, &self.tool_ctx),
        };
        if let PermissionDecision::Deny(reason) = self.gate.check(&call, &self.tool_ctx).await {
            tracing::info!(tool = name, %reason, "tool call denied");
            self.events.emit(AgentEvent::ToolDenied {
                name: name.to_owned(),
                reason: reason.clone(),
            });
            crate::telemetry::record_tool_error(&crate::telemetry::tool_span(name, id), true);
            return (ToolOutput::error(reason), true);
        }
        self.events.emit(AgentEvent::ToolCallStarted {
            id: id.to_owned(),
            name: name.to_owned(),
            input: input.clone(),
        });
        let span = crate::telemetry::tool_span(name, id);
        let cancel = self.tool_ctx.cancel.clone();
        let limit = self.tool_timeout;
        let output = tokio::select! {
            biased;
            _ = cancel.cancelled() => ToolOutput::error("Cancelled by the user while this tool ran."),
            o = tokio::time::timeout(limit, tracing::Instrument::instrument(caller::scope(self.caller(), tool.call(input.clone(), &self.tool_ctx)), span.clone())) => {
                o.unwrap_or_else(|_| {
                    tracing::warn!(tool = name, ?limit, "tool call timed out");
                    ToolOutput::error(format!("The tool call timed out after {} s and was stopped.", limit.as_secs_f64()))
                })
            }
        };
        let output = self.cap(id, output);
        if output.is_error {
            crate::telemetry::record_tool_error(&span, false);
        }
        self.events.emit(AgentEvent::ToolCallFinished {
            id: id.to_owned(),
            name: name.to_owned(),
            is_error: output.is_error,
            output: truncate_utf8(&output.content, EVENT_OUTPUT_BYTES).to_owned(),
        });
        (output, false)
    }
}
