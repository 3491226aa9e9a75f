#![allow(missing_docs)] // criterion_group! generates undocumented items
//! What the recall hook does per turn, before reading the chosen files: bring the headers up to
//! date through the change feed (the `ScanCache` the BM25 selector shares, as `RecallHook` does:
//! one feed call per turn), let the BM25 index catch up from it, select (`select_checked`,
//! limit 5); also with a query whose words every memory holds (`every_memory_matches`), and with
//! memories that all score exactly the same, saved one after another (`exact_ties`). At 200,
//! 2,000 and 20,000 memories, with no change since the last
//! turn and with one file changed by another writer (an in-place rewrite, outside the timed part),
//! watching the dir (the default) and polling it (`StoreConfig::watch = false`). Then one
//! `MemoryStore::write` of a new memory (its index line appended) and of a new body under an
//! unchanged line, at 200 and 20,000.
//!
//! `cargo bench -p memloop-recall --bench recall_turn -- --warm-up-time 1 --measurement-time 3`

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use memloop_files::{FileMemoryStore, StoreConfig};
use memloop_recall::{Bm25Selector, SelectionContext, Selector};
use memloop_store::{MemoryDoc, MemoryStore, MemoryType, ScanCache, WriteMode};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// The first 18 words of the test kit's list (the figures in docs/benchmarks.md were taken on
/// these).
fn words() -> &'static [&'static str] {
    &memloop_testkit::WORDS[..18]
}

fn text(i: usize, rev: usize) -> String {
    let w = |k: usize| words()[(i * 7 + k * 13) % words().len()];
    format!(
        "---\nname: memory {i}\ndescription: {} {} notes for module {}\ntype: project\n---\n\n\
         The {} service uses {} with {}; revision {rev}. {}\n",
        w(0),
        w(1),
        i % 97,
        w(2),
        w(3),
        w(4),
        "Details about the setup and why it was chosen. ".repeat(4)
    )
}

/// `n` memories in 10 folders, and their index.
fn populate(dir: &Path, n: usize) {
    let mut index = String::new();
    for i in 0..n {
        let sub = format!("topic{}", i % 10);
        std::fs::create_dir_all(dir.join(&sub)).ok();
        std::fs::write(dir.join(&sub).join(format!("m{i}.md")), text(i, 0)).ok();
        index.push_str(&format!("- [memory {i}]({sub}/m{i}.md) — notes\n"));
    }
    std::fs::write(dir.join("MEMORY.md"), index).ok();
}

struct Turn {
    headers: Arc<ScanCache>,
    selector: Arc<dyn Selector>,
}

impl Turn {
    fn new(store: Arc<dyn MemoryStore>) -> Self {
        let selector: Arc<dyn Selector> = Arc::new(Bm25Selector::new(store.clone()));
        Self {
            headers: selector
                .header_cache()
                .unwrap_or_else(|| Arc::new(ScanCache::new(store))),
            selector,
        }
    }

    /// One turn with `query`.
    async fn run_query(&self, query: &str) -> usize {
        let Ok(headers) = self.headers.headers().await else {
            return 0;
        };
        let ctx = SelectionContext::with_limit(5);
        self.selector
            .select_checked(query, &headers, &ctx)
            .await
            .map_or(0, |c| c.len())
    }

    /// A turn whose query shares words with a third of the memories: BM25 scoring dominates.
    async fn run(&self) -> usize {
        self.run_query("why does the billing queue retry on timeout")
            .await
    }

    /// A turn whose words every memory holds, with near-equal scores (the load client's
    /// searches): scoring every memory and keeping the best five dominate.
    async fn run_common(&self) -> usize {
        self.run_query("details about the setup").await
    }

    /// A turn whose query matches no memory: what is left is the feed, the BM25 follow and the
    /// selection machinery.
    async fn run_feed(&self) -> usize {
        self.run_query("zebra quokka").await
    }
}

/// The runtime the turns run on: two workers, as on the 2-core machines the figures come from.
fn runtime() -> Option<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .ok()
}

