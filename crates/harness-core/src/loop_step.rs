//! One step of the model → tools loop, shared by [`crate::Agent`] and [`crate::fork::ForkedAgent`]:
//! send a request (with its events), then run the response's tool calls through the gate.

use crate::events::{AgentEvent, EventSink};
use crate::message::{ContentBlock, Message, Role};
use crate::model::{Model, ModelError, ModelRequest, ModelResponse};
use crate::text::truncate_utf8;
use crate::tokens::{CharEstimator, TokenCounter};
use crate::tool::{
    PermissionDecision, PermissionGate, ToolCallRequest, ToolContext, ToolOutput, ToolRegistry,
};
use crate::window::ContextWindow;
use std::sync::Arc;

/// How one tool call ended (for the "recently used tools" rule).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ToolOutcome {
    pub name: String,
    pub is_error: bool,
    pub denied: bool,
}

pub(crate) struct LoopStep<'a> {
    pub model: &'a Arc<dyn Model>,
    pub tools: &'a ToolRegistry,
    pub gate: &'a Arc<dyn PermissionGate>,
    pub events: &'a Arc<dyn EventSink>,
    pub tool_ctx: ToolContext,
    pub purpose: &'a str,
    pub max_tokens: u32,
}

const EVENT_OUTPUT_BYTES: usize = 500;

impl LoopStep<'_> {
    /// The `max_tokens` to request: the configured cap, clamped so the prompt (system sections,
    /// tool specs and `context_tokens` of messages) plus the output fit `window`.
    pub fn output_budget(
        &self,
        system: &[String],
        context_tokens: u64,
        window: &ContextWindow,
    ) -> u32 {
        window.output_budget(
            self.request_overhead(system) + context_tokens,
            self.max_tokens,
        )
    }

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

    pub async fn call_model(
        &self,
        system: Vec<String>,
        messages: Vec<Message>,
        iteration: u32,
        context_tokens: u64,
    ) -> Result<ModelResponse, ModelError> {
        let mut req = ModelRequest::new(self.purpose, messages);
        req.system = system;
        req.tools = self.tools.specs();
        req.max_tokens = self.max_tokens;
        self.events.emit(AgentEvent::ModelRequest {
            purpose: self.purpose.to_owned(),
            iteration,
            context_tokens,
        });
        let cancel = self.tool_ctx.cancel.clone();
        let response = tokio::select! {
            biased;
            _ = cancel.cancelled() => Err(ModelError::Cancelled),
            r = self.model.complete(req, cancel.clone()) => r,
        }?;
        self.events.emit(AgentEvent::ModelResponse {
            purpose: self.purpose.to_owned(),
            stop_reason: response.stop_reason,
            usage: response.usage,
        });
        Ok(response)
    }

    /// Run every tool call of `assistant` in order, through the gate, and build the user message
    /// holding the results (one per call, in call order, even when cancelled).
    pub async fn run_tools(&self, assistant: &Message) -> (Message, Vec<ToolOutcome>) {
        let mut blocks = Vec::new();
        let mut outcomes = Vec::new();
        let mut files = Vec::new();
        for (id, name, input) in assistant.tool_uses() {
            let (output, denied) = self.run_one(id, name, input).await;
            outcomes.push(ToolOutcome {
                name: name.to_owned(),
                is_error: output.is_error,
                denied,
            });
            files.extend(output.files_written.iter().cloned());
            blocks.push(ContentBlock::tool_result(
                id,
                output.content,
                output.is_error,
            ));
        }
        let mut msg = Message::new(Role::User, blocks);
        msg.meta.files_written = files;
        (msg, outcomes)
    }

    async fn run_one(&self, id: &str, name: &str, input: &serde_json::Value) -> (ToolOutput, bool) {
        if self.tool_ctx.cancel.is_cancelled() {
            return (
                ToolOutput::error("Cancelled by the user before this tool ran."),
                false,
            );
        }
        let Some(tool) = self.tools.get(name) else {
            let known = self.tools.names().join(", ");
            return (
                ToolOutput::error(format!("Unknown tool `{name}`. Available tools: {known}.")),
                false,
            );
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
            return (ToolOutput::error(reason), true);
        }
        self.events.emit(AgentEvent::ToolCallStarted {
            id: id.to_owned(),
            name: name.to_owned(),
            input: input.clone(),
        });
        let span = tracing::info_span!("tool", name, id);
        let cancel = self.tool_ctx.cancel.clone();
        let output = tokio::select! {
            biased;
            _ = cancel.cancelled() => ToolOutput::error("Cancelled by the user while this tool ran."),
            o = tracing::Instrument::instrument(tool.call(input.clone(), &self.tool_ctx), span) => o,
        };
        self.events.emit(AgentEvent::ToolCallFinished {
            id: id.to_owned(),
            name: name.to_owned(),
            is_error: output.is_error,
            output: truncate_utf8(&output.content, EVENT_OUTPUT_BYTES).to_owned(),
        });
        (output, false)
    }
}
