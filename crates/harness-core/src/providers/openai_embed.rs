//! [`OpenAiEmbedder`]: an [`Embedder`] over an OpenAI-compatible `/v1/embeddings` endpoint
//! (OpenAI, Ollama, vLLM, llama.cpp's server started with `--embedding`).
//!
//! Wire shape: `POST {base_url}/embeddings` with `{"model", "input": [...], "encoding_format":
//! "float"}` (plus `"dimensions"` when configured); the answer's `data[i].embedding` vectors are
//! put back in input order by their `index`. Retries, timeouts and the mapping of HTTP failures
//! onto typed errors are the chat providers' own.

use super::http::{HttpTransport, parse_body};
use super::openai::DEFAULT_BASE_URL;
use super::retry::RetryPolicy;
use super::settings::{EnvLookup, ProviderError, non_empty, process_env, secret_header};
use crate::embed::{EmbedError, Embedder, normalize};
use crate::model::ModelError;
use async_trait::async_trait;
use reqwest::header::{AUTHORIZATION, HeaderMap};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// The model [`OpenAiEmbedConfig::from_env_with`] uses when none is named.
pub const DEFAULT_EMBEDDING_MODEL: &str = "text-embedding-3-small";

/// Settings of an [`OpenAiEmbedder`].
#[derive(Clone)]
pub struct OpenAiEmbedConfig {
    /// Bearer token; `None` sends no `Authorization` header (local servers).
    pub api_key: Option<String>,
    /// Base URL including the version path (`https://api.openai.com/v1`,
    /// `http://127.0.0.1:8080/v1`, `http://localhost:11434/v1`).
    pub base_url: String,
    /// Model name.
    pub model: String,
    /// Ask the server for vectors of this length (OpenAI's `dimensions`, for models that can
    /// shorten them). `None` takes the model's own length, learned from a first request.
    pub dimensions: Option<usize>,
    /// Texts per request. Default 64.
    pub max_batch: usize,
    /// Per-request timeout (each attempt); `None` waits forever. Default 60 s.
    pub timeout: Option<Duration>,
    /// Retries on 429, 5xx, overload and transport errors.
    pub retry: RetryPolicy,
}

impl std::fmt::Debug for OpenAiEmbedConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiEmbedConfig")
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("dimensions", &self.dimensions)
            .field("max_batch", &self.max_batch)
            .field("timeout", &self.timeout)
            .field("retry", &self.retry)
            .finish()
    }
}

impl OpenAiEmbedConfig {
    /// Settings for `base_url` and `model`: no key, the model's own dimension, 64 texts per
    /// request, a 60-second timeout, [`RetryPolicy::default`].
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            api_key: None,
            base_url: base_url.into(),
            model: model.into(),
            dimensions: None,
            max_batch: 64,
            timeout: Some(Duration::from_secs(60)),
            retry: RetryPolicy::default(),
        }
    }

    /// Set the key (builder style).
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// From the process environment (see [`OpenAiEmbedConfig::from_env_with`]).
    pub fn from_env() -> Result<Self, ProviderError> {
        Self::from_env_with(&process_env)
    }

    /// From `OPENAI_EMBEDDINGS_BASE_URL` (else `OPENAI_BASE_URL`, else [`DEFAULT_BASE_URL`]),
    /// `OPENAI_EMBEDDINGS_MODEL` (default [`DEFAULT_EMBEDDING_MODEL`]) and `OPENAI_API_KEY`
    /// (required for `api.openai.com` only).
    ///
    /// ```
    /// use memloop_core::providers::OpenAiEmbedConfig;
    /// let env = |k: &str| match k {
    ///     "OPENAI_BASE_URL" => Some("http://127.0.0.1:11434/v1".to_owned()),
    ///     "OPENAI_EMBEDDINGS_MODEL" => Some("nomic-embed-text".to_owned()),
    ///     _ => None,
    /// };
    /// let config = OpenAiEmbedConfig::from_env_with(&env).unwrap();
    /// assert_eq!(config.model, "nomic-embed-text");
    /// ```
    pub fn from_env_with(env: EnvLookup<'_>) -> Result<Self, ProviderError> {
        let base = env("OPENAI_EMBEDDINGS_BASE_URL")
            .or_else(|| env("OPENAI_BASE_URL"))
            .unwrap_or_else(|| DEFAULT_BASE_URL.to_owned());
        let model =
            env("OPENAI_EMBEDDINGS_MODEL").unwrap_or_else(|| DEFAULT_EMBEDDING_MODEL.to_owned());
        let mut config = Self::new(base, model);
        config.api_key = env("OPENAI_API_KEY");
        if config.api_key.is_none() && config.base_url.contains("api.openai.com") {
            return Err(ProviderError::MissingEnv {
                provider: "openai",
                var: "OPENAI_API_KEY",
                hint: "export your OpenAI key, or set OPENAI_EMBEDDINGS_BASE_URL to a local \
                       server (Ollama, vLLM, llama.cpp --embedding) that needs none",
            });
        }
        Ok(config)
    }
}

