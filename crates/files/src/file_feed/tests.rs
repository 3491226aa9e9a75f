//! The file store's change feed against every kind of outside change: watching with this
//! platform's queue (the inotify queue read directly, on Linux), watching through `notify`'s
//! thread and barrier (the other platforms' path), and with the watcher switched off (polling).
//! No sleeps: `changes` must be right the moment the change is made.

use super::*;
use crate::{FileMemoryStore, StoreConfig};
use memloop_store::{MemoryDoc, MemoryStore, MemoryType, WriteMode};
use std::collections::BTreeSet;
use std::io::Write;

const MODES: [FeedMode; 3] = [FeedMode::Watch, FeedMode::WatchThread, FeedMode::Poll];

fn store(dir: &Path, mode: FeedMode) -> FileMemoryStore {
    FileMemoryStore::open(dir)
        .unwrap()
        .with_config(StoreConfig {
            watch: mode != FeedMode::Poll,
            ..StoreConfig::default()
        })
        .with_feed_mode(mode)
}

fn memory(name: &str, body: &str) -> String {
    format!("---\nname: {name}\ndescription: {name} notes\ntype: project\n---\n\n{body}\n")
}

/// What one `changes` call reported, as sorted path sets.
#[derive(Debug, PartialEq)]
enum Seen {
    Unchanged,
    Changed {
        written: BTreeSet<String>,
        removed: BTreeSet<String>,
    },
    Rescan,
}

struct Probe {
    store: FileMemoryStore,
    cursor: ChangeCursor,
    /// `notify`'s thread may hand over an event of a change it already reported after the
    /// barrier (on other platforms its queues coalesce and reorder): reporting a change again
    /// is allowed, missing one never is. With this set, [`Probe::expect`] accepts a re-report
    /// of a path the previous answer reported as written.
    late_reports: bool,
    /// What the previous answer reported as written.
    last_written: BTreeSet<String>,
}

impl Probe {
    async fn new(store: FileMemoryStore) -> Self {
        let Changes::Rescan { cursor: Some(c) } = store.changes(None).await.unwrap() else {
            panic!("the first call must ask for a rescan with a cursor");
        };
        let late_reports = store.feed().mode == FeedMode::WatchThread;
        Self {
            store,
            cursor: c,
            late_reports,
            last_written: BTreeSet::new(),
        }
    }

    /// The next answer is `want` (up to a late re-report, see [`Probe::late_reports`]).
    async fn expect(&mut self, want: Seen) {
        let mut seen = self.next().await;
        if self.late_reports {
            if let Seen::Changed { written, removed } = &mut seen {
                let wanted = match &want {
                    Seen::Changed { written, .. } => written.clone(),
                    _ => BTreeSet::new(),
                };
                written.retain(|p| wanted.contains(p) || !self.last_written.contains(p));
                if written.is_empty() && removed.is_empty() && want == Seen::Unchanged {
                    seen = Seen::Unchanged;
                }
            }
        }
        assert_eq!(seen, want);
    }

    async fn next(&mut self) -> Seen {
        match self.store.changes(Some(&self.cursor)).await.unwrap() {
            Changes::Unchanged => {
                self.last_written.clear();
                Seen::Unchanged
            }
            Changes::Changed {
                cursor,
                written,
                removed,
                ..
            } => {
                self.cursor = cursor;
                let written: BTreeSet<String> = written.into_iter().map(|h| h.rel_path).collect();
                self.last_written = written.clone();
                Seen::Changed {
                    written,
                    removed: removed.into_iter().map(|p| p.as_str().to_owned()).collect(),
                }
            }
            Changes::Rescan { cursor } => {
                self.cursor = cursor.unwrap();
                self.last_written.clear();
                Seen::Rescan
            }
        }
    }
}

fn set(paths: &[&str]) -> BTreeSet<String> {
    paths.iter().map(|p| (*p).to_owned()).collect()
}

fn changed(written: &[&str], removed: &[&str]) -> Seen {
    Seen::Changed {
        written: set(written),
        removed: set(removed),
    }
}

