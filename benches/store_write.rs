#![allow(missing_docs)] // criterion_group! generates undocumented items
//! One `MemoryStore::write` (atomic temp+rename of the file, its `MEMORY.md` line updated under
//! the dir lock, temp+rename of the index) into memory dirs of 200, 2,000 and 20,000 memories,
//! with the default durability (`Durability::Process`: never torn, not fsync'd); and at 2,000
//! with `Durability::Power` (each file and directory fsync'd). Each iteration rewrites one
//! existing memory with a new description, so both the file and its index line change and the
//! number of memories stays the same.
//!
//! `cargo bench --bench store_write -- --warm-up-time 1 --measurement-time 5`

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use memloop::memory::files::{Durability, FileMemoryStore, StoreConfig};
use memloop::memory::store::{MemoryDoc, MemoryType, WriteMode};
use std::path::Path;
use tempfile::TempDir;

/// `n` memories and their index, written directly (what the store would have produced).
fn populate(dir: &Path, n: usize) {
    let mut index = String::from("# Memories\n\nHand-written notes stay on top.\n\n");
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
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok();
    let Some(rt) = rt else { return };
    let mut group = c.benchmark_group("store_write");
    for (name, n, durability) in [
        ("rewrite_one", 200usize, Durability::Process),
        ("rewrite_one", 2_000, Durability::Process),
        ("rewrite_one", 20_000, Durability::Process),
        ("rewrite_one_fsync", 2_000, Durability::Power),
    ] {
        let Ok(dir) = TempDir::new() else { return };
        populate(dir.path(), n);
        let config = StoreConfig {
            durability,
            ..StoreConfig::default()
        };
        let Ok(store) = FileMemoryStore::open(dir.path()).map(|s| s.with_config(config)) else {
            return;
        };
        if n >= 20_000 {
            group.sample_size(20);
        }
        let mut k = 0usize;
        group.bench_with_input(BenchmarkId::new(name, n), &n, |b, &n| {
            b.iter(|| {
                k += 1;
                let i = (k * 7919) % n;
                let rel = format!("topic{}/m{i}.md", i % 10);
                let doc = MemoryDoc::new(
                    format!("memory {i}"),
                    format!("the user now prefers approach {k} for module {}", i % 97),
                    MemoryType::Project,
                    format!("Body of memory {i}, revision {k}.\n"),
                );
                rt.block_on(store.write(&rel, &doc, WriteMode::Overwrite))
                    .is_ok()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_write);
criterion_main!(benches);
