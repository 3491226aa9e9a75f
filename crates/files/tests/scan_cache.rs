//! The header cache (`memloop_store::ScanCache`) over the memory dir, a store with a change
//! feed: it matches a fresh scan after every change, shares one question among callers that
//! arrive together, and reads a text once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop_files::{FileMemoryStore, StoreConfig};
use memloop_store::{MemoryDoc, MemoryStore, MemoryType, ScanCache, ScanChange, WriteMode};
use memloop_testkit::{Forwarding, Hold, Method};
use std::sync::Arc;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_matches_a_fresh_scan_after_every_change() {
    for watch in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(
            FileMemoryStore::open(dir.path())
                .unwrap()
                .with_config(StoreConfig {
                    watch,
                    ..StoreConfig::default()
                }),
        );
        let cache = ScanCache::new(store.clone());
        let first = cache.refresh().await.unwrap();
        assert_eq!(first.change, ScanChange::Rescanned);
        let doc = |n: &str| MemoryDoc::new(n, "d", MemoryType::User, "body");
        for (i, name) in ["一.md", "два.md", "세.md", "four.md"].iter().enumerate() {
            store
                .write(name, &doc(name), WriteMode::Overwrite)
                .await
                .unwrap();
            let u = cache.refresh().await.unwrap();
            assert!(
                matches!(&u.change, ScanChange::Changed { written, .. } if written.len() == 1),
                "write {i}: {:?}",
                u.change
            );
            assert_eq!(u.headers.as_slice(), store.scan().await.unwrap());
        }
        store.delete("два.md").await.unwrap();
        std::fs::write(dir.path().join("一.md"), "---\nname: Один\n---\nx\n").unwrap();
        let u = cache.refresh().await.unwrap();
        assert_eq!(u.headers.as_slice(), store.scan().await.unwrap());
        assert_eq!(
            cache.refresh().await.unwrap().change,
            ScanChange::Unchanged,
            "watch={watch}"
        );
        cache.invalidate().await;
        assert_eq!(cache.refresh().await.unwrap().change, ScanChange::Rescanned);
    }
}

/// A real memory dir whose calls are counted, and whose feed answers can be held at a gate
/// (after the question was asked) or carry texts.
fn gated(dir: &std::path::Path) -> Arc<Forwarding<FileMemoryStore>> {
    Arc::new(Forwarding::new(FileMemoryStore::open(dir).unwrap()))
}

/// Callers that arrive together share the store's answers, and none gets an answer older
/// than its arrival: while one refresh's question is out, a write lands and two more
/// callers arrive; they share one new question, and both see the write.
#[tokio::test(flavor = "current_thread")]
async fn callers_arriving_together_share_one_question_and_see_every_earlier_write() {
    let dir = tempfile::tempdir().unwrap();
    let store = gated(dir.path());
    let cache = Arc::new(ScanCache::new(store.clone()));
    let doc = |n: &str| MemoryDoc::new(n, "d", MemoryType::User, "body");
    store
        .inner()
        .write("early.md", &doc("early"), WriteMode::Overwrite)
        .await
        .unwrap();
    cache.refresh().await.unwrap();
    store.take_calls();
    let gate = store.hold(Method::Changes, Hold::Answer);

    let first = tokio::spawn({
        let cache = cache.clone();
        async move { cache.refresh().await.unwrap() }
    });
    // Its question is out, its answer held (a cache that never asks fails here).
    tokio::time::timeout(Duration::from_secs(30), gate.wait_entered(1))
        .await
        .expect("the first caller asked the store");
    store
        .inner()
        .write("late.md", &doc("late"), WriteMode::Overwrite)
        .await
        .unwrap();
    let later: Vec<_> = (0..2)
        .map(|_| {
            let cache = cache.clone();
            tokio::spawn(async move { cache.refresh().await.unwrap() })
        })
        .collect();
    // One thread: the two run until they wait for the cache, having noted their arrival.
    tokio::task::yield_now().await;
    gate.open();
    let first = first.await.unwrap();
    assert!(
        first.headers.get("late.md").is_none(),
        "asked before the write"
    );
    for (i, t) in later.into_iter().enumerate() {
        let u = t.await.unwrap();
        assert!(
            u.headers.get("late.md").is_some(),
            "caller {i} got an answer from before it arrived"
        );
    }
    assert_eq!(store.count(Method::Changes), 2, "one question each round");
}

/// The texts a change's answer carries are what consumers taking the change in get: none of
/// them reads the store again (a store that carries none is read, once per memory).
#[tokio::test(flavor = "current_thread")]
async fn texts_the_feed_carries_are_not_read_again() {
    for carry in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let store = gated(dir.path());
        store.carry_texts(carry);
        let cache = ScanCache::new(store.clone());
        cache.refresh().await.unwrap();
        let doc = |n: &str| MemoryDoc::new(n, "d", MemoryType::User, format!("{n} body"));
        for n in ["a.md", "b.md"] {
            store
                .inner()
                .write(n, &doc(n), WriteMode::Overwrite)
                .await
                .unwrap();
        }
        let u = cache.refresh().await.unwrap();
        let ScanChange::Changed { written, .. } = u.change else {
            panic!("two writes: {:?}", u.change);
        };
        for _consumer in 0..2 {
            for h in &written {
                let f = cache.read(h).await.unwrap();
                assert_eq!(f.body.trim_end(), format!("{} body", h.rel_path));
            }
        }
        let reads = store.count(Method::ReadPath);
        assert_eq!(reads, if carry { 0 } else { 2 }, "carry={carry}");
    }
}

