//! The [`Model`] trait: one call to an LLM.

use crate::message::{ContentBlock, Message, Usage};
use crate::tool::ToolSpec;
use async_trait::async_trait;
use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// A JSON schema the response must follow (structured output).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JsonSchema {
    /// Schema name (some providers require one).
    pub name: String,
    /// The JSON schema.
    pub schema: serde_json::Value,
}

/// One request to a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    /// What the request is for: `main`, `memory_selector`, `extractor`, `session_memory`,
    /// `compact_summary`, `dream`... Providers ignore it; it names the request in traces and lets a
    /// `ScriptedModel` (crate `memloop-testkit`) route responses.
    pub purpose: String,
    /// System prompt sections, in order.
    pub system: Vec<String>,
    /// The conversation.
    pub messages: Vec<Message>,
    /// Tools the model may call.
    pub tools: Vec<ToolSpec>,
    /// Output cap.
    pub max_tokens: u32,
    /// Structured output, if wanted.
    pub response_schema: Option<JsonSchema>,
    /// Sampling temperature, if set.
    pub temperature: Option<f32>,
    /// How the model may use the tools; `None` leaves the provider default (`auto`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    /// Sequences that stop generation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop_sequences: Vec<String>,
    /// Provider-specific fields merged into the request body as-is (top-level keys; they win over
    /// the fields memloop sets). Use it for knobs memloop has no name for (`top_p`, `seed`,
    /// `metadata`, llama.cpp's `min_p`...).
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// How a model may use its tools.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "type", content = "name")]
pub enum ToolChoice {
    /// The model decides (the default).
    Auto,
    /// The model must call some tool.
    Any,
    /// The model must not call tools.
    None,
    /// The model must call this tool.
    Tool(String),
}

/// Request settings a host may set per agent or per fork: sampling temperature, tool choice,
/// stop sequences and provider-specific extra body fields.
///
/// ```
/// use memloop_core::model::{ModelRequest, RequestOptions, ToolChoice};
/// let opts = RequestOptions { temperature: Some(0.2), tool_choice: Some(ToolChoice::Any), ..Default::default() };
/// let mut req = ModelRequest::new("main", vec![]);
/// opts.apply(&mut req);
/// assert_eq!(req.temperature, Some(0.2));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestOptions {
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Tool choice.
    pub tool_choice: Option<ToolChoice>,
    /// Stop sequences.
    pub stop_sequences: Vec<String>,
    /// Provider-specific body fields (see [`ModelRequest::extra`]).
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl RequestOptions {
    /// Copy the set options onto `req`.
    pub fn apply(&self, req: &mut ModelRequest) {
        if self.temperature.is_some() {
            req.temperature = self.temperature;
        }
        if self.tool_choice.is_some() {
            req.tool_choice = self.tool_choice.clone();
        }
        if !self.stop_sequences.is_empty() {
            req.stop_sequences = self.stop_sequences.clone();
        }
        for (k, v) in &self.extra {
            req.extra.insert(k.clone(), v.clone());
        }
    }
}

impl ModelRequest {
    /// A request with the given purpose and messages, no system prompt, no tools, 4,096 max tokens.
    ///
    /// ```
    /// use memloop_core::{message::Message, model::ModelRequest};
    /// let req = ModelRequest::new("main", vec![Message::user("hi")]);
    /// assert_eq!(req.max_tokens, 4096);
    /// ```
    pub fn new(purpose: impl Into<String>, messages: Vec<Message>) -> Self {
        Self {
            purpose: purpose.into(),
            system: Vec::new(),
            messages,
            tools: Vec::new(),
            max_tokens: 4096,
            response_schema: None,
            temperature: None,
            tool_choice: None,
            stop_sequences: Vec::new(),
            extra: serde_json::Map::new(),
        }
    }

    /// The text of the last user message, if any (handy for routing scripted responses).
    pub fn last_user_text(&self) -> Option<String> {
        self.messages
            .iter()
            .rev()
            .find(|m| m.role == crate::message::Role::User && m.has_text())
            .map(Message::text)
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// Natural end of the turn.
    EndTurn,
    /// The model wants tool results.
    ToolUse,
    /// Output cap reached.
    MaxTokens,
    /// A stop sequence matched.
    StopSequence,
    /// The provider refused.
    Refusal,
    /// Anything else.
    Other,
}

/// One model response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelResponse {
    /// Provider response id (groups split records).
    pub id: String,
    /// Model name that answered.
    pub model: String,
    /// Content blocks.
    pub content: Vec<ContentBlock>,
    /// Why it stopped.
    pub stop_reason: StopReason,
    /// Token usage.
    pub usage: Usage,
}

