//! The embedder recall uses: the one `--embed-model` / `--embed-url` (or their environment
//! variables) name, else a local model configured or fetched. Nothing is downloaded unless the
//! user asks (`memloop models fetch`).

use crate::args::{EmbedArgs, EmbedPrefixes, EmbedRoleMode};
use anyhow::{Context as _, bail};
use memloop_core::embed::{Embedder, Prefixed};
use std::sync::Arc;

/// The embedder `args` name, with its prefixes (`--embed-prefixes`).
pub async fn embedder(
    args: &EmbedArgs,
    env: &memloop_host::env::EnvVars,
) -> anyhow::Result<Arc<dyn Embedder>> {
    let model = unprefixed(args, env).await?;
    Ok(match args.embed_prefixes {
        EmbedPrefixes::None => model,
        EmbedPrefixes::E5 => Arc::new(Prefixed::e5(model)),
        EmbedPrefixes::Bge => Arc::new(Prefixed::bge(model)),
    })
}

async fn unprefixed(
    args: &EmbedArgs,
    env: &memloop_host::env::EnvVars,
) -> anyhow::Result<Arc<dyn Embedder>> {
    if let Some(url) = &args.embed_url {
        use memloop_providers::{OpenAiEmbedConfig, OpenAiEmbedder};
        let mut config = OpenAiEmbedConfig::new(url, &args.embed_name).with_roles(roles(args)?);
        config.api_key = env.get("OPENAI_API_KEY").map(str::to_owned);
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
        "--semantic needs an embedding model: `memloop models fetch multilingual-e5-small`, \
         --embed-model DIR (a sentence-transformers directory) or --embed-url URL (an \
         OpenAI-compatible endpoint), or MEMLOOP_EMBED_MODEL / MEMLOOP_EMBED_URL"
    )
}

/// How the endpoint is told a query from a memory: `--embed-roles`, or one model name per role
/// (`--embed-query-name` with `--embed-passage-name`).
fn roles(args: &EmbedArgs) -> anyhow::Result<memloop_providers::EmbedRoles> {
    use memloop_providers::EmbedRoles;
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

/// The embedder recall uses by default: the one `args` names, else the local model configured
/// (`MEMLOOP_EMBED_MODEL`) or fetched (`memloop models fetch`; the first known model in the
/// Hugging Face cache), else none (BM25). Says which on the `memloop::recall` log target, shown
/// by default.
pub async fn embedder_if_configured(
    args: &EmbedArgs,
    env: &memloop_host::env::EnvVars,
) -> anyhow::Result<Option<Arc<dyn Embedder>>> {
    if args.embed_url.is_some() || args.embed_model.is_some() {
        let embedder = embedder(args, env).await?;
        tracing::info!(target: "memloop::recall", model = embedder.model_id(), "recall: hybrid (BM25 + embeddings)");
        return Ok(Some(embedder));
    }
    Ok(default_local(env))
}

/// The local model configured or fetched, opened lazily (its weights load on first use; a
/// broken one makes recall fall back to BM25 and say why).
#[cfg(feature = "candle")]
fn default_local(env: &memloop_host::env::EnvVars) -> Option<Arc<dyn Embedder>> {
    match memloop_candle::default_model(env) {
        Some(found) => {
            tracing::info!(
                target: "memloop::recall",
                model = %found.name,
                dir = %found.dir.display(),
                "recall: hybrid (BM25 + {} in-process, from {})",
                found.name,
                found.source
            );
            Some(Arc::new(found.embedder))
        }
        None => {
            tracing::info!(
                target: "memloop::recall",
                "recall: BM25 (no embedding model; `memloop models fetch multilingual-e5-small` adds meaning-based recall in every language)"
            );
            None
        }
    }
}

#[cfg(not(feature = "candle"))]
fn default_local(_: &memloop_host::env::EnvVars) -> Option<Arc<dyn Embedder>> {
    tracing::info!(target: "memloop::recall", "recall: BM25 (built without the `candle` feature)");
    None
}

/// The model in `dir`, loaded now (a bad directory is an error naming the file), with a known
/// model's prompts where the directory declares none.
#[cfg(feature = "candle")]
fn local(dir: &std::path::Path) -> anyhow::Result<Arc<dyn Embedder>> {
    let mut embedder = memloop_candle::CandleEmbedder::load(dir)
        .with_context(|| format!("cannot load the embedding model in {}", dir.display()))?;
    if let Some(known) = memloop_candle::KnownModel::for_dir(dir) {
        embedder = embedder.with_default_prompts(known.query_prompt, known.passage_prompt);
    }
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
