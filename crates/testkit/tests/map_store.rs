//! `MapStore` keeps the store contract: it passes the whole store conformance suite, and what it
//! adds of its own (no transcripts, a local dir only when given one, a distinct identity per
//! map) holds.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop_store::conformance;
use memloop_store::{LocalDir, LocalPurpose, MemoryStore};
use memloop_testkit::MapStore;
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_map_store_passes_the_conformance_suite() {
    let report =
        conformance::run(|| async { Arc::new(MapStore::new()) as Arc<dyn MemoryStore> }).await;
    assert!(report.is_ok(), "{report}");
}

#[test]
fn a_map_keeps_no_transcripts_and_local_files_only_where_it_is_told() {
    let bare = MapStore::new();
    for purpose in [LocalPurpose::Locks, LocalPurpose::Transcripts] {
        assert!(
            matches!(bare.local_dir(purpose), LocalDir::Elsewhere(_)),
            "{purpose:?}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let local = MapStore::with_local_dir(dir.path());
    assert_eq!(
        local.local_dir(LocalPurpose::Locks),
        LocalDir::Dir(dir.path().to_path_buf())
    );
    assert!(matches!(
        local.local_dir(LocalPurpose::Transcripts),
        LocalDir::Elsewhere(_)
    ));
    // Two maps are two stores: local files keyed by identity never mix.
    assert_ne!(bare.describe().identity, local.describe().identity);
    assert_eq!(bare.describe().dir(), None);
}
