//! What the OpenAI-compatible clients (chat completions and embeddings) share when they are
//! built: the base URL and key read from the environment, and the HTTP transport that sends the
//! key as a bearer token.

use super::http::HttpTransport;
use super::retry::RetryPolicy;
use super::settings::{ProviderError, secret_header, setting};
use memloop_host::env::EnvVars;
use reqwest::header::{AUTHORIZATION, HeaderMap};
use std::time::Duration;

/// OpenAI's own API, the base URL when the environment names none (re-exported as
/// `openai::DEFAULT_BASE_URL`).
pub(crate) const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The variable holding the key of every OpenAI-compatible client.
const API_KEY_VAR: &str = "OPENAI_API_KEY";

/// The base URL and key of an OpenAI-compatible server, as the environment gives them.
pub(crate) struct EnvEndpoint {
    /// The first of the base-URL variables that is set, else [`DEFAULT_BASE_URL`].
    pub(crate) base_url: String,
    /// `OPENAI_API_KEY`, when set.
    pub(crate) api_key: Option<String>,
}

impl EnvEndpoint {
    /// The base URL from the first of `base_vars` that is set (else [`DEFAULT_BASE_URL`]) and
    /// the key from `OPENAI_API_KEY`, which is required only for `api.openai.com`; `hint` says
    /// what to do when it is missing there.
    pub(crate) fn read(
        vars: &EnvVars,
        base_vars: &[&str],
        hint: &'static str,
    ) -> Result<Self, ProviderError> {
        let base_url = base_vars
            .iter()
            .find_map(|name| setting(vars, name))
            .unwrap_or_else(|| DEFAULT_BASE_URL.to_owned());
        let api_key = setting(vars, API_KEY_VAR);
        if api_key.is_none() && base_url.contains("api.openai.com") {
            return Err(ProviderError::MissingEnv {
                provider: "openai",
                var: API_KEY_VAR,
                hint,
            });
        }
        Ok(Self { base_url, api_key })
    }
}

/// The transport posting to `{base_url}{path}`, with `Authorization: Bearer <key>` when a
/// non-blank key is given (local servers take none).
pub(crate) fn bearer_transport(
    base_url: &str,
    path: &str,
    api_key: Option<&str>,
    retry: RetryPolicy,
    timeout: Option<Duration>,
) -> Result<HttpTransport, ProviderError> {
    let mut headers = HeaderMap::new();
    if let Some(key) = api_key.filter(|k| !k.trim().is_empty()) {
        headers.insert(
            AUTHORIZATION,
            secret_header("API key", &format!("Bearer {key}"))?,
        );
    }
    HttpTransport::new(base_url, path, headers, retry, timeout)
}
