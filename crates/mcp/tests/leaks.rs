//! What the server says about itself: no answer of any tool or resource names the database URL,
//! its host, port or user, or a server-side path (the memory dirs' home, the user's home), on
//! memory dirs, on PostgreSQL and on a database that does not answer, unless the server was
//! started to reveal its store (`reveal_store`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use memloop_mcp::{McpConfig, TeamStores};
use rmcp::model::{CallToolRequestParams, ReadResourceRequestParams};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use support::team::DropSchema;
use support::{Client, Fixture, connect, s};

/// Every answer (tool results, tool errors, protocol errors, resources) of a session that uses
/// every tool and action on `project`, as JSON text.
async fn every_answer(client: &Client, fx: &Fixture, project: &Path) -> Vec<String> {
    let p = s(project);
    let calls = [
        (
            "context_manage",
            json!({"project_path": p, "action": "init_project"}),
        ),
        (
            "context_save",
            json!({"project_path": p, "entries": [
                {"type": "decision", "title": "ledger", "content": "the ledger closes at five"},
                {"type": "todo", "title": "fix ci", "content": "the CI cache is stale"},
                {"type": "knowledge", "scope": "global", "title": "style", "content": "tabs, not spaces"}]}),
        ),
        ("context_load", json!({"project_path": p})),
        ("context_load", json!({"project_path": p, "detail": "full"})),
        (
            "context_search",
            json!({"project_path": p, "query": "ledger"}),
        ),
        (
            "context_manage",
            json!({"project_path": p, "action": "list"}),
        ),
        (
            "context_manage",
            json!({"project_path": p, "action": "update", "target": "decisions/ledger.md",
                   "content": "the ledger closes at six", "expected_version": "stale"}),
        ),
        (
            "context_manage",
            json!({"project_path": p, "action": "update", "target": "decisions/ledger.md",
                   "content": "the ledger closes at six"}),
        ),
        (
            "context_manage",
            json!({"project_path": p, "action": "delete", "target": "todos/nope.md"}),
        ),
        (
            "context_manage",
            json!({"project_path": p, "action": "delete", "target": "../../etc/passwd"}),
        ),
        (
            "context_save",
            json!({"project_path": p, "entries": [
                {"type": "knowledge", "title": "key", "content": "aws_secret_access_key = AKIAABCDEFGHIJKLMNOP/abcdefghijklmnopqrstuvwxyz0123"}]}),
        ),
        // Outside the served roots, and not a directory at all.
        ("context_load", json!({"project_path": s(&fx.base)})),
        (
            "context_load",
            json!({"project_path": s(&fx.base.join("missing"))}),
        ),
        (
            "context_search",
            json!({"project_path": "relative/path", "query": "x"}),
        ),
    ];
    let mut out = Vec::new();
    for (tool, args) in calls {
        let Value::Object(map) = args else {
            unreachable!()
        };
        let answer = client
            .call_tool(CallToolRequestParams::new(tool).with_arguments(map))
            .await;
        out.push(match answer {
            Ok(r) => serde_json::to_string(&r).unwrap(),
            Err(e) => e.to_string(),
        });
    }
    let resources = client.list_all_resources().await.unwrap();
    out.push(serde_json::to_string(&resources).unwrap());
    assert!(!resources.is_empty());
    for r in &resources {
        let read = client
            .read_resource(ReadResourceRequestParams::new(r.uri.clone()))
            .await;
        out.push(match read {
            Ok(r) => serde_json::to_string(&r).unwrap(),
            Err(e) => e.to_string(),
        });
    }
    out
}

/// The answers that contain any of `secrets`, with the secret found.
fn leaks<'a>(answers: &'a [String], secrets: &[&'a str]) -> Vec<(&'a str, &'a str)> {
    answers
        .iter()
        .flat_map(|a| {
            secrets
                .iter()
                .filter(|s| a.contains(**s))
                .map(move |s| (*s, a.as_str()))
        })
        .collect()
}

fn server_paths(fx: &Fixture) -> Vec<String> {
    vec![s(&fx.home), s(&fx.user_home)]
}

#[tokio::test]
async fn answers_on_memory_dirs_name_no_server_path_unless_revealed() {
    let fx = Fixture::new();
    let project = fx.project("app");
    let paths = server_paths(&fx);
    let mut secrets: Vec<&str> = paths.iter().map(String::as_str).collect();
    secrets.push("memory_dir");
    let answers = every_answer(&connect(fx.config()).await, &fx, &project).await;
    assert_eq!(leaks(&answers, &secrets), vec![]);
    assert!(
        answers[2].contains(r#"\"store\":\"files\""#),
        "{}",
        answers[2]
    );

    // Asked to, the server names its memory dirs.
    let mut config = fx.config();
    config.reveal_store = true;
    let revealed = every_answer(&connect(config).await, &fx, &project).await;
    assert!(!leaks(&revealed, &[s(&fx.home).as_str()]).is_empty());
}

fn team(fx: &Fixture, url: &str, schema: &str, reveal: bool) -> McpConfig {
    let mut config = fx.config();
    config.stores = Some(Arc::new(
        TeamStores::new(url, memloop_host::env::EnvVars::from_process()).schema(schema),
    ));
    config.reveal_store = reveal;
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_on_postgres_name_no_url_host_or_user_unless_revealed() {
    let fx = Fixture::new();
    let project = fx.project("app");
    let schema = format!("memloop_mcp_{}", uuid::Uuid::new_v4().simple());
    let _drop = DropSchema(schema.clone());
    let url = "postgres://root@127.0.0.1:5432/test";
    let paths = server_paths(&fx);
    let mut secrets: Vec<&str> = paths.iter().map(String::as_str).collect();
    secrets.extend([
        "postgres://",
        "root@",
        "127.0.0.1",
        ":5432",
        "memory_dir",
        &schema,
    ]);
    let answers = every_answer(
        &connect(team(&fx, url, &schema, false)).await,
        &fx,
        &project,
    )
    .await;
    assert_eq!(leaks(&answers, &secrets), vec![]);
    assert!(
        answers[2].contains(r#"\"store\":\"postgres\""#),
        "{}",
        answers[2]
    );
    assert!(answers[1].contains(r#"\"written\":3"#), "{}", answers[1]);

    let revealed = every_answer(&connect(team(&fx, url, &schema, true)).await, &fx, &project).await;
    assert!(!leaks(&revealed, &["root@127.0.0.1"]).is_empty());
}

#[tokio::test]
async fn a_database_that_does_not_answer_is_reported_without_its_address() {
    let fx = Fixture::new();
    let project = fx.project("app");
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port().to_string()
    };
    let url = format!("postgres://root@127.0.0.1:{port}/test");
    let paths = server_paths(&fx);
    let mut secrets: Vec<&str> = paths.iter().map(String::as_str).collect();
    secrets.extend(["postgres://", "root@", "127.0.0.1", &port]);
    let answers = every_answer(
        &connect(team(&fx, &url, "public", false)).await,
        &fx,
        &project,
    )
    .await;
    assert_eq!(leaks(&answers, &secrets), vec![]);
    assert!(
        answers[2].contains(r#"\"available\":false"#),
        "{}",
        answers[2]
    );
    assert!(
        answers[2].contains("postgres store is unavailable"),
        "{}",
        answers[2]
    );
}
