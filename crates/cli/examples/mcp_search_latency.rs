//! `context_search` latency through `memloop mcp` over stdio, at 200 and 2,000 memories.
//!
//! ```text
//! cargo build --release -p memloop-cli
//! cargo run --release -p memloop-cli --example mcp_search_latency -- target/release/memloop
//! ```
//!
//! For each size: seed a fresh memory dir through the store, spawn the server, warm up (the first
//! search builds the BM25 index), then time 300 `context_search` round-trips (rmcp client,
//! stdio) and print p50 / p99.
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use memloop_files::FileMemoryStore;
use memloop_store::{MemoryDoc, MemoryType, WriteMode};
use memloop_testkit::Lcg;
use rmcp::{ServiceExt, model::CallToolRequestParams, transport::TokioChildProcess};
use serde_json::json;
use std::time::Instant;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let binary = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "target/release/memloop".into());
    for size in [200usize, 2_000] {
        let tmp = tempfile::tempdir()?;
        let (project, mem) = (tmp.path().join("proj"), tmp.path().join("mem"));
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
        let mut cmd = tokio::process::Command::new(&binary);
        cmd.arg("--project")
            .arg(&project)
            .arg("--memory-dir")
            .arg(&mem)
            .arg("mcp");
        cmd.env("MEMLOOP_LOG", "error");
        let client = ().serve(TokioChildProcess::new(cmd)?).await?;
        let project = project.canonicalize()?.to_string_lossy().into_owned();
        let search = |q: String| {
            let args = json!({"project_path": project, "query": q, "limit": 5});
            let serde_json::Value::Object(map) = args else {
                unreachable!()
            };
            CallToolRequestParams::new("context_search").with_arguments(map)
        };
        for _ in 0..20 {
            client.call_tool(search(rng.words(3))).await?;
        }
        let mut times = Vec::new();
        for _ in 0..300 {
            let q = search(rng.words(3));
            let start = Instant::now();
            let r = client.call_tool(q).await?;
            times.push(start.elapsed());
            assert_eq!(r.is_error, Some(false));
        }
        times.sort();
        println!(
            "{size:>5} memories: context_search p50 {:.2} ms, p99 {:.2} ms (300 calls, stdio)",
            memloop_testkit::percentile(&times, 0.50).as_secs_f64() * 1e3,
            memloop_testkit::percentile(&times, 0.99).as_secs_f64() * 1e3,
        );
        client.cancel().await?;
    }
    Ok(())
}
