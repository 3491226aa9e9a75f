//! Replicas behind a real load balancer: HAProxy (Debian's `haproxy`; `.ci/run` installs it)
//! round-robin per request in front of three `memloop mcp --http` processes on one PostgreSQL
//! schema, health-checking `/health`.
//!
//! - One client's requests on one keep-alive connection are answered by every replica in turn.
//! - The MCP Python SDK works through it: 1.x (protocol 2025-06-18, with the handshake) and 2.x
//!   in both the protocols it speaks (2026-07-28, stateless; and the handshake of 2025-11-25).
//! - The load client works through it, in both protocol eras, and when one replica is killed
//!   (SIGKILL) under load no acknowledged save is lost and none lands twice: each save carries
//!   an idempotency key and is retried with it.
//! - A save acknowledged by one replica is found by a search answered by another.
#![cfg(all(unix, feature = "postgres"))]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

#[path = "support/replicas.rs"]
mod replicas;

use memloop_testkit::{
    LoadOp, LoadPlan, LoadProgress, McpHttp, read_back, read_your_writes, run_load, skip_unless_ci,
};
use replicas::{Backend, Haproxy, Schema, Server, admin, answer_dropper, haproxy_available};
use serde_json::json;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

const TOKEN: &str = "balancer-token-0123456789abcdef";

/// Three replicas on one schema, HAProxy in front, a project under the served root.
struct Deployment {
    replicas: Vec<Server>,
    haproxy: Haproxy,
    project: PathBuf,
    schema: Schema,
    _tmp: tempfile::TempDir,
}

impl Deployment {
    async fn start() -> Option<Self> {
        Self::start_with(false).await
    }

    /// With `lossy`, replica 0 is reached through [`answer_dropper`]: every answer it gives is
    /// lost after it carried the request out.
    async fn start_with(lossy: bool) -> Option<Self> {
        if !haproxy_available() {
            skip_unless_ci("haproxy is not installed (`.ci/run` installs Debian's haproxy)");
            return None;
        }
        let schema = Schema::new("balancer").await;
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        let (root, home) = (base.join("root"), base.join("home"));
        let project = root.join("billing-service");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let tokens = base.join("tokens");
        std::fs::write(&tokens, format!("{TOKEN}\n")).unwrap();
        // A token file others may read is refused.
        let private = std::os::unix::fs::PermissionsExt::from_mode(0o600);
        std::fs::set_permissions(&tokens, private).unwrap();
        let tokens = tokens.to_str().unwrap().to_owned();
        // No rate limit: the load below is one token, spread over three replicas.
        let extra = ["--token-file", &tokens, "--token-rate", "0"];
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let mut replicas = Vec::new();
        for _ in 0..3 {
            replicas.push(Server::start_with(&schema.url(), &root, &home, any, &extra).await);
        }
        let mut backends: Vec<Backend> = replicas.iter().map(|r| Backend::from(r.addr)).collect();
        if lossy {
            backends[0].traffic = answer_dropper(replicas[0].addr).await;
        }
        let haproxy = Haproxy::start(&base, &backends).await;
        Some(Self {
            replicas,
            haproxy,
            project,
            schema,
            _tmp: tmp,
        })
    }

    fn project(&self) -> String {
        self.project.to_str().unwrap().to_owned()
    }

    /// A load run through HAProxy in the project: `clients` clients of `mix`, each stopping
    /// after `operations` or at `limit`.
    fn plan(
        &self,
        protocol: &str,
        clients: usize,
        mix: &str,
        operations: usize,
        limit: Duration,
    ) -> LoadPlan {
        LoadPlan {
            url: self.haproxy.url(),
            token: Some(TOKEN.into()),
            protocol: protocol.into(),
            projects: vec![self.project()],
            clients,
            mix: LoadOp::parse_mix(mix).unwrap(),
            duration: limit,
            operations_per_client: Some(operations),
        }
    }