/// An [`Embedder`] over an OpenAI-compatible embeddings endpoint.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use memloop_core::providers::{OpenAiEmbedConfig, OpenAiEmbedder};
/// let config = OpenAiEmbedConfig::new("http://127.0.0.1:11434/v1", "nomic-embed-text");
/// let embedder = OpenAiEmbedder::connect(config).await?; // learns the dimension
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct OpenAiEmbedder {
    config: OpenAiEmbedConfig,
    http: HttpTransport,
    model_id: String,
    dimension: usize,
}

#[derive(serde::Deserialize)]
struct EmbeddingsResponse {
    data: Vec<EmbeddingItem>,
}

#[derive(serde::Deserialize)]
struct EmbeddingItem {
    index: usize,
    embedding: Vec<f32>,
}

impl OpenAiEmbedder {
    /// An embedder whose vectors are `dimension` long, without asking the server.
    pub fn with_dimension(
        config: OpenAiEmbedConfig,
        dimension: usize,
    ) -> Result<Self, ProviderError> {
        non_empty("the embeddings base URL", &config.base_url)?;
        non_empty("the embeddings model name", &config.model)?;
        if dimension == 0 || config.dimensions.is_some_and(|d| d != dimension) {
            return Err(ProviderError::InvalidConfig(format!(
                "embedding dimension {dimension} (configured: {:?})",
                config.dimensions
            )));
        }
        let mut headers = HeaderMap::new();
        if let Some(key) = config.api_key.as_deref().filter(|k| !k.trim().is_empty()) {
            headers.insert(
                AUTHORIZATION,
                secret_header("API key", &format!("Bearer {key}"))?,
            );
        }
        let http = HttpTransport::new(
            &config.base_url,
            "/embeddings",
            headers,
            config.retry.clone(),
            config.timeout,
        )?;
        let model_id = format!(
            "openai:{}@{}:{dimension}",
            config.model,
            config.base_url.trim_end_matches('/')
        );
        Ok(Self {
            config,
            http,
            model_id,
            dimension,
        })
    }

    /// An embedder for `config`; when `config.dimensions` is unset, one request embeds a probe
    /// text to learn the model's dimension (so a wrong URL or model fails here, not mid-recall).
    pub async fn connect(config: OpenAiEmbedConfig) -> Result<Self, EmbedError> {
        let dimension = match config.dimensions {
            Some(d) => d,
            None => {
                // A provisional client whose dimension is not checked yet.
                let probe = Self::with_dimension(config.clone(), 1).map_err(provider_error)?;
                let vectors = probe.request(&["dimension probe".to_owned()]).await?;
                vectors.first().map(Vec::len).unwrap_or(0)
            }
        };
        Self::with_dimension(config, dimension).map_err(provider_error)
    }

    /// One request for `texts` (none of them empty): the vectors in input order, normalised.
    async fn request(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut body = serde_json::json!({
            "model": self.config.model,
            "input": texts,
            "encoding_format": "float",
        });
        if let Some(d) = self.config.dimensions {
            body["dimensions"] = d.into();
        }
        let span =
            tracing::info_span!("embed_call", model = %self.config.model, texts = texts.len());
        let bytes = self
            .http
            .post_json(&body, &CancellationToken::new())
            .instrument(span)
            .await?;
        let parsed: EmbeddingsResponse = parse_body(&bytes)?;
        let mut slots: Vec<Option<Vec<f32>>> = vec![None; texts.len()];
        for item in parsed.data {
            match slots.get_mut(item.index) {
                Some(slot @ None) => *slot = Some(item.embedding),
                _ => {
                    return Err(ModelError::InvalidResponse(format!(
                        "embedding index {} is out of range or repeated",
                        item.index
                    ))
                    .into());
                }
            }
        }
        slots
            .into_iter()
            .enumerate()
            .map(|(i, v)| {
                let mut v = v.ok_or_else(|| {
                    EmbedError::from(ModelError::InvalidResponse(format!(
                        "no embedding for input {i}"
                    )))
                })?;
                normalize(&mut v);
                Ok(v)
            })
            .collect()
    }
}

fn provider_error(e: ProviderError) -> EmbedError {
    EmbedError::Load(e.to_string())
}

#[async_trait]
impl Embedder for OpenAiEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dimension(&self) -> usize {
        self.dimension
    }

    fn max_batch(&self) -> usize {
        self.config.max_batch.max(1)
    }

    /// Empty (or all-whitespace) texts are not sent (the APIs reject them): they get a zero
    /// vector, similar to nothing.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let sent: Vec<String> = texts
            .iter()
            .filter(|t| !t.trim().is_empty())
            .cloned()
            .collect();
        let mut vectors = if sent.is_empty() {
            Vec::new()
        } else {
            self.request(&sent).await?
        }
        .into_iter();
        Ok(texts
            .iter()
            .map(|t| {
                if t.trim().is_empty() {
                    vec![0.0; self.dimension]
                } else {
                    vectors.next().unwrap_or_default()
                }
            })
            .collect())
    }
}
