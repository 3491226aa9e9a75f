//! `memory search`: ranked search with the recall layer's [`Bm25Selector`] (BM25F over name,
//! description and body of every memory, stemmed, through the store), or with `--semantic` its
//! [`HybridSelector`] (BM25 fused with embeddings), called via `select_checked` like recall
//! does, so the CLI ranks exactly as an agent's recall would.

use super::header_json;
use crate::context::{Context, Io, write_json};
use crate::progress::Progress;
use crate::table;
use memloop_core::embed::Embedder;
use memloop_host::env::EnvVars;
use memloop_recall::{DefaultSelector, SelectionContext};
use memloop_store::{MemoryHeader, MemoryStore};
use serde_json::{Value, json};
use std::sync::Arc;

/// A description longer than this many display columns is cut (with `…`) in the table.
const DESCRIPTION_COLUMNS: usize = 80;

/// The memories best matching `query`, best first, at most `limit`; with an embedder, every
/// memory without a cached vector is embedded first.
pub async fn ranked(
    store: Arc<dyn MemoryStore>,
    query: &str,
    limit: usize,
    embedder: Option<Arc<dyn Embedder>>,
    env: &EnvVars,
) -> anyhow::Result<Vec<MemoryHeader>> {
    let headers = store.scan().await?;
    let recall = DefaultSelector::new(store, embedder);
    if let Some(hybrid) = recall.hybrid() {
        let progress = Progress::new("embedding memories", env);
        let report = hybrid
            .warm_with_progress(&headers, &|done, total| progress.set(done, total))
            .await?;
        progress.finish();
        tracing::info!(?report, "memories embedded");
    }
    let paths = recall
        .selector()
        .select_checked(query, &headers, &SelectionContext::with_limit(limit))
        .await?;
    Ok(paths
        .iter()
        .filter_map(|p| headers.iter().find(|h| &h.rel_path == p).cloned())
        .collect())
}

/// Search the memory dir and print the ranked hits.
pub async fn search(
    ctx: &Context,
    io: &mut Io<'_>,
    query: &str,
    limit: usize,
    embedder: Option<Arc<dyn Embedder>>,
) -> anyhow::Result<()> {
    let (resolved, store) = ctx.open_existing().await?;
    let hits = ranked(store, query, limit, embedder, &ctx.env).await?;
    if ctx.json {
        let rows: Vec<Value> = hits
            .iter()
            .zip(1..)
            .map(|(h, rank)| {
                let mut v = header_json(h);
                if let Value::Object(map) = &mut v {
                    map.insert("rank".into(), json!(rank));
                }
                v
            })
            .collect();
        return write_json(io.out, &rows);
    }
    if hits.is_empty() {
        writeln!(
            io.out,
            "no memory in {} matches `{query}`",
            resolved.dir.display()
        )?;
    }
    // Columns line up in display width (a CJK character is two columns wide).
    let kinds: Vec<String> = hits
        .iter()
        .map(|h| h.memory_type.map(|t| format!("[{t}]")).unwrap_or_default())
        .collect();
    let kind_w = kinds.iter().map(|k| table::width(k)).max().unwrap_or(0);
    let path_w = hits
        .iter()
        .map(|h| table::width(&h.rel_path))
        .max()
        .unwrap_or(0);
    for ((h, kind), rank) in hits.iter().zip(&kinds).zip(1..) {
        let desc = table::clip(h.description.as_deref().unwrap_or(""), DESCRIPTION_COLUMNS);
        let line = format!(
            "{rank:>2}. {} {}  {desc}",
            table::pad(kind, kind_w),
            table::pad(&h.rel_path, path_w)
        );
        writeln!(io.out, "{}", line.trim_end())?;
    }
    Ok(())
}
