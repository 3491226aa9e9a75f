//! Shared test support: a fresh schema per test on the machine's PostgreSQL, dropped on drop
//! (also when the test fails).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use memloop_files::FileMemoryStore;
use memloop_pg::{PgConfig, PgMemoryStore, TeamSync};
use memloop_store::{MemoryDoc, MemoryType, WriteMode};

/// The machine's PostgreSQL (trust auth).
pub const URL: &str = "host=127.0.0.1 port=5432 user=root dbname=test";

/// A schema with a random name, dropped (cascade) when the guard goes.
pub struct TestSchema {
    pub name: String,
}

impl TestSchema {
    pub fn new() -> Self {
        Self {
            name: format!("memloop_test_{}", uuid::Uuid::new_v4().simple()),
        }
    }

    pub fn config(&self, project: &str) -> PgConfig {
        PgConfig::new(URL, project)
            .schema(&self.name)
            .writer(format!("test@{project}"))
    }

    pub async fn open(&self, project: &str) -> PgMemoryStore {
        PgMemoryStore::open(self.config(project)).await.unwrap()
    }
}

/// Write `(path, name, description, body)` project memories, overwriting.
pub async fn write_memories(store: &PgMemoryStore, mems: &[(&str, &str, &str, &str)]) {
    for &(rel, name, desc, body) in mems {
        store
            .write(
                rel,
                &MemoryDoc::new(name, desc, MemoryType::Project, body),
                WriteMode::Overwrite,
            )
            .await
            .unwrap();
    }
}

/// A project memory named `name` with `body`, as the sync tests write them.
pub fn sync_doc(name: &str, body: &str) -> MemoryDoc {
    MemoryDoc::new(name, format!("about {name}"), MemoryType::Project, body)
}

/// One teammate's machine: a memory dir (`sub` in a tempdir) synced with the team store of
/// project `acme/api` in `schema`.
pub struct Machine {
    _dir: tempfile::TempDir,
    pub local: FileMemoryStore,
    pub sync: TeamSync,
}

/// A [`Machine`] whose memory dir is `sub`.
pub async fn sync_machine(schema: &TestSchema, sub: &str) -> Machine {
    let dir = tempfile::tempdir().unwrap();
    let local = FileMemoryStore::open(dir.path().join(sub)).unwrap();
    let team = schema.open("acme/api").await;
    Machine {
        sync: TeamSync::new(local.clone(), team),
        local,
        _dir: dir,
    }
}

/// The paths of `store`'s memories, sorted.
pub async fn rel_paths(store: &PgMemoryStore) -> Vec<String> {
    use memloop_store::MemoryStore;
    let mut paths: Vec<String> = store
        .scan()
        .await
        .unwrap()
        .into_iter()
        .map(|h| h.rel_path)
        .collect();
    paths.sort();
    paths
}

/// A plain connection for assertions and admin statements.
pub async fn admin() -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(URL, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
}

impl Drop for TestSchema {
    fn drop(&mut self) {
        let name = self.name.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let (c, conn) = tokio_postgres::connect(URL, tokio_postgres::NoTls).await?;
                tokio::spawn(conn);
                // Bounded: a test that panicked while its own transaction still holds a lock
                // in the schema must fail, not hang on its cleanup.
                c.batch_execute(&format!(
                    "SET lock_timeout = '10s'; DROP SCHEMA IF EXISTS {name} CASCADE"
                ))
                .await
            })
        })
        .join();
    }
}
