//! What both providers share when they are built: environment lookup, setting validation, and
//! the error a bad setting gives.

use memloop_host::env::EnvVars;

/// Errors building a provider.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    /// A required environment variable (an API key) is not set.
    #[error("{provider}: the environment variable {var} is not set ({hint})")]
    MissingEnv {
        /// Provider name.
        provider: &'static str,
        /// The variable.
        var: &'static str,
        /// What to do about it.
        hint: &'static str,
    },
    /// The provider name is not one we know.
    #[error("unknown provider {0:?}: expected \"anthropic\" or \"openai\"")]
    UnknownProvider(String),
    /// A setting is unusable (an empty base URL or model name, a key with invalid characters...).
    #[error("invalid provider configuration: {0}")]
    InvalidConfig(String),
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
}

/// One setting from the environment; empty and all-blank values count as unset.
pub(crate) fn setting(env: &EnvVars, name: &str) -> Option<String> {
    env.get(name)
        .filter(|v| !v.trim().is_empty())
        .map(str::to_owned)
}

/// Reject an empty setting with a clear error.
pub(crate) fn non_empty(what: &str, value: &str) -> Result<(), ProviderError> {
    if value.trim().is_empty() {
        return Err(ProviderError::InvalidConfig(format!("{what} is empty")));
    }
    Ok(())
}

/// A header value from a secret, without echoing the secret in the error.
pub(crate) fn secret_header(
    name: &str,
    value: &str,
) -> Result<reqwest::header::HeaderValue, ProviderError> {
    let mut v = reqwest::header::HeaderValue::from_str(value).map_err(|_| {
        ProviderError::InvalidConfig(format!(
            "the {name} contains characters not allowed in a header"
        ))
    })?;
    v.set_sensitive(true);
    Ok(v)
}
