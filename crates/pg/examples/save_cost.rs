//! CPU per save next to CPU per search on the team store: the client process's CPU (this
//! process, from `/proc/self/stat`) and PostgreSQL's (the backends serving this example's
//! connections, found by `application_name` in `pg_stat_activity`, from `/proc/<pid>/stat`),
//! each divided by the number of operations.
//!
//! ```sh
//! cargo run --release -p memloop-pg --example save_cost -- "host=127.0.0.1 user=root dbname=test" 2000
//! ```
//!
//! A save is what `context_save` does with one entry on the team store: the read its plan
//! makes (the names at the entry's path and at the old naming rule's) and one keyed batch
//! ([`PgMemoryStore::write_batch`] with a fresh idempotency key: the key's row, the memory row,
//! its change-feed row, its full-text column). Half the saves create a memory, half replace
//! one. A search is what `context_search` asks of the database (the change feed since its
//! cursor), and, for comparison, a full-text search in the database
//! ([`PgMemoryStore::search`]). The example works in a schema of its own, dropped at the end;
//! it needs the backends' `/proc` entries (PostgreSQL on this machine).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use memloop_pg::{BatchOutcome, BatchWrite, IdempotencyKey, PgConfig, PgMemoryStore};
use memloop_store::{
    CheckedWrite, ExpectedVersion, MemoryDoc, MemoryStore, MemoryType, WriteLimits, WriteMode,
};
use std::time::{Duration, Instant};

const APP: &str = "memloop-save-cost";

/// utime + stime of `/proc/<pid>/stat`, in seconds.
fn proc_cpu(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start after the last `)`.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    // USER_HZ is 100 on Linux.
    Some(ticks / 100.0)
}

/// The CPU seconds of this process and of its PostgreSQL backends.
async fn cpu(admin: &tokio_postgres::Client) -> (f64, f64) {
    let rows = admin
        .query(
            "SELECT pid FROM pg_stat_activity WHERE application_name = $1",
            &[&APP],
        )
        .await
        .unwrap_or_default();
    let backends: f64 = rows
        .iter()
        .filter_map(|r| proc_cpu(&r.get::<_, i32>(0).to_string()))
        .sum();
    (proc_cpu("self").unwrap_or(0.0), backends)
}

fn doc(i: usize, round: usize) -> MemoryDoc {
    MemoryDoc::new(
        format!("Decision {i}"),
        format!("why we chose option {i} for the billing queue"),
        MemoryType::Project,
        format!(
            "Use one queue per tenant (round {round}); the shared queue starved small tenants \
             when a large one replayed its backlog. Revisit when tenants exceed {i}00.\n"
        ),
    )
}

struct Figures {
    what: &'static str,
    n: usize,
    wall: Duration,
    client: f64,
    server: f64,
}

impl Figures {
    fn print(&self) {
        let per = |s: f64| s * 1e3 / self.n as f64;
        println!(
            "{:<34} {:>6} ops  {:>7.3} ms wall/op  {:>6.3} ms client CPU/op  {:>6.3} ms PostgreSQL CPU/op",
            self.what,
            self.n,
            self.wall.as_secs_f64() * 1e3 / self.n as f64,
            per(self.client),
            per(self.server),
        );
    }
}

async fn measure<F, Fut>(
    admin: &tokio_postgres::Client,
    what: &'static str,
    n: usize,
    mut op: F,
) -> Figures
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let (c0, s0) = cpu(admin).await;
    let t = Instant::now();
    for i in 0..n {
        op(i).await;
    }
    let wall = t.elapsed();
    let (c1, s1) = cpu(admin).await;
    let f = Figures {
        what,
        n,
        wall,
        client: c1 - c0,
        server: s1 - s0,
    };
    f.print();
    f
}

async fn save(store: &PgMemoryStore, i: usize, round: usize, key: String) {
    let rel = format!("project/decision-{i}.md");
    // The plan's read: the names at the entry's path and the old naming rule's.
    let old = format!("project/decision_{i}.md");
    let _ = store.names(&[&rel, &old]).await;
    let write = CheckedWrite::check(
        &rel,
        &doc(i, round),
        WriteMode::Overwrite,
        WriteLimits::default(),
    )
    .unwrap_or_else(|e| panic!("checked: {e}"));
    let key = IdempotencyKey {
        caller: "bench".into(),
        key,
        request_sha256: format!("{round}-{i}"),
        ttl: memloop_pg::IDEMPOTENCY_TTL,
    };
    let out = store
        .write_batch(
            &[BatchWrite {
                write,
                expected: ExpectedVersion::Any,
            }],
            Some(&key),
            &|w| format!("{{\"written\":{}}}", w.len()),
        )
        .await
        .unwrap_or_else(|e| panic!("save {i}: {e}"));
    assert!(matches!(out, BatchOutcome::Written(_)), "save {i}: {out:?}");
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .unwrap_or_else(|| "host=127.0.0.1 user=root dbname=test".into());
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(2000);
    let schema = format!("memloop_save_cost_{}", std::process::id());
    let (admin, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("connect {url}: {e}"));
    tokio::spawn(conn);
    let store = PgMemoryStore::open(
        PgConfig::new(url.clone(), "github.com/acme/billing")
            .schema(&schema)
            .application_name(APP)
            .pool_size(1),
    )
    .await
    .unwrap_or_else(|e| panic!("open: {e}"));
    // 200 memories, as in the load run, and a warm connection.
    for i in 0..200 {
        save(&store, i, 0, format!("warm-{i}")).await;
    }
    println!("{n} operations each, one connection, schema {schema}");
    // New memories (200..200+n/2), then replacements of existing ones.
    let half = n / 2;
    measure(&admin, "save: create (2 reads + keyed batch)", half, |i| {
        save(&store, 200 + i, 1, format!("create-{i}"))
    })
    .await;
    measure(
        &admin,
        "save: replace (2 reads + keyed batch)",
        n - half,
        |i| save(&store, i % 200, 2 + i / 200, format!("replace-{i}")),
    )
    .await;
    let cursor = match store.changes(None).await {
        Ok(memloop_store::Changes::Rescan { cursor: Some(c) }) => c,
        other => panic!("changes: {other:?}"),
    };
    measure(&admin, "search: change feed since cursor", n, |_| async {
        let _ = store
            .changes(Some(&cursor))
            .await
            .unwrap_or_else(|e| panic!("changes: {e}"));
    })
    .await;
    measure(&admin, "search: full text in PostgreSQL", n, |i| {
        let store = &store;
        async move {
            let q = format!("tenant queue option {}", i % 300);
            let _ = store
                .search(&q, 5, &[])
                .await
                .unwrap_or_else(|e| panic!("search: {e}"));
        }
    })
    .await;
    drop(store);
    let _ = admin
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .await;
}
