//! [`AnthropicModel`]: the Anthropic Messages API (`POST {base}/v1/messages`).
//!
//! System sections become system text blocks; the last one carries `cache_control` (ephemeral)
//! when prompt caching is on, so the stable prefix is cached. Messages keep their Anthropic shape
//! (text, tool_use, tool_result, thinking, image, document). Usage maps one to one, cache
//! creation and cache reads included.
//!
//! **Structured output.** For a request with a `response_schema` the model is given one extra
//! tool named after the schema, whose input schema is the requested schema, and `tool_choice`
//! forces that tool. The tool input the model produces is returned as the response's only text
//! block (compact JSON) with stop reason `EndTurn`; no other tool is called in that response.
//! A schema whose root is not an object is wrapped as `{"value": <schema>}` (tool inputs must be
//! objects) and unwrapped again.
//!
//! **Streaming.** [`Model::stream`] sends `"stream": true` and reads the event stream:
//! `message_start` (id, model, input usage), `content_block_start`, `content_block_delta`
//! (`text_delta`, `thinking_delta`, `signature_delta`, `input_json_delta`), `content_block_stop`,
//! `message_delta` (stop reason, output usage), `message_stop`; `ping` is ignored and an `error`
//! event ends the stream with [`ModelError::Stream`] (retryable for `overloaded_error`). Extended thinking is not sent with such a request (the API does
//! not allow it with a forced tool).

use super::anthropic_wire::{BodyOptions, StreamDecoder, build_body, parse_response};
use super::http::HttpTransport;
use super::retry::RetryPolicy;
use super::settings::{ProviderError, non_empty, secret_header, setting};
use async_trait::async_trait;
use futures::stream::BoxStream;
use memloop_core::model::{Model, ModelError, ModelRequest, ModelResponse, StreamEvent};
use memloop_host::env::EnvVars;
use reqwest::header::{HeaderMap, HeaderValue};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The default base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The model used when neither the caller nor `ANTHROPIC_MODEL` names one.
pub const DEFAULT_MODEL: &str = "claude-sonnet-4-5";
/// The `anthropic-version` header sent by default.
pub const DEFAULT_API_VERSION: &str = "2023-06-01";

/// Settings of an [`AnthropicModel`].
#[derive(Clone)]
pub struct AnthropicConfig {
    /// The API key (`x-api-key`).
    pub api_key: String,
    /// Base URL without the `/v1/messages` path.
    pub base_url: String,
    /// Model name, e.g. `claude-sonnet-4-5`.
    pub model: String,
    /// Per-request timeout (each attempt); `None` waits forever.
    pub timeout: Option<Duration>,
    /// Retries on 429, 5xx, overload and transport errors.
    pub retry: RetryPolicy,
    /// The `anthropic-version` header.
    pub api_version: String,
    /// Mark the last system block with `cache_control` (prompt caching).
    pub prompt_caching: bool,
    /// Enable extended thinking with this token budget. Requests whose `max_tokens` is not above
    /// the budget, and structured-output requests, are sent without thinking.
    pub thinking_budget_tokens: Option<u32>,
}

impl std::fmt::Debug for AnthropicConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicConfig")
            .field("api_key", &"<redacted>")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("timeout", &self.timeout)
            .field("retry", &self.retry)
            .field("api_version", &self.api_version)
            .field("prompt_caching", &self.prompt_caching)
            .field("thinking_budget_tokens", &self.thinking_budget_tokens)
            .finish()
    }
}

