//! The embedder `--semantic` uses, from `--embed-model` / `--embed-url` (or their environment
//! variables). memloop never downloads a model: the user names a directory or an endpoint.

use crate::args::{EmbedArgs, EmbedPrefixes, EmbedRoleMode};
use anyhow::{Context as _, bail};
use memloop_core::embed::{Embedder, Prefixed};
use std::sync::Arc;

/// The embedder `args` name, with its prefixes (`--embed-prefixes`).
pub async fn embedder(args: &EmbedArgs) -> anyhow::Result<Arc<dyn Embedder>> {
    let model = unprefixed(args).await?;
    Ok(match args.embed_prefixes {
        EmbedPrefixes::None => model,
        EmbedPrefixes::E5 => Arc::new(Prefixed::e5(model)),
        EmbedPrefixes::Bge => Arc::new(Prefixed::bge(model)),
    })
}

async fn unprefixed(args: &EmbedArgs) -> anyhow::Result<Arc<dyn Embedder>> {
    if let Some(url) = &args.embed_url {
        use memloop_core::providers::{OpenAiEmbedConfig, OpenAiEmbedder};
        let mut config = OpenAiEmbedConfig::new(url, &args.embed_name).with_roles(roles(args)?);
        config.api_key = memloop_core::providers::process_env("OPENAI_API_KEY");
        let embedder = OpenAiEmbedder::connect(config)
            .await
            .with_context(|| format!("cannot use the embeddings endpoint {url}"))?;
        return Ok(Arc::new(embedder));
    }
    if let Some(dir) = &args.embed_model {
        if args.embed_roles != EmbedRoleMode::None || args.embed_query_name.is_some() {
            bail!(
                "--embed-roles and --embed-query-name / --embed-passage-name apply to --embed-url \
                 only, not to --embed-model"
            );
        }
        return local(dir);
    }
    bail!(
        "--semantic needs an embedding model: --embed-model DIR (a sentence-transformers \
         directory) or --embed-url URL (an OpenAI-compatible endpoint), or MEMLOOP_EMBED_MODEL / \
         MEMLOOP_EMBED_URL"
    )
}

/// How the endpoint is told a query from a memory: `--embed-roles`, or one model name per role
/// (`--embed-query-name` with `--embed-passage-name`).
fn roles(args: &EmbedArgs) -> anyhow::Result<memloop_core::providers::EmbedRoles> {
    use memloop_core::providers::EmbedRoles;
    Ok(
        match (
            args.embed_roles,
            &args.embed_query_name,
            &args.embed_passage_name,
        ) {
            (EmbedRoleMode::None, None, None) => EmbedRoles::None,
            (EmbedRoleMode::InputType, None, None) => EmbedRoles::input_type(),
            (EmbedRoleMode::None, Some(query), Some(passage)) => {
                EmbedRoles::model_per_role(query, passage)
            }
            (EmbedRoleMode::InputType, Some(_), _) | (EmbedRoleMode::InputType, _, Some(_)) => {
                bail!(
                    "--embed-roles input-type and --embed-query-name / --embed-passage-name are \
                     two ways of telling the role: choose one"
                )
            }
            (EmbedRoleMode::None, _, _) => {
                bail!("--embed-query-name and --embed-passage-name go together")
            }
        },
    )
}

/// The embedder `args` name, else all-MiniLM-L6-v2 found in the Hugging Face cache
/// ([`hf_cache_model`], `candle` builds only), else none.
pub async fn embedder_if_configured(
    args: &EmbedArgs,
    env: &memloop_store::env::EnvVars,
) -> anyhow::Result<Option<Arc<dyn Embedder>>> {
    if args.embed_url.is_some() || args.embed_model.is_some() {
        return embedder(args).await.map(Some);
    }
    match hf_cache_model(env) {
        Some(dir) if cfg!(feature = "candle") => local(&dir).map(Some),
        _ => Ok(None),
    }
}

/// The newest snapshot of `sentence-transformers/all-MiniLM-L6-v2` in the Hugging Face cache
/// (`$HF_HUB_CACHE`, else `$HF_HOME/hub`, else `~/.cache/huggingface/hub`) that has its
/// weights, if any.
pub fn hf_cache_model(env: &memloop_store::env::EnvVars) -> Option<std::path::PathBuf> {
    use std::path::PathBuf;
    let hub = env
        .get("HF_HUB_CACHE")
        .map(PathBuf::from)
        .or_else(|| env.get("HF_HOME").map(|h| PathBuf::from(h).join("hub")))
        .or_else(|| env.home_dir().map(|h| h.join(".cache/huggingface/hub")))?;
    let snapshots = hub.join("models--sentence-transformers--all-MiniLM-L6-v2/snapshots");
    let mut dirs: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(snapshots)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("model.safetensors").is_file() && p.join("tokenizer.json").is_file())
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
        .collect();
    dirs.sort();
    dirs.pop().map(|(_, p)| p)
}

#[cfg(feature = "candle")]
fn local(dir: &std::path::Path) -> anyhow::Result<Arc<dyn Embedder>> {
    let embedder = memloop_candle::CandleEmbedder::load(dir)
        .with_context(|| format!("cannot load the embedding model in {}", dir.display()))?;
    Ok(Arc::new(embedder))
}

#[cfg(not(feature = "candle"))]
fn local(dir: &std::path::Path) -> anyhow::Result<Arc<dyn Embedder>> {
    bail!(
        "--embed-model {} needs a memloop built with the `candle` feature \
         (cargo install memloop-cli --features candle); or use --embed-url",
        dir.display()
    )
}