    fn client(&self, url: &str, protocol: &str) -> McpHttp {
        McpHttp::new(url).with_token(TOKEN).with_protocol(protocol)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_keep_alive_client_is_answered_by_every_replica_in_turn() {
    let Some(d) = Deployment::start().await else {
        return;
    };
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(1)
        .build()
        .unwrap();
    let mut answered = Vec::new();
    for id in 0..6 {
        let r = http
            .post(d.haproxy.url())
            .bearer_auth(TOKEN)
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", "2025-06-18")
            .json(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let replica = r.headers()["x-replica"].to_str().unwrap().to_owned();
        assert!(r.text().await.unwrap().contains("context_save"));
        answered.push(replica);
    }
    // Round-robin per request, not per connection: three distinct replicas, each twice.
    let mut distinct = answered.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct, ["r0", "r1", "r2"], "{answered:?}");
    assert_ne!(answered[0], answered[1], "{answered:?}");
}

/// Run `script` with `python` against the balancer; false when the SDK is not installed there.
async fn python(python: &str, script: &str, d: &Deployment, extra: &[&str]) -> bool {
    let probe = tokio::process::Command::new(python)
        .args(["-c", "import mcp"])
        .output()
        .await;
    if !probe.is_ok_and(|o| o.status.success()) {
        return false;
    }
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../mcp/tests/python")
        .join(script);
    let out = tokio::process::Command::new(python)
        .arg(&script)
        .arg(d.haproxy.url())
        .arg(TOKEN)
        .arg(d.project())
        .args(extra)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{} {extra:?} failed through HAProxy:\nstdout: {}\nstderr: {}",
        script.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_works_through_haproxy_in_every_protocol_it_speaks() {
    let Some(d) = Deployment::start().await else {
        return;
    };
    let v1 = std::env::var("MEMLOOP_MCP_PYTHON").unwrap_or_else(|_| "python3".into());
    if !python(&v1, "http_session.py", &d, &[]).await {
        skip_unless_ci(format!(
            "the MCP Python SDK 1.x is not available (`.ci/run` installs it; MEMLOOP_MCP_PYTHON={v1})"
        ));
    }
    let v2 = std::env::var("MEMLOOP_MCP2_PYTHON").unwrap_or_else(|_| "python3".into());
    for mode in ["2026-07-28", "legacy"] {
        if !python(&v2, "http_client_v2.py", &d, &[mode]).await {
            skip_unless_ci(format!(
                "the MCP Python SDK 2.x is not available (`.ci/run` installs it; MEMLOOP_MCP2_PYTHON={v2})"
            ));
            return;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_load_client_works_through_haproxy_in_both_protocol_eras() {
    let Some(d) = Deployment::start().await else {
        return;
    };
    for protocol in ["2025-06-18", "2026-07-28"] {
        let plan = d.plan(
            protocol,
            4,
            "search=2,save=1,load=1,manage=1",
            15,
            Duration::from_secs(120),
        );
        let report = run_load(plan, Arc::new(LoadProgress::default()))
            .await
            .unwrap();
        assert!(report.errors.is_empty(), "{protocol}: {:?}", report.errors);
        assert_eq!(report.operations(), 60, "{protocol}");
        assert_eq!(report.saved.len(), 12, "{protocol}");
        let back = read_back(&mut d.client(&d.haproxy.url(), protocol), &report.saved).await;
        assert!(back.lost.is_empty(), "{protocol}: lost {:?}", back.lost);
        assert!(
            back.duplicated.is_empty(),
            "{protocol}: {:?}",
            back.duplicated
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_under_load_loses_no_acknowledged_save_and_doubles_none() {
    let Some(mut d) = Deployment::start().await else {
        return;
    };
    let plan = d.plan(
        "2025-06-18",
        8,
        "search=1,save=1",
        40,
        Duration::from_secs(300),
    );
    let progress = Arc::new(LoadProgress::default());
    let load = tokio::spawn(run_load(plan, progress.clone()));
    // Once a fifth of the saves are acknowledged, SIGKILL one replica: its requests in flight
    // get no answer, and HAProxy marks it down after its health checks fail.
    progress.saves_reach(32).await;
    d.replicas[1].child.kill().await.unwrap();
    let report = load.await.unwrap().unwrap();
    eprintln!(
        "replica killed under load: {} operations, {} saves acknowledged, {} calls sent again",
        report.operations(),
        report.saved.len(),
        report.retries
    );
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(report.saved.len(), 160);
    let back = read_back(&mut d.client(&d.haproxy.url(), "2025-06-18"), &report.saved).await;
    assert!(back.lost.is_empty(), "lost: {:?}", back.lost);
    assert!(back.duplicated.is_empty(), "twice: {:?}", back.duplicated);

    // In the database: one row per acknowledged save, written once.
    assert_each_written_once(&d, &report.saved).await;
}

/// Count the rows whose body holds each acknowledged marker, and their versions: one row each,
/// written once.
async fn assert_each_written_once(d: &Deployment, saved: &[memloop_testkit::SavedEntry]) {
    let db = admin().await;
    for entry in saved {
        let rows = db
            .query(
                &format!(
                    "SELECT version FROM {}.memloop_memories WHERE body LIKE $1",
                    d.schema.name
                ),
                &[&format!("%{}%", entry.marker)],
            )
            .await
            .unwrap();
        let versions: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
        assert_eq!(versions, [1], "{}", entry.marker);
    }
    let load_rows: i64 = db
        .query_one(
            &format!(
                "SELECT count(*) FROM {}.memloop_memories WHERE name LIKE 'load lc%'",
                d.schema.name
            ),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(load_rows as usize, saved.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_save_whose_answer_was_lost_lands_once_when_retried_through_another_replica() {
    // Replica 0 carries out every request it gets and its answer never arrives: the balancer
    // answers 502, and the client sends the save again, with its key, to the next replica.
    let Some(d) = Deployment::start_with(true).await else {
        return;
    };
    let plan = d.plan("2026-07-28", 3, "save=1", 15, Duration::from_secs(300));
    let report = run_load(plan, Arc::new(LoadProgress::default()))
        .await
        .unwrap();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(report.saved.len(), 45);
    // About a third of the calls reached replica 0, which saved the entry: sent again, each of
    // them got that first outcome back instead of a second write.
    assert!(report.retries >= 5, "{} calls sent again", report.retries);
    assert!(report.replayed >= 5, "{} answers replayed", report.replayed);
    let back = read_back(
        &mut d.client(&d.replicas[1].url(), "2026-07-28"),
        &report.saved,
    )
    .await;
    assert!(back.lost.is_empty(), "lost: {:?}", back.lost);
    assert!(back.duplicated.is_empty(), "twice: {:?}", back.duplicated);
    assert_each_written_once(&d, &report.saved).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_save_answered_by_one_replica_is_found_through_another() {
    let Some(d) = Deployment::start().await else {
        return;
    };
    for protocol in ["2025-06-18", "2026-07-28"] {
        for (w, r) in [(0, 1), (1, 2), (2, 0)] {
            let mut write = d.client(&d.replicas[w].url(), protocol);
            let mut read = d.client(&d.replicas[r].url(), protocol);
            // Read once first: the reading replica has the project's caches open and must
            // follow the other replica's write.
            read.call(
                "context_search",
                json!({"project_path": d.project(), "query": "anything"}),
            )
            .await
            .unwrap();
            let delays = read_your_writes(
                &mut write,
                &mut read,
                &d.project(),
                10,
                Duration::from_secs(10),
            )
            .await
            .unwrap_or_else(|e| panic!("{protocol} r{w} -> r{r}: {e}"));
            assert_eq!(delays.len(), 10);
        }
    }
}
