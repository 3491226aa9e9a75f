//! The change feeds of a process share one inotify instance (Linux): a server holding more
//! projects than the user may have instances (`fs.inotify.max_user_instances`, often 128) still
//! watches every one, leaves the other processes of the user their instances, and a store that
//! goes takes its watches with it. Its own test binary: the only inotify user of its process.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop_files::FileMemoryStore;
use memloop_store::{ChangeCursor, Changes, MemoryDoc, MemoryStore, MemoryType, WriteMode};

/// More stores than the usual per-user limit of inotify instances.
const STORES: usize = 200;

/// The process's inotify instances: its file descriptors open on `anon_inode:inotify`.
fn inotify_fds() -> Vec<String> {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read_link(e.path()).is_ok_and(|t| t.to_string_lossy() == "anon_inode:inotify")
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// The watches the process's inotify instances hold (`inotify wd:` lines of their fdinfo).
fn watches() -> usize {
    inotify_fds()
        .iter()
        .map(|fd| {
            std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}"))
                .map(|info| {
                    info.lines()
                        .filter(|l| l.starts_with("inotify wd:"))
                        .count()
                })
                .unwrap_or(0)
        })
        .sum()
}

/// The tests of this binary share the process's inotify instance and count its watches: one
/// at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A store over `dir` and the cursor of its first (watch-starting) call.
async fn watched(dir: &std::path::Path) -> (FileMemoryStore, ChangeCursor) {
    let store = FileMemoryStore::open(dir).unwrap();
    let Changes::Rescan { cursor: Some(c) } = store.changes(None).await.unwrap() else {
        panic!("the first call asks for a rescan");
    };
    (store, c)
}

/// The memory paths a `changes` call reports written (moving `cursor` on); panics on anything
/// but `Changed`.
async fn written(store: &FileMemoryStore, cursor: &mut ChangeCursor) -> Vec<String> {
    match store.changes(Some(cursor)).await.unwrap() {
        Changes::Changed {
            cursor: next,
            written,
            ..
        } => {
            *cursor = next;
            written.into_iter().map(|h| h.rel_path).collect()
        }
        other => panic!("{other:?}"),
    }
}

fn memory_text(name: &str) -> String {
    format!("---\nname: {name}\ndescription: {name}\ntype: project\n---\n\nТекст.\n")
}

#[tokio::test]
async fn two_stores_over_one_dir_both_see_its_changes_and_one_dropped_leaves_the_other_watching() {
    let _serial = SERIAL.lock().await;
    let watches_before = watches();
    let tmp = tempfile::tempdir().unwrap();
    // The kernel gives both the same watch descriptor.
    let (a, mut ca) = watched(tmp.path()).await;
    let (b, mut cb) = watched(tmp.path()).await;
    assert_eq!(watches(), watches_before + 1);
    std::fs::write(tmp.path().join("один.md"), memory_text("один")).unwrap();
    assert_eq!(written(&a, &mut ca).await, ["один.md"]);
    assert_eq!(written(&b, &mut cb).await, ["один.md"]);
    drop(a);
    assert_eq!(watches(), watches_before + 1, "b still watches the dir");
    std::fs::write(tmp.path().join("deux.md"), memory_text("deux")).unwrap();
    assert_eq!(written(&b, &mut cb).await, ["deux.md"]);
    drop(b);
    assert_eq!(watches(), watches_before);
}

#[tokio::test]
async fn a_queue_overflow_makes_every_feed_rescan() {
    let _serial = SERIAL.lock().await;
    let limit: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let (a, mut ca) = watched(&tmp.path().join("a")).await;
    let (b, mut cb) = watched(&tmp.path().join("b")).await;
    // Two events a write (modified, closed), never merged: more than the queue holds.
    let path = a.root().join("busy.md");
    for n in 0..limit / 2 + 1000 {
        std::fs::write(&path, memory_text(&format!("busy {n}"))).unwrap();
    }
    for (store, cursor) in [(&a, &mut ca), (&b, &mut cb)] {
        let Changes::Rescan { cursor: Some(c) } = store.changes(Some(cursor)).await.unwrap() else {
            panic!("an overflow makes every feed rescan");
        };
        *cursor = c;
    }
    // Then each goes on reporting its own changes.
    std::fs::write(b.root().join("après.md"), memory_text("après")).unwrap();
    assert_eq!(written(&b, &mut cb).await, ["après.md"]);
    assert!(matches!(
        a.changes(Some(&ca)).await.unwrap(),
        Changes::Unchanged
    ));
}

#[tokio::test]
async fn every_feed_shares_one_inotify_instance_and_a_dropped_store_releases_its_watches() {
    let _serial = SERIAL.lock().await;
    let before = inotify_fds().len();
    let watches_before = watches();
    let tmp = tempfile::tempdir().unwrap();
    let mut stores: Vec<(FileMemoryStore, ChangeCursor)> = Vec::new();
    for n in 0..STORES {
        let store = FileMemoryStore::open(tmp.path().join(format!("проект-{n}"))).unwrap();
        // The first call starts the watch.
        let Changes::Rescan { cursor: Some(c) } = store.changes(None).await.unwrap() else {
            panic!("the first call asks for a rescan");
        };
        stores.push((store, c));
    }
    assert!(
        inotify_fds().len() <= before + 1,
        "{STORES} stores hold {} inotify instances (before: {before})",
        inotify_fds().len()
    );
    assert_eq!(watches(), watches_before + STORES);

    // Each store's feed reports the write made to it, and no other store's.
    for (n, (store, _)) in stores.iter().enumerate() {
        let doc = MemoryDoc::new(
            format!("Заметка {n}"),
            format!("note {n}, nota {n}"),
            Some(MemoryType::Project),
            "Ça marche.\n",
        );
        store
            .write(&format!("note_{n}.md"), &doc, WriteMode::Overwrite)
            .await
            .unwrap();
    }
    for (n, (store, cursor)) in stores.iter_mut().enumerate() {
        match store.changes(Some(cursor)).await.unwrap() {
            Changes::Changed {
                cursor: next,
                written,
                removed,
                ..
            } => {
                let written: Vec<_> = written.iter().map(|h| h.rel_path.as_str()).collect();
                assert_eq!(written, [format!("note_{n}.md")], "store {n}");
                assert!(removed.is_empty(), "store {n}: {removed:?}");
                *cursor = next;
            }
            other => panic!("store {n}: {other:?}"),
        }
        assert!(matches!(
            store.changes(Some(cursor)).await.unwrap(),
            Changes::Unchanged
        ));
    }

    // Dropped stores take their watches with them; the others still watch.
    let kept = stores.split_off(STORES / 2);
    drop(stores);
    assert_eq!(watches(), watches_before + STORES - STORES / 2);
    let (store, cursor) = &kept[0];
    std::fs::write(
        store.root().join("outside.md"),
        "---\nname: Outside\ndescription: written by an editor\n---\n\nx\n",
    )
    .unwrap();
    let Changes::Changed { written, .. } = store.changes(Some(cursor)).await.unwrap() else {
        panic!("the write of an editor is reported");
    };
    assert_eq!(written[0].rel_path, "outside.md");
    drop(kept);
    assert_eq!(watches(), watches_before);
    assert!(inotify_fds().len() <= before + 1);
}
