//! A batch of memory writes lands whole on the memory dir, even when the writing process is
//! killed (SIGKILL) midway: the journal it committed is finished by the next open, so a reader
//! sees every memory of every acknowledged batch and of the batch whose journal was committed,
//! never a part of one. A real child process writing batches in a loop, killed at a point it
//! reports itself (no sleeps): right after the journal's commit, midway through the files, or
//! after every file before the flush and the journal's removal.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop_files::FileMemoryStore;
use memloop_store::{
    CheckedWrite, ExpectedVersion, MemoryDoc, MemoryError, MemoryStore, MemoryType, WriteLimits,
    WriteMode, content_version,
};
use std::io::{BufRead, Write};
use std::path::Path;

/// The memory dir the child writes its batches into (set only for the child).
const CHILD_DIR: &str = "MEMLOOP_TEST_BATCH_CHILD_DIR";
/// Where the child stops, to be killed: `<batch>:<memories landed>` (set only for the child).
const CHILD_STOP: &str = "MEMLOOP_TEST_BATCH_CHILD_STOP";
/// Memories per batch.
const ENTRIES: usize = 20;
/// Batches the child would write if it were not killed.
const BATCHES: usize = 6;
/// The batch the child is killed in (the ones before are acknowledged).
#[cfg(unix)]
const KILLED_IN: usize = 3;

fn rel(batch: usize, n: usize) -> String {
    format!("b{batch}/n{n:02}.md")
}

fn doc(n: usize, round: &str) -> MemoryDoc {
    MemoryDoc::new(
        format!("Note {n}"),
        format!("note {n} of the batch"),
        Some(MemoryType::Project),
        format!("{round}: the body of note {n}.\n"),
    )
}

/// Batch `k`: 20 memories in `b<k>/`.
fn batch(k: usize) -> Vec<(CheckedWrite, ExpectedVersion)> {
    (0..ENTRIES)
        .map(|n| {
            let w = CheckedWrite::check(
                &rel(k, n),
                &doc(n, "batch"),
                WriteMode::Overwrite,
                WriteLimits::default(),
            )
            .unwrap();
            (w, ExpectedVersion::Any)
        })
        .collect()
}

/// The memories on disk in `b<batch>/`.
fn on_disk(dir: &Path, batch: usize) -> usize {
    std::fs::read_dir(dir.join(format!("b{batch}")))
        .map(|d| {
            d.flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "md"))
                .count()
        })
        .unwrap_or(0)
}

/// The child's part, run by [`kill_the_writer`] (which sets [`CHILD_DIR`] and [`CHILD_STOP`]):
/// writes batch after batch, saying `acked <k>` on stdout when batch `k` returned; in the batch
/// and at the count of landed memories [`CHILD_STOP`] names (`0`: right after the journal's
/// commit, before any memory), says `stopped` and waits on stdin, which the parent never
/// writes: it kills it there.
#[test]
#[ignore = "the child process of the batch kill tests"]
fn batch_writer_child() {
    let dir = std::env::var(CHILD_DIR).expect("run by the parent test");
    let stop = std::env::var(CHILD_STOP).expect("run by the parent test");
    let (stop_batch, stop_at) = stop.split_once(':').unwrap();
    let (stop_batch, stop_at): (usize, usize) =
        (stop_batch.parse().unwrap(), stop_at.parse().unwrap());
    let store = FileMemoryStore::open(&dir).unwrap();
    let mut stdin = std::io::stdin().lock();
    for k in 0..BATCHES {
        store
            .write_batch_blocking(&batch(k), &mut |landed| {
                if k == stop_batch && landed == stop_at {
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "stopped").unwrap();
                    out.flush().unwrap();
                    let mut line = String::new();
                    let _ = stdin.read_line(&mut line);
                }
            })
            .unwrap();
        let mut out = std::io::stdout().lock();
        writeln!(out, "acked {k}").unwrap();
        out.flush().unwrap();
    }
}

