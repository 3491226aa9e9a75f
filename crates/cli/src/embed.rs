//! The embedder `--semantic` uses, from `--embed-model` / `--embed-url` (or their environment
//! variables). memloop never downloads a model: the user names a directory or an endpoint.

use crate::args::EmbedArgs;
use anyhow::{Context as _, bail};
use memloop_core::embed::Embedder;
use std::sync::Arc;

/// The embedder `args` name.
pub async fn embedder(args: &EmbedArgs) -> anyhow::Result<Arc<dyn Embedder>> {
    if let Some(url) = &args.embed_url {
        use memloop_core::providers::{OpenAiEmbedConfig, OpenAiEmbedder};
        let mut config = OpenAiEmbedConfig::new(url, &args.embed_name);
        config.api_key = memloop_core::providers::process_env("OPENAI_API_KEY");
        let embedder = OpenAiEmbedder::connect(config)
            .await
            .with_context(|| format!("cannot use the embeddings endpoint {url}"))?;
        return Ok(Arc::new(embedder));
    }
    if let Some(dir) = &args.embed_model {
        return local(dir);
    }
    bail!(
        "--semantic needs an embedding model: --embed-model DIR (a sentence-transformers \
         directory) or --embed-url URL (an OpenAI-compatible endpoint), or MEMLOOP_EMBED_MODEL / \
         MEMLOOP_EMBED_URL"
    )
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
