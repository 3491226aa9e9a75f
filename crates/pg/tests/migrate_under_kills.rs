//! `PgMemoryStore::open` on a fresh schema while the store's backends are terminated
//! (`pg_terminate_backend`): a lost connection is retried (until the open's deadline, not only
//! `retries` times), and each migration version commits on its own, so progress accumulates
//! across attempts and the open finishes with the schema at the newest version.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use memloop_pg::{PgError, PgMemoryStore};
use memloop_store::{MemoryDoc, MemoryType, WriteMode};
use std::time::{Duration, Instant};
use support::{TestSchema, admin};
use tokio::task::JoinHandle;

/// The advisory lock every migration transaction takes first (`migrations.rs`); the tests hold
/// it to stop the open at the start of a version.
const MIGRATION_LOCK: i64 = 7_377_002;

/// How often the storm test terminates the store's backends.
const KILL_EVERY: Duration = Duration::from_millis(50);

/// The tests here hold the migration lock, which is the whole database's: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

type Opening = JoinHandle<Result<PgMemoryStore, PgError>>;

/// Open `schema`'s store for project `p` under the application name `app`, in the background.
fn open(schema: &TestSchema, app: &str) -> Opening {
    tokio::spawn(PgMemoryStore::open(
        schema.config("p").application_name(app),
    ))
}

/// An application name of the test's own, so only its store's backends are terminated.
fn app_name(schema: &TestSchema, test: &str) -> String {
    format!("memloop_{test}_{}", &schema.name[13..21])
}

/// Terminate every backend named `app` and wait until they are gone (their locks with them);
/// how many there were.
async fn terminate(admin: &tokio_postgres::Client, app: &str) -> i64 {
    admin
        .query_one(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 10000))
             FROM pg_stat_activity WHERE application_name = $1",
            &[&app],
        )
        .await
        .unwrap()
        .get(0)
}

/// Wait until a backend named `app` waits for a lock (inside a migration transaction); panic
/// if the open returns first.
async fn until_waiting_for_lock(admin: &tokio_postgres::Client, app: &str, opening: &mut Opening) {
    let give_up = Instant::now() + Duration::from_secs(30);
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
        assert!(Instant::now() < give_up, "the open never waited for a lock");
        // The server sends no notice when a backend starts waiting: look again shortly.
        tokio::select! {
            opened = &mut *opening => panic!(
                "the open returned instead of waiting for a lock: {:?}",
                opened.unwrap().map(|_| "a store")
            ),
            () = tokio::time::sleep(Duration::from_millis(5)) => {}
        }
    }
}

/// The versions recorded in `schema`'s migrations table, in order (none before it exists).
async fn versions(schema: &TestSchema) -> Vec<i32> {
    let admin = admin().await;
    let table = format!("{}.memloop_schema_migrations", schema.name);
    let exists: bool = admin
        .query_one("SELECT to_regclass($1) IS NOT NULL", &[&table])
        .await
        .unwrap()
        .get(0);
    if !exists {
        return Vec::new();
    }
    admin
        .query(
            &format!("SELECT version FROM {table} ORDER BY version"),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// What a fresh schema records when nothing interferes: every version this build knows.
async fn all_versions() -> Vec<i32> {
    let reference = TestSchema::new();
    drop(reference.open("p").await);
    let all = versions(&reference).await;
    assert!(!all.is_empty());
    all
}

/// A write and a read through `store`.
async fn works(store: &PgMemoryStore) {
    let doc = MemoryDoc::new(
        "Queue",
        "the deploy queue",
        MemoryType::Project,
        "one queue",
    );
    store
        .write("decisions/queue.md", &doc, WriteMode::Overwrite)
        .await
        .unwrap();
    assert_eq!(
        store.read("decisions/queue.md").await.unwrap().body,
        "one queue\n"
    );
}

/// The open is killed inside the transaction of every version (and retried more times than
/// `retries`): each time it resumes with the versions before it kept, none applied twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_inside_a_migration_keeps_the_versions_before_it() {
    let _serial = SERIAL.lock().await;
    let all = all_versions().await;
    let schema = TestSchema::new();
    let app = app_name(&schema, "mstep");
    // `locker` holds the migration lock and lets the open through one version at a time.
    let (locker, watcher) = (admin().await, admin().await);
    locker
        .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
        .await
        .unwrap();
    let mut opening = open(&schema, &app);
    for applied in 0..all.len() {
        until_waiting_for_lock(&watcher, &app, &mut opening).await;
        assert_eq!(versions(&schema).await, all[..applied]);
        assert!(terminate(&watcher, &app).await > 0);
        until_waiting_for_lock(&watcher, &app, &mut opening).await;
        assert_eq!(
            versions(&schema).await,
            all[..applied],
            "the kill undid or skipped a version"
        );
        // The open is first in the lock's queue: released, the lock is its own at once, and
        // `locker` has it back when the open's version commits.
        locker
            .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
            .await
            .unwrap();
        locker
            .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
            .await
            .unwrap();
    }
    // Every version applied: the open's last look finds nothing to do.
    until_waiting_for_lock(&watcher, &app, &mut opening).await;
    locker
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
        .await
        .unwrap();
    let store = opening.await.unwrap().unwrap();
    assert_eq!(versions(&schema).await, all);
    works(&store).await;
}

/// Every backend of the store is terminated every 50 ms while it opens, the first time inside
/// a statement of its first migration: the open finishes with every version applied once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_migrates_a_fresh_schema_while_its_backends_are_killed() {
    let _serial = SERIAL.lock().await;
    let all = all_versions().await;
    let schema = TestSchema::new();
    let app = app_name(&schema, "mkill");
    let admin = admin().await;
    // The first kill lands inside migration 1's `CREATE TABLE memloop_memories`, which waits
    // for this uncommitted table of the same name.
    let mut blocker = support::admin().await;
    blocker
        .batch_execute(&format!("CREATE SCHEMA {}", schema.name))
        .await
        .unwrap();
    let blocking = blocker.transaction().await.unwrap();
    blocking
        .batch_execute(&format!(
            "CREATE TABLE {}.memloop_memories (placeholder int)",
            schema.name
        ))
        .await
        .unwrap();
    let mut opening = open(&schema, &app);
    until_waiting_for_lock(&admin, &app, &mut opening).await;
    let mut killed = terminate(&admin, &app).await;
    assert!(killed > 0);
    blocking.rollback().await.unwrap();
    // Then every backend of the store again and again until the open returns.
    let mut tick = tokio::time::interval(KILL_EVERY);
    let (mut rounds, started) = (0u32, Instant::now());
    let opened = loop {
        tokio::select! {
            opened = &mut opening => break opened.unwrap(),
            _ = tick.tick() => {
                killed += terminate(&admin, &app).await;
                rounds += 1;
            }
        }
    };
    let store = opened.unwrap_or_else(|e| {
        panic!(
            "open failed while its backends were killed ({killed} backends, {rounds} rounds \
             in {:?}): {e}",
            started.elapsed()
        )
    });
    assert_eq!(versions(&schema).await, all, "every version recorded once");
    works(&store).await;
}
