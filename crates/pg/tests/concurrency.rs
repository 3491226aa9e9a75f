//! Reliability against the machine's PostgreSQL: eight "machines" (separate store instances with
//! their own pools) writing into one project, and connections killed mid-run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use memloop_pg::{Expected, PgError, PgMemoryStore, PgWrite, StoreError, sha256_hex};
use memloop_store::{MemoryDoc, MemoryStore, MemoryType, WriteMode};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use support::{TestSchema, admin};
use tokio::sync::Barrier;

const MACHINES: usize = 8;
const WRITES: usize = 100;
const HOT: usize = 5;
/// The memory every machine appends to.
const LOG: &str = "log.md";

fn doc(name: &str, body: &str) -> MemoryDoc {
    MemoryDoc::new(name, "concurrency", MemoryType::Project, body)
}

#[derive(Default)]
struct Tally {
    landed: HashMap<String, i64>,
    conflicts: usize,
    /// Versioned writes that landed on a version other than the one they read plus one (the
    /// write they raced with was overwritten).
    lost: Vec<String>,
    /// The lines this machine's appends to [`LOG`] were acknowledged for, in order.
    logged: Vec<String>,
}

/// 8 machines × 100 writes. Even writes: read a shared "hot" memory and write it back based on
/// the version read; each landed write must get exactly that version plus one (a write that
/// lands on top of another it did not see is a lost update), and the versions count the landed
/// writes. Odd writes append a line, alternately to the machine's own memory (every line there,
/// in order) and to one memory all machines append to (every acknowledged line there, once,
/// each machine's in order).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_machines_write_one_project_and_nothing_is_lost() {
    let schema = TestSchema::new();
    schema.open("shared").await; // migrate once up front
    let barrier = Arc::new(Barrier::new(MACHINES));
    let mut tasks = Vec::new();
    for m in 0..MACHINES {
        let store: PgMemoryStore = PgMemoryStore::open(schema.config("shared").pool_size(2))
            .await
            .unwrap();
        let barrier = barrier.clone();
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            let mut tally = Tally::default();
            for i in 0..WRITES {
                if i % 2 == 0 {
                    let rel = format!("hot{}.md", (i / 2 + m) % HOT);
                    let (expected, read) = match store.get(&rel).await.unwrap() {
                        Some(cur) => (Expected::Version(cur.version), cur.version),
                        None => (Expected::Absent, 0),
                    };
                    let body = format!("machine {m} write {i}");
                    match store
                        .write_versioned(&rel, &doc("Hot", &body), WriteMode::Overwrite, expected)
                        .await
                    {
                        Ok(w) => {
                            assert!(w.changed);
                            if w.version != read + 1 {
                                tally.lost.push(format!(
                                    "{rel}: machine {m} read version {read}, its write landed as \
                                     version {}",
                                    w.version
                                ));
                            }
                            *tally.landed.entry(rel).or_default() += 1;
                        }
                        Err(StoreError::Pg(PgError::Conflict { .. })) => tally.conflicts += 1,
                        Err(e) => panic!("write neither landed nor conflicted: {e}"),
                    }
                } else {
                    let (rel, text) = if i % 4 == 1 {
                        (format!("machine{m}.md"), format!("line {i}"))
                    } else {
                        (LOG.to_owned(), format!("machine {m} line {i}"))
                    };
                    let line = MemoryDoc::new("", "", None, text.clone());
                    store
                        .write_versioned(&rel, &line, WriteMode::Append, Expected::Any)
                        .await
                        .unwrap();
                    if rel == LOG {
                        tally.logged.push(text);
                    }
                }
            }
            tally
        }));
    }
    let mut landed: HashMap<String, i64> = HashMap::new();
    let (mut conflicts, mut lost, mut logged) = (0, Vec::new(), Vec::new());
    for t in tasks {
        let tally = t.await.unwrap();
        conflicts += tally.conflicts;
        lost.extend(tally.lost);
        logged.push(tally.logged);
        for (k, v) in tally.landed {
            *landed.entry(k).or_default() += v;
        }
    }
    let store = schema.open("shared").await;
    // Every versioned write either landed or got a conflict; every landed one is the successor
    // of the version it read (none was silently overwritten) and is counted in the version.
    assert!(lost.is_empty(), "lost updates:\n{}", lost.join("\n"));
    let total_landed: i64 = landed.values().sum();
    assert_eq!(total_landed as usize + conflicts, MACHINES * WRITES / 2);
    assert!(total_landed >= HOT as i64);
    for (rel, n) in &landed {
        let row = store.get(rel).await.unwrap().unwrap();
        assert_eq!(
            row.version, *n,
            "{rel}: version {} but {n} writes landed",
            row.version
        );
        assert_eq!(row.sha256, sha256_hex(&row.content));
    }
    // Appends on each machine's own memory: all 25 lines, in order.
    for m in 0..MACHINES {
        let body = store.read(&format!("machine{m}.md")).await.unwrap().body;
        let lines: Vec<&str> = body.lines().filter(|l| !l.is_empty()).collect();
        let want: Vec<String> = (0..WRITES)
            .filter(|i| i % 4 == 1)
            .map(|i| format!("line {i}"))
            .collect();
        assert_eq!(lines, want, "machine {m}");
    }
    // Appends contending on one memory: every acknowledged line is there once, each machine's
    // in the order it wrote them, and nothing else.
    let body = store.read(LOG).await.unwrap().body;
    let lines: Vec<&str> = body.lines().filter(|l| !l.is_empty()).collect();
    let acknowledged: usize = logged.iter().map(Vec::len).sum();
    assert_eq!(acknowledged, MACHINES * WRITES / 4);
    for (m, mine) in logged.iter().enumerate() {
        let prefix = format!("machine {m} ");
        let found: Vec<&str> = lines
            .iter()
            .copied()
            .filter(|l| l.starts_with(&prefix))
            .collect();
        let missing: Vec<&String> = mine
            .iter()
            .filter(|l| !lines.contains(&l.as_str()))
            .collect();
        assert!(
            missing.is_empty(),
            "{LOG}: machine {m}'s acknowledged appends are missing: {missing:?}"
        );
        assert_eq!(found, *mine, "{LOG}: machine {m}'s lines");
    }
    assert_eq!(lines.len(), acknowledged, "{LOG}");
    // The index view is consistent with the rows.
    let rows = HOT + MACHINES + 1;
    let entries = store.index_entries().await.unwrap();
    let scan = store.scan().await.unwrap();
    assert_eq!(entries.len(), rows);
    assert_eq!(scan.len(), rows);
    let index = store.load_index().await.unwrap();
    assert_eq!(index.content.lines().count(), rows);
    for h in &scan {
        assert!(index.content.contains(&format!("]({})", h.rel_path)));
    }
}

