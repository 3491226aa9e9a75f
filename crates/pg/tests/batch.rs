//! `PgMemoryStore::write_batch`: one transaction (a conflict on the last entry leaves the
//! first ones unwritten), idempotency keys (replayed, refused when reused for another request,
//! claimed afresh once expired, other keys' expired rows left to the sweep) and concurrent calls
//! with one key (one writes, the others wait and replay).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use memloop_pg::{BatchOutcome, BatchWrite, IDEMPOTENCY_TTL, IdempotencyKey, PgMemoryStore};
use memloop_store::{
    CheckedWrite, ExpectedVersion, MemoryDoc, MemoryError, MemoryType, VersionedWrite, WriteLimits,
    WriteMode, content_version,
};
use std::sync::Arc;
use std::time::Duration;
use support::{TestSchema, rel_paths};

fn write(rel: &str, body: &str, expected: ExpectedVersion) -> BatchWrite {
    let doc = MemoryDoc::new(rel, "a batch entry", MemoryType::Project, body);
    BatchWrite {
        write: CheckedWrite::check(rel, &doc, WriteMode::Overwrite, WriteLimits::default())
            .unwrap(),
        expected,
    }
}

fn key(key: &str, request: &str, ttl: Duration) -> IdempotencyKey {
    IdempotencyKey {
        caller: "caller-a".into(),
        key: key.into(),
        request_sha256: content_version(request),
        ttl,
    }
}

fn outcome(w: &[VersionedWrite]) -> String {
    w.iter()
        .map(|w| format!("{}={}", w.report.rel_path, w.version))
        .collect::<Vec<_>>()
        .join(",")
}

#[tokio::test]
async fn a_conflict_on_the_last_entry_writes_none_of_the_batch() {
    let schema = TestSchema::new();
    let store = schema.open("github.com/acme/billing").await;
    let first = store
        .write_batch(
            &[write(
                "decisions/queue.md",
                "one queue",
                ExpectedVersion::Absent,
            )],
            None,
            &outcome,
        )
        .await
        .unwrap();
    let BatchOutcome::Written(w) = first else {
        panic!("{first:?}")
    };
    let v1 = w[0].version.clone();
    assert_eq!(
        v1,
        content_version(&store.read("decisions/queue.md").await.unwrap().raw)
    );

    let stale = ExpectedVersion::Is(content_version("not what is stored"));
    let err = store
        .write_batch(
            &[
                write("knowledge/a.md", "a", ExpectedVersion::Absent),
                write("knowledge/b.md", "b", ExpectedVersion::Any),
                write("decisions/queue.md", "two queues", stale),
            ],
            None,
            &outcome,
        )
        .await
        .unwrap_err();
    let MemoryError::VersionConflict { path, current, .. } = MemoryError::from(err) else {
        panic!("not a conflict")
    };
    assert_eq!((path.as_str(), current), ("decisions/queue.md", v1.clone()));
    assert_eq!(rel_paths(&store).await, ["decisions/queue.md"]);
    assert!(
        store
            .read("decisions/queue.md")
            .await
            .unwrap()
            .body
            .contains("one queue")
    );

    // With the current version the same batch lands whole.
    let ok = store
        .write_batch(
            &[
                write("knowledge/a.md", "a", ExpectedVersion::Absent),
                write("knowledge/b.md", "b", ExpectedVersion::Any),
                write("decisions/queue.md", "two queues", ExpectedVersion::Is(v1)),
            ],
            None,
            &outcome,
        )
        .await
        .unwrap();
    assert!(
        matches!(ok, BatchOutcome::Written(ref w) if w.len() == 3),
        "{ok:?}"
    );
    assert_eq!(
        rel_paths(&store).await,
        ["decisions/queue.md", "knowledge/a.md", "knowledge/b.md"]
    );
}

