//! [`OpenAiCompatModel`]: OpenAI-compatible chat completions (`POST {base}/chat/completions`).
//!
//! Works with OpenAI and with local servers that speak the same protocol (llama.cpp's
//! `llama-server`, vLLM, Ollama's `/v1`), which need no key.
//!
//! Mapping: the system sections become one `system` message; assistant tool_use blocks become
//! `tool_calls` with JSON-string arguments; tool_result blocks become `role: "tool"` messages
//! placed right after the assistant message that called them (an error result is prefixed with
//! `Error: `); images become `image_url` parts (data URLs for inline data); thinking blocks are not
//! sent. A `response_schema` becomes `response_format: {type: "json_schema"}` and the JSON arrives
//! as the response text. A `reasoning_content` field (DeepSeek, vLLM reasoning parsers) becomes a
//! thinking block. Usage: `prompt_tokens` minus `prompt_tokens_details.cached_tokens` is the
//! input, the cached tokens are cache reads, `completion_tokens` the output.
//!
//! **Streaming.** [`Model::stream`] sends `"stream": true` with
//! `stream_options: {include_usage: true}` and reads `data:` chunks: `delta.content` (text),
//! `delta.reasoning_content` (thinking), `delta.tool_calls[i]` (id and name first, then
//! `function.arguments` fragments), `finish_reason`, a final usage chunk with empty `choices`, and
//! `data: [DONE]`. A chunk holding `error` ends the stream with [`ModelError::Stream`].

use super::http::HttpTransport;
use super::openai_endpoint::{EnvEndpoint, bearer_transport};
use super::openai_wire::{BodyOptions, StreamDecoder, build_body, make_streaming, parse_response};
use super::retry::RetryPolicy;
use super::settings::{ProviderError, non_empty, setting};
use async_trait::async_trait;
use futures::stream::BoxStream;
use memloop_core::model::{Model, ModelError, ModelRequest, ModelResponse, StreamEvent};
use memloop_host::env::EnvVars;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The default base URL.
pub const DEFAULT_BASE_URL: &str = super::openai_endpoint::DEFAULT_BASE_URL;
/// The model used when neither the caller nor `OPENAI_MODEL` names one.
pub const DEFAULT_MODEL: &str = "gpt-4o-mini";

/// Settings of an [`OpenAiCompatModel`].
#[derive(Clone)]
pub struct OpenAiConfig {
    /// Bearer token; `None` sends no `Authorization` header (local servers).
    pub api_key: Option<String>,
    /// Base URL including the version path (`https://api.openai.com/v1`,
    /// `http://127.0.0.1:8080/v1`, `http://localhost:11434/v1`).
    pub base_url: String,
    /// Model name.
    pub model: String,
    /// Per-request timeout (each attempt); `None` waits forever.
    pub timeout: Option<Duration>,
    /// Retries on 429, 5xx, overload and transport errors.
    pub retry: RetryPolicy,
    /// Send the output cap as `max_completion_tokens` (OpenAI's current name, required by its
    /// reasoning models) instead of `max_tokens` (what local servers read).
    pub use_max_completion_tokens: bool,
    /// Ask for `strict` JSON-schema adherence (the schema must then follow OpenAI's strict rules).
    pub strict_schema: bool,
}

impl std::fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("timeout", &self.timeout)
            .field("retry", &self.retry)
            .field("use_max_completion_tokens", &self.use_max_completion_tokens)
            .field("strict_schema", &self.strict_schema)
            .finish()
    }
}

impl OpenAiConfig {
    /// Settings for `base_url` and `model`: no key, a 10-minute timeout,
    /// [`RetryPolicy::default`], `max_completion_tokens` only for `api.openai.com`.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        let base_url = base_url.into();
        Self {
            api_key: None,
            use_max_completion_tokens: base_url.contains("api.openai.com"),
            base_url,
            model: model.into(),
            timeout: Some(Duration::from_secs(600)),
            retry: RetryPolicy::default(),
            strict_schema: false,
        }
    }

    /// Set the key (builder style).
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// From the process environment (see [`OpenAiConfig::from_env_with`]).
    pub fn from_env() -> Result<Self, ProviderError> {
        Self::from_env_with(&EnvVars::from_process())
    }

    /// From `OPENAI_API_KEY`, `OPENAI_BASE_URL` (default [`DEFAULT_BASE_URL`]) and `OPENAI_MODEL`
    /// (default [`DEFAULT_MODEL`]). The key is required only for the default (OpenAI) endpoint.
    pub fn from_env_with(vars: &EnvVars) -> Result<Self, ProviderError> {
        let endpoint = EnvEndpoint::read(
            vars,
            &["OPENAI_BASE_URL"],
            "export your OpenAI key, or set OPENAI_BASE_URL to a local server \
             (llama.cpp, vLLM, Ollama) that needs none",
        )?;
        let model = setting(vars, "OPENAI_MODEL").unwrap_or_else(|| DEFAULT_MODEL.to_owned());
        let mut config = Self::new(endpoint.base_url, model);
        config.api_key = endpoint.api_key;
        Ok(config)
    }
}

