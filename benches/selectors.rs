//! Selection latency of the no-model selectors over 200, 2,000 and 20,000 memories, and the cost
//! of the BM25 index's incremental update when one memory changed.
//!
//! ```text
//! cargo bench --bench selectors -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! Memories are real files in a tempdir (frontmatter rendered by the crate, scanned by
//! `FileMemoryStore`). Their text is drawn by a seeded generator: a third of the words from 75
//! topic words (so every query matches many memories), the rest Zipf-distributed over 20,000
//! filler words, roughly like prose.

#![allow(missing_docs, clippy::unwrap_used)] // bench harness code, like a test

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use memloop_files::FileMemoryStore;
use memloop_recall::{Bm25Selector, KeywordSelector, SelectionContext, Selector};
use memloop_store::{MemoryDoc, MemoryHeader, MemoryStore, MemoryType};
use std::sync::Arc;
use std::time::Duration;

const WORDS: &[&str] = &[
    "deploy",
    "release",
    "database",
    "migration",
    "schema",
    "test",
    "integration",
    "mock",
    "api",
    "endpoint",
    "latency",
    "cache",
    "redis",
    "queue",
    "worker",
    "retry",
    "timeout",
    "auth",
    "token",
    "session",
    "login",
    "billing",
    "invoice",
    "payment",
    "webhook",
    "stripe",
    "email",
    "template",
    "frontend",
    "react",
    "css",
    "layout",
    "mobile",
    "android",
    "ios",
    "build",
    "docker",
    "kubernetes",
    "helm",
    "terraform",
    "aws",
    "bucket",
    "logs",
    "metrics",
    "grafana",
    "alert",
    "oncall",
    "incident",
    "postmortem",
    "customer",
    "report",
    "export",
    "csv",
    "pdf",
    "search",
    "index",
    "ranking",
    "feature",
    "flag",
    "experiment",
    "user",
    "prefers",
    "tabs",
    "spaces",
    "review",
    "style",
    "naming",
    "rust",
    "python",
    "typescript",
    "lint",
    "format",
];

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn word(&mut self) -> String {
        let r = self.next();
        if r % 3 == 0 {
            return WORDS[(r / 3) as usize % WORDS.len()].to_owned();
        }
        // Zipf-like rank: u^3 skews towards the frequent filler words.
        let u = (self.next() % 1_000_000) as f64 / 1_000_000.0;
        format!("w{}", (u * u * u * 20_000.0) as u64)
    }

    fn text(&mut self, n: usize) -> String {
        (0..n).map(|_| self.word()).collect::<Vec<_>>().join(" ")
    }
}

struct Fixture {
    _tmp: tempfile::TempDir,
    store: Arc<dyn MemoryStore>,
    headers: Vec<MemoryHeader>,
}

fn fixture(n: usize) -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("memory");
    let mut rng = Rng(n as u64);
    for i in 0..n {
        let sub = dir.join(format!("topic-{:03}", i % 100));
        std::fs::create_dir_all(&sub).unwrap();
        let doc = MemoryDoc {
            name: rng.text(3),
            description: rng.text(12),
            memory_type: Some(MemoryType::ALL[i % 4]),
            body: rng.text(80),
        };
        std::fs::write(sub.join(format!("m{i:05}.md")), doc.render()).unwrap();
    }
    let store: Arc<dyn MemoryStore> = Arc::new(FileMemoryStore::open(&dir).unwrap());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let headers = rt.block_on(store.scan()).unwrap();
    assert_eq!(headers.len(), n);
    Fixture {
        _tmp: tmp,
        store,
        headers,
    }
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let query = "why does the stripe webhook retry time out after a deploy?";
    let ctx = SelectionContext::default();
    let mut select = c.benchmark_group("select");
    let mut fixtures = Vec::new();
    for n in [200, 2_000, 20_000] {
        let f = fixture(n);
        let keyword: Arc<dyn Selector> = Arc::new(KeywordSelector::default());
        let bm25 = Bm25Selector::new(f.store.clone());
        rt.block_on(bm25.sync(&f.headers));
        let bm25: Arc<dyn Selector> = Arc::new(bm25);
        for (name, sel) in [("keyword", &keyword), ("bm25", &bm25)] {
            select.bench_with_input(BenchmarkId::new(name, n), &n, |b, _| {
                b.to_async(&rt)
                    .iter(|| sel.select_checked(query, &f.headers, &ctx))
            });
        }
        fixtures.push(f);
    }
    select.finish();

    let mut update = c.benchmark_group("bm25_update_one_changed_file");
    for f in &fixtures {
        let bm25 = Bm25Selector::new(f.store.clone());
        rt.block_on(bm25.sync(&f.headers));
        let mut headers = f.headers.clone();
        let base = headers[0].mtime;
        let mut tick = 0u64;
        update.bench_with_input(BenchmarkId::from_parameter(f.headers.len()), &(), |b, _| {
            b.iter(|| {
                tick += 1;
                headers[0].mtime = base + Duration::from_nanos(tick);
                let report = rt.block_on(bm25.sync(&headers));
                assert_eq!(report.updated, 1);
            })
        });
    }
    update.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
