//! A project's first search builds its BM25 postings (every memory read and analysed) without
//! holding other projects' requests: the analysis runs on the blocking pool, so while one
//! project's build waits there, a search of another project is answered.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use memloop_mcp::{OpenFuture, Project, ProjectStores};
use memloop_store::{MemoryDoc, MemoryStore, MemoryType, WriteLimits, WriteMode};
use memloop_testkit::{Forwarding, Hold, MapStore, Method};
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use support::{Fixture, call, connect};

/// Each project's memories in a map in memory (no file system, so nothing of theirs waits on
/// the blocking pool but the analysis), behind a wrapper that lets the test see its reads.
struct MapStores(Vec<(PathBuf, Arc<Forwarding<MapStore>>)>);

impl ProjectStores for MapStores {
    fn describe(&self) -> String {
        "maps".into()
    }

    fn kind(&self) -> &'static str {
        "maps"
    }

    fn open<'a>(&'a self, project: &'a Project, _limits: WriteLimits) -> OpenFuture<'a> {
        let store = self
            .0
            .iter()
            .find(|(p, _)| *p == project.path)
            .map(|(_, s)| s.clone() as Arc<dyn MemoryStore>);
        Box::pin(async move { Ok(store.expect("a project of the test")) })
    }
}

/// A store of `n` one-line memories about `topic`.
async fn filled(topic: &str, n: usize) -> Arc<Forwarding<MapStore>> {
    let store = Arc::new(Forwarding::new(MapStore::new()));
    for i in 0..n {
        let doc = MemoryDoc::new(
            format!("{topic} note {i}"),
            format!("what we learned about {topic} ({i})"),
            MemoryType::Project,
            format!("The {topic} queue {i} drains nightly."),
        );
        let path = format!("knowledge/{topic}{i}.md");
        (store.clone() as Arc<dyn MemoryStore>)
            .write(&path, &doc, WriteMode::Overwrite)
            .await
            .unwrap();
    }
    store
}

/// How long the test waits for an answer before it fails instead of hanging: far more than
/// any answer takes, however loaded the machine.
const HUNG: Duration = Duration::from_secs(120);

#[test]
fn a_cold_projects_index_build_does_not_hold_another_projects_search() {
    // One runtime thread: whatever a request runs on it holds every other request. One
    // blocking thread, which the test takes: an analysis sent to the blocking pool waits
    // there, while the runtime goes on.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .max_blocking_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    // The runtime runs on a thread of its own: a request that held the runtime's thread
    // would hold the test's too; this way the test fails instead.
    let test = std::thread::spawn(move || {
        runtime.block_on(scenario());
        let _ = done_tx.send(());
    });
    match done_rx.recv_timeout(HUNG) {
        Ok(()) => test.join().unwrap(),
        // The scenario panicked: its message.
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => test.join().unwrap(),
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("the runtime's thread was held: another project's search was not answered")
        }
    }
}

async fn scenario() {
    let fx = Fixture::new();
    let (a, b) = (fx.project("a"), fx.project("b"));
    // Enough memories that A's build goes to the blocking pool; B's few are analysed inline.
    let (store_a, store_b) = (filled("billing", 300).await, filled("payments", 3).await);
    let mut config = fx.config();
    config.stores = Some(Arc::new(MapStores(vec![
        (a.clone(), store_a.clone()),
        (b.clone(), store_b),
    ])));
    let client = Arc::new(connect(config).await);
    let search = |project: &PathBuf, query: &str| {
        let (client, args) = (
            client.clone(),
            json!({"project_path": project.to_string_lossy(), "query": query, "limit": 5}),
        );
        async move { call(&client, "context_search", args).await }
    };

    // The test takes the only blocking thread.
    let (taken_tx, taken) = tokio::sync::oneshot::channel();
    let (free, free_rx) = std::sync::mpsc::channel::<()>();
    let blocker = tokio::task::spawn_blocking(move || {
        let _ = taken_tx.send(());
        let _ = free_rx.recv();
    });
    taken.await.unwrap();

    // A's first search reads all its memories, then waits for their analysis.
    let reads = store_a.hold(Method::ReadPath, Hold::Call);
    reads.open();
    let first = tokio::spawn(search(&a, "billing queue"));
    reads.wait_entered(300).await;

    // B's first search is answered while A's build waits.
    let other = tokio::time::timeout(HUNG, search(&b, "payments queue"))
        .await
        .expect("B's search answered while A's build waits");
    assert_eq!(other["is_error"], false, "{other}");
    assert_eq!(other["results"].as_array().unwrap().len(), 3, "{other}");
    assert!(
        !first.is_finished(),
        "A's search finished while the blocking pool was taken: its memories were analysed on \
         the runtime's thread, where they hold every other request"
    );

    // Given the blocking thread, A's build finishes.
    free.send(()).unwrap();
    blocker.await.unwrap();
    let first = tokio::time::timeout(HUNG, first).await.unwrap().unwrap();
    assert_eq!(first["is_error"], false, "{first}");
    assert_eq!(first["results"].as_array().unwrap().len(), 5, "{first}");
}
