#![allow(missing_docs)] // criterion_group! generates undocumented items
//! A cold project's first `context_search`: 10,000 memories on the memory dir, a fresh server
//! (new process state: no header cache, no BM25 postings; the OS page cache stays warm), one
//! search through the real server and rmcp's client over an in-process pipe. Two shapes: one
//! line per memory, and multi-paragraph memories (about 1.5 KB each). The first search scans
//! the dir, reads every memory and builds the postings; later searches follow the change feed.
//!
//! `cargo bench -p memloop-mcp --features postgres --bench cold_search -- --warm-up-time 1 --measurement-time 3`

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use memloop_store::{MemoryDoc, MemoryType};
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};

// The tests' fixture and in-process client (the real server over a pipe, rmcp's client).
#[path = "../tests/support/mod.rs"]
#[allow(missing_docs)]
mod support;

use support::{Fixture, call, connect};

const MEMORIES: usize = 10_000;

/// The body of memory `i`: one line, or three paragraphs.
fn body(i: usize, large: bool) -> String {
    if !large {
        return format!("The billing queue {i} drains nightly after the export job.");
    }
    format!(
        "We moved the billing export {i} off the nightly cron because the queue backed up \
         whenever the warehouse load ran long; the export now starts when the load reports \
         done, and retries twice with a five minute pause before paging anyone.\n\n\
         Decision {i}: keep the old cron entry disabled (not deleted) for one release so that \
         rolling back is a one-line change. The dashboards were updated to show the export's \
         start and end times next to the warehouse load, which makes the dependency visible \
         to whoever is on call.\n\n\
         Follow-ups: document the retry policy in the runbook, add an alert when the export \
         has not started two hours after midnight, and ask the data team whether the \
         warehouse load can emit an event instead of a status row ({i}).\n"
    )
}

/// `n` memories in the project's memory dir, written straight through its store.
async fn fill(fx: &Fixture, project: &Path, n: usize, large: bool) {
    support::fill(fx, project, n, |i| {
        let doc = MemoryDoc::new(
            format!("Billing note {i}"),
            format!("What we learned about billing export {i}"),
            MemoryType::Project,
            body(i, large),
        );
        let folder = ["decisions", "knowledge", "todos", "sessions"][i % 4];
        (format!("{folder}/m{i:05}.md"), doc)
    })
    .await;
}

fn bench_cold_search(c: &mut Criterion) {
    let rt = support::bench_runtime();
    let mut group = c.benchmark_group("cold_search");
    group.sample_size(10);
    for (shape, large) in [("one_line", false), ("paragraphs", true)] {
        let fx = Fixture::new();
        let project = fx.project("bench");
        rt.block_on(fill(&fx, &project, MEMORIES, large));
        group.bench_function(BenchmarkId::new(shape, MEMORIES), |b| {
            b.iter_custom(|iters| {
                let mut spent = Duration::ZERO;
                for _ in 0..iters {
                    spent += rt.block_on(async {
                        // A fresh server: nothing of the project is open or cached.
                        let client = connect(fx.config()).await;
                        let started = Instant::now();
                        let r = call(
                            &client,
                            "context_search",
                            json!({"project_path": project.to_string_lossy(),
                                   "query": "billing export queue 4242", "limit": 5}),
                        )
                        .await;
                        let spent = started.elapsed();
                        assert_eq!(r["is_error"], false, "{r}");
                        assert_eq!(r["results"].as_array().map(Vec::len), Some(5), "{r}");
                        let _ = client.cancel().await;
                        spent
                    });
                }
                spent
            });
        });
    }
    group.finish();
}

criterion_group!(benches, bench_cold_search);
criterion_main!(benches);