fn doc(name: &str, body: &str) -> MemoryDoc {
    MemoryDoc::new(name, format!("{name} notes"), MemoryType::Project, body)
}

/// Every kind of change, in one dir, reported exactly.
async fn every_kind_of_change(mode: FeedMode) {
    let watch = mode != FeedMode::Poll;
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::write(root.join("a.md"), memory("a", "first")).unwrap();
    std::fs::write(root.join("b.md"), memory("b", "second")).unwrap();
    let mut p = Probe::new(store(&root, mode)).await;
    assert_eq!(p.store.feed().on_local_fs(), watch, "feed source");
    p.expect(Seen::Unchanged).await;

    // memloop's own write: the memory, not MEMORY.md, the lock or the temp file.
    p.store
        .write("новое.md", &doc("Новое", "заметка"), WriteMode::Overwrite)
        .await
        .unwrap();
    p.expect(changed(&["новое.md"], &[])).await;
    p.expect(Seen::Unchanged).await;

    // An in-place append (no rename, the dir's mtime does not move).
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(root.join("a.md"))
        .unwrap();
    f.write_all("追加の行\n".as_bytes()).unwrap();
    drop(f);
    p.expect(changed(&["a.md"], &[])).await;

    // An editor's save: write a temp file, rename it over the memory.
    std::fs::write(root.join("b.md.tmp~"), memory("b", "edited in an editor")).unwrap();
    std::fs::rename(root.join("b.md.tmp~"), root.join("b.md")).unwrap();
    p.expect(changed(&["b.md"], &[])).await;

    // A delete, then a rename.
    std::fs::remove_file(root.join("a.md")).unwrap();
    p.expect(changed(&[], &["a.md"])).await;
    std::fs::rename(root.join("b.md"), root.join("메모.md")).unwrap();
    p.expect(changed(&["메모.md"], &["b.md"])).await;

    // `git checkout`: many files replaced (unlink + create) at once.
    let names: Vec<String> = (0..40).map(|i| format!("checkout_{i}.md")).collect();
    for n in &names {
        std::fs::write(root.join(n), memory(n, "v1")).unwrap();
    }
    let _ = p.next().await;
    for n in &names {
        std::fs::remove_file(root.join(n)).unwrap();
        std::fs::write(root.join(n), memory(n, "v2 from another branch")).unwrap();
    }
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    p.expect(changed(&refs, &[])).await;

    // A second process appends to a memory.
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg("printf 'from another process\\n' >> \"$1\"")
        .arg("sh")
        .arg(root.join("новое.md"))
        .status()
        .unwrap();
    assert!(status.success());
    p.expect(changed(&["новое.md"], &[])).await;

    // Files that are not memories change nothing.
    std::fs::write(root.join("notes.txt"), "not a memory").unwrap();
    std::fs::write(root.join(".hidden.md"), memory("h", "hidden")).unwrap();
    std::fs::write(root.join("MEMORY.md"), "- [x](x.md) — index\n").unwrap();
    p.expect(Seen::Unchanged).await;

    // A new directory with a memory in it: watching rebuilds its watches and asks for a
    // rescan; polling names the file. Either way the next change inside it is seen.
    std::fs::create_dir(root.join("团队")).unwrap();
    std::fs::write(root.join("团队/规则.md"), memory("规则", "review first")).unwrap();
    let seen = p.next().await;
    if watch {
        assert_eq!(seen, Seen::Rescan);
    } else {
        assert_eq!(seen, changed(&["团队/规则.md"], &[]));
    }
    std::fs::write(root.join("团队/规则.md"), memory("规则", "two reviewers")).unwrap();
    p.expect(changed(&["团队/规则.md"], &[])).await;

    // The headers reported are the current ones.
    std::fs::write(root.join("c.md"), memory("Gamma", "γ")).unwrap();
    match p.store.changes(Some(&p.cursor)).await.unwrap() {
        Changes::Changed { written, .. } => {
            assert_eq!(written.len(), 1);
            assert_eq!(written[0].name.as_deref(), Some("Gamma"));
        }
        other => panic!("{other:?}"),
    }
    p.next().await;

    // A directory renamed, then deleted with what it holds.
    std::fs::rename(root.join("团队"), root.join("チーム")).unwrap();
    let seen = p.next().await;
    if watch {
        assert_eq!(seen, Seen::Rescan);
    } else {
        assert_eq!(seen, changed(&["チーム/规则.md"], &["团队/规则.md"]));
    }
    std::fs::write(root.join("チーム/规则.md"), memory("規則", "三人")).unwrap();
    p.expect(changed(&["チーム/规则.md"], &[])).await;
    std::fs::remove_dir_all(root.join("チーム")).unwrap();
    let seen = p.next().await;
    if watch {
        assert_eq!(seen, Seen::Rescan);
    } else {
        assert_eq!(seen, changed(&[], &["チーム/规则.md"]));
    }
    p.expect(Seen::Unchanged).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watching_reports_every_kind_of_change() {
    every_kind_of_change(FeedMode::Watch).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watching_through_the_watcher_thread_reports_every_kind_of_change() {
    every_kind_of_change(FeedMode::WatchThread).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_reports_every_kind_of_change() {
    every_kind_of_change(FeedMode::Poll).await;
}

/// On Linux a watched dir with nothing new, or a few memories changed, is answered on the
/// caller's task; more changes, or a new directory, go to the full refresh (the events stay
/// queued for it), which reports them. The watcher thread's path and polling always take the
/// full refresh.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_quiet_watched_dir_is_answered_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::write(root.join("вопрос.md"), memory("Вопрос", "первый")).unwrap();
    let s = store(&root, FeedMode::Watch);
    let Changes::Rescan { cursor: Some(c) } = s.changes(None).await.unwrap() else {
        panic!("the first call asks for a rescan");
    };
    assert_eq!(s.feed().changes_now(Some(&c)), Some(Changes::Unchanged));
    // Files that are not memories change nothing.
    std::fs::write(root.join(".lock"), "").unwrap();
    std::fs::write(root.join("MEMORY.md"), "- [Вопрос](вопрос.md) — первый\n").unwrap();
    std::fs::write(root.join("메모.txt"), "not a memory").unwrap();
    assert_eq!(s.feed().changes_now(Some(&c)), Some(Changes::Unchanged));
    // Another process appends to a memory: answered at once, with the new header.
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg("printf 'второй\\n' >> \"$1\"")
        .arg("sh")
        .arg(root.join("вопрос.md"))
        .status()
        .unwrap();
    assert!(status.success());
    let Some(Changes::Changed {
        cursor, written, ..
    }) = s.feed().changes_now(Some(&c))
    else {
        panic!("the append must be reported at once");
    };
    assert_eq!(written.len(), 1);
    assert_eq!(written[0].rel_path, "вопрос.md");
    assert_eq!(
        s.feed().changes_now(Some(&cursor)),
        Some(Changes::Unchanged)
    );
    // More memories than are read inline: not answered at once, and still not on a second try
    // (the events wait for the full refresh), which reports every one.
    let names: Vec<String> = (0..=INLINE_READS).map(|i| format!("日記{i}.md")).collect();
    for n in &names {
        std::fs::write(root.join(n), memory(n, "本文")).unwrap();
    }
    assert_eq!(s.feed().changes_now(Some(&cursor)), None);
    assert_eq!(s.feed().changes_now(Some(&cursor)), None);
    let Changes::Changed {
        cursor, written, ..
    } = s.changes(Some(&cursor)).await.unwrap()
    else {
        panic!("the writes must be reported");
    };
    let mut got: Vec<String> = written.into_iter().map(|h| h.rel_path).collect();
    got.sort();
    assert_eq!(got, names);
    // A new directory: the full refresh decides (it rebuilds the watches).
    std::fs::create_dir(root.join("новая")).unwrap();
    assert_eq!(s.feed().changes_now(Some(&cursor)), None);

    for mode in [FeedMode::WatchThread, FeedMode::Poll] {
        let s = store(&root, mode);
        let Changes::Rescan { cursor: Some(c) } = s.changes(None).await.unwrap() else {
            panic!("the first call asks for a rescan");
        };
        assert_eq!(s.feed().changes_now(Some(&c)), None, "{mode:?}");
    }
}

#[tokio::test]
async fn a_cursor_from_another_store_or_garbage_gets_a_rescan() {
    let dir = tempfile::tempdir().unwrap();
    let a = Probe::new(store(dir.path(), FeedMode::Poll)).await;
    let b = store(dir.path(), FeedMode::Poll);
    let _ = b.changes(None).await.unwrap();
    assert!(matches!(
        b.changes(Some(&a.cursor)).await.unwrap(),
        Changes::Rescan { cursor: Some(_) }
    ));
    assert!(matches!(
        b.changes(Some(&ChangeCursor::new("nonsense")))
            .await
            .unwrap(),
        Changes::Rescan { cursor: Some(_) }
    ));
    // Clones share the feed: their cursors stay valid.
    let clone = a.store.clone();
    assert_eq!(
        clone.changes(Some(&a.cursor)).await.unwrap(),
        Changes::Unchanged
    );
}

#[tokio::test]
async fn reading_the_feed_creates_nothing_in_the_memory_dir() {
    for mode in MODES {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.md"), memory("a", "x")).unwrap();
        let mut p = Probe::new(store(dir.path(), mode)).await;
        p.expect(Seen::Unchanged).await;
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("a.md")], "{mode:?}");
    }
}

