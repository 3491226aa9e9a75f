//! One follow of the store per turn, shared: the recall hook, the BM25 index and the hybrid
//! selector's vector cache follow the store through one header cache, so a turn asks the store
//! once what changed, and a memory another writer rewrote is read once by the indexes, however
//! many take it in. Counted at the store boundary with a wrapper around a real memory dir.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod recall_common;

use memloop_core::embed::Embedder;
use memloop_core::events::VecSink;
use memloop_core::{CancellationToken, Hook};
use memloop_files::FileMemoryStore;
use memloop_recall::{Bm25Selector, DefaultSelector, RecallEvent, RecallHook, Selector};
use memloop_store::MemoryStore;
use memloop_testkit::{FakeEmbedder, Forwarding, Method};
use recall_common::{hook_ctx, put};
use std::sync::Arc;

/// A real memory dir whose calls are counted at the store boundary.
type Counting = Forwarding<FileMemoryStore>;

/// The feed calls, the scans and the paths read (sorted) since the last look.
fn take(counting: &Counting) -> (usize, usize, Vec<String>) {
    let calls = counting.take_calls();
    let mut reads = calls.paths(Method::ReadPath);
    reads.sort();
    (
        calls.count(Method::Changes),
        calls.count(Method::Scan),
        reads,
    )
}

async fn setup() -> (tempfile::TempDir, Arc<Counting>, Arc<dyn MemoryStore>) {
    let tmp = tempfile::tempdir().unwrap();
    let counting = Arc::new(Forwarding::new(
        FileMemoryStore::open(tmp.path().join("memory")).unwrap(),
    ));
    let store: Arc<dyn MemoryStore> = counting.clone();
    for (rel, body) in [
        (
            "deploy.md",
            "We deploy on Tuesdays after the billing freeze.",
        ),
        (
            "database.md",
            "Integration tests run against a real Postgres.",
        ),
        ("oncall.md", "The oncall rotation changes on Mondays."),
    ] {
        put(&store, rel, rel.trim_end_matches(".md"), body).await;
    }
    (tmp, counting, store)
}

/// One recall turn through the hook (refresh, select, render the chosen files); the paths it
/// surfaced (each read once more, to render it).
async fn turn(hook: &RecallHook, query: &str) -> Vec<String> {
    let events = VecSink::default();
    let ctx = hook_ctx(vec![], &events, CancellationToken::new());
    if let Some(pending) = hook.on_turn_start(&ctx, query).await {
        pending.wait().await;
    }
    events
        .events()
        .iter()
        .filter_map(|e| match e.extension() {
            Some(RecallEvent::MemoriesSurfaced { paths, .. }) => Some(paths.clone()),
            _ => None,
        })
        .flatten()
        .collect()
}

/// A memory rewritten behind the store's back (another process), as the feed sees it.
fn rewrite_outside(dir: &std::path::Path) {
    std::fs::write(
        dir.join("memory/oncall.md"),
        "---\nname: oncall\ndescription: oncall\ntype: project\n---\n\nThe oncall rotation now changes on Fridays.\n",
    )
    .unwrap();
}

async fn one_follow_per_turn(embedder: Option<Arc<dyn Embedder>>) {
    let (tmp, counting, store) = setup().await;
    let indexes = if embedder.is_some() { 2 } else { 1 };
    let recall = DefaultSelector::new(store.clone(), embedder);
    let hook = RecallHook::new(store.clone(), recall.selector());
    // The first turn scans once and reads everything once.
    turn(&hook, "when does the oncall rotation change?").await;
    let (_, scans, reads) = take(&counting);
    assert_eq!(scans, 1, "one scan for the hook and every index");
    let mut unique = reads.clone();
    unique.dedup();
    assert_eq!(unique.len(), 3, "{reads:?}");
    // A first build reads every memory once per index (BM25, and vectors when hybrid), plus
    // the file the hook renders; only a change's memories are kept read for every index.
    assert!(reads.len() <= 3 * indexes + 1, "{reads:?}");

    // A turn with nothing changed: one feed call, nothing read but what is surfaced.
    turn(&hook, "which database do the tests use?").await;
    let (changes, scans, _) = take(&counting);
    assert_eq!((changes, scans), (1, 0), "one feed call per turn");

    // One memory rewritten by another writer: one feed call, and the indexes read it once.
    rewrite_outside(tmp.path());
    let surfaced = turn(&hook, "deploy tuesdays billing").await;
    let (changes, scans, reads) = take(&counting);
    assert_eq!((changes, scans), (1, 0), "one feed call per turn");
    let rendered = usize::from(surfaced.iter().any(|p| p == "oncall.md"));
    assert_eq!(
        reads.iter().filter(|r| *r == "oncall.md").count(),
        1 + rendered,
        "the rewritten memory is read once for every index: {reads:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bm25_turn_asks_the_store_once() {
    one_follow_per_turn(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hybrid_turn_asks_the_store_once_and_reads_a_change_once() {
    // Enough of a model for vectors to exist.
    one_follow_per_turn(Some(Arc::new(FakeEmbedder::hashed(64)))).await;
}

/// A selector used on its own (no hook refreshed its cache this turn) follows the store itself:
/// one feed call per selection, and it still sees another writer's change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selector_on_its_own_still_follows_the_store() {
    let (tmp, counting, store) = setup().await;
    let bm25: Arc<dyn Selector> = Arc::new(Bm25Selector::new(store.clone()));
    let headers = store.scan().await.unwrap();
    let ctx = memloop_recall::SelectionContext::with_limit(1);
    let got = bm25
        .select_checked("fridays", &headers, &ctx)
        .await
        .unwrap();
    assert!(got.is_empty(), "{got:?}");
    take(&counting);
    rewrite_outside(tmp.path());
    let headers = store.scan().await.unwrap();
    take(&counting);
    let got = bm25
        .select_checked("fridays", &headers, &ctx)
        .await
        .unwrap();
    assert_eq!(got, ["oncall.md"]);
    let (changes, _, reads) = take(&counting);
    assert_eq!(changes, 1);
    assert_eq!(reads, ["oncall.md"]);
}
