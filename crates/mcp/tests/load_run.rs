//! The load run's small version (the full one is `bash crates/mcp/load/run.sh`, see
//! docs/benchmarks.md): 4 clients of the official MCP Python SDK x 20 mixed operations
//! (tests/python/load_run.py) against two servers on one PostgreSQL database, each with its own
//! connection pool under its own `application_name`, while a `psql` session terminates both
//! servers' database connections every 100 ms. Every operation completes (transient failures
//! retried, saves with idempotency keys), and every acknowledged write reads back through the
//! servers as acknowledged: none lost, none stale, no delete undone, nothing else there.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod support;

use memloop_mcp::Tokens;
use support::team::{DropSchema, TestTeam, URL as PG};
use support::{Fixture, s};
const TOKEN: &str = "load-run-token-0123456789";

/// The Python with the MCP SDK, or `None` (skipped outside CI) when there is none or no `psql`.
fn python() -> Option<String> {
    let python = std::env::var("MEMLOOP_MCP_PYTHON").unwrap_or_else(|_| "python3".into());
    let sdk = std::process::Command::new(&python)
        .args(["-c", "import mcp.client.streamable_http"])
        .output()
        .is_ok_and(|o| o.status.success());
    let psql = std::process::Command::new("psql")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !sdk || !psql {
        memloop_testkit::skip_unless_ci(format!(
            "the load run needs the MCP Python SDK (`.ci/run` installs it; \
             MEMLOOP_MCP_PYTHON={python}: {}) and psql ({})",
            if sdk { "found" } else { "missing" },
            if psql { "found" } else { "missing" },
        ));
        return None;
    }
    Some(python)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sdk_clients_on_two_servers_lose_no_acknowledged_write_while_connections_are_killed() {
    let Some(python) = python() else {
        return;
    };
    let fx = Fixture::new();
    let run = uuid::Uuid::new_v4().simple().to_string();
    let schema = format!("memloop_loadtest_{run}");
    let _drop = DropSchema(schema.clone());
    let apps = [
        format!("memloop-load-{run}-a"),
        format!("memloop-load-{run}-b"),
    ];
    let tokens = Tokens::parse(TOKEN).unwrap();
    let mut servers = Vec::new();
    for app in &apps {
        let mut config = fx.config();
        config.stores = Some(TestTeam::sharing(&schema, app));
        servers.push(support::start_http_config(config, Some(tokens.clone()), None).await);
    }
    let root = fx.root.join("load");
    let figures = fx.base.join("figures.json");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/load_run.py");
    let run = tokio::process::Command::new(&python)
        .arg(&script)
        .args(["--url", &servers[0].url, "--url", &servers[1].url])
        .args(["--token", TOKEN, "--root", &s(&root)])
        .args(["--clients", "4", "--ops", "20", "--processes", "1"])
        .args([
            "--pg",
            PG,
            "--kill-apps",
            &apps.join(","),
            "--kill-every",
            "0.05",
        ])
        .args(["--label", "test", "--json", &s(&figures)])
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(std::time::Duration::from_secs(120), run)
        .await
        .expect("the load run took over 2 minutes")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}");
    let report = format!(
        "stdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let f: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&figures).unwrap_or_default())
            .unwrap_or_else(|e| panic!("no figures ({e}):\n{report}"));
    assert_eq!(f["operations"], 80, "{report}");
    assert_eq!(f["failed"], 0, "operations failed:\n{report}");
    for problem in ["lost", "stale", "resurrected", "unexpected"] {
        assert_eq!(f[problem], 0, "{problem} writes:\n{report}");
    }
    assert!(
        f["acknowledged_writes"].as_u64().unwrap_or(0) > 10,
        "{report}"
    );
    assert!(
        f["connections_terminated"].as_u64().unwrap_or(0) > 0,
        "no connection was terminated:\n{report}"
    );
    assert!(out.status.success(), "{report}");
}