const WRITERS: usize = 4;
const PER_WRITER: usize = 50;

/// When the killer terminates every backend of the writers' store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kills {
    /// After every 10 completed writes, whatever is in flight then.
    EveryTenWrites,
    /// Whenever every writer still writing has completed a write since the last kill: a write
    /// interrupted by one kill is settled before the next, so one retry recovers it.
    Spaced,
}

/// One create: path, body, result.
type Outcome = (String, String, Result<PgWrite, StoreError>);

/// What [`write_while_killing`] leaves to check.
struct KillRun {
    /// The writers' store (its backends were killed).
    store: PgMemoryStore,
    /// Another store on the same project whose connections are never killed, for the checks.
    check: PgMemoryStore,
    outcomes: Vec<Outcome>,
    /// Kill rounds that terminated at least one backend.
    rounds: usize,
}

/// Four writers create 50 memories each through one store (pool of 4) while its backends are
/// terminated (`pg_terminate_backend`) as `kills` says.
async fn write_while_killing(schema: &TestSchema, kills: Kills) -> KillRun {
    let app = format!("memloop_kill_{}", &schema.name[13..21]);
    let store = PgMemoryStore::open(schema.config("p").application_name(&app).pool_size(4))
        .await
        .unwrap();
    let check = schema.open("p").await;
    let (progress_tx, mut progress_rx) = tokio::sync::mpsc::unbounded_channel::<usize>();
    let mut tasks = Vec::new();
    for t in 0..WRITERS {
        let (store, progress) = (store.clone(), progress_tx.clone());
        tasks.push(tokio::spawn(async move {
            let mut outcomes = Vec::new();
            for i in 0..PER_WRITER {
                let rel = format!("k{t}_{i}.md");
                let body = format!("writer {t} item {i}\n{}", "x".repeat(200));
                let r = store
                    .write_versioned(
                        &rel,
                        &doc("K", &body),
                        WriteMode::Overwrite,
                        Expected::Absent,
                    )
                    .await;
                outcomes.push((rel, body, r));
                let _ = progress.send(t);
            }
            outcomes
        }));
    }
    drop(progress_tx);
    let killer = tokio::spawn(async move {
        let admin = admin().await;
        let (mut done, mut rounds) = (0usize, 0usize);
        let mut written = [0usize; WRITERS];
        let mut moved = HashSet::new();
        while let Some(t) = progress_rx.recv().await {
            done += 1;
            written[t] += 1;
            moved.insert(t);
            let due = match kills {
                Kills::EveryTenWrites => done % 10 == 0,
                Kills::Spaced => {
                    (0..WRITERS).all(|w| moved.contains(&w) || written[w] == PER_WRITER)
                }
            };
            if !due {
                continue;
            }
            moved.clear();
            let n: i64 = admin
                .query_one(
                    "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
                     FROM pg_stat_activity WHERE application_name = $1",
                    &[&app],
                )
                .await
                .unwrap()
                .get(0);
            rounds += usize::from(n > 0);
        }
        rounds
    });
    let mut outcomes = Vec::new();
    for t in tasks {
        outcomes.extend(t.await.unwrap());
    }
    let rounds = killer.await.unwrap();
    KillRun {
        store,
        check,
        outcomes,
        rounds,
    }
}

