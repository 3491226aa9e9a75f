//! A project's cache estimate is what the heap really holds: the header cache and BM25
//! postings a team server keeps for one project on PostgreSQL (`DefaultSelector` over a
//! `PgMemoryStore` on a shared pool, as `memloop mcp --database-url` opens them), estimated by
//! `DefaultSelector::approx_bytes`, against the bytes the allocator frees when that project is
//! dropped (what an eviction returns), counted by an instrumented global allocator.
//!
//! The allocator counts requested bytes (exactly: the estimate's own count of them agrees
//! to within 0.1%); the heap holds each allocation in a block of glibc's malloc (an 8-byte
//! header, rounded up to 16, at least 32), so the measure adds 16 bytes a freed allocation (the
//! header and, on average, half the rounding). The estimate must agree within 5%: that mean is
//! what is approximate.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use memloop_pg::{PgMemoryStore, PgPool};
use memloop_recall::DefaultSelector;
use memloop_store::{MemoryDoc, MemoryStore, MemoryType, WriteMode};
use memloop_testkit::Lcg;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use std::alloc::System;
use std::sync::Arc;
use support::TestSchema;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Memories in the project, as the `cache_budget` benchmark generates them.
const MEMORIES: usize = 50;

/// Open the project on `pool`, search it once (its headers loaded, its postings built), and
/// return the selector (which holds the store) and its estimate.
async fn open_and_search(schema: &TestSchema, pool: &PgPool) -> (DefaultSelector, usize) {
    let store = PgMemoryStore::open_in(schema.config("estimated"), pool)
        .await
        .unwrap();
    let store: Arc<dyn MemoryStore> = Arc::new(store);
    let recall = DefaultSelector::new(store, None);
    let headers = recall.header_cache().headers().await.unwrap();
    let found = recall
        .bm25()
        .scored("billing queue", &headers, 5, |_| true)
        .await;
    assert_eq!(found.len(), 5, "{found:?}");
    drop((headers, found));
    let estimate = recall.approx_bytes().expect("no selection is running");
    (recall, estimate)
}

#[tokio::test]
async fn a_projects_estimate_is_the_heap_its_caches_free() {
    let schema = TestSchema::new();
    let writer = schema.open("estimated").await;
    let mut rng = Lcg(54);
    for j in 0..MEMORIES {
        let (w1, w2) = (rng.word(), rng.word());
        let doc = MemoryDoc::new(
            format!("{w1} {w2} note {j}"),
            format!("what the team learned about {}", rng.words(6)),
            MemoryType::Project,
            format!("{}.\n\n{}.\n", rng.words(30), rng.words(30 + j % 30)),
        );
        writer
            .write(
                &format!("project/{w1}_{w2}_{j}.md"),
                &doc,
                WriteMode::Overwrite,
            )
            .await
            .unwrap();
    }
    let pool = PgPool::new(&schema.config("estimated")).unwrap();

    // Once to warm what every project shares (the pool's connections, their statements,
    // the runtime's threads); then the project opened afresh is measured.
    let (warm, _) = open_and_search(&schema, &pool).await;
    drop(warm);
    let (recall, estimate) = open_and_search(&schema, &pool).await;

    let region = Region::new(GLOBAL);
    drop(recall);
    let freed = region.change();
    let bytes = freed.bytes_deallocated as i64
        - freed.bytes_allocated as i64
        - freed.bytes_reallocated as i64;
    let blocks = freed.deallocations as i64 - freed.allocations as i64;
    let held = bytes + 16 * blocks;
    let error = (estimate as f64 - held as f64) / held as f64;
    println!(
        "estimate {estimate} B; freed {bytes} B in {blocks} allocations, {held} B of heap; \
         error {:+.1}%",
        error * 100.0
    );
    assert!(held > 50_000, "the project's caches freed only {held} B");
    assert!(
        error.abs() <= 0.05,
        "estimate {estimate} B, heap freed {held} B ({:+.1}%)",
        error * 100.0
    );
    drop(writer);
}
