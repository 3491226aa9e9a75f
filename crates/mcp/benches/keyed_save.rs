#![allow(missing_docs)] // criterion_group! generates undocumented items
//! One keyed `context_save` (one decision, a new idempotency key each time) on the memory dir,
//! through the real server and rmcp's client over an in-process pipe, with 0 and 3,000
//! idempotency keys already recorded: a keyed save reads and writes its own key record only,
//! so both cost the same (expired records are swept at most once an hour, not on every save).
//!
//! `cargo bench -p memloop-mcp --features postgres --bench keyed_save -- --warm-up-time 1 --measurement-time 5`

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use serde_json::json;
use std::path::Path;

// The tests' fixture and in-process client (the real server over a pipe, rmcp's client).
#[path = "../tests/support/mod.rs"]
#[allow(missing_docs)]
mod support;

use support::{Client, Fixture, call, connect};

/// One keyed save of one decision (the same title each time: the memory count stays put).
async fn save(client: &Client, project: &Path, key: usize) {
    let r = call(
        client,
        "context_save",
        json!({
            "project_path": project.to_string_lossy(),
            "idempotency_key": format!("bench-{key}"),
            "entries": [{"type": "decision", "title": "Billing queue",
                         "content": format!("Use one queue per tenant (round {key}).")}],
        }),
    )
    .await;
    assert_eq!(r["is_error"], false, "save {key}: {r}");
}

fn bench_keyed_save(c: &mut Criterion) {
    let rt = support::bench_runtime();
    let mut group = c.benchmark_group("keyed_save");
    for existing in [0usize, 3_000] {
        let fx = Fixture::new();
        let project = fx.project("billing");
        let client = rt.block_on(connect(fx.config()));
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