/// An OpenAI-compatible chat-completions endpoint as a [`Model`].
#[derive(Debug, Clone)]
pub struct OpenAiCompatModel {
    config: OpenAiConfig,
    http: HttpTransport,
}

impl OpenAiCompatModel {
    /// A model from `config`. Fails on an empty base URL or model name.
    pub fn new(config: OpenAiConfig) -> Result<Self, ProviderError> {
        non_empty("the OpenAI base URL", &config.base_url)?;
        non_empty("the OpenAI model name", &config.model)?;
        let http = bearer_transport(
            &config.base_url,
            "/chat/completions",
            config.api_key.as_deref(),
            config.retry.clone(),
            config.timeout,
        )?;
        Ok(Self { config, http })
    }

    /// From the process environment (see [`OpenAiConfig::from_env_with`]).
    pub fn from_env() -> Result<Self, ProviderError> {
        Self::new(OpenAiConfig::from_env()?)
    }

    /// The configuration.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    /// The context window the server reports for this model, in tokens, so thresholds follow
    /// the real window: llama.cpp's `GET /props` (`default_generation_settings.n_ctx`, or a
    /// top-level `n_ctx`), Ollama's `POST /api/show` (`num_ctx` in its `parameters` when the
    /// model sets one, else `model_info.<arch>.context_length`), and vLLM's `GET {base}/models`
    /// (`max_model_len` of this model). The server root is the base URL without its trailing
    /// `/v1`. `None` when no endpoint answers (OpenAI itself reports none).
    pub async fn context_window(&self) -> Option<u64> {
        let base = self.config.base_url.trim_end_matches('/');
        let root = base.strip_suffix("/v1").unwrap_or(base);
        if let Some(props) = self.http.fetch_json(&format!("{root}/props"), None).await {
            let n = props
                .pointer("/default_generation_settings/n_ctx")
                .or_else(|| props.get("n_ctx"))
                .and_then(serde_json::Value::as_u64);
            if let Some(n) = n.filter(|&n| n > 0) {
                return Some(n);
            }
        }
        let show = serde_json::json!({"model": self.config.model});
        if let Some(info) = self
            .http
            .fetch_json(&format!("{root}/api/show"), Some(&show))
            .await
        {
            if let Some(n) = ollama_context(&info) {
                return Some(n);
            }
        }
        let models = self
            .http
            .fetch_json(&format!("{base}/models"), None)
            .await?;
        models
            .get("data")?
            .as_array()?
            .iter()
            .find(|m| m["id"] == self.config.model.as_str())?
            .get("max_model_len")?
            .as_u64()
            .filter(|&n| n > 0)
    }
}

/// Ollama's effective window: `num_ctx` in the model's `parameters` text, else the trained
/// `model_info.<arch>.context_length`.
fn ollama_context(info: &serde_json::Value) -> Option<u64> {
    let num_ctx = info
        .get("parameters")
        .and_then(serde_json::Value::as_str)
        .and_then(|p| {
            p.lines().find_map(|line| {
                let mut words = line.split_whitespace();
                (words.next() == Some("num_ctx"))
                    .then(|| words.next()?.parse::<u64>().ok())
                    .flatten()
            })
        });
    num_ctx
        .or_else(|| {
            info.get("model_info")?
                .as_object()?
                .iter()
                .find(|(k, _)| k.ends_with(".context_length"))?
                .1
                .as_u64()
        })
        .filter(|&n| n > 0)
}

#[async_trait]
impl Model for OpenAiCompatModel {
    fn provider(&self) -> &str {
        "openai"
    }

    fn name(&self) -> &str {
        &self.config.model
    }

    async fn complete(
        &self,
        request: ModelRequest,
        cancel: CancellationToken,
    ) -> Result<ModelResponse, ModelError> {
        let body = build_body(self.body_options(), &request);
        let model = &self.config.model;
        self.http
            .call(
                "openai",
                model,
                &request.purpose,
                &body,
                &cancel,
                parse_response,
            )
            .await
    }

    /// Streams with `"stream": true` and `stream_options.include_usage`, reading `data:` chunks
    /// until `[DONE]` (see the module docs).
    fn stream(
        &self,
        request: ModelRequest,
        cancel: CancellationToken,
    ) -> BoxStream<'_, Result<StreamEvent, ModelError>> {
        let mut body = build_body(self.body_options(), &request);
        make_streaming(&mut body);
        self.http.stream(
            "openai",
            &self.config.model,
            &request.purpose,
            body,
            cancel,
            StreamDecoder::default,
        )
    }
}

impl OpenAiCompatModel {
    fn body_options(&self) -> BodyOptions<'_> {
        BodyOptions {
            model: &self.config.model,
            use_max_completion_tokens: self.config.use_max_completion_tokens,
            strict_schema: self.config.strict_schema,
        }
    }
}
