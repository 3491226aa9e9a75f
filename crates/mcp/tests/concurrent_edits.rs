//! Concurrent edits through MCP are never lost: two members (two servers, as two processes
//! would be, each with its own store over the same memories) edit one entry; an update or save
//! based on a version that is no longer current is refused with the current version, on the
//! file store and on the PostgreSQL team store alike, with Japanese and Chinese text.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use memloop_mcp::{McpConfig, OpenFuture, Project, ProjectStores};
use memloop_pg::{PgConfig, PgMemoryStore};
use memloop_store::{MemoryError, MemoryStore, WriteLimits};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use support::{Client, Fixture, call, connect, s, save};

const URL: &str = "host=127.0.0.1 port=5432 user=root dbname=test";

/// The team store in a schema of its own (dropped when the test ends), one store per project
/// path, opened afresh by each server.
struct TestTeam {
    schema: String,
}

impl ProjectStores for TestTeam {
    fn describe(&self) -> String {
        format!("postgres:test?schema={}", self.schema)
    }

    fn kind(&self) -> &'static str {
        "postgres"
    }

    fn open<'a>(&'a self, project: &'a Project, limits: WriteLimits) -> OpenFuture<'a> {
        Box::pin(async move {
            let config = PgConfig::for_project_dir(URL, &project.path)
                .schema(&self.schema)
                .write_limits(limits);
            let store = PgMemoryStore::open(config)
                .await
                .map_err(MemoryError::from)?;
            Ok(Arc::new(store) as Arc<dyn MemoryStore>)
        })
    }
}

impl Drop for TestTeam {
    fn drop(&mut self) {
        let sql = format!("DROP SCHEMA IF EXISTS {} CASCADE", self.schema);
        let _ = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(async {
                    let (c, conn) = tokio_postgres::connect(URL, tokio_postgres::NoTls).await?;
                    tokio::spawn(conn);
                    c.batch_execute(&sql).await
                })
        })
        .join();
    }
}

fn team() -> Arc<TestTeam> {
    Arc::new(TestTeam {
        schema: format!("memloop_mcp_{}", uuid::Uuid::new_v4().simple()),
    })
}

fn with_stores(fx: &Fixture, stores: Option<Arc<TestTeam>>) -> McpConfig {
    let mut c = fx.config();
    c.stores = stores.map(|t| t as Arc<dyn ProjectStores>);
    c
}

