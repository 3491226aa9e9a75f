#![allow(missing_docs)] // criterion_group! generates undocumented items
//! Scan + manifest over memory dirs of 200, 2,000 and 20,000 files (every `*.md` except
//! `MEMORY.md`, frontmatter read from each file's first lines, newest first).
//!
//! `cargo bench --bench scan -- --warm-up-time 1 --measurement-time 3`

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use memloop::MemoryStore;
use memloop::memory::files::FileMemoryStore;
use memloop::memory::store::MemoryDoc;
use memloop::memory::store::format_manifest;
use std::path::Path;
use tempfile::TempDir;

fn populate(dir: &Path, n: usize) {
    let types = ["user", "feedback", "project", "reference"];
    for i in 0..n {
        let sub = dir.join(format!("topic{}", i % 10));
        std::fs::create_dir_all(&sub).ok();
        let text = format!(
            "---\nname: memory {i}\ndescription: the user prefers approach {i} for module {} because of latency\ntype: {}\n---\n\n{}",
            i % 97,
            types[i % 4],
            "Body line with details that the scan never reads past line thirty.\n".repeat(40)
        );
        std::fs::write(sub.join(format!("m{i}.md")), text).ok();
    }
}

fn bench_scan(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .ok();
    let Some(rt) = rt else { return };
    let mut group = c.benchmark_group("scan_manifest");
    for n in [200usize, 2_000, 20_000] {
        let Ok(dir) = TempDir::new() else { return };
        populate(dir.path(), n);
        let Ok(store) = FileMemoryStore::open(dir.path()) else {
            return;
        };
        if n >= 20_000 {
            group.sample_size(10);
        }
        // Cold: a freshly opened store (empty header cache), so every file is opened and its
        // first 30 lines read and parsed.
        group.bench_with_input(BenchmarkId::new("cold", n), &n, |b, _| {
            b.iter(|| {
                rt.block_on(async {
                    let Ok(fresh) = FileMemoryStore::open(dir.path()) else {
                        return 0;
                    };
                    let headers = fresh.scan().await.unwrap_or_default();
                    format_manifest(&headers).len()
                })
            })
        });
        // Warm: the store's rescan, where unchanged files are only stat'ed.
        group.bench_with_input(BenchmarkId::new("store_rescan", n), &n, |b, _| {
            b.iter(|| {
                rt.block_on(async {
                    let headers = store.scan().await.unwrap_or_default();
                    format_manifest(&headers).len()
                })
            })
        });
    }
    group.finish();
}

fn bench_parse(c: &mut Criterion) {
    let text = "---\nname: memory 1\ndescription: the user prefers approach 1 for module 1 because of latency\ntype: user\n---\n\nBody\n";
    c.bench_function("parse_frontmatter", |b| {
        b.iter(|| MemoryDoc::parse(std::hint::black_box(text), "m").ok())
    });
}

criterion_group!(benches, bench_scan, bench_parse);
criterion_main!(benches);
