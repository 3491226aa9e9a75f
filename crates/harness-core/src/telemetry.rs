//! The spans the loop opens, named and attributed as OpenTelemetry's GenAI semantic conventions
//! define them, so any tracing backend that reads those conventions (Arize Phoenix, Langfuse,
//! Jaeger, Grafana Tempo, Datadog) shows what an agent did. They are ordinary `tracing` spans:
//! a host that exports them (e.g. through `tracing-opentelemetry`, which takes the span's name
//! from `otel.name` and its kind from `otel.kind`) sees, nested:
//!
//! - `invoke_agent {agent}`: an agent's whole life (its session), `gen_ai.conversation.id`;
//! - `turn`: one user turn, under the agent's span;
//! - `chat {model}`: one model request: `gen_ai.operation.name`, `gen_ai.provider.name`,
//!   `gen_ai.request.model`, `gen_ai.request.max_tokens`, then `gen_ai.response.model`,
//!   `gen_ai.response.id`, `gen_ai.response.finish_reasons`, `gen_ai.usage.input_tokens`,
//!   `gen_ai.usage.output_tokens`, the cache read and write tokens, or `error.type`; and
//!   `memloop.purpose` (main, a fork's purpose, a sub-agent's);
//! - `execute_tool {tool}`: one tool call: `gen_ai.tool.name`, `gen_ai.tool.call.id`,
//!   `gen_ai.tool.type`, and `error.type` when the tool failed.
//!
//! No message text is recorded. The names live here, in one place, so every caller writes the
//! same ones.

use crate::message::Usage;
use crate::model::{ModelError, ModelResponse, StopReason};
use tracing::Span;

/// `gen_ai.operation.name` of a model request.
pub const OP_CHAT: &str = "chat";
/// `gen_ai.operation.name` of a tool call.
pub const OP_EXECUTE_TOOL: &str = "execute_tool";
/// `gen_ai.operation.name` of an agent's run.
pub const OP_INVOKE_AGENT: &str = "invoke_agent";

/// The span of an agent's whole run (its session): `invoke_agent {agent}`; a sub-agent records
/// its nesting depth in `memloop.depth`.
pub fn agent_span(agent: &str, session_id: &str) -> Span {
    tracing::info_span!(
        "invoke_agent",
        otel.name = %format!("{OP_INVOKE_AGENT} {agent}"),
        otel.kind = "internal",
        gen_ai.operation.name = OP_INVOKE_AGENT,
        gen_ai.agent.name = %agent,
        gen_ai.conversation.id = %session_id,
        memloop.depth = tracing::field::Empty,
    )
}

/// The span of one model request, before it is sent: `chat {model}`. Record the answer with
/// [`record_response`] or [`record_error`].
pub fn chat_span(provider: &str, model: &str, purpose: &str, max_tokens: u32) -> Span {
    tracing::info_span!(
        "chat",
        otel.name = %format!("{OP_CHAT} {model}"),
        otel.kind = "client",
        otel.status_code = tracing::field::Empty,
        gen_ai.operation.name = OP_CHAT,
        gen_ai.provider.name = %provider,
        gen_ai.request.model = %model,
        gen_ai.request.max_tokens = max_tokens,
        gen_ai.response.model = tracing::field::Empty,
        gen_ai.response.id = tracing::field::Empty,
        gen_ai.response.finish_reasons = tracing::field::Empty,
        gen_ai.usage.input_tokens = tracing::field::Empty,
        gen_ai.usage.output_tokens = tracing::field::Empty,
        gen_ai.usage.cache_read.input_tokens = tracing::field::Empty,
        gen_ai.usage.cache_creation.input_tokens = tracing::field::Empty,
        error.type = tracing::field::Empty,
        gen_ai.system_instructions = tracing::field::Empty,
        gen_ai.input.messages = tracing::field::Empty,
        gen_ai.output.messages = tracing::field::Empty,
        memloop.purpose = %purpose,
    )
}

/// Record a model's answer on its [`chat_span`].
pub fn record_response(span: &Span, response: &ModelResponse) {
    if !response.model.is_empty() {
        span.record("gen_ai.response.model", response.model.as_str());
    }
    if !response.id.is_empty() {
        span.record("gen_ai.response.id", response.id.as_str());
    }
    span.record(
        "gen_ai.response.finish_reasons",
        format!("[\"{}\"]", finish_reason(response.stop_reason)).as_str(),
    );
    record_usage(span, &response.usage);
}

fn record_usage(span: &Span, usage: &Usage) {
    span.record("gen_ai.usage.input_tokens", usage.input_tokens);
    span.record("gen_ai.usage.output_tokens", usage.output_tokens);
    span.record(
        "gen_ai.usage.cache_read.input_tokens",
        usage.cache_read_input_tokens,
    );
    span.record(
        "gen_ai.usage.cache_creation.input_tokens",
        usage.cache_creation_input_tokens,
    );
}

