//! The SQLite store passes memloop's store conformance suite, each check on a database file of
//! its own.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop::MemoryStore;
use memloop::memory::store::conformance::{self, Check};
use memloop_sqlite_store::SqliteMemoryStore;
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_sqlite_store_passes_every_check() {
    let dir = tempfile::tempdir().unwrap();
    let mut n = 0;
    let report = conformance::run(|| {
        n += 1;
        let path = dir.path().join(format!("check-{n}.sqlite3"));
        async move { Arc::new(SqliteMemoryStore::open(path).unwrap()) as Arc<dyn MemoryStore> }
    })
    .await;
    assert!(report.is_ok(), "{report}");
    assert_eq!(report.passed, Check::ALL);
}