#[tokio::test]
async fn a_key_replays_its_first_outcome_until_it_expires() {
    let schema = TestSchema::new();
    let store = schema.open("github.com/acme/billing").await;
    let batch = || [write("sessions/s1.md", "summary", ExpectedVersion::Any)];
    let k = key("k-1", "request one", IDEMPOTENCY_TTL);
    let BatchOutcome::Written(w) = store
        .write_batch(&batch(), Some(&k), &outcome)
        .await
        .unwrap()
    else {
        panic!("not written")
    };
    let recorded = outcome(&w);
    // A retry: the recorded outcome, and the row untouched (same version number).
    let version_before = store.get("sessions/s1.md").await.unwrap().unwrap().version;
    let again = store
        .write_batch(&batch(), Some(&k), &outcome)
        .await
        .unwrap();
    assert_eq!(again, BatchOutcome::Replayed(recorded));
    assert_eq!(
        store.get("sessions/s1.md").await.unwrap().unwrap().version,
        version_before
    );
    // The same key for another request.
    let other = key("k-1", "request two", IDEMPOTENCY_TTL);
    let reused = store
        .write_batch(
            &[write("sessions/s2.md", "other", ExpectedVersion::Any)],
            Some(&other),
            &outcome,
        )
        .await
        .unwrap();
    assert_eq!(reused, BatchOutcome::KeyReused);
    assert_eq!(rel_paths(&store).await, ["sessions/s1.md"]);

    // A key kept no time is expired at once: the next call with it claims it afresh.
    let brief = key("k-2", "request three", Duration::ZERO);
    let once = store
        .write_batch(
            &[write("sessions/s3.md", "three", ExpectedVersion::Any)],
            Some(&brief),
            &outcome,
        )
        .await
        .unwrap();
    assert!(matches!(once, BatchOutcome::Written(_)));
    let twice = store
        .write_batch(
            &[write("sessions/s3.md", "three again", ExpectedVersion::Any)],
            Some(&brief),
            &outcome,
        )
        .await
        .unwrap();
    assert!(matches!(twice, BatchOutcome::Written(_)), "{twice:?}");
    let rows: i64 = support::admin()
        .await
        .query_one(
            &format!("SELECT count(*) FROM {}.memloop_idempotency", schema.name),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        rows, 2,
        "k-1, and k-2 once (its expired row was taken afresh)"
    );
}