impl ModelResponse {
    /// A text-only response that ends the turn.
    pub fn text(text: impl Into<String>) -> Self {
        Self::from_blocks(vec![ContentBlock::text(text)])
    }

    /// A response from blocks; the stop reason is `ToolUse` if any block is a tool use.
    pub fn from_blocks(content: Vec<ContentBlock>) -> Self {
        let stop_reason = if content
            .iter()
            .any(|b| matches!(b, ContentBlock::ToolUse { .. }))
        {
            StopReason::ToolUse
        } else {
            StopReason::EndTurn
        };
        Self {
            id: format!("resp_{}", uuid::Uuid::new_v4().simple()),
            model: String::new(),
            content,
            stop_reason,
            usage: Usage::default(),
        }
    }

    /// Set the usage (builder style).
    pub fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = usage;
        self
    }

    /// All text blocks joined.
    pub fn text_content(&self) -> String {
        self.content
            .iter()
            .filter_map(ContentBlock::as_text)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Turn the response into a conversation message (response id attached, and the usage when
    /// the provider reported any: an all-zero usage means "not reported" and is dropped, so token
    /// counting falls back to the estimate).
    pub fn into_message(self) -> Message {
        let mut m =
            Message::new(crate::message::Role::Assistant, self.content).with_response_id(self.id);
        if self.usage.context_tokens() > 0 {
            m.usage = Some(self.usage);
        }
        m
    }
}

/// Errors a [`Model`] reports. The variants drive retry and compaction decisions.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// Bad or missing credentials. Not retried.
    #[error("authentication failed: {0}")]
    Auth(String),
    /// Rate limited; retry after the hint if given.
    #[error("rate limited (retry after {retry_after:?})")]
    RateLimited {
        /// Server hint.
        retry_after: Option<Duration>,
    },
    /// The provider is overloaded (HTTP 529/503).
    #[error("provider overloaded: {0}")]
    Overloaded(String),
    /// The prompt does not fit the context window. Compaction's prompt-too-long path handles it.
    #[error("prompt too long: {message}")]
    ContextTooLong {
        /// Provider text.
        message: String,
        /// Tokens over the limit, when the provider says.
        excess_tokens: Option<u64>,
        /// The context window the provider reported (its total token limit), when it says.
        /// The agent adopts it (see [`crate::window::ContextWindow::learn`]).
        limit: Option<u64>,
    },
    /// The provider answered something we cannot parse.
    #[error("malformed response: {0}")]
    InvalidResponse(String),
    /// Any other HTTP error status.
    #[error("HTTP {status}: {body}")]
    Http {
        /// Status code.
        status: u16,
        /// Body (truncated).
        body: String,
    },
    /// Network trouble.
    #[error("transport error: {0}")]
    Transport(String),
    /// The call took too long.
    #[error("model call timed out")]
    Timeout,
    /// The caller cancelled.
    #[error("model call cancelled")]
    Cancelled,
    /// A streamed response broke off: the connection was cut, an event could not be parsed, or
    /// the provider sent an `error` event. Retried only when nothing had been emitted yet.
    #[error("stream failed after {emitted} event(s): {message}")]
    Stream {
        /// What went wrong.
        message: String,
        /// Events already handed to the caller when it failed.
        emitted: u64,
        /// Whether a retry may succeed (a cut connection or an overloaded provider).
        retryable: bool,
    },
    /// Anything else (including an exhausted script).
    #[error("{0}")]
    Other(String),
}

impl ModelError {
    /// Whether retrying the same request may succeed: rate limits, overloads, transport trouble,
    /// timeouts, HTTP 409 (a conflict the APIs document as retryable) and 5xx. A 413 (request
    /// larger than the server accepts) is not: the same bytes fail again.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::RateLimited { .. } | Self::Overloaded(_) | Self::Transport(_) | Self::Timeout
        ) || matches!(self, Self::Http { status, .. } if *status >= 500 || *status == 409)
            || matches!(
                self,
                Self::Stream {
                    retryable: true,
                    emitted: 0,
                    ..
                }
            )
    }
}

/// An LLM. Object-safe: use it as `Arc<dyn Model>`.
///
/// Implementations must honour `cancel` (return [`ModelError::Cancelled`] promptly once it fires).
///
/// ```
/// use memloop_core::model::{Model, ModelError, ModelRequest, ModelResponse};
/// use tokio_util::sync::CancellationToken;
///
/// struct Echo;
///
/// #[async_trait::async_trait]
/// impl Model for Echo {
///     fn name(&self) -> &str { "echo" }
///     async fn complete(&self, req: ModelRequest, _cancel: CancellationToken) -> Result<ModelResponse, ModelError> {
///         Ok(ModelResponse::text(req.last_user_text().unwrap_or_default()))
///     }
/// }
/// ```
#[async_trait]
pub trait Model: Send + Sync {
    /// A display name (`claude-sonnet-4`, `scripted`...).
    fn name(&self) -> &str;