impl AnthropicConfig {
    /// Defaults for everything but the key and the model: the public endpoint, a 10-minute
    /// timeout, [`RetryPolicy::default`], prompt caching on, no extended thinking.
    pub fn new(api_key: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            api_key: api_key.into(),
            base_url: DEFAULT_BASE_URL.to_owned(),
            model: model.into(),
            timeout: Some(Duration::from_secs(600)),
            retry: RetryPolicy::default(),
            api_version: DEFAULT_API_VERSION.to_owned(),
            prompt_caching: true,
            thinking_budget_tokens: None,
        }
    }

    /// From the process environment (see [`AnthropicConfig::from_env_with`]).
    pub fn from_env() -> Result<Self, ProviderError> {
        Self::from_env_with(&EnvVars::from_process())
    }

    /// From `ANTHROPIC_API_KEY` (required), `ANTHROPIC_BASE_URL` (default
    /// [`DEFAULT_BASE_URL`]) and `ANTHROPIC_MODEL` (default [`DEFAULT_MODEL`]).
    pub fn from_env_with(vars: &EnvVars) -> Result<Self, ProviderError> {
        let env = |name: &str| setting(vars, name);
        let key = env("ANTHROPIC_API_KEY").ok_or(ProviderError::MissingEnv {
            provider: "anthropic",
            var: "ANTHROPIC_API_KEY",
            hint: "create a key in the Anthropic console and export it",
        })?;
        let model = env("ANTHROPIC_MODEL").unwrap_or_else(|| DEFAULT_MODEL.to_owned());
        let mut config = Self::new(key, model);
        if let Some(base) = env("ANTHROPIC_BASE_URL") {
            config.base_url = base;
        }
        Ok(config)
    }
}

/// The Anthropic Messages API as a [`Model`].
#[derive(Debug, Clone)]
pub struct AnthropicModel {
    config: AnthropicConfig,
    http: HttpTransport,
}

impl AnthropicModel {
    /// A model from `config`. Fails on an empty key, base URL or model name.
    pub fn new(config: AnthropicConfig) -> Result<Self, ProviderError> {
        non_empty("the Anthropic API key", &config.api_key)?;
        non_empty("the Anthropic base URL", &config.base_url)?;
        non_empty("the Anthropic model name", &config.model)?;
        let mut headers = HeaderMap::new();
        headers.insert("x-api-key", secret_header("API key", &config.api_key)?);
        headers.insert(
            "anthropic-version",
            HeaderValue::from_str(&config.api_version)
                .map_err(|_| ProviderError::InvalidConfig("bad anthropic-version".into()))?,
        );
        let http = HttpTransport::new(
            &config.base_url,
            "/v1/messages",
            headers,
            config.retry.clone(),
            config.timeout,
        )?;
        Ok(Self { config, http })
    }

    /// From the process environment (see [`AnthropicConfig::from_env_with`]).
    pub fn from_env() -> Result<Self, ProviderError> {
        Self::new(AnthropicConfig::from_env()?)
    }

    /// The configuration.
    pub fn config(&self) -> &AnthropicConfig {
        &self.config
    }
}

#[async_trait]
impl Model for AnthropicModel {
    fn provider(&self) -> &str {
        "anthropic"
    }

    fn name(&self) -> &str {
        &self.config.model
    }

    async fn complete(
        &self,
        request: ModelRequest,
        cancel: CancellationToken,
    ) -> Result<ModelResponse, ModelError> {
        let (body, schema_tool) = build_body(self.body_options(), &request);
        let model = &self.config.model;
        self.http
            .call("anthropic", model, &request.purpose, &body, &cancel, |b| {
                parse_response(b, schema_tool.as_ref())
            })
            .await
    }

    /// Streams over server-sent events (`"stream": true`); see the `SseDecoder` notes in the
    /// module docs for the events read.
    fn stream(
        &self,
        request: ModelRequest,
        cancel: CancellationToken,
    ) -> BoxStream<'_, Result<StreamEvent, ModelError>> {
        let (mut body, schema_tool) = build_body(self.body_options(), &request);
        body["stream"] = serde_json::Value::Bool(true);
        self.http.stream(
            "anthropic",
            &self.config.model,
            &request.purpose,
            body,
            cancel,
            move || StreamDecoder::new(schema_tool.clone()),
        )
    }
}

impl AnthropicModel {
    fn body_options(&self) -> BodyOptions<'_> {
        BodyOptions {
            model: &self.config.model,
            prompt_caching: self.config.prompt_caching,
            thinking_budget_tokens: self.config.thinking_budget_tokens,
        }
    }
}
