//! Resident memory of a host with `n` memories loaded for recall: the headers (`ScanCache`) and
//! the BM25 index (`Bm25Selector`) after one selection, plus the change feed's watcher.
//!
//! ```text
//! cargo run --release -p memloop-recall --example recall_footprint -- 2000
//! cargo run --release -p memloop-recall --example recall_footprint -- 20000
//! ```
//!
//! Prints VmRSS (from `/proc/self/status`) before the memories are loaded and after, in KiB.
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use memloop_files::FileMemoryStore;
use memloop_recall::{Bm25Selector, SelectionContext, Selector};
use memloop_store::{MemoryStore, ScanCache};
use std::sync::Arc;

/// The first 18 words of the test kit's list (the figures in docs/benchmarks.md were taken on
/// these).
fn words() -> &'static [&'static str] {
    &memloop_testkit::WORDS[..18]
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2_000);
    let dir = tempfile::tempdir().unwrap();
    // ~120 words per memory, as in the MCP search benchmark.
    for i in 0..n {
        let sub = dir.path().join(format!("topic{}", i % 10));
        std::fs::create_dir_all(&sub).unwrap();
        let body: Vec<&str> = (0..120)
            .map(|k| words()[(i * 7 + k * 13) % words().len()])
            .collect();
        std::fs::write(
            sub.join(format!("m{i}.md")),
            format!(
                "---\nname: memory {i}\ndescription: notes on module {}\ntype: project\n---\n\n{}\n",
                i % 97,
                body.join(" ")
            ),
        )
        .unwrap();
    }
    let before = rss_kib();
    let store: Arc<dyn MemoryStore> = Arc::new(FileMemoryStore::open(dir.path()).unwrap());
    let cache = ScanCache::new(store.clone());
    let selector: Arc<dyn Selector> = Arc::new(Bm25Selector::new(store.clone()));
    let headers = cache.headers().await.unwrap();
    let chosen = selector
        .select_checked(
            "billing queue retry",
            &headers,
            &SelectionContext::with_limit(5),
        )
        .await
        .unwrap();
    let after = rss_kib();
    println!(
        "memories {n}: VmRSS {after} KiB loaded ({before} KiB before loading, +{} KiB for headers + BM25 index); {} selected",
        after.saturating_sub(before),
        chosen.len()
    );
}