/// Run [`batch_writer_child`] on `dir`, SIGKILL it where it stops (batch [`KILLED_IN`], after
/// `landed` memories of it), and return the batches it acknowledged.
#[cfg(unix)]
fn kill_the_writer(dir: &Path, landed: usize) -> Vec<usize> {
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "batch_writer_child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DIR, dir)
        .env(CHILD_STOP, format!("{KILLED_IN}:{landed}"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut acked = Vec::new();
    let mut stopped = false;
    // The harness may start a line with the test's name.
    for line in stdout.lines().map_while(Result::ok) {
        if let Some((_, k)) = line.rsplit_once("acked ") {
            acked.push(k.trim().parse().unwrap());
        } else if line.ends_with("stopped") {
            stopped = true;
            break;
        }
    }
    assert!(
        stopped,
        "the child ended before it stopped in batch {KILLED_IN}"
    );
    // SIGKILL, mid-batch: no destructor, no cleanup runs.
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert!(!status.success(), "{status:?}");
    acked
}

/// Kill the writer in batch [`KILLED_IN`] after `landed` memories of it, then check what the
/// killed writer left and what the next open makes of it: every acknowledged batch whole, the
/// killed one (its journal committed) whole too, none after it, and every memory indexed.
#[cfg(unix)]
async fn killed_after(landed: usize) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let before = FileMemoryStore::open(dir).unwrap();
    // The killed batch replaces a memory written before it.
    before
        .write(&rel(KILLED_IN, 0), &doc(0, "before"), WriteMode::Overwrite)
        .await
        .unwrap();
    drop(before);

    let acked = kill_the_writer(dir, landed);
    assert_eq!(acked, (0..KILLED_IN).collect::<Vec<_>>());
    // What the killed writer left: part of the killed batch, and its committed journal.
    assert_eq!(on_disk(dir, KILLED_IN), landed.max(1));
    assert!(dir.join(memloop_files::BATCH_JOURNAL).exists());

    // The next open finishes the batch before anything reads the dir: every memory of it,
    // with its index line, and the journal gone.
    let store = FileMemoryStore::open(dir).unwrap();
    assert!(!dir.join(memloop_files::BATCH_JOURNAL).exists());
    let entries = store.index_entries().await.unwrap();
    for k in 0..BATCHES {
        let expected = if k <= KILLED_IN { ENTRIES } else { 0 };
        assert_eq!(
            on_disk(dir, k),
            expected,
            "batch {k} after a kill at {landed}"
        );
        for n in 0..expected {
            let f = store.read(&rel(k, n)).await.unwrap();
            assert_eq!(
                f.body,
                format!("batch: the body of note {n}.\n"),
                "{}",
                rel(k, n)
            );
            assert!(
                entries.iter().any(|e| e.file == rel(k, n)),
                "{} unindexed",
                rel(k, n)
            );
        }
    }
    assert_eq!(entries.len(), (KILLED_IN + 1) * ENTRIES);
}

#[cfg(unix)]
#[tokio::test]
async fn a_batch_killed_right_after_its_commit_lands_whole_at_the_next_open() {
    killed_after(0).await;
}

#[cfg(unix)]
#[tokio::test]
async fn a_batch_killed_midway_lands_whole_at_the_next_open() {
    killed_after(ENTRIES / 2).await;
}

#[cfg(unix)]
#[tokio::test]
async fn a_batch_killed_before_its_flush_and_journal_removal_lands_whole_at_the_next_open() {
    killed_after(ENTRIES).await;
}

#[tokio::test]
async fn a_batch_with_one_stale_version_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let store = FileMemoryStore::open(tmp.path()).unwrap();
    let w = (&store as &dyn MemoryStore)
        .write_if(
            &rel(0, 5),
            &doc(5, "first"),
            WriteMode::Overwrite,
            &ExpectedVersion::Any,
        )
        .await
        .unwrap();
    let stale = content_version("not what is there");
    let mut writes = batch(0);
    writes[5].1 = ExpectedVersion::Is(stale);
    let e = store.write_checked_batch(writes).await.unwrap_err();
    assert!(
        matches!(e, MemoryError::VersionConflict { ref path, .. } if *path == rel(0, 5)),
        "{e}"
    );
    assert_eq!(on_disk(tmp.path(), 0), 1);
    assert!(!tmp.path().join(memloop_files::BATCH_JOURNAL).exists());
    let f = store.read(&rel(0, 5)).await.unwrap();
    assert_eq!(content_version(&f.raw), w.version);
}

#[test]
fn a_torn_journal_is_dropped_and_nothing_of_its_batch_written() {
    // A journal lands by a rename, whole or not at all; one that cannot be read (written by
    // hand, or on a filesystem without atomic renames) means no memory of its batch was
    // written, so it is dropped.
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join(memloop_files::BATCH_JOURNAL),
        r#"{"entries":[{"rel":"b0/n00.md","te"#,
    )
    .unwrap();
    let _store = FileMemoryStore::open(tmp.path()).unwrap();
    assert!(!tmp.path().join(memloop_files::BATCH_JOURNAL).exists());
    assert_eq!(on_disk(tmp.path(), 0), 0);
}
