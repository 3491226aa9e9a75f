//! Semantic recall over the PostgreSQL store through the library: the hybrid selector's vector
//! cache is a real file in the cache dir the store gives, keyed by the store's identity.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use memloop_host::env::EnvVars;
use memloop_pg::PgMemoryStore;
use memloop_recall::{HybridSelector, SelectionContext, Selector, vector_cache_for};
use memloop_store::{
    LocalDir, LocalPurpose, MemoryDoc, MemoryStore, MemoryType, StoreLocation, WriteMode,
};
use memloop_testkit::FakeEmbedder;
use std::sync::Arc;
use support::TestSchema;

/// The concepts of the deterministic concept embedder (a stand-in for a model).
const CONCEPTS: [&[&str]; 2] = [
    &["release", "ship", "freeze", "merge"],
    &["database", "test"],
];

#[tokio::test]
async fn semantic_search_over_postgres_caches_vectors_in_a_real_dir() {
    let schema = TestSchema::new();
    let store: Arc<dyn MemoryStore> = Arc::new(schema.open("acme/api").await);
    for (rel, name, body) in [
        (
            "deadline.md",
            "Release freeze",
            "Merges after Thursday wait.",
        ),
        ("testing.md", "Testing", "Never mock the database."),
    ] {
        let doc = MemoryDoc::new(name, name.to_lowercase(), MemoryType::Project, body);
        store.write(rel, &doc, WriteMode::Overwrite).await.unwrap();
    }

    // The store says what it is: a database project, no directory, password-free URL.
    let description = store.describe();
    assert!(
        matches!(&description.location, StoreLocation::Database { project, .. } if project == "acme/api")
    );
    assert_eq!(description.dir(), None);
    let LocalDir::Dir(cache_dir) = store.local_dir(LocalPurpose::VectorCache) else {
        panic!("a PostgreSQL store has a local vector cache dir");
    };
    assert!(cache_dir.is_absolute());
    assert!(cache_dir.ends_with(format!("memloop/vectors/{}", description.identity_hash())));

    let cache = vector_cache_for(&*store, "concepts-pg");
    assert_eq!(cache.parent(), Some(cache_dir.as_path()));
    let hybrid = Arc::new(HybridSelector::new(
        store.clone(),
        Arc::new(FakeEmbedder::concepts(&CONCEPTS).with_model_id("concepts-pg")),
        cache.clone(),
    ));
    let headers = store.scan().await.unwrap();
    hybrid.warm(&headers).await.unwrap();
    let selector: Arc<dyn Selector> = hybrid;
    let hits = selector
        .select_checked(
            "when does shipping stop?",
            &headers,
            &SelectionContext::with_limit(1),
        )
        .await
        .unwrap();
    assert_eq!(hits, ["deadline.md"]);
    assert!(std::fs::metadata(&cache).unwrap().len() > 0, "{cache:?}");

    // Another project has another identity, so another cache dir; the same project reopened
    // finds the same one.
    let other: Arc<dyn MemoryStore> = Arc::new(schema.open("acme/web").await);
    assert_ne!(
        other.local_dir(LocalPurpose::VectorCache),
        LocalDir::Dir(cache_dir.clone())
    );
    let again: Arc<dyn MemoryStore> = Arc::new(schema.open("acme/api").await);
    assert_eq!(
        again.local_dir(LocalPurpose::VectorCache),
        LocalDir::Dir(cache_dir.clone())
    );
    std::fs::remove_dir_all(&cache_dir).unwrap();
}

#[tokio::test]
async fn local_dirs_come_from_the_injected_environment_not_the_process() {
    let schema = TestSchema::new();
    let home = tempfile::tempdir().unwrap();
    let state = home.path().join("state");
    let env = EnvVars::from_pairs([
        ("HOME", home.path().display().to_string()),
        ("XDG_STATE_HOME", state.display().to_string()),
        ("USER", "林美".to_owned()),
    ]);
    let store = PgMemoryStore::open(schema.config("acme/api").env(&env))
        .await
        .unwrap();
    let hash = store.describe().identity_hash();
    assert_eq!(
        store.local_dir(LocalPurpose::VectorCache),
        LocalDir::Dir(home.path().join(".cache/memloop/vectors").join(&hash))
    );
    assert_eq!(
        store.local_dir(LocalPurpose::Locks),
        LocalDir::Dir(state.join("memloop/stores").join(&hash))
    );
    assert!(store.config().writer.starts_with("林美@"));
    // Vectors are cached in the injected home, whatever the process's HOME is.
    let cache = vector_cache_for(&store, "concepts-pg");
    assert!(cache.starts_with(home.path()), "{cache:?}");

    // An environment with no home has no local dirs: the store says so instead of guessing.
    let bare = PgMemoryStore::open(schema.config("acme/api").env(&EnvVars::default()))
        .await
        .unwrap();
    match bare.local_dir(LocalPurpose::VectorCache) {
        LocalDir::Elsewhere(why) => assert!(why.contains("HOME"), "{why}"),
        dir => panic!("no HOME, yet {dir:?}"),
    }
}
