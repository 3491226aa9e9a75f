#![allow(missing_docs)] // criterion_group! generates undocumented items
//! A warm `context_search` (the project's header cache and postings built by an earlier
//! search) on the memory dir, through the real server and rmcp's client over an in-process
//! pipe, with 100 and 10,000 memories. Two queries: one that every memory matches on all its
//! words (the load client's: each of its saves writes "Deploy pipeline note ...: releases go
//! out on Tuesdays.", and it searches "deploy pipeline release"), and one that a single memory
//! matches best among many that share a word. The answer (5 results) is the same size at
//! both sizes.
//!
//! `cargo bench -p memloop-mcp --features postgres --bench search_cost -- --warm-up-time 1 --measurement-time 3`

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use memloop_store::{MemoryDoc, MemoryType};
use serde_json::json;
use std::path::Path;

// The tests' fixture and in-process client (the real server over a pipe, rmcp's client).
#[path = "../tests/support/mod.rs"]
#[allow(missing_docs)]
mod support;

use support::{Client, Fixture, call, connect};

/// Memory `i`, shaped as the load client's saves are.
fn memory(i: usize) -> (String, MemoryDoc) {
    let marker = format!(
        "lc{}x{:08x}",
        i % 20,
        (i as u64).wrapping_mul(0x9e37_79b9) as u32
    );
    let doc = MemoryDoc::new(
        format!("load {marker}"),
        format!("load {marker}"),
        MemoryType::Project,
        format!("Deploy pipeline note {marker}: releases go out on Tuesdays. Billing {i}."),
    );
    (format!("knowledge/load-{marker}.md"), doc)
}

async fn search(client: &Client, project: &Path, query: &str) {
    let r = call(
        client,
        "context_search",
        json!({"project_path": project.to_string_lossy(), "query": query, "limit": 5}),
    )
    .await;
    assert_eq!(r["is_error"], false, "{r}");
    assert_eq!(r["results"].as_array().map(Vec::len), Some(5), "{r}");
}

fn bench_search_cost(c: &mut Criterion) {
    let rt = support::bench_runtime();
    let mut group = c.benchmark_group("search_cost");
    for memories in [100usize, 10_000] {
        let fx = Fixture::new();
        let project = fx.project("bench");
        rt.block_on(support::fill(&fx, &project, memories, memory));
        let client = rt.block_on(connect(fx.config()));
        // The first search builds the header cache and the postings.
        rt.block_on(search(&client, &project, "deploy pipeline release"));
        for (name, query) in [
            ("matches_all", "deploy pipeline release"),
            ("matches_one", "billing 42 tuesday"),
        ] {
            group.bench_function(BenchmarkId::new(name, memories), |b| {
                b.iter(|| rt.block_on(search(&client, &project, query)));
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench_search_cost);
criterion_main!(benches);
