//! `Forwarding` is the store it wraps (the conformance suite passes through it) and does to the
//! calls a test names exactly what it says: records them with their paths, holds them at a gate
//! before or after the wrapped store, fails them without the wrapped store seeing them, and
//! makes a change feed carry texts. `Gate` lets through exactly what it is told to.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use async_trait::async_trait;
use memloop_store::conformance;
use memloop_store::{
    ChangeCursor, Changes, CheckedWrite, ExpectedVersion, IndexEntry, LoadedIndex, MemoryDoc,
    MemoryError, MemoryFile, MemoryHeader, MemoryPath, MemoryStore, MemoryType, StoreDescription,
    VersionedWrite, WriteMode,
};
use memloop_testkit::{Call, Forwarding, Gate, Hold, MapStore, Method};
use std::sync::Arc;
use std::time::SystemTime;

fn doc(name: &str, body: &str) -> MemoryDoc {
    MemoryDoc::new(name, "d", MemoryType::Project, body)
}

fn wrapped() -> (Arc<Forwarding<MapStore>>, Arc<dyn MemoryStore>) {
    let wrapped = Arc::new(Forwarding::new(MapStore::new()));
    let store: Arc<dyn MemoryStore> = wrapped.clone();
    (wrapped, store)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrapped_store_passes_the_conformance_suite() {
    let report = conformance::run(|| async {
        Arc::new(Forwarding::new(MapStore::new())) as Arc<dyn MemoryStore>
    })
    .await;
    assert!(report.is_ok(), "{report}");
    // Over a store already shared as `dyn MemoryStore` too.
    let report = conformance::run(|| async {
        let shared: Arc<dyn MemoryStore> = Arc::new(MapStore::new());
        Arc::new(Forwarding::over(shared)) as Arc<dyn MemoryStore>
    })
    .await;
    assert!(report.is_ok(), "{report}");
}

/// Every call made on the wrapper is recorded with the paths it named, byte for byte, in call
/// order; calls through `inner()` are not.
#[tokio::test]
async fn every_call_is_recorded_with_its_paths() {
    let (wrapped, store) = wrapped();
    store
        .write("部署.md", &doc("部署", "周二"), WriteMode::Overwrite)
        .await
        .unwrap();
    store.read("部署.md").await.unwrap();
    store.rename("部署.md", "развёртывание.md").await.unwrap();
    store.delete("развёртывание.md").await.unwrap();
    store.scan().await.unwrap();
    let calls = wrapped.take_calls();
    assert_eq!(calls.count(Method::WriteChecked), 1);
    assert_eq!(calls.paths(Method::WriteChecked), ["部署.md"]);
    // The rename read the memory first, through the wrapper.
    assert_eq!(calls.paths(Method::ReadPath), ["部署.md", "部署.md"]);
    assert_eq!(
        calls.paths(Method::RenameChecked),
        ["部署.md", "развёртывание.md"]
    );
    assert_eq!(calls.paths(Method::DeleteChecked), ["развёртывание.md"]);
    assert_eq!(calls.count(Method::Scan), 1);
    assert!(calls.count(Method::CheckContained) >= 4);
    // Taken: the record starts afresh, and what goes through `inner()` is not in it.
    assert_eq!(wrapped.calls().0, Vec::<Call>::new());
    let inner: Arc<dyn MemoryStore> = Arc::new(Forwarding::over(wrapped.inner().clone()));
    inner
        .write("café.md", &doc("café", "x"), WriteMode::Overwrite)
        .await
        .unwrap();
    assert_eq!(wrapped.count(Method::WriteChecked), 0);
    assert_eq!(wrapped.inner().paths(), ["café.md"]);
}

/// A call held at `Hold::Call` has not reached the wrapped store; one held at `Hold::Answer`
/// was answered from the store's state when it was asked.
#[tokio::test(flavor = "current_thread")]
async fn held_calls_wait_before_or_after_the_wrapped_store() {
    let (wrapped, store) = wrapped();
    let gate = wrapped.hold(Method::WriteChecked, Hold::Call);
    let write = tokio::spawn({
        let store = store.clone();
        async move {
            store
                .write("a.md", &doc("a", "Dienstag"), WriteMode::Overwrite)
                .await
        }
    });
    gate.wait_entered(1).await;
    assert!(wrapped.inner().paths().is_empty(), "held before the store");
    gate.release(1);
    write.await.unwrap().unwrap();
    assert_eq!(wrapped.inner().paths(), ["a.md"]);
    wrapped.unhold(Method::WriteChecked);

    let gate = wrapped.hold(Method::Scan, Hold::Answer);
    let scan = tokio::spawn({
        let store = store.clone();
        async move { store.scan().await }
    });
    gate.wait_entered(1).await;
    // Written after the scan was answered, before its caller got the answer.
    let inner: &dyn MemoryStore = wrapped.inner().as_ref();
    inner
        .write("b.md", &doc("b", "mardi"), WriteMode::Overwrite)
        .await
        .unwrap();
    gate.open();
    let headers = scan.await.unwrap().unwrap();
    let paths: Vec<&str> = headers.iter().map(|h| h.rel_path.as_str()).collect();
    assert_eq!(paths, ["a.md"]);
    // Open: later calls pass straight through.
    assert_eq!(store.scan().await.unwrap().len(), 2);
}

/// A failed method never reaches the wrapped store; the others do; healed, it does again.
#[tokio::test]
async fn failed_calls_never_reach_the_wrapped_store() {
    let (wrapped, store) = wrapped();
    store
        .write("keep.md", &doc("keep", "kept"), WriteMode::Overwrite)
        .await
        .unwrap();
    wrapped.fail(Method::WRITES, |call| {
        MemoryError::io(
            format!("writing {}", call.paths.join(", ")),
            std::io::ErrorKind::ReadOnlyFilesystem.into(),
        )
    });
    let refused = store
        .write("nouveau.md", &doc("nouveau", "é"), WriteMode::Overwrite)
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("writing nouveau.md"),
        "{refused}"
    );
    assert!(
        store
            .write_if(
                "keep.md",
                &doc("keep", "other"),
                WriteMode::Overwrite,
                &ExpectedVersion::Any
            )
            .await
            .is_err()
    );
    assert!(store.rename("keep.md", "moved.md").await.is_err());
    // Reads and deletes are not writes: they still reach the map.
    assert_eq!(store.read("keep.md").await.unwrap().body.trim_end(), "kept");
    assert_eq!(wrapped.inner().paths(), ["keep.md"]);
    // A containment failure refuses even a read.
    wrapped.fail([Method::CheckContained], |call| MemoryError::InvalidName {
        name: call.paths[0].clone(),
        reason: "injected".into(),
    });
    assert!(matches!(
        store.read("keep.md").await,
        Err(MemoryError::InvalidName { .. })
    ));
    wrapped.heal(Method::WRITES.into_iter().chain([Method::CheckContained]));
    store
        .write("nouveau.md", &doc("nouveau", "é"), WriteMode::Overwrite)
        .await
        .unwrap();
    assert_eq!(wrapped.inner().paths(), ["keep.md", "nouveau.md"]);
}

