#![allow(missing_docs)] // criterion_group! generates undocumented items
//! One batch of 20 new memories (`FileMemoryStore::write_batch_blocking`, what `context_save`
//! with 20 entries writes) into a memory dir of 2,000 memories, with each durability of the
//! store's single writes. Each iteration writes 20 memories of new names (the dir grows by
//! 20 a batch), so every memory is a new file and a new `MEMORY.md` line.
//!
//! `cargo bench -p memloop-files --bench batch_write -- --warm-up-time 1 --measurement-time 5`

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use memloop_files::{Durability, FileMemoryStore, StoreConfig};
use memloop_store::{CheckedWrite, ExpectedVersion, MemoryDoc, MemoryType, WriteLimits, WriteMode};
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

/// Batch `k`: 20 new knowledge memories.
fn batch(k: usize) -> Vec<(CheckedWrite, ExpectedVersion)> {
    (0..20)
        .filter_map(|i| {
            let n = k * 20 + i;
            let doc = MemoryDoc::new(
                format!("fact {n}"),
                format!(
                    "the service on port {} is owned by team {}",
                    8000 + n,
                    n % 17
                ),
                Some(MemoryType::Project),
                format!(
                    "Fact {n}: the service on port {} is owned by team {}.\n",
                    8000 + n,
                    n % 17
                ),
            );
            let w = CheckedWrite::check(
                &format!("knowledge/fact-{n:06}.md"),
                &doc,
                WriteMode::Overwrite,
                WriteLimits::default(),
            );
            w.ok().map(|w| (w, ExpectedVersion::Any))
        })
        .collect()
}

fn bench_batch(c: &mut Criterion) {
    let mut group = c.benchmark_group("store_batch");
    for (name, durability) in [
        ("batch_of_20", Durability::Process),
        ("batch_of_20_power", Durability::Power),
    ] {
        let n = 2_000usize;
        let Ok(dir) = TempDir::new() else { return };
        populate(dir.path(), n);
        let config = StoreConfig {
            durability,
            ..StoreConfig::default()
        };
        let Ok(store) = FileMemoryStore::open(dir.path()).map(|s| s.with_config(config)) else {
            return;
        };
        let mut k = 0usize;
        group.bench_with_input(BenchmarkId::new(name, n), &n, |b, _| {
            b.iter(|| {
                k += 1;
                let writes = batch(k);
                store.write_batch_blocking(&writes, &mut |_| {}).ok()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_batch);
criterion_main!(benches);