#[test]
fn polling_sees_a_second_edit_within_one_timestamp_tick() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let path = root.join("tick.md");
    std::fs::write(&path, memory("tick", "AAAA")).unwrap();
    let mut snap = Snapshot::default();
    assert_eq!(snap.diff(root), vec!["tick.md".to_owned()]);
    assert!(snap.files["tick.md"].racy.is_some(), "just written: racy");
    // Same size, in place; then make the remembered stamp equal the new one, as when both
    // edits fall in one tick of a coarse clock.
    std::fs::write(&path, memory("tick", "BBBB")).unwrap();
    let now = stamp_of(&std::fs::metadata(&path).unwrap());
    snap.files.get_mut("tick.md").unwrap().stamp = now;
    assert_eq!(snap.diff(root), vec!["tick.md".to_owned()]);
    assert_eq!(snap.diff(root), Vec::<String>::new(), "reported once");
}

#[test]
fn an_old_stamp_is_not_racy_and_a_recent_one_is() {
    let meta = |secs: i64| Stamp {
        len: 1,
        mtime: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(secs as u64)),
        ctime: (secs, 0),
        ino: 1,
    };
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
    assert!(!is_racy(&meta(900), now));
    assert!(is_racy(&meta(999), now));
    assert!(is_racy(&meta(998), now), "the window's edge counts as racy");
}

