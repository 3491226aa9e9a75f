//! HTTP [`Model`](memloop_core::model::Model) providers (cargo feature `providers`).
//!
//! - [`AnthropicModel`]: the Anthropic Messages API.
//! - [`OpenAiCompatModel`]: OpenAI-compatible chat completions, which also covers local servers
//!   such as llama.cpp, vLLM and Ollama.
//! - [`OpenAiEmbedder`]: an [`Embedder`](memloop_core::embed::Embedder) over an OpenAI-compatible
//!   `/v1/embeddings` endpoint, with the same retries and error mapping.
//!
//! Both retry 429, 5xx, overload and transport errors with backoff ([`retry`]), bound each request
//! with a timeout, honour cancellation, and map failures onto typed [`ModelError`](memloop_core::model::ModelError)s:
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
//! # fn main() -> Result<(), memloop_providers::ProviderError> {
//! let model = memloop_providers::from_env("anthropic", Some("claude-sonnet-4-5"))?;
//! # Ok(()) }
//! ```

pub mod anthropic;
mod anthropic_wire;
pub mod http;
mod naming;
pub mod openai;
mod openai_embed;
mod openai_endpoint;
mod openai_wire;
mod pick;
pub mod retry;
mod settings;
pub mod sse;

pub use anthropic::{AnthropicConfig, AnthropicModel};
pub use http::HttpTransport;
pub use openai::{OpenAiCompatModel, OpenAiConfig};
pub use openai_embed::{DEFAULT_EMBEDDING_MODEL, EmbedRoles, OpenAiEmbedConfig, OpenAiEmbedder};
pub use pick::{from_env, from_env_with};
pub use retry::RetryPolicy;
pub use settings::ProviderError;
