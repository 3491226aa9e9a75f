//! Picking a provider by name and configuring it from the environment.

use super::{AnthropicConfig, AnthropicModel, OpenAiCompatModel, OpenAiConfig, ProviderError};
use memloop_core::model::Model;
use memloop_host::env::EnvVars;
use std::sync::Arc;

/// A model for `provider` (`anthropic` or `openai`, case-insensitive) configured from the
/// process environment; `model` overrides `ANTHROPIC_MODEL` / `OPENAI_MODEL`.
///
/// See [`AnthropicConfig::from_env_with`] and [`OpenAiConfig::from_env_with`] for the variables.
pub fn from_env(provider: &str, model: Option<&str>) -> Result<Arc<dyn Model>, ProviderError> {
    from_env_with(provider, model, &EnvVars::from_process())
}

/// [`from_env`] with an injected environment.
///
/// ```
/// use memloop_host::env::EnvVars;
/// use memloop_providers::{from_env_with, ProviderError};
/// let env = EnvVars::from_pairs([("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1")]);
/// let model = from_env_with("openai", Some("qwen2.5"), &env).unwrap();
/// assert_eq!(model.name(), "qwen2.5");
/// let err = from_env_with("anthropic", None, &EnvVars::default()).err().unwrap();
/// assert!(matches!(err, ProviderError::MissingEnv { var: "ANTHROPIC_API_KEY", .. }));
/// ```
pub fn from_env_with(
    provider: &str,
    model: Option<&str>,
    env: &EnvVars,
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
