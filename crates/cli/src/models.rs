//! `memloop models list|fetch`: the embedding models memloop knows, which the Hugging Face
//! cache holds, which one recall uses by default, and fetching one as `huggingface_hub` would.

use crate::args::ModelsCommand;
use crate::context::{Context, Io, write_json};
use crate::table::pad;
use anyhow::Context as _;
use memloop_candle::{FetchOptions, HubCache, KNOWN_MODELS, default_model, known_model};
use serde_json::json;

/// Run a `models` command.
pub async fn run(cmd: &ModelsCommand, ctx: &Context, io: &mut Io<'_>) -> anyhow::Result<()> {
    match cmd {
        ModelsCommand::List => list(ctx, io),
        ModelsCommand::Fetch { name } => fetch(ctx, io, name).await,
    }
}

/// Every known model: name, languages, dimension, download size, where the cache holds it; the
/// one recall uses by default is marked.
fn list(ctx: &Context, io: &mut Io<'_>) -> anyhow::Result<()> {
    let cache = HubCache::from_env(&ctx.env);
    let default = default_model(&ctx.env);
    let rows: Vec<serde_json::Value> = KNOWN_MODELS
        .iter()
        .map(|m| {
            let dir = cache.as_ref().and_then(|c| c.snapshot(m.repo));
            let is_default = default
                .as_ref()
                .is_some_and(|d| d.source != "MEMLOOP_EMBED_MODEL" && d.name == m.name);
            json!({
                "name": m.name,
                "repo": m.repo,
                "languages": m.languages,
                "dimension": m.dimension,
                "download_mb": m.download_mb,
                "path": dir.map(|d| d.display().to_string()),
                "default": is_default,
            })
        })
        .collect();
    if ctx.json {
        return write_json(
            io.out,
            &json!({
                "models": rows,
                "cache": cache.map(|c| c.root().display().to_string()),
                "configured": ctx.env.get("MEMLOOP_EMBED_MODEL"),
            }),
        );
    }
    writeln!(
        io.out,
        "{} {} {} {}  STATUS",
        pad("NAME", 38),
        pad("LANGUAGES", 15),
        pad("DIM", 5),
        pad("SIZE", 8)
    )?;
    for row in &rows {
        let status = match (row["path"].as_str(), row["default"].as_bool()) {
            (Some(_), Some(true)) => "fetched (recall's default)",
            (Some(_), _) => "fetched",
            (None, _) => "-",
        };
        writeln!(
            io.out,
            "{} {} {} {}  {status}",
            pad(row["name"].as_str().unwrap_or_default(), 38),
            pad(row["languages"].as_str().unwrap_or_default(), 15),
            pad(&row["dimension"].to_string(), 5),
            pad(&format!("{} MB", row["download_mb"]), 8),
        )?;
    }
    match (&default, cache) {
        (Some(d), _) if d.source == "MEMLOOP_EMBED_MODEL" => writeln!(
            io.err,
            "recall uses MEMLOOP_EMBED_MODEL={} by default",
            d.dir.display()
        )?,
        (None, _) => writeln!(
            io.err,
            "no model fetched: recall ranks with BM25; `memloop models fetch multilingual-e5-small` adds meaning-based recall in every language"
        )?,
        (Some(_), _) => {}
    }
    Ok(())
}

/// Download `name` (a known model's name or any `owner/name` repository) into the Hugging Face
/// cache, check that it loads, and say that recall now uses it.
async fn fetch(ctx: &Context, io: &mut Io<'_>, name: &str) -> anyhow::Result<()> {
    let repo = match known_model(name) {
        Some(model) => model.repo.to_owned(),
        None if name.split('/').count() == 2 && !name.contains("..") => name.to_owned(),
        None => {
            let names: Vec<&str> = KNOWN_MODELS.iter().map(|m| m.name).collect();
            anyhow::bail!(
                "unknown model `{name}`: one of {} or a Hugging Face repository (owner/name)",
                names.join(", ")
            )
        }
    };
    let mut options = FetchOptions::from_env(&ctx.env)
        .context("no cache directory: set HF_HUB_CACHE or HF_HOME (no home directory found)")?;
    options.progress = !ctx.json && std::io::IsTerminal::is_terminal(&std::io::stderr());
    writeln!(
        io.err,
        "fetching {repo} into {}",
        options.cache.root().display()
    )?;
    let dir = memloop_candle::fetch(&repo, &options)
        .await
        .with_context(|| format!("cannot fetch {repo}"))?;
    // Load it now: a repository that is not a model memloop runs is reported here, not at the
    // first recall.
    let check = dir.clone();
    let loaded = tokio::task::spawn_blocking(move || memloop_candle::CandleEmbedder::load(&check))
        .await?
        .with_context(|| format!("fetched {repo}, but it is not a model memloop can run"))?;
    let dimension = memloop_core::embed::Embedder::dimension(&loaded);
    let default = default_model(&ctx.env);
    let used = default.as_ref().is_some_and(|d| d.dir == dir);
    if ctx.json {
        return write_json(
            io.out,
            &json!({"repo": repo, "path": dir.display().to_string(), "dimension": dimension, "default": used}),
        );
    }
    writeln!(io.out, "{}", dir.display())?;
    let note = match &default {
        _ if used => "recall uses it by default (memory search, mcp, MemorySetup)".to_owned(),
        Some(d) => format!("recall keeps using {} ({})", d.name, d.source),
        None => "name it with --embed-model or MEMLOOP_EMBED_MODEL to use it".to_owned(),
    };
    writeln!(io.err, "{repo}: {dimension} dimensions; {note}")?;
    Ok(())
}