/// Record a failed model request on its [`chat_span`]: `error.type` and an error status.
pub fn record_error(span: &Span, error: &ModelError) {
    span.record("error.type", error_type(error));
    span.record("otel.status_code", "ERROR");
}

/// The span of one tool call: `execute_tool {tool}`.
pub fn tool_span(tool: &str, call_id: &str) -> Span {
    tracing::info_span!(
        "execute_tool",
        otel.name = %format!("{OP_EXECUTE_TOOL} {tool}"),
        otel.kind = "internal",
        otel.status_code = tracing::field::Empty,
        gen_ai.operation.name = OP_EXECUTE_TOOL,
        gen_ai.tool.name = %tool,
        gen_ai.tool.call.id = %call_id,
        gen_ai.tool.type = "function",
        error.type = tracing::field::Empty,
    )
}

/// Record that a tool call failed (its output is an error) on its [`tool_span`].
pub fn record_tool_error(span: &Span, denied: bool) {
    span.record(
        "error.type",
        if denied {
            "permission_denied"
        } else {
            "tool_error"
        },
    );
    span.record("otel.status_code", "ERROR");
}

/// The convention's finish reason for a stop reason.
///
/// ```
/// use memloop_core::model::StopReason;
/// assert_eq!(memloop_core::telemetry::finish_reason(StopReason::MaxTokens), "length");
/// ```
pub fn finish_reason(stop: StopReason) -> &'static str {
    match stop {
        StopReason::EndTurn => "stop",
        StopReason::ToolUse => "tool_calls",
        StopReason::MaxTokens => "length",
        StopReason::StopSequence => "stop_sequence",
        StopReason::Refusal => "content_filter",
        StopReason::Other => "other",
    }
}

/// `error.type` of a model error: a short, stable name of its kind (never its message).
///
/// ```
/// use memloop_core::model::ModelError;
/// assert_eq!(memloop_core::telemetry::error_type(&ModelError::Timeout), "timeout");
/// ```
pub fn error_type(error: &ModelError) -> &'static str {
    match error {
        ModelError::Auth(_) => "auth",
        ModelError::RateLimited { .. } => "rate_limited",
        ModelError::Overloaded(_) => "overloaded",
        ModelError::ContextTooLong { .. } => "context_too_long",
        ModelError::InvalidResponse(_) => "invalid_response",
        ModelError::Http { .. } => "http",
        ModelError::Transport(_) => "transport",
        ModelError::Timeout => "timeout",
        ModelError::Cancelled => "cancelled",
        ModelError::Stream { .. } => "stream",
        ModelError::Other(_) => "other",
    }
}

/// The `tracing` target of the metric events [`record_chat_metrics`] emits; an exporter turns
/// them into OpenTelemetry metrics (crate `memloop-otel`), every other subscriber
/// may ignore them.
pub const METRICS_TARGET: &str = "memloop::metrics";

/// Record one model request in the GenAI client metrics: `gen_ai.client.operation.duration`
/// (seconds) and, when it answered, `gen_ai.client.token.usage` once for its input tokens and
/// once for its output tokens (`gen_ai.token.type`), each with the operation, provider, request
/// and response model and, on failure, `error.type`. Emitted as `tracing` events on
/// [`METRICS_TARGET`] (a field `histogram.<metric>` holds the value).
pub fn record_chat_metrics(
    provider: &str,
    request_model: &str,
    duration: std::time::Duration,
    outcome: Result<&ModelResponse, &ModelError>,
) {
    let (response_model, error) = match outcome {
        Ok(r) => (r.model.as_str(), ""),
        Err(e) => ("", error_type(e)),
    };
    tracing::event!(
        target: METRICS_TARGET,
        tracing::Level::INFO,
        { "histogram.gen_ai.client.operation.duration" } = duration.as_secs_f64(),
        gen_ai.operation.name = OP_CHAT,
        gen_ai.provider.name = provider,
        gen_ai.request.model = request_model,
        gen_ai.response.model = response_model,
        error.type = error,
    );
    if let Ok(response) = outcome {
        for (kind, tokens) in [
            ("input", response.usage.input_tokens),
            ("output", response.usage.output_tokens),
        ] {
            tracing::event!(
                target: METRICS_TARGET,
                tracing::Level::INFO,
                { "histogram.gen_ai.client.token.usage" } = tokens,
                gen_ai.operation.name = OP_CHAT,
                gen_ai.provider.name = provider,
                gen_ai.request.model = request_model,
                gen_ai.response.model = response_model,
                gen_ai.token.type = kind,
            );
        }
    }
}