#[test]
fn network_and_fuse_filesystems_are_not_watched() {
    assert_eq!(unescape_mount("/mnt/my\\040dir"), "/mnt/my dir");
    // Whatever this machine's root is, the answer comes from the mount table.
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let root_fs = info
        .lines()
        .find(|l| l.split(' ').nth(4) == Some("/"))
        .and_then(|l| l.split(" - ").nth(1))
        .and_then(|r| r.split(' ').next())
        .unwrap_or("");
    let expect_watch = !(UNWATCHABLE_FS.contains(&root_fs) || root_fs.starts_with("fuse."));
    assert_eq!(watchable(Path::new("/")).is_ok(), expect_watch, "{root_fs}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_cursor_beyond_the_journal_gets_a_rescan() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let feed = FileFeed::new(&root, ScanConfig::default(), FeedMode::Poll);
    let Changes::Rescan { cursor: Some(old) } = feed.changes(None).unwrap() else {
        panic!()
    };
    {
        let mut inner = feed.inner.lock().unwrap();
        for i in 0..JOURNAL_CAP + 1 {
            feed.record(&mut inner, format!("f{}.md", i % 3));
        }
        assert_eq!(inner.latest.len(), 3, "latest keeps one entry per path");
    }
    assert!(matches!(
        feed.changes(Some(&old)).unwrap(),
        Changes::Rescan { .. }
    ));
}
