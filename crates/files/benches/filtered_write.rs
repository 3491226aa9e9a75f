#![allow(missing_docs)] // criterion_group! generates undocumented items
//! One `FileMemoryStore::write` of a 1 KiB body of ordinary memory text (prose in several
//! languages that talks about passwords without giving one, so every rule of the secret filter,
//! run on every field, goes to the end) into a memory dir of 2,000 memories. The filter alone is
//! memloop-secrets' `secrets` bench.
//!
//! `cargo bench -p memloop-store --bench filtered_write -- --warm-up-time 1 --measurement-time 5`

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use memloop_files::FileMemoryStore;
use memloop_store::{MemoryDoc, MemoryType, WriteMode};
use memloop_testkit::harmless_text;
use std::path::Path;
use tempfile::TempDir;

/// `n` memories and their index, written directly (what the store would have produced).
fn populate(dir: &Path, n: usize) {
    let mut index = String::from("# Memories\n\n");
    for i in 0..n {
        let sub = format!("topic{}", i % 10);
        std::fs::create_dir_all(dir.join(&sub)).ok();
        let desc = format!("the user prefers approach {i} for module {}", i % 97);
        let text = format!(
            "---\nname: memory {i}\ndescription: {desc}\ntype: project\n---\n\nBody of memory {i}.\n"
        );
        std::fs::write(dir.join(&sub).join(format!("m{i}.md")), text).ok();
        index.push_str(&format!("- [memory {i}]({sub}/m{i}.md) — {desc}\n"));
    }
    std::fs::write(dir.join("MEMORY.md"), index).ok();
}

fn bench_write(c: &mut Criterion) {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    let body = harmless_text(1024);
    let mut group = c.benchmark_group("store_write_with_filter");
    let n = 2_000usize;
    let Ok(dir) = TempDir::new() else { return };
    populate(dir.path(), n);
    let Ok(store) = FileMemoryStore::open(dir.path()) else {
        return;
    };
    let mut k = 0usize;
    group.bench_with_input(BenchmarkId::new("rewrite_one_1KiB_body", n), &n, |b, &n| {
        b.iter(|| {
            k += 1;
            let i = (k * 7919) % n;
            let rel = format!("topic{}/m{i}.md", i % 10);
            let doc = MemoryDoc::new(
                format!("memory {i}"),
                format!("the user now prefers approach {k} for module {}", i % 97),
                MemoryType::Project,
                format!("{body}\nrevision {k}.\n"),
            );
            rt.block_on(store.write(&rel, &doc, WriteMode::Overwrite))
                .is_ok()
        })
    });
    group.finish();
}

criterion_group!(benches, bench_write);
criterion_main!(benches);
