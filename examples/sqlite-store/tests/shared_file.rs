//! Several stores over one database file (as several processes would open it): their
//! conditional writes are ordered by SQLite's write lock, and each one's change feed sees the
//! others' writes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop::MemoryStore;
use memloop::memory::store::{
    Changes, ExpectedVersion, MemoryDoc, MemoryError, MemoryType, WriteMode,
};
use memloop_sqlite_store::SqliteMemoryStore;
use std::sync::Arc;

fn doc(body: &str) -> MemoryDoc {
    MemoryDoc::new(
        "Shared",
        "one file, many handles",
        MemoryType::Project,
        body,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn handles_on_one_file_see_and_order_each_others_writes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("team.sqlite3");
    let handles: Vec<Arc<dyn MemoryStore>> = (0..4)
        .map(|_| Arc::new(SqliteMemoryStore::open(&path).unwrap()) as Arc<dyn MemoryStore>)
        .collect();
    assert_eq!(handles[0].describe(), handles[3].describe());

    let v0 = handles[0]
        .write_if(
            "shared.md",
            &doc("start"),
            WriteMode::Overwrite,
            &ExpectedVersion::Absent,
        )
        .await
        .unwrap()
        .version;
    let Changes::Rescan {
        cursor: Some(cursor),
    } = handles[1].changes(None).await.unwrap()
    else {
        panic!("the feed gives a cursor")
    };

    // Two writers per handle, released together, all expecting v0: one wins.
    let barrier = Arc::new(tokio::sync::Barrier::new(8));
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let (store, barrier, v0) = (handles[i % 4].clone(), barrier.clone(), v0.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                store
                    .write_if(
                        "shared.md",
                        &doc(&format!("writer {i}")),
                        WriteMode::Overwrite,
                        &ExpectedVersion::Is(v0),
                    )
                    .await
                    .map(|w| (i, w.version))
            })
        })
        .collect();
    let mut winners = Vec::new();
    for task in tasks {
        match task.await.unwrap() {
            Ok(won) => winners.push(won),
            Err(MemoryError::VersionConflict { .. }) => {}
            Err(e) => panic!("a writer failed: {e}"),
        }
    }
    let [(winner, version)] = winners.as_slice() else {
        panic!("exactly one writer must win: {winners:?}")
    };

    // Every handle reads the winner's text; the others' feed reports the write.
    for store in &handles {
        let file = store.read("shared.md").await.unwrap();
        assert_eq!(file.body.trim_end(), format!("writer {winner}"));
        assert_eq!(memloop::memory::store::content_version(&file.raw), *version);
    }
    let Changes::Changed { written, .. } = handles[2].changes(Some(&cursor)).await.unwrap() else {
        panic!("a write by another handle is reported")
    };
    assert_eq!(written.len(), 1);
    assert_eq!(written[0].rel_path, "shared.md");
}
