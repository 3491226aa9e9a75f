//! HTTP [`Model`] providers (cargo feature `providers`).
//!
//! - [`AnthropicModel`]: the Anthropic Messages API.
//! - [`OpenAiCompatModel`]: OpenAI-compatible chat completions, which also covers local servers
//!   such as llama.cpp, vLLM and Ollama.
//! - [`OpenAiEmbedder`]: an [`Embedder`](crate::embed::Embedder) over an OpenAI-compatible
//!   `/v1/embeddings` endpoint, with the same retries and error mapping.
//!
//! Both retry 429, 5xx, overload and transport errors with backoff ([`retry`]), bound each request
//! with a timeout, honour cancellation, and map failures onto typed [`ModelError`](crate::model::ModelError)s:
//! 401/403 → `Auth`, a prompt that does not fit → `ContextTooLong` (with the excess when the
//! provider states it), 429 → `RateLimited`, 503/529 → `Overloaded`, an unparsable body →
//! `InvalidResponse` with a short excerpt.
//!
//! A provider of your own (another crate) reuses the same plumbing: [`http::HttpTransport`]
//! (POST with retries, timeout, cancellation, error mapping, SSE streaming), [`sse`] (the event
//! parser and the [`sse::SseDecoder`] trait) and [`retry`] (the policy and
//! [`retry::run_with_retry`] for transports of your own).
//!
//! [`from_env`] builds either one from the usual environment variables:
//!
//! ```no_run
//! # fn main() -> Result<(), memloop_core::providers::ProviderError> {
//! let model = memloop_core::providers::from_env("anthropic", Some("claude-sonnet-4-5"))?;
//! # Ok(()) }
//! ```

pub mod anthropic;
mod anthropic_wire;
pub mod http;
mod naming;
pub mod openai;
mod openai_embed;
mod openai_wire;
pub mod retry;
mod settings;
pub mod sse;

pub use anthropic::{AnthropicConfig, AnthropicModel};
pub use http::HttpTransport;
pub use openai::{OpenAiCompatModel, OpenAiConfig};
pub use openai_embed::{DEFAULT_EMBEDDING_MODEL, OpenAiEmbedConfig, OpenAiEmbedder};
pub use retry::RetryPolicy;
pub use settings::{EnvLookup, ProviderError, process_env};

use crate::model::Model;
use std::sync::Arc;

/// A model for `provider` (`anthropic` or `openai`, case-insensitive) configured from the
/// process environment; `model` overrides `ANTHROPIC_MODEL` / `OPENAI_MODEL`.
///
/// See [`AnthropicConfig::from_env_with`] and [`OpenAiConfig::from_env_with`] for the variables.
pub fn from_env(provider: &str, model: Option<&str>) -> Result<Arc<dyn Model>, ProviderError> {
    from_env_with(provider, model, &process_env)
}

/// [`from_env`] with an injected environment.
///
/// ```
/// use memloop_core::providers::{from_env_with, ProviderError};
/// let env = |k: &str| (k == "OPENAI_BASE_URL").then(|| "http://127.0.0.1:8080/v1".to_owned());
/// let model = from_env_with("openai", Some("qwen2.5"), &env).unwrap();
/// assert_eq!(model.name(), "qwen2.5");
/// let err = from_env_with("anthropic", None, &|_: &str| None).err().unwrap();
/// assert!(matches!(err, ProviderError::MissingEnv { var: "ANTHROPIC_API_KEY", .. }));
/// ```
pub fn from_env_with(
    provider: &str,
    model: Option<&str>,
    env: EnvLookup<'_>,
) -> Result<Arc<dyn Model>, ProviderError> {
    match provider.trim().to_ascii_lowercase().as_str() {
        "anthropic" => {
            let mut config = AnthropicConfig::from_env_with(env)?;
            if let Some(m) = model {
                config.model = m.to_owned();
            }
            Ok(Arc::new(AnthropicModel::new(config)?))
        }
        "openai" => {
            let mut config = OpenAiConfig::from_env_with(env)?;
            if let Some(m) = model {
                config.model = m.to_owned();
            }
            Ok(Arc::new(OpenAiCompatModel::new(config)?))
        }
        other => Err(ProviderError::UnknownProvider(other.to_owned())),
    }
}