/// A text read once is kept for the next reader, and a change to it (reported by the feed)
/// is read afresh: the kept text is always the version the cache lists.
#[tokio::test(flavor = "current_thread")]
async fn texts_read_are_kept_until_a_change_names_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = gated(dir.path());
    let cache = ScanCache::new(store.clone());
    let doc = |body: &str| MemoryDoc::new("Deploys", "d", MemoryType::Project, body);
    store
        .inner()
        .write("deploy.md", &doc("Tuesdays."), WriteMode::Overwrite)
        .await
        .unwrap();
    for _search in 0..3 {
        let headers = cache.headers().await.unwrap();
        let f = cache.read(&headers[0]).await.unwrap();
        assert!(f.body.contains("Tuesdays."));
    }
    assert_eq!(store.count(Method::ReadPath), 1, "read once, kept");
    store
        .inner()
        .write("deploy.md", &doc("Fridays."), WriteMode::Overwrite)
        .await
        .unwrap();
    for _search in 0..3 {
        let headers = cache.headers().await.unwrap();
        let f = cache.read(&headers[0]).await.unwrap();
        assert!(
            f.body.contains("Fridays."),
            "the changed text, not the kept one"
        );
    }
    assert_eq!(store.count(Method::ReadPath), 2);
}

/// A consumer catching up with a list the cache handed out earlier, while another caller has
/// refreshed it since, is given the current list without a question to the store: the current
/// list is newer than the one it holds.
#[tokio::test(flavor = "current_thread")]
async fn following_with_a_list_handed_out_earlier_asks_the_store_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = gated(dir.path());
    let cache = ScanCache::new(store.clone());
    let doc = |n: &str| MemoryDoc::new(n, "d", MemoryType::User, "body");
    store
        .inner()
        .write("first.md", &doc("first"), WriteMode::Overwrite)
        .await
        .unwrap();
    let held = cache.headers().await.unwrap();
    let seen = cache.follow(None, &held).await.unwrap().headers.version();
    // Another caller refreshes after a write: the list held is no longer the current one.
    store
        .inner()
        .write("second.md", &doc("second"), WriteMode::Overwrite)
        .await
        .unwrap();
    let current = cache.headers().await.unwrap();
    assert!(current.get("second.md").is_some());
    store.take_calls();
    let followed = cache.follow(Some(seen), &held).await.unwrap();
    assert_eq!(store.count(Method::Changes), 0, "the store was asked");
    assert_eq!(followed.headers.version(), current.version());
    assert!(
        matches!(&followed.since, memloop_store::Since::Changed { written, .. }
            if written.iter().any(|h| h.rel_path == "second.md")),
        "{:?}",
        followed.since
    );
    // A list the cache never handed out is followed with a refresh.
    let elsewhere = held.as_slice().to_vec();
    cache.follow(Some(seen), &elsewhere).await.unwrap();
    assert_eq!(store.count(Method::Changes), 1);
}

/// A consumer catching up with a list the cache handed out is answered while another
/// refresh's question is out to the store: the lists are not locked across a round trip, so a
/// search holding its index's lock never waits on another request's question.
#[tokio::test(flavor = "current_thread")]
async fn following_a_list_handed_out_never_waits_on_a_question_out() {
    let dir = tempfile::tempdir().unwrap();
    let store = gated(dir.path());
    let cache = Arc::new(ScanCache::new(store.clone()));
    let doc = |n: &str| MemoryDoc::new(n, "d", MemoryType::User, "body");
    store
        .inner()
        .write("заметка.md", &doc("заметка"), WriteMode::Overwrite)
        .await
        .unwrap();
    let held = cache.headers().await.unwrap();
    store
        .inner()
        .write("笔记.md", &doc("笔记"), WriteMode::Overwrite)
        .await
        .unwrap();
    let gate = store.hold(Method::Changes, Hold::Answer);
    let asking = tokio::spawn({
        let cache = cache.clone();
        async move { cache.refresh().await.unwrap() }
    });
    tokio::time::timeout(Duration::from_secs(30), gate.wait_entered(1))
        .await
        .expect("the refresh asked the store");
    // Polled once, with the question still out: ready, not waiting for the answer.
    let followed = tokio::select! {
        biased;
        f = cache.follow(None, &held) => Some(f.unwrap()),
        () = std::future::ready(()) => None,
    };
    let followed = followed.expect("following waited on another refresh's question");
    assert!(followed.headers.get("заметка.md").is_some());
    assert!(
        followed.headers.get("笔记.md").is_none(),
        "the answer still out is not applied yet"
    );
    gate.open();
    let answered = asking.await.unwrap();
    assert!(answered.headers.get("笔记.md").is_some());
    assert_eq!(
        cache.headers().await.unwrap().version(),
        answered.headers.version()
    );
}
