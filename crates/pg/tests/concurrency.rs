//! Reliability against the machine's PostgreSQL: eight "machines" (separate store instances with
//! their own pools) writing into one project, and connections killed mid-run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use memloop_memory::store::{MemoryDoc, MemoryStore, MemoryType, WriteMode};
use memloop_pg::{Expected, PgError, PgMemoryStore, StoreError, sha256_hex};
use std::collections::HashMap;
use std::sync::Arc;
use support::{TestSchema, admin};
use tokio::sync::Barrier;

const MACHINES: usize = 8;
const WRITES: usize = 100;
const HOT: usize = 5;

fn doc(name: &str, body: &str) -> MemoryDoc {
    MemoryDoc::new(name, "concurrency", MemoryType::Project, body)
}

#[derive(Default)]
struct Tally {
    landed: HashMap<String, i64>,
    conflicts: usize,
}

/// 8 machines × 100 writes. Even writes: read a shared "hot" memory and write it back based on
/// the version read (a lost update would show as a version that does not match the landed
/// count). Odd writes: append a line to the machine's own memory (every line must be there).
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
                    let expected = match store.get(&rel).await.unwrap() {
                        Some(cur) => Expected::Version(cur.version),
                        None => Expected::Absent,
                    };
                    let body = format!("machine {m} write {i}");
                    match store
                        .write_versioned(&rel, &doc("Hot", &body), WriteMode::Overwrite, expected)
                        .await
                    {
                        Ok(w) => {
                            assert!(w.changed);
                            *tally.landed.entry(rel).or_default() += 1;
                        }
                        Err(StoreError::Pg(PgError::Conflict { .. })) => tally.conflicts += 1,
                        Err(e) => panic!("write neither landed nor conflicted: {e}"),
                    }
                } else {
                    let rel = format!("machine{m}.md");
                    let line = MemoryDoc::new("", "", None, format!("line {i}"));
                    store
                        .write_versioned(&rel, &line, WriteMode::Append, Expected::Any)
                        .await
                        .unwrap();
                }
            }
            tally
        }));
    }
    let mut landed: HashMap<String, i64> = HashMap::new();
    let mut conflicts = 0;
    for t in tasks {
        let tally = t.await.unwrap();
        conflicts += tally.conflicts;
        for (k, v) in tally.landed {
            *landed.entry(k).or_default() += v;
        }
    }
    let store = schema.open("shared").await;
    // Every versioned write either landed or got a conflict; every landed one is counted in
    // the version (none was silently overwritten).
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
    // Appends on each machine's own memory: all 50 lines, in order.
    for m in 0..MACHINES {
        let body = store.read(&format!("machine{m}.md")).await.unwrap().body;
        let lines: Vec<&str> = body.lines().filter(|l| !l.is_empty()).collect();
        let want: Vec<String> = (0..WRITES)
            .filter(|i| i % 2 == 1)
            .map(|i| format!("line {i}"))
            .collect();
        assert_eq!(lines, want, "machine {m}");
    }
    // The index view is consistent with the rows.
    let entries = store.index_entries().await.unwrap();
    let scan = store.scan().await.unwrap();
    assert_eq!(entries.len(), HOT + MACHINES);
    assert_eq!(scan.len(), HOT + MACHINES);
    let index = store.load_index().await.unwrap();
    assert_eq!(index.content.lines().count(), HOT + MACHINES);
    for h in &scan {
        assert!(index.content.contains(&format!("]({})", h.rel_path)));
    }
}

/// Backends are terminated (`pg_terminate_backend`) while four writers create memories: every
/// write lands or is reported, none is applied twice or half-written, and the store keeps
/// working afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killed_connections_are_retried_or_reported_never_half_written() {
    let schema = TestSchema::new();
    let app = format!("memloop_kill_{}", &schema.name[13..21]);
    let store = PgMemoryStore::open(schema.config("p").application_name(&app).pool_size(4))
        .await
        .unwrap();
    let (progress_tx, mut progress_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let writers = 4;
    let per_writer = 50;
    let mut tasks = Vec::new();
    for t in 0..writers {
        let (store, progress) = (store.clone(), progress_tx.clone());
        tasks.push(tokio::spawn(async move {
            let mut outcomes = Vec::new();
            for i in 0..per_writer {
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
                let _ = progress.send(());
            }
            outcomes
        }));
    }
    drop(progress_tx);
    // The killer: after every 10 completed writes, terminate every backend of the store.
    let killer = tokio::spawn(async move {
        let admin = admin().await;
        let (mut done, mut killed) = (0usize, 0i64);
        while progress_rx.recv().await.is_some() {
            done += 1;
            if done % 10 == 0 {
                let n: i64 = admin
                    .query_one(
                        "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
                         FROM pg_stat_activity WHERE application_name = $1",
                        &[&app],
                    )
                    .await
                    .unwrap()
                    .get(0);
                killed += n;
            }
        }
        killed
    });
    let mut ok = 0;
    let mut reported = 0;
    let mut outcomes = Vec::new();
    for t in tasks {
        outcomes.extend(t.await.unwrap());
    }
    let killed = killer.await.unwrap();
    assert!(killed > 0, "no backend was terminated");
    for (rel, body, r) in &outcomes {
        let row = store.get(rel).await.unwrap();
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
                // Either absent or complete: never half-written.
                if let Some(row) = &row {
                    assert_eq!(row.doc.body, format!("{body}\n"));
                }
            }
        }
        if let Some(row) = row {
            assert_eq!(row.version, 1, "{rel} applied twice");
            assert_eq!(row.sha256, sha256_hex(&row.content));
        }
    }
    assert_eq!(ok + reported, writers * per_writer);
    // The store reconnects and keeps working.
    store
        .write(
            "after.md",
            &doc("After", "still here"),
            WriteMode::Overwrite,
        )
        .await
        .unwrap();
    assert_eq!(
        store.scan().await.unwrap().len(),
        ok + 1 + stray(&store, &outcomes).await
    );
}

/// Rows whose write was reported failed but that landed (the commit reached the server before
/// the connection died and every retry failed too).
async fn stray(
    store: &PgMemoryStore,
    outcomes: &[(String, String, Result<memloop_pg::PgWrite, StoreError>)],
) -> usize {
    let mut n = 0;
    for (rel, _, r) in outcomes {
        if r.is_err() && store.get(rel).await.unwrap().is_some() {
            n += 1;
        }
    }
    n
}