/// A stub with a change feed: it reports `a.md` written and carries no text.
struct OneChange;

#[async_trait]
impl MemoryStore for OneChange {
    fn describe(&self) -> StoreDescription {
        StoreDescription::directory(std::path::Path::new("/one-change"))
    }
    async fn changes(&self, _: Option<&ChangeCursor>) -> Result<Changes, MemoryError> {
        Ok(Changes::Changed {
            cursor: ChangeCursor::new("one"),
            written: vec![header()],
            removed: Vec::new(),
            files: Vec::new(),
        })
    }
    async fn scan(&self) -> Result<Vec<MemoryHeader>, MemoryError> {
        Ok(vec![header()])
    }
    async fn read_path(&self, path: &MemoryPath) -> Result<MemoryFile, MemoryError> {
        Ok(MemoryFile {
            header: header(),
            body: format!("text of {path}"),
            raw: format!("text of {path}"),
        })
    }
    async fn write_checked_if(
        &self,
        write: CheckedWrite,
        _: &ExpectedVersion,
    ) -> Result<VersionedWrite, MemoryError> {
        Err(MemoryError::NotFound(write.path().to_string()))
    }
    async fn delete_checked(&self, path: &MemoryPath) -> Result<(), MemoryError> {
        Err(MemoryError::NotFound(path.to_string()))
    }
    async fn clear(&self) -> Result<Vec<String>, MemoryError> {
        Ok(Vec::new())
    }
    async fn load_index(&self) -> Result<LoadedIndex, MemoryError> {
        Ok(LoadedIndex::default())
    }
    async fn index_entries(&self) -> Result<Vec<IndexEntry>, MemoryError> {
        Ok(Vec::new())
    }
}

fn header() -> MemoryHeader {
    MemoryHeader {
        rel_path: "a.md".into(),
        name: Some("a".into()),
        description: None,
        memory_type: None,
        mtime: SystemTime::UNIX_EPOCH,
    }
}

/// With texts carried, a feed's answer holds the text of every memory it reports written,
/// read from the wrapped store without being recorded; without, it is the store's answer.
#[tokio::test]
async fn a_carrying_feed_holds_the_texts_of_what_it_reports() {
    let wrapped = Forwarding::new(OneChange);
    let Changes::Changed { files, .. } = wrapped.changes(None).await.unwrap() else {
        panic!("the stub reports a change");
    };
    assert!(files.is_empty());
    wrapped.carry_texts(true);
    let Changes::Changed { files, .. } = wrapped.changes(None).await.unwrap() else {
        panic!("the stub reports a change");
    };
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].body, "text of a.md");
    let calls = wrapped.calls();
    assert_eq!(calls.count(Method::Changes), 2);
    assert_eq!(
        calls.count(Method::ReadPath),
        0,
        "the carried reads are not recorded"
    );
}

/// `release(n)` lets exactly `n` callers through; `open` lets everyone through, also later
/// arrivals; `wait_entered` counts every arrival since the gate was made.
#[tokio::test(flavor = "current_thread")]
async fn a_gate_lets_through_what_it_is_told_to() {
    let gate = Arc::new(Gate::new());
    let (passed, mut through) = tokio::sync::mpsc::unbounded_channel();
    let spawn = |n: usize| {
        let (gate, passed) = (gate.clone(), passed.clone());
        tokio::spawn(async move {
            gate.pass().await;
            passed.send(n).unwrap();
        })
    };
    let tasks: Vec<_> = (0..3).map(spawn).collect();
    gate.wait_entered(3).await;
    assert_eq!(gate.entered(), 3);
    assert!(through.try_recv().is_err(), "a closed gate holds everyone");
    gate.release(2);
    // The first two to arrive, in order.
    assert_eq!(through.recv().await, Some(0));
    assert_eq!(through.recv().await, Some(1));
    gate.open();
    assert_eq!(through.recv().await, Some(2));
    for t in tasks {
        t.await.unwrap();
    }
    // Open: a later arrival passes straight through, and is counted.
    spawn(3).await.unwrap();
    assert_eq!(gate.entered(), 4);
    assert_eq!(through.recv().await, Some(3));
}