/// Opt-in capture of what a model request sends and gets back, on its `chat` span, as the GenAI
/// conventions define it: `gen_ai.system_instructions`, `gen_ai.input.messages` and
/// `gen_ai.output.messages` (JSON: each message's role and parts, text, tool calls and tool
/// results). Off unless a host sets one ([`AgentConfig::capture_content`]); every text goes
/// through the capture's filter first (`MemorySetup` passes memloop's credential redaction), and
/// each attribute is cut at 64 KiB with a note.
///
/// [`AgentConfig::capture_content`]: crate::AgentConfig::capture_content
#[derive(Clone)]
pub struct ContentCapture {
    filter: std::sync::Arc<dyn Fn(&str) -> String + Send + Sync>,
}

impl std::fmt::Debug for ContentCapture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContentCapture").finish_non_exhaustive()
    }
}

/// The standard switch of content capture: `true` (or `1`) turns it on.
pub const CAPTURE_CONTENT_ENV: &str = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT";

/// The most bytes one captured attribute holds.
const MAX_CAPTURED_BYTES: usize = 64 * 1024;

impl ContentCapture {
    /// Capture content, every text passed through `filter` (a redaction of secrets) first.
    pub fn new(filter: impl Fn(&str) -> String + Send + Sync + 'static) -> Self {
        Self {
            filter: std::sync::Arc::new(filter),
        }
    }

    /// Whether `env` asks for content capture ([`CAPTURE_CONTENT_ENV`]).
    pub fn requested(env: &memloop_host::env::EnvVars) -> bool {
        env.get(CAPTURE_CONTENT_ENV)
            .and_then(memloop_host::env::parse_bool_env)
            .unwrap_or(false)
    }

    /// `blocks` as the conventions' parts, texts filtered.
    fn parts(&self, blocks: &[crate::message::ContentBlock]) -> Vec<serde_json::Value> {
        use crate::message::ContentBlock;
        use serde_json::json;
        blocks
            .iter()
            .filter_map(|block| match block {
                ContentBlock::Text { text } => {
                    Some(json!({"type": "text", "content": (self.filter)(text)}))
                }
                ContentBlock::ToolUse { id, name, input } => Some(json!({
                    "type": "tool_call", "id": id, "name": name,
                    "arguments": (self.filter)(&input.to_string()),
                })),
                ContentBlock::ToolResult {
                    tool_use_id,
                    content,
                    ..
                } => Some(json!({
                    "type": "tool_call_response", "id": tool_use_id,
                    "response": (self.filter)(&content.text()),
                })),
                _ => None,
            })
            .collect()
    }

    /// Record the request's system sections and messages on `span`.
    pub(crate) fn record_request(&self, span: &Span, request: &crate::model::ModelRequest) {
        let system: Vec<serde_json::Value> = request
            .system
            .iter()
            .map(|s| serde_json::json!({"type": "text", "content": (self.filter)(s)}))
            .collect();
        let messages: Vec<serde_json::Value> = request
            .messages
            .iter()
            .map(|m| {
                let role = match m.role {
                    crate::message::Role::User => "user",
                    crate::message::Role::Assistant => "assistant",
                };
                serde_json::json!({"role": role, "parts": self.parts(&m.content)})
            })
            .collect();
        span.record("gen_ai.system_instructions", capped(&system).as_str());
        span.record("gen_ai.input.messages", capped(&messages).as_str());
    }

    /// Record the answer on `span`.
    pub(crate) fn record_response(&self, span: &Span, response: &ModelResponse) {
        let output = [serde_json::json!({
            "role": "assistant",
            "parts": self.parts(&response.content),
            "finish_reason": finish_reason(response.stop_reason),
        })];
        span.record("gen_ai.output.messages", capped(&output).as_str());
    }
}

/// `value` as JSON, cut at [`MAX_CAPTURED_BYTES`] (on a character boundary) with a note.
fn capped(value: &[serde_json::Value]) -> String {
    let text = serde_json::to_string(value).unwrap_or_default();
    if text.len() <= MAX_CAPTURED_BYTES {
        return text;
    }
    let mut end = MAX_CAPTURED_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… [cut: {} bytes in all]", &text[..end], text.len())
}

/// The span of one embedding call (`embed_checked` and the query form, the entry points every
/// caller uses): `embeddings {model}`, with the provider, the model id, how many texts and in
/// which role (`query` or `passage`); `error.type` when it fails. Never the texts.
pub fn embeddings_span(provider: &str, model: &str, texts: usize, role: &str) -> Span {
    tracing::info_span!(
        "embeddings",
        otel.name = %format!("{OP_EMBEDDINGS} {model}"),
        otel.kind = "client",
        otel.status_code = tracing::field::Empty,
        gen_ai.operation.name = OP_EMBEDDINGS,
        gen_ai.provider.name = %provider,
        gen_ai.request.model = %model,
        memloop.texts = texts,
        memloop.role = role,
        error.type = tracing::field::Empty,
    )
}

/// `gen_ai.operation.name` of an embedding call.
pub const OP_EMBEDDINGS: &str = "embeddings";
