//! The consolidation lock across real OS processes, staleness, and rollback.
//! The race test spawns this test binary twice in "child" mode (env var), with stdin as the
//! start signal and the release signal, so both children try at once and the winner keeps
//! holding (alive) until the parent has both answers. No sleeps.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use memloop_memory::dream::{CONSOLIDATE_LOCK, ConsolidationLock, LockAttempt};
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const CHILD_ENV: &str = "MEMLOOP_DREAM_LOCK_CHILD_DIR";

fn outcome_name(a: &LockAttempt) -> &'static str {
    match a {
        LockAttempt::Acquired(_) => "acquired",
        LockAttempt::Blocked { .. } => "blocked",
        LockAttempt::LostRace { .. } => "lost_race",
    }
}

/// Child mode only (does nothing in a normal test run).
#[test]
fn lock_race_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mut stdin = std::io::stdin().lock();
    let mut line = String::new();
    stdin.read_line(&mut line).unwrap(); // "go"
    let attempt = ConsolidationLock::new(dir.as_ref()).acquire().unwrap();
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "\nRESULT:{}:{}",
        outcome_name(&attempt),
        std::process::id()
    )
    .unwrap();
    out.flush().unwrap();
    drop(out);
    line.clear();
    let _ = stdin.read_line(&mut line); // hold the lock (alive) until the parent closes stdin
    if let LockAttempt::Acquired(guard) = attempt {
        guard.commit().unwrap();
    }
}

#[test]
fn two_processes_race_for_the_lock_and_exactly_one_wins() {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut children: Vec<_> = (0..2)
        .map(|_| {
            Command::new(&exe)
                .args([
                    "lock_race_child",
                    "--exact",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(CHILD_ENV, dir.path())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in &mut children {
        writeln!(c.stdin.as_mut().unwrap(), "go").unwrap();
    }
    let mut results = Vec::new();
    let mut readers = Vec::new();
    for c in &mut children {
        let mut reader = BufReader::new(c.stdout.take().unwrap());
        let mut line = String::new();
        while reader.read_line(&mut line).unwrap() > 0 {
            if let Some(i) = line.find("RESULT:") {
                results.push(line[i..].trim().to_owned());
                break;
            }
            line.clear();
        }
        readers.push(reader);
    }
    assert_eq!(results.len(), 2, "{results:?}");
    for (mut c, mut reader) in children.into_iter().zip(readers) {
        drop(c.stdin.take()); // release: the holder commits and exits
        std::io::copy(&mut reader, &mut std::io::sink()).unwrap();
        assert!(c.wait().unwrap().success());
    }
    let winners: Vec<&String> = results
        .iter()
        .filter(|r| r.contains(":acquired:"))
        .collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    let loser = results.iter().find(|r| !r.contains(":acquired:")).unwrap();
    assert!(
        loser.contains(":blocked:") || loser.contains(":lost_race:"),
        "{loser}"
    );
    let winner_pid = winners[0].rsplit(':').next().unwrap();
    let body = std::fs::read_to_string(dir.path().join(CONSOLIDATE_LOCK)).unwrap();
    assert_eq!(body, winner_pid);
}

fn write_lock(dir: &std::path::Path, body: &str, mtime: SystemTime) {
    let path = dir.join(CONSOLIDATE_LOCK);
    std::fs::write(&path, body).unwrap();
    File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
}

fn mtime(dir: &std::path::Path) -> SystemTime {
    std::fs::metadata(dir.join(CONSOLIDATE_LOCK))
        .unwrap()
        .modified()
        .unwrap()
}

fn dead_pid() -> u32 {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap(); // reaped: the PID no longer exists
    pid
}

#[test]
fn a_fresh_lock_held_by_a_live_process_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let ten_minutes_ago = SystemTime::now() - Duration::from_secs(600);
    write_lock(dir.path(), "1", ten_minutes_ago); // PID 1 is always alive
    match ConsolidationLock::new(dir.path()).acquire().unwrap() {
        LockAttempt::Blocked { holder_pid, age } => {
            assert_eq!(holder_pid, 1);
            assert!(age >= Duration::from_secs(600));
        }
        other => panic!("expected blocked, got {other:?}"),
    }
    assert_eq!(
        mtime(dir.path()),
        ten_minutes_ago,
        "a blocked attempt changes nothing"
    );
}

#[test]
fn stale_locks_are_taken_over_dead_pid_or_older_than_an_hour() {
    let dir = tempfile::tempdir().unwrap();
    let lock = ConsolidationLock::new(dir.path());
    let me = std::process::id().to_string();

    write_lock(dir.path(), &dead_pid().to_string(), SystemTime::now());
    let LockAttempt::Acquired(guard) = lock.acquire().unwrap() else {
        panic!("dead PID must be taken over")
    };
    assert_eq!(std::fs::read_to_string(lock.path()).unwrap(), me);
    guard.commit().unwrap();

    write_lock(
        dir.path(),
        "1",
        SystemTime::now() - Duration::from_secs(3_601),
    );
    let LockAttempt::Acquired(guard) = lock.acquire().unwrap() else {
        panic!("a lock older than 1 h must be taken over even with a live PID")
    };
    guard.commit().unwrap();
    let age = SystemTime::now().duration_since(mtime(dir.path())).unwrap();
    assert!(age < Duration::from_secs(60), "commit leaves mtime = now");
}

#[test]
fn rollback_restores_the_previous_mtime_or_removes_a_new_lock() {
    let dir = tempfile::tempdir().unwrap();
    let lock = ConsolidationLock::new(dir.path());
    let previous = UNIX_EPOCH + Duration::from_secs(1_775_736_000);
    write_lock(dir.path(), &dead_pid().to_string(), previous);
    assert_eq!(lock.last_consolidation().unwrap(), Some(previous));
    let LockAttempt::Acquired(guard) = lock.acquire().unwrap() else {
        panic!("stale lock")
    };
    assert_ne!(mtime(dir.path()), previous, "taking the lock touches it");
    guard.rollback().unwrap();
    assert_eq!(mtime(dir.path()), previous);
    assert_eq!(lock.last_consolidation().unwrap(), Some(previous));

    std::fs::remove_file(lock.path()).unwrap();
    let LockAttempt::Acquired(guard) = lock.acquire().unwrap() else {
        panic!("no lock yet")
    };
    assert!(lock.path().exists());
    drop(guard); // dropped without commit = rollback
    assert!(!lock.path().exists());
    assert_eq!(lock.last_consolidation().unwrap(), None);
}