fn bench_turn(c: &mut Criterion) {
    let Some(rt) = runtime() else { return };
    let mut group = c.benchmark_group("recall_turn");
    for n in [200usize, 2_000, 20_000] {
        let Ok(dir) = TempDir::new() else { return };
        populate(dir.path(), n);
        if n >= 20_000 {
            group.sample_size(20);
        }
        for watch in [true, false] {
            let Ok(store) = FileMemoryStore::open(dir.path()) else {
                return;
            };
            let store: Arc<dyn MemoryStore> = Arc::new(store.with_config(StoreConfig {
                watch,
                ..StoreConfig::default()
            }));
            let turn = Turn::new(store);
            rt.block_on(turn.run()); // the first turn scans and indexes everything
            let mode = if watch { "watch" } else { "poll" };
            if watch {
                group.bench_with_input(BenchmarkId::new("every_memory_matches", n), &n, |b, _| {
                    b.iter(|| rt.block_on(turn.run_common()))
                });
                group.bench_with_input(BenchmarkId::new("feed/unchanged", n), &n, |b, _| {
                    b.iter(|| rt.block_on(turn.run_feed()))
                });
                let mut rev = 1_000_000usize;
                group.bench_with_input(BenchmarkId::new("feed/one_changed", n), &n, |b, &n| {
                    b.iter_custom(|iters| {
                        let mut total = Duration::ZERO;
                        for _ in 0..iters {
                            rev += 1;
                            let i = (rev * 7919) % n;
                            let path = dir.path().join(format!("topic{}/m{i}.md", i % 10));
                            std::fs::write(&path, text(i, rev)).ok();
                            let start = Instant::now();
                            std::hint::black_box(rt.block_on(turn.run_feed()));
                            total += start.elapsed();
                        }
                        total
                    })
                });
            }
            group.bench_with_input(
                BenchmarkId::new(format!("{mode}/unchanged"), n),
                &n,
                |b, _| b.iter(|| rt.block_on(turn.run())),
            );
            let mut rev = 0usize;
            group.bench_with_input(
                BenchmarkId::new(format!("{mode}/one_changed"), n),
                &n,
                |b, &n| {
                    b.iter_custom(|iters| {
                        let mut total = Duration::ZERO;
                        for _ in 0..iters {
                            rev += 1;
                            let i = (rev * 7919) % n;
                            let path = dir.path().join(format!("topic{}/m{i}.md", i % 10));
                            std::fs::write(&path, text(i, rev)).ok();
                            let start = Instant::now();
                            std::hint::black_box(rt.block_on(turn.run()));
                            total += start.elapsed();
                        }
                        total
                    })
                },
            );
        }
    }
    group.finish();
}

/// The load client's searches: memories saved one after another with texts of one length,
/// all holding the query's words, so every memory scores exactly the same and the newest win.
/// Each is indexed as it arrives (one turn per save), as a server's index follows the saves.
fn bench_ties(c: &mut Criterion) {
    let Some(rt) = runtime() else { return };
    let mut group = c.benchmark_group("recall_turn");
    for n in [2_000usize, 20_000] {
        let Ok(dir) = TempDir::new() else { return };
        let Ok(store) = FileMemoryStore::open(dir.path()) else {
            return;
        };
        let turn = Turn::new(Arc::new(store));
        for i in 0..n {
            let text = format!(
                "---\nname: load {i:06}\ndescription: deploy pipeline note\ntype: project\n---\n\n\
                 Deploy pipeline note {i:06}: releases go out on Tuesdays.\n"
            );
            std::fs::write(dir.path().join(format!("m{i:06}.md")), text).ok();
            rt.block_on(turn.run_feed());
        }
        if n >= 20_000 {
            group.sample_size(20);
        }
        group.bench_with_input(BenchmarkId::new("exact_ties", n), &n, |b, _| {
            b.iter(|| rt.block_on(turn.run_query("deploy pipeline release")))
        });
    }
    group.finish();
}

fn bench_write(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok();
    let Some(rt) = rt else { return };
    let mut group = c.benchmark_group("store_write");
    for n in [200usize, 20_000] {
        let Ok(dir) = TempDir::new() else { return };
        populate(dir.path(), n);
        let Ok(store) = FileMemoryStore::open(dir.path()) else {
            return;
        };
        group.sample_size(20);
        let mut k = 0usize;
        // A new memory: its file, and its index line appended.
        group.bench_with_input(BenchmarkId::new("new_memory", n), &n, |b, _| {
            b.iter(|| {
                k += 1;
                let doc = MemoryDoc::new(
                    format!("new memory {k}"),
                    format!("learned in turn {k}"),
                    MemoryType::Feedback,
                    format!("Body {k}.\n"),
                );
                rt.block_on(store.write(&format!("new/n{n}_{k}.md"), &doc, WriteMode::Overwrite))
                    .is_ok()
            })
        });
        // A new body under the same name and description: the index line stays as it is.
        group.bench_with_input(BenchmarkId::new("same_line", n), &n, |b, &n| {
            b.iter(|| {
                k += 1;
                let i = (k * 7919) % n;
                let doc = MemoryDoc::new(
                    format!("memory {i}"),
                    "notes",
                    MemoryType::Project,
                    format!("Body of memory {i}, revision {k}.\n"),
                );
                let rel = format!("topic{}/m{i}.md", i % 10);
                rt.block_on(store.write(&rel, &doc, WriteMode::Overwrite))
                    .is_ok()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_turn, bench_ties, bench_write);
criterion_main!(benches);