/// The `version` of `path` in a `context_search` answer for `query`.
async fn searched_version(client: &Client, project: &Path, query: &str, path: &str) -> String {
    let r = call(
        client,
        "context_search",
        json!({ "project_path": s(project), "query": query, "detail": "full" }),
    )
    .await;
    let hit = r["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["path"] == path)
        .unwrap_or_else(|| panic!("{path} not found: {r}"));
    hit["version"].as_str().unwrap().to_owned()
}

async fn update(client: &Client, project: &Path, target: &str, content: &str, v: Value) -> Value {
    call(
        client,
        "context_manage",
        json!({ "project_path": s(project), "action": "update", "target": target,
                "content": content, "expected_version": v }),
    )
    .await
}

async fn body(client: &Client, project: &Path, query: &str) -> String {
    let r = call(
        client,
        "context_search",
        json!({ "project_path": s(project), "query": query, "detail": "full" }),
    )
    .await;
    r["results"][0]["content"].as_str().unwrap().to_owned()
}

async fn two_members_never_lose_an_edit(stores: Option<Arc<TestTeam>>) {
    let fx = Fixture::new();
    let project = fx.project("アプリ");
    let alice = connect(with_stores(&fx, stores.clone())).await;
    let bob = connect(with_stores(&fx, stores.clone())).await;

    // Alice records a decision; the answer gives its version.
    let saved = save(
        &alice,
        &project,
        json!([{ "type": "decision", "title": "データベース選定",
                 "content": "本番データベースは PostgreSQL 16 を使う。" }]),
    )
    .await;
    let rel = saved["results"][0]["path"].as_str().unwrap().to_owned();
    let v0 = saved["results"][0]["version"].as_str().unwrap().to_owned();
    assert_eq!(v0.len(), 64, "{saved}");

    // Both read it: the same version, the SHA-256 of the stored text.
    assert_eq!(
        searched_version(&bob, &project, "データベース", &rel).await,
        v0
    );

    // Alice updates it first.
    let a = update(
        &alice,
        &project,
        &rel,
        "本番データベースは PostgreSQL 17 に上げる。",
        json!(v0),
    )
    .await;
    assert_eq!(a["is_error"], false, "{a}");
    let v1 = a["version"].as_str().unwrap().to_owned();
    assert_eq!(a["previous_version"], v0.as_str());
    assert_ne!(v1, v0);

    // Bob's update is based on v0, which he read before Alice's change: refused, naming v1.
    let b = update(&bob, &project, &rel, "数据库改用 MySQL 8。", json!(v0)).await;
    assert_eq!(b["is_error"], true, "{b}");
    assert_eq!(b["code"], "version_conflict", "{b}");
    assert_eq!(b["current_version"], v1.as_str(), "{b}");
    assert_eq!(b["expected_version"], v0.as_str(), "{b}");
    assert!(b["reason"].as_str().unwrap().contains(&v1), "{b}");
    // Alice's text is intact, for both.
    for c in [&alice, &bob] {
        assert!(
            body(c, &project, "データベース")
                .await
                .contains("PostgreSQL 17")
        );
    }

    // Bob re-reads (v1), merges and retries: accepted.
    let current = searched_version(&bob, &project, "データベース", &rel).await;
    assert_eq!(current, v1);
    let b = update(
        &bob,
        &project,
        &rel,
        "本番は PostgreSQL 17。数据库备份每天一次。",
        json!(current.to_uppercase()),
    )
    .await;
    assert_eq!(b["is_error"], false, "{b}");
    let v2 = b["version"].as_str().unwrap().to_owned();
    assert!(
        body(&alice, &project, "データベース")
            .await
            .contains("数据库备份")
    );
    assert_eq!(
        searched_version(&alice, &project, "データベース", &rel).await,
        v2
    );

    // An update without a version (the original `target` + `content` schema) applies to the
    // memory as it is now, and says which version it replaced.
    let none = call(
        &alice,
        "context_manage",
        json!({ "project_path": s(&project), "action": "update", "target": rel,
                "content": "本番は PostgreSQL 17。数据库备份每天一次。Backups at 02:00." }),
    )
    .await;
    assert_eq!(none["is_error"], false, "{none}");
    assert_eq!(none["previous_version"], v2.as_str(), "{none}");
    let v2 = none["version"].as_str().unwrap().to_owned();
    assert!(body(&bob, &project, "データベース").await.contains("02:00"));
    // Something that is not a version is refused.
    let junk = update(&alice, &project, &rel, "上書き", json!("v2")).await;
    assert_eq!(junk["is_error"], true, "{junk}");

    // A save that replaces the entry with a stale expected_version is refused per entry, with
    // the current version; one with the current version replaces it.
    let stale = save(
        &bob,
        &project,
        json!([{ "type": "decision", "title": "データベース選定",
                 "content": "数据库换成 SQLite。", "expected_version": v1 }]),
    )
    .await;
    let r = &stale["results"][0];
    assert_eq!(
        (&r["status"], &r["code"]),
        (&json!("refused"), &json!("version_conflict")),
        "{stale}"
    );
    assert!(r["reason"].as_str().unwrap().contains(&v2), "{stale}");
    let fresh = save(
        &bob,
        &project,
        json!([{ "type": "decision", "title": "データベース選定",
                 "content": "本番は PostgreSQL 17、数据库每小时备份。", "expected_version": v2 }]),
    )
    .await;
    assert_eq!(fresh["results"][0]["status"], "written", "{fresh}");
    assert_eq!(fresh["results"][0]["replaced"], true, "{fresh}");
    let v3 = fresh["results"][0]["version"].as_str().unwrap().to_owned();

    // Both members update from v3 at the same moment: exactly one wins, the other is told the
    // winner's version; the stored text is the winner's, whole.
    let (x, y) = tokio::join!(
        update(
            &alice,
            &project,
            &rel,
            "アリスの版: 東京リージョン。",
            json!(v3)
        ),
        update(&bob, &project, &rel, "鲍勃的版本：上海区域。", json!(v3)),
    );
    let (won, lost, text) = match (x["is_error"].as_bool(), y["is_error"].as_bool()) {
        (Some(false), Some(true)) => (x, y, "東京リージョン"),
        (Some(true), Some(false)) => (y, x, "上海区域"),
        _ => panic!("exactly one update must win: {x} / {y}"),
    };
    assert_eq!(lost["code"], "version_conflict", "{lost}");
    assert_eq!(lost["current_version"], won["version"], "{lost}");
    let stored = body(&alice, &project, "データベース").await;
    assert!(stored.contains(text), "{stored}");
    assert_eq!(
        searched_version(&bob, &project, "データベース", &rel).await,
        won["version"].as_str().unwrap()
    );
}

#[tokio::test]
async fn two_members_never_lose_an_edit_on_the_file_store() {
    two_members_never_lose_an_edit(None).await;
}

#[tokio::test]
async fn two_members_never_lose_an_edit_on_postgres() {
    two_members_never_lose_an_edit(Some(team())).await;
}