/// The store whose backends were killed reconnects and keeps working; the project then holds
/// `expected` rows besides the new one.
async fn keeps_working(run: &KillRun, expected: usize) {
    run.store
        .write(
            "after.md",
            &doc("After", "still here"),
            WriteMode::Overwrite,
        )
        .await
        .unwrap();
    assert_eq!(run.check.scan().await.unwrap().len(), expected + 1);
}

/// Backends are terminated after every 10 completed writes while four writers create memories:
/// every write lands or is reported, none is applied twice or half-written, and the store keeps
/// working afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killed_connections_are_retried_or_reported_never_half_written() {
    let schema = TestSchema::new();
    let run = write_while_killing(&schema, Kills::EveryTenWrites).await;
    assert!(run.rounds > 0, "no backend was terminated");
    let (mut ok, mut reported, mut stray) = (0, 0, 0);
    for (rel, body, r) in &run.outcomes {
        let row = run.check.get(rel).await.unwrap();
        match r {
            Ok(w) => {
                ok += 1;
                let landed = row
                    .as_ref()
                    .unwrap_or_else(|| panic!("{rel} reported written but absent"));
                assert_eq!(w.version, 1);
                assert_eq!(landed.doc.body, format!("{body}\n"));
            }
            Err(e) => {
                reported += 1;
                assert!(
                    matches!(
                        e,
                        StoreError::Pg(PgError::ConnectionLost(_) | PgError::Connect(_))
                    ),
                    "{rel}: unexpected error {e}"
                );
                // Either absent or complete: never half-written. Present means the commit
                // reached the server before the connection died and every retry failed too.
                if let Some(row) = &row {
                    stray += 1;
                    assert_eq!(row.doc.body, format!("{body}\n"));
                }
            }
        }
        if let Some(row) = row {
            assert_eq!(row.version, 1, "{rel} applied twice");
            assert_eq!(row.sha256, sha256_hex(&row.content));
        }
    }
    assert_eq!(ok + reported, WRITERS * PER_WRITER);
    keeps_working(&run, ok + stray).await;
}

/// Backends are terminated again and again, but each kill only once every writer has completed
/// a write since the previous one, so no write meets more than one kill: the retries recover
/// every write it interrupts, and every write lands exactly once, whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_write_interrupted_by_one_kill_is_retried_and_lands_once() {
    let schema = TestSchema::new();
    let run = write_while_killing(&schema, Kills::Spaced).await;
    assert!(
        run.rounds >= 10,
        "only {} kill rounds terminated a backend",
        run.rounds
    );
    let reported: Vec<String> = run
        .outcomes
        .iter()
        .filter_map(|(rel, _, r)| r.as_ref().err().map(|e| format!("{rel}: {e}")))
        .collect();
    assert!(
        reported.is_empty(),
        "{} of {} writes were reported failed although a retry could recover each \
         ({} kill rounds): {reported:#?}",
        reported.len(),
        run.outcomes.len(),
        run.rounds
    );
    for (rel, body, _) in &run.outcomes {
        let row = run
            .check
            .get(rel)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{rel} reported written but absent"));
        assert_eq!(row.version, 1, "{rel} applied twice");
        assert_eq!(row.doc.body, format!("{body}\n"));
        assert_eq!(row.sha256, sha256_hex(&row.content));
    }
    keeps_working(&run, WRITERS * PER_WRITER).await;
}
