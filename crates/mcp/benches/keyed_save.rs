#![allow(missing_docs)] // criterion_group! generates undocumented items
//! One keyed `context_save` (one decision, a new idempotency key each time) on the memory dir,
//! through the real server and rmcp's client over an in-process pipe, with 0 and 3,000
//! idempotency keys already recorded: a keyed save reads and writes its own key record only,
//! so both cost the same (expired records are swept at most once an hour, not on every save).
//!
//! `cargo bench -p memloop-mcp --bench keyed_save -- --warm-up-time 1 --measurement-time 5`

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use memloop_mcp::{McpConfig, McpLimits, MemoryServer};
use memloop_store::env::EnvVars;
use rmcp::{RoleClient, ServiceExt, model::CallToolRequestParams, service::RunningService};
use serde_json::json;
use std::path::{Path, PathBuf};

type Client = RunningService<RoleClient, ()>;

/// A server over a fresh root and home, and a project under the root.
async fn serve(base: &Path) -> Option<(Client, PathBuf)> {
    let (root, home, user) = (base.join("root"), base.join("home"), base.join("user"));
    let project = root.join("billing");
    for d in [&project, &home, &user] {
        std::fs::create_dir_all(d).ok()?;
    }
    let config = McpConfig {
        roots: vec![root],
        allow_any_project: false,
        env: EnvVars::from_pairs([
            ("MEMLOOP_HOME", home.to_string_lossy().into_owned()),
            ("HOME", user.to_string_lossy().into_owned()),
        ]),
        claude: false,
        memory_dir: None,
        limits: McpLimits::default(),
        no_claude_md: false,
        embedder: None,
        summaries: Default::default(),
        stores: None,
    };
    let (client_io, server_io) = tokio::io::duplex(1 << 22);
    let server = MemoryServer::new(config);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(tokio::io::split(server_io)).await {
            let _ = running.waiting().await;
        }
    });
    let client = ().serve(tokio::io::split(client_io)).await.ok()?;
    Some((client, project))
}

/// One keyed save of one decision (the same title each time: the memory count stays put).
async fn save(client: &Client, project: &Path, key: usize) {
    let args = json!({
        "project_path": project.to_string_lossy(),
        "idempotency_key": format!("bench-{key}"),
        "entries": [{"type": "decision", "title": "Billing queue",
                     "content": format!("Use one queue per tenant (round {key}).")}],
    });
    let serde_json::Value::Object(map) = args else {
        return;
    };
    let r = client
        .call_tool(CallToolRequestParams::new("context_save").with_arguments(map))
        .await;
    assert!(
        r.is_ok_and(|r| r.is_error != Some(true)),
        "save {key} failed"
    );
}

fn bench_keyed_save(c: &mut Criterion) {
    let Ok(rt) = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    else {
        return;
    };
    let mut group = c.benchmark_group("keyed_save");
    for existing in [0usize, 3_000] {
        let Ok(tmp) = tempfile::tempdir() else { return };
        let Some((client, project)) = rt.block_on(serve(tmp.path())) else {
            return;
        };
        rt.block_on(async {
            for key in 0..existing {
                save(&client, &project, key).await;
            }
        });
        let mut next = existing;
        group.bench_function(BenchmarkId::new("existing_keys", existing), |b| {
            b.iter(|| {
                next += 1;
                rt.block_on(save(&client, &project, next));
            });
        });
    }
    group.finish();
}

criterion_group!(benches, bench_keyed_save);
criterion_main!(benches);
