//! The [`Model`] trait: one call to an LLM.

use crate::message::{ContentBlock, Message, Usage};
use crate::tool::ToolSpec;
use async_trait::async_trait;
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
    /// [`crate::testing::ScriptedModel`] route responses.
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
    /// Anything else (including an exhausted script).
    #[error("{0}")]
    Other(String),
}

impl ModelError {
    /// Whether retrying the same request may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::RateLimited { .. } | Self::Overloaded(_) | Self::Transport(_) | Self::Timeout
        ) || matches!(self, Self::Http { status, .. } if *status >= 500)
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

    /// Send one request and wait for the whole response.
    async fn complete(
        &self,
        request: ModelRequest,
        cancel: CancellationToken,
    ) -> Result<ModelResponse, ModelError>;
}
