//! The PostgreSQL store passes the store conformance suite (`memloop_store::conformance`), each
//! check on a project of its own in one fresh schema (dropped when the test ends).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use memloop_store::MemoryStore;
use memloop_store::conformance::{self, Check};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use support::TestSchema;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_postgres_store_passes_every_check() {
    let schema = TestSchema::new();
    let projects = AtomicUsize::new(0);
    let report = conformance::run(|| {
        let project = format!("conformance/{}", projects.fetch_add(1, Ordering::Relaxed));
        let schema = &schema;
        async move { Arc::new(schema.open(&project).await) as Arc<dyn MemoryStore> }
    })
    .await;
    assert!(report.is_ok(), "{report}");
    assert_eq!(report.passed, Check::ALL);
}