/// The idempotency rows of every project in `schema`: (project, key), sorted.
async fn key_rows(schema: &TestSchema) -> Vec<(String, String)> {
    support::admin()
        .await
        .query(
            &format!(
                "SELECT project_id, key FROM {}.memloop_idempotency ORDER BY 1, 2",
                schema.name
            ),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

fn rows(of: &[(&str, &str)]) -> Vec<(String, String)> {
    of.iter()
        .map(|(p, k)| ((*p).to_owned(), (*k).to_owned()))
        .collect()
}

#[tokio::test]
async fn an_expired_key_is_claimed_afresh_by_another_request() {
    let schema = TestSchema::new();
    let store = schema.open("github.com/acme/billing").await;
    let first = key("k", "request one", Duration::ZERO);
    let once = store
        .write_batch(
            &[write("sessions/a.md", "one", ExpectedVersion::Any)],
            Some(&first),
            &outcome,
        )
        .await
        .unwrap();
    assert!(matches!(once, BatchOutcome::Written(_)), "{once:?}");
    // Past its expiry the key no longer counts: another request with it writes, not refused as
    // reused, and the key now stands for that request (and its outcome) for its whole TTL.
    let second = key("k", "request two", IDEMPOTENCY_TTL);
    let BatchOutcome::Written(w) = store
        .write_batch(
            &[write("sessions/b.md", "two", ExpectedVersion::Any)],
            Some(&second),
            &outcome,
        )
        .await
        .unwrap()
    else {
        panic!("an expired key was not claimed afresh")
    };
    let again = store
        .write_batch(
            &[write("sessions/b.md", "two", ExpectedVersion::Any)],
            Some(&second),
            &outcome,
        )
        .await
        .unwrap();
    assert_eq!(again, BatchOutcome::Replayed(outcome(&w)));
    let reused = store
        .write_batch(
            &[write("sessions/a.md", "one", ExpectedVersion::Any)],
            Some(&first),
            &outcome,
        )
        .await
        .unwrap();
    assert_eq!(reused, BatchOutcome::KeyReused);
    assert_eq!(
        key_rows(&schema).await,
        rows(&[("github.com/acme/billing", "k")])
    );
}

#[tokio::test]
async fn a_save_leaves_other_keys_expired_rows_to_the_sweep() {
    let schema = TestSchema::new();
    let (p, q) = ("github.com/acme/billing", "github.com/acme/ledger");
    let billing = schema.open(p).await;
    let ledger = schema.open(q).await;
    for (store, k) in [(&billing, "old"), (&ledger, "q-old")] {
        let saved = store
            .write_batch(
                &[write(
                    "sessions/s.md",
                    "expired at once",
                    ExpectedVersion::Any,
                )],
                Some(&key(k, k, Duration::ZERO)),
                &outcome,
            )
            .await
            .unwrap();
        assert!(matches!(saved, BatchOutcome::Written(_)), "{saved:?}");
    }
    // A keyed save deals with its own key only: the project's expired `old` stays.
    let saved = billing
        .write_batch(
            &[write("sessions/t.md", "kept a day", ExpectedVersion::Any)],
            Some(&key("new", "new", IDEMPOTENCY_TTL)),
            &outcome,
        )
        .await
        .unwrap();
    assert!(matches!(saved, BatchOutcome::Written(_)), "{saved:?}");
    assert_eq!(
        key_rows(&schema).await,
        rows(&[(p, "new"), (p, "old"), (q, "q-old")])
    );
    // The sweep deletes the project's expired keys, not its live ones or another project's.
    assert_eq!(billing.sweep_expired_keys().await.unwrap(), 1);
    assert_eq!(key_rows(&schema).await, rows(&[(p, "new"), (q, "q-old")]));
    assert_eq!(billing.sweep_expired_keys().await.unwrap(), 0);
    // Opening a store sweeps its project.
    drop(schema.open(q).await);
    assert_eq!(key_rows(&schema).await, rows(&[(p, "new")]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_with_one_key_write_once() {
    const CALLS: usize = 6;
    let schema = TestSchema::new();
    let store = Arc::new(schema.open("github.com/acme/billing").await);
    // Every caller has its own connection: two stores per caller, as two servers would.
    let start = Arc::new(tokio::sync::Barrier::new(CALLS));
    let mut tasks = Vec::new();
    for _ in 0..CALLS {
        let config = store.config().clone();
        let start = start.clone();
        tasks.push(tokio::spawn(async move {
            let store = PgMemoryStore::open(config).await.unwrap();
            let k = key("same", "the request", IDEMPOTENCY_TTL);
            let batch = [
                write("changes/c.md", "one change", ExpectedVersion::Absent),
                write("todos/t.md", "one todo", ExpectedVersion::Absent),
            ];
            start.wait().await;
            store.write_batch(&batch, Some(&k), &outcome).await.unwrap()
        }));
    }
    let mut written = 0;
    let mut replayed = Vec::new();
    for t in tasks {
        match t.await.unwrap() {
            BatchOutcome::Written(_) => written += 1,
            BatchOutcome::Replayed(o) => replayed.push(o),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(written, 1);
    assert_eq!(replayed.len(), CALLS - 1);
    assert!(replayed.iter().all(|o| o.contains("changes/c.md=")));
    assert_eq!(rel_paths(&store).await, ["changes/c.md", "todos/t.md"]);
    assert_eq!(store.get("changes/c.md").await.unwrap().unwrap().version, 1);
}

/// Wait until a backend of `app` waits for a lock, or panic if `running` ends first.
async fn until_waiting<T: std::fmt::Debug>(
    admin: &tokio_postgres::Client,
    app: &str,
    running: &mut tokio::task::JoinHandle<T>,
) {
    let give_up = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let waiting: i64 = admin
            .query_one(
                "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
                 WHERE a.application_name = $1 AND NOT l.granted",
                &[&app],
            )
            .await
            .unwrap()
            .get(0);
        if waiting > 0 {
            return;
        }
        assert!(
            std::time::Instant::now() < give_up,
            "the batch never waited for a lock"
        );
        // The server sends no notice when a backend starts waiting: look again shortly.
        tokio::select! {
            done = &mut *running => panic!("the batch ended instead of waiting: {done:?}"),
            () = tokio::time::sleep(Duration::from_millis(5)) => {}
        }
    }
}

/// A row another writer creates between the batch's lock (which finds nothing) and its insert:
/// the insert waits for that writer, then fails; the batch is a conflict naming the row now
/// there, none of its entries and not its key land, and its connection (the pool's only one)
/// serves the next batch, whose key is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_created_under_the_batch_is_a_conflict_and_nothing_lands() {
    let schema = TestSchema::new();
    let project = "github.com/acme/billing";
    let app = format!("race-{}", uuid::Uuid::new_v4().simple());
    let store = PgMemoryStore::open(schema.config(project).application_name(&app).pool_size(1))
        .await
        .unwrap();
    let other = support::admin().await;
    let theirs = "---\nname: theirs\n---\ncreated by another writer\n";
    other
        .batch_execute(&format!(
            "BEGIN; INSERT INTO {}.memloop_memories (project_id, rel_path, name, description,
                 body, content, sha256, version, updated_by, write_id)
             VALUES ('{project}', 'knowledge/a.md', 'theirs', '', 'created by another writer',
                 $t${theirs}$t$, '{}', 1, 'other', gen_random_uuid())",
            schema.name,
            content_version(theirs)
        ))
        .await
        .unwrap();
    let k = key("raced", "the request", IDEMPOTENCY_TTL);
    let mut running = tokio::spawn({
        let (store, k) = (store.clone(), k.clone());
        async move {
            let batch = [
                write("knowledge/b.md", "b", ExpectedVersion::Absent),
                write("knowledge/a.md", "ours", ExpectedVersion::Absent),
            ];
            store.write_batch(&batch, Some(&k), &outcome).await
        }
    });
    until_waiting(&support::admin().await, &app, &mut running).await;
    other.batch_execute("COMMIT").await.unwrap();
    let err = running.await.unwrap().unwrap_err();
    let MemoryError::VersionConflict { path, current, .. } = MemoryError::from(err) else {
        panic!("not a conflict")
    };
    assert_eq!(
        (path.as_str(), current),
        ("knowledge/a.md", content_version(theirs))
    );
    assert_eq!(rel_paths(&store).await, ["knowledge/a.md"]);
    assert!(key_rows(&schema).await.is_empty(), "the key was recorded");

    // The same connection, out of the failed transaction: the key writes, once.
    let batch = [
        write("knowledge/b.md", "b", ExpectedVersion::Absent),
        write("knowledge/a.md", "ours", ExpectedVersion::Any),
    ];
    let again = store.write_batch(&batch, Some(&k), &outcome).await.unwrap();
    assert!(
        matches!(again, BatchOutcome::Written(ref w) if w.len() == 2),
        "{again:?}"
    );
    assert!(
        store
            .read("knowledge/a.md")
            .await
            .unwrap()
            .body
            .contains("ours")
    );
    assert_eq!(
        store.get("knowledge/a.md").await.unwrap().unwrap().version,
        2
    );
    let replay = store.write_batch(&batch, Some(&k), &outcome).await.unwrap();
    assert!(
        matches!(replay, BatchOutcome::Replayed(ref o) if o.contains("knowledge/a.md=")),
        "{replay:?}"
    );
}

/// A batch given up while it waits inside its transaction (its caller went away) leaves
/// nothing behind: not its writes, not its key's claim, and no transaction on a pooled
/// connection; a retry with the key writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_given_up_midway_leaves_its_key_free() {
    let schema = TestSchema::new();
    let project = "github.com/acme/billing";
    let app = format!("dropped-{}", uuid::Uuid::new_v4().simple());
    let store = PgMemoryStore::open(schema.config(project).application_name(&app).pool_size(1))
        .await
        .unwrap();
    let first = store
        .write_batch(
            &[write("knowledge/a.md", "first", ExpectedVersion::Absent)],
            None,
            &outcome,
        )
        .await
        .unwrap();
    assert!(matches!(first, BatchOutcome::Written(_)), "{first:?}");
    let other = support::admin().await;
    other
        .batch_execute(&format!(
            "BEGIN; SELECT 1 FROM {}.memloop_memories WHERE rel_path = 'knowledge/a.md' FOR UPDATE",
            schema.name
        ))
        .await
        .unwrap();
    let k = key("given-up", "the request", IDEMPOTENCY_TTL);
    let batch = || {
        [
            write("knowledge/b.md", "b", ExpectedVersion::Absent),
            write("knowledge/a.md", "second", ExpectedVersion::Any),
        ]
    };
    let mut running = tokio::spawn({
        let (store, k, batch) = (store.clone(), k.clone(), batch());
        async move { store.write_batch(&batch, Some(&k), &outcome).await }
    });
    until_waiting(&support::admin().await, &app, &mut running).await;
    running.abort();
    assert!(running.await.unwrap_err().is_cancelled());
    other.batch_execute("COMMIT").await.unwrap();

    let again = store
        .write_batch(&batch(), Some(&k), &outcome)
        .await
        .unwrap();
    assert!(
        matches!(again, BatchOutcome::Written(ref w) if w.len() == 2),
        "{again:?}"
    );
    assert_eq!(
        rel_paths(&store).await,
        ["knowledge/a.md", "knowledge/b.md"]
    );
    assert_eq!(
        store.get("knowledge/a.md").await.unwrap().unwrap().version,
        2
    );
    assert_eq!(key_rows(&schema).await, rows(&[(project, "given-up")]));
}

/// One path twice in a batch: the second write lands on the first, as two writes in a row
/// would (a new memory at version 2 holding the second text).
#[tokio::test]
async fn a_path_written_twice_in_one_batch_keeps_the_second_write() {
    let schema = TestSchema::new();
    let store = schema.open("github.com/acme/billing").await;
    let out = store
        .write_batch(
            &[
                write("knowledge/a.md", "first", ExpectedVersion::Absent),
                write("knowledge/a.md", "second", ExpectedVersion::Any),
            ],
            Some(&key("twice", "the request", IDEMPOTENCY_TTL)),
            &outcome,
        )
        .await
        .unwrap();
    let BatchOutcome::Written(w) = out else {
        panic!("{out:?}")
    };
    let stored = store.get("knowledge/a.md").await.unwrap().unwrap();
    assert_eq!(stored.version, 2);
    assert!(stored.doc.body.contains("second"), "{:?}", stored.doc.body);
    assert!(w[0].report.created && !w[1].report.created, "{w:?}");
    assert_eq!(w[1].version, content_version(&stored.content));
}