    /// Who serves the model, as telemetry names it (`gen_ai.provider.name`: `anthropic`,
    /// `openai`, ...; see [`crate::telemetry`]). Default `unknown`.
    fn provider(&self) -> &str {
        "unknown"
    }

    /// Send one request and wait for the whole response.
    async fn complete(
        &self,
        request: ModelRequest,
        cancel: CancellationToken,
    ) -> Result<ModelResponse, ModelError>;

    /// Send one request and stream the answer: deltas as they arrive, then exactly one
    /// [`StreamEvent::Finished`] with the whole response and its usage. An `Err` item ends the
    /// stream.
    ///
    /// The default calls [`complete`](Self::complete) and replays the response as one delta per
    /// block, so every `Model` streams; providers override it to stream for real.
    fn stream(
        &self,
        request: ModelRequest,
        cancel: CancellationToken,
    ) -> BoxStream<'_, Result<StreamEvent, ModelError>> {
        use futures::StreamExt;
        futures::stream::once(self.complete(request, cancel))
            .flat_map(|r| {
                let items: Vec<Result<StreamEvent, ModelError>> = match r {
                    Ok(resp) => StreamEvent::replay(resp).into_iter().map(Ok).collect(),
                    Err(e) => vec![Err(e)],
                };
                futures::stream::iter(items)
            })
            .boxed()
    }
}

/// One item of a streamed response (see [`Model::stream`]). `index` is the content block the
/// delta belongs to, in response order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum StreamEvent {
    /// More answer text.
    TextDelta {
        /// Block index.
        index: usize,
        /// The new text.
        text: String,
    },
    /// More reasoning text.
    ThinkingDelta {
        /// Block index.
        index: usize,
        /// The new reasoning text.
        thinking: String,
    },
    /// A tool call began.
    ToolUseStart {
        /// Block index.
        index: usize,
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
    },
    /// A fragment of a tool call's JSON input (concatenate the fragments of one index).
    ToolInputDelta {
        /// Block index.
        index: usize,
        /// The JSON fragment.
        partial_json: String,
    },
    /// The whole response, with stop reason and usage. Always the last item.
    Finished(ModelResponse),
}

impl StreamEvent {
    /// A whole response as a stream: one delta per text/thinking block, a start and one input
    /// delta per tool call, then [`StreamEvent::Finished`].
    ///
    /// ```
    /// use memloop_core::model::{ModelResponse, StreamEvent};
    /// let events = StreamEvent::replay(ModelResponse::text("hi"));
    /// assert_eq!(events.len(), 2);
    /// assert!(matches!(&events[0], StreamEvent::TextDelta { text, .. } if text == "hi"));
    /// ```
    pub fn replay(response: ModelResponse) -> Vec<StreamEvent> {
        let mut out = Vec::new();
        for (index, block) in response.content.iter().enumerate() {
            match block {
                ContentBlock::Text { text } => out.push(Self::TextDelta {
                    index,
                    text: text.clone(),
                }),
                ContentBlock::Thinking { thinking, .. } => out.push(Self::ThinkingDelta {
                    index,
                    thinking: thinking.clone(),
                }),
                ContentBlock::ToolUse { id, name, input } => {
                    out.push(Self::ToolUseStart {
                        index,
                        id: id.clone(),
                        name: name.clone(),
                    });
                    out.push(Self::ToolInputDelta {
                        index,
                        partial_json: input.to_string(),
                    });
                }
                _ => {}
            }
        }
        out.push(Self::Finished(response));
        out
    }
}

/// Drain a stream into its final response (what a caller that wants no deltas does).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use memloop_core::model::{collect_stream, Model, ModelRequest};
/// use memloop_testkit::{ScriptStep, ScriptedModel};
/// use tokio_util::sync::CancellationToken;
/// let m = ScriptedModel::new().then(ScriptStep::text("hello")).chunked(2);
/// let r = collect_stream(m.stream(ModelRequest::new("main", vec![]), CancellationToken::new())).await.unwrap();
/// assert_eq!(r.text_content(), "hello");
/// # }
/// ```
pub async fn collect_stream(
    mut stream: BoxStream<'_, Result<StreamEvent, ModelError>>,
) -> Result<ModelResponse, ModelError> {
    use futures::StreamExt;
    while let Some(item) = stream.next().await {
        if let StreamEvent::Finished(r) = item? {
            return Ok(r);
        }
    }
    Err(ModelError::Stream {
        message: "the stream ended without a final response".into(),
        emitted: 0,
        retryable: false,
    })
}
