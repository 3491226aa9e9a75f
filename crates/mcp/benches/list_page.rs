#![allow(missing_docs)] // criterion_group! generates undocumented items
//! One `context_manage list` page (the first, one from the middle through its cursor, and the
//! first of one folder) and one `context_load`, on the memory dir, through the real server and
//! rmcp's client over an in-process pipe, with 100 and 10,000 memories. Both projects hold the
//! same 100 memories in the folders `context_load` shows (sessions, todos, decisions,
//! knowledge); the larger one holds 9,900 more under `archive/`. So the answers of the load and
//! of the folder page are the same at both sizes, and their cost should be too: the header
//! cache keeps each folder newest first and the paths in order, updated with each change, so a
//! call costs its answer (a first page holds 100 memories at both sizes).
//!
//! The same on the team store (PostgreSQL on 127.0.0.1:5432, a schema of its own): the index
//! lines' count is kept at write time and `load_index` reads the first 200 lines.
//!
//! `cargo bench -p memloop-mcp --features postgres --bench list_page -- --warm-up-time 1 --measurement-time 3`

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use memloop_pg::PgMemoryStore;
use memloop_store::{MemoryDoc, MemoryType};
use serde_json::{Value, json};
use std::path::Path;

// The tests' fixture and in-process client (the real server over a pipe, rmcp's client).
#[path = "../tests/support/mod.rs"]
#[allow(missing_docs)]
mod support;

use std::sync::Arc;
use support::team::TestTeam;
use support::{Client, Fixture, call, connect};

/// Memory `i`: the first 100 in the folders `context_load` shows, the rest under `archive/`.
fn memory(i: usize) -> (String, MemoryDoc) {
    let doc = MemoryDoc::new(
        format!("Решение {i}: 数据库 café"),
        format!("Почему выбрали вариант {i}; 原因 {i}"),
        MemoryType::Project,
        format!("Текст решения {i}."),
    );
    let folder = if i < 100 {
        ["decisions", "knowledge", "todos", "sessions"][i % 4]
    } else {
        "archive"
    };
    (format!("{folder}/m{i:05}.md"), doc)
}

/// `n` memories in the project's memory dir (after `init_project`).
async fn fill(fx: &Fixture, client: &Client, project: &Path, n: usize) {
    let init = call(
        client,
        "context_manage",
        json!({"project_path": project.to_string_lossy(), "action": "init_project",
               "claude_md": false}),
    )
    .await;
    assert_eq!(init["is_error"], false, "{init}");
    support::fill(fx, project, n, memory).await;
}

/// `n` memories in the project's team store, written straight through it (batches of 500).
async fn fill_team(team: &TestTeam, project: &Path, n: usize) {
    let Ok(store) = PgMemoryStore::open(team.config(project)).await else {
        return;
    };
    support::write_all(&store, n, memory).await;
}

async fn list(client: &Client, project: &Path, cursor: Option<&str>) -> Value {
    list_in(client, project, None, cursor).await
}

async fn list_in(
    client: &Client,
    project: &Path,
    target: Option<&str>,
    cursor: Option<&str>,
) -> Value {
    let mut args = json!({"project_path": project.to_string_lossy(), "action": "list"});
    if let Some(t) = target {
        args["target"] = json!(t);
    }
    if let Some(c) = cursor {
        args["cursor"] = json!(c);
    }
    let r = call(client, "context_manage", args).await;
    assert_eq!(r["is_error"], false, "{r}");
    r
}

fn bench_list_page(c: &mut Criterion) {
    let rt = support::bench_runtime();
    for backend in ["files", "postgres"] {
        let mut group = c.benchmark_group(format!("list_page_{backend}"));
        for memories in [100usize, 10_000] {
            let fx = Fixture::new();
            let project = fx.project("bench");
            let mut config = fx.config();
            let team = (backend == "postgres").then(TestTeam::new);
            if let Some(team) = &team {
                config.stores = Some(team.clone() as Arc<dyn memloop_mcp::ProjectStores>);
            }
            let client = rt.block_on(connect(config));
            match &team {
                Some(team) => rt.block_on(fill_team(team, &project, memories)),
                None => rt.block_on(fill(&fx, &client, &project, memories)),
            }
            // A cursor into the middle of the list (the first page's, when there is one page).
            let middle = rt.block_on(async {
                let mut cursor: Option<String> = None;
                for _ in 0..memories / 200 {
                    let page = list(&client, &project, cursor.as_deref()).await;
                    cursor = page["nextCursor"].as_str().map(str::to_owned);
                }
                cursor
            });
            group.bench_function(BenchmarkId::new("first_page", memories), |b| {
                b.iter(|| rt.block_on(list(&client, &project, None)));
            });
            group.bench_function(BenchmarkId::new("middle_page", memories), |b| {
                b.iter(|| rt.block_on(list(&client, &project, middle.as_deref())));
            });
            group.bench_function(BenchmarkId::new("folder_page", memories), |b| {
                b.iter(|| {
                    rt.block_on(async {
                        let page = list_in(&client, &project, Some("decisions/"), None).await;
                        assert_eq!(page["total"], 25, "{page}");
                    })
                });
            });
            group.bench_function(BenchmarkId::new("context_load", memories), |b| {
                b.iter(|| {
                    rt.block_on(async {
                        let r = call(
                            &client,
                            "context_load",
                            json!({"project_path": project.to_string_lossy()}),
                        )
                        .await;
                        assert_eq!(r["is_error"], false, "{r}");
                        assert!(r.get("cut").is_none(), "{r}");
                    })
                });
            });
        }
        group.finish();
    }
}

criterion_group!(benches, bench_list_page);
criterion_main!(benches);
