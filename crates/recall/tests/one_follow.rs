//! One follow of the store per turn, shared: the recall hook, the BM25 index and the hybrid
//! selector's vector cache follow the store through one header cache, so a turn asks the store
//! once what changed, and a memory another writer rewrote is read once by the indexes, however
//! many take it in. Counted at the store boundary with a wrapper around a real memory dir.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod recall_common;

use memloop_core::embed::{EmbedError, Embedder};
use memloop_core::events::VecSink;
use memloop_core::{CancellationToken, Hook};
use memloop_files::FileMemoryStore;
use memloop_recall::{Bm25Selector, DefaultSelector, RecallEvent, RecallHook, Selector};
use memloop_store::{
    ChangeCursor, Changes, CheckedWrite, IndexEntry, LoadedIndex, MemoryError, MemoryFile,
    MemoryHeader, MemoryPath, MemoryStore, StoreDescription,
};
use recall_common::{hook_ctx, put};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A real memory dir that counts the feed calls and the reads of each path.
struct Counting {
    inner: FileMemoryStore,
    changes: AtomicUsize,
    scans: AtomicUsize,
    reads: std::sync::Mutex<Vec<String>>,
}

impl Counting {
    fn take(&self) -> (usize, usize, Vec<String>) {
        let mut reads = std::mem::take(&mut *self.reads.lock().unwrap());
        reads.sort();
        (
            self.changes.swap(0, Ordering::SeqCst),
            self.scans.swap(0, Ordering::SeqCst),
            reads,
        )
    }
}

#[async_trait::async_trait]
impl MemoryStore for Counting {
    fn describe(&self) -> StoreDescription {
        self.inner.describe()
    }
    async fn changes(&self, since: Option<&ChangeCursor>) -> Result<Changes, MemoryError> {
        self.changes.fetch_add(1, Ordering::SeqCst);
        self.inner.changes(since).await
    }
    async fn scan(&self) -> Result<Vec<MemoryHeader>, MemoryError> {
        self.scans.fetch_add(1, Ordering::SeqCst);
        self.inner.scan().await
    }
    async fn read_path(&self, path: &MemoryPath) -> Result<MemoryFile, MemoryError> {
        self.reads.lock().unwrap().push(path.as_str().to_owned());
        self.inner.read_path(path).await
    }
    async fn write_checked_if(
        &self,
        write: CheckedWrite,
        expected: &memloop_store::ExpectedVersion,
    ) -> Result<memloop_store::VersionedWrite, MemoryError> {
        self.inner.write_checked_if(write, expected).await
    }
    async fn delete_checked(&self, path: &MemoryPath) -> Result<(), MemoryError> {
        self.inner.delete_checked(path).await
    }
    async fn clear(&self) -> Result<Vec<String>, MemoryError> {
        self.inner.clear().await
    }
    async fn load_index(&self) -> Result<LoadedIndex, MemoryError> {
        self.inner.load_index().await
    }
    async fn index_entries(&self) -> Result<Vec<IndexEntry>, MemoryError> {
        self.inner.index_entries().await
    }
    fn check_contained(&self, rel: &str) -> Result<MemoryPath, MemoryError> {
        self.inner.check_contained(rel)
    }
}

/// Counts letters: enough of a model for vectors to exist.
struct Letters;

#[async_trait::async_trait]
impl Embedder for Letters {
    fn model_id(&self) -> &str {
        "letters-v1"
    }
    fn dimension(&self) -> usize {
        26
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0.0f32; 26];
                for c in t
                    .to_ascii_lowercase()
                    .bytes()
                    .filter(u8::is_ascii_lowercase)
                {
                    v[usize::from(c - b'a')] += 1.0;
                }
                v
            })
            .collect())
    }
}

async fn setup() -> (tempfile::TempDir, Arc<Counting>, Arc<dyn MemoryStore>) {
    let tmp = tempfile::tempdir().unwrap();
    let counting = Arc::new(Counting {
        inner: FileMemoryStore::open(tmp.path().join("memory")).unwrap(),
        changes: AtomicUsize::new(0),
        scans: AtomicUsize::new(0),
        reads: std::sync::Mutex::default(),
    });
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
    let (_, scans, reads) = counting.take();
    assert_eq!(scans, 1, "one scan for the hook and every index");
    let mut unique = reads.clone();
    unique.dedup();
    assert_eq!(unique.len(), 3, "{reads:?}");
    // A first build reads every memory once per index (BM25, and vectors when hybrid), plus
    // the file the hook renders; only a change's memories are kept read for every index.
    assert!(reads.len() <= 3 * indexes + 1, "{reads:?}");

    // A turn with nothing changed: one feed call, nothing read but what is surfaced.
    turn(&hook, "which database do the tests use?").await;
    let (changes, scans, _) = counting.take();
    assert_eq!((changes, scans), (1, 0), "one feed call per turn");

    // One memory rewritten by another writer: one feed call, and the indexes read it once.
    rewrite_outside(tmp.path());
    let surfaced = turn(&hook, "deploy tuesdays billing").await;
    let (changes, scans, reads) = counting.take();
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
    one_follow_per_turn(Some(Arc::new(Letters))).await;
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
    counting.take();
    rewrite_outside(tmp.path());
    let headers = store.scan().await.unwrap();
    counting.take();
    let got = bm25
        .select_checked("fridays", &headers, &ctx)
        .await
        .unwrap();
    assert_eq!(got, ["oncall.md"]);
    let (changes, _, reads) = counting.take();
    assert_eq!(changes, 1);
    assert_eq!(reads, ["oncall.md"]);
}
