//! `memloop mcp --http` (the built binary) with `MEMLOOP_LOG=debug` and `trace`: a refused
//! bearer token, the accepted one, and the text of a saved memory never appear in its log, on the
//! memory dir and (with the `postgres` feature) on the PostgreSQL team store, while the log does
//! hold the server's debug lines.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop_testkit::{McpCallError, McpHttp};
use serde_json::json;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufReadExt, BufReader};

const BIN: &str = env!("CARGO_BIN_EXE_memloop");
const TOKEN: &str = "accepted-token-Kq83nZ0pWm5vXy71";
const WRONG: &str = "refused-token-Jd92LxQ4bT6cRv08";
/// The text of the saved memory, and of a title and an update: none may be logged.
const BODY: &str = "Quokka-marmalade-7731 is the staging vault's rotation day";
const TITLE: &str = "Zebra-quartz-4410 rotation";
const UPDATED: &str = "Pangolin-sorbet-5582 moved the rotation to Friday";

/// The server's whole stderr, as it arrives.
type Log = Arc<Mutex<String>>;

async fn start(
    root: &Path,
    home: &Path,
    level: &str,
    database_url: Option<&str>,
) -> (
    tokio::process::Child,
    String,
    Log,
    tokio::task::JoinHandle<()>,
) {
    let tokens = home.join("tokens");
    std::fs::write(&tokens, format!("{TOKEN}\n")).unwrap();
    #[cfg(unix)]
    std::fs::set_permissions(&tokens, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("MEMLOOP_HOME", home.join("base"))
        .env("MEMLOOP_LOG", level)
        .arg("--project")
        .arg(root)
        .arg("mcp")
        .arg("--root")
        .arg(root)
        .args(["--http", "127.0.0.1:0", "--token-file"])
        .arg(&tokens)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(url) = database_url {
        cmd.env("MEMLOOP_DATABASE_URL", url);
    }
    let mut child = cmd.spawn().unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let log: Log = Arc::default();
    let url = loop {
        let line = tokio::time::timeout(std::time::Duration::from_secs(60), lines.next_line())
            .await
            .expect("the server prints its address")
            .unwrap()
            .expect("the server exited before listening");
        log.lock().unwrap().push_str(&format!("{line}\n"));
        if let Some(url) = line.strip_prefix("memloop: serving MCP on ") {
            break url.to_owned();
        }
    };
    let sink = log.clone();
    let reader = tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            sink.lock().unwrap().push_str(&format!("{line}\n"));
        }
    });
    (child, url, log, reader)
}

/// A refused token, then a session that saves, searches, loads and updates a memory, and sends
/// client text the MCP library logs verbatim.
async fn exercise(url: &str, project: &Path) {
    let refused = McpHttp::new(url)
        .with_token(WRONG)
        .with_protocol("2025-03-26")
        .initialize()
        .await;
    assert!(
        matches!(refused, Err(McpCallError::Status { status: 401, .. })),
        "{refused:?}"
    );
    // Stateless by default: no session id comes back, and each request stands alone.
    let mut client = McpHttp::new(url)
        .with_token(TOKEN)
        .with_protocol("2025-03-26");
    client.initialize().await.unwrap();
    let p = project.to_string_lossy();
    let saved = client
        .call(
            "context_save",
            json!({"project_path": p, "idempotency_key": "log-test-1", "entries": [
                {"type": "knowledge", "title": TITLE, "content": BODY}]}),
        )
        .await
        .unwrap();
    assert_eq!(saved["written"], 1, "{saved}");
    let path = saved["results"][0]["path"].as_str().unwrap().to_owned();
    let version = saved["results"][0]["version"].clone();
    let found = client
        .call(
            "context_search",
            json!({"project_path": p, "query": "quokka marmalade", "detail": "full"}),
        )
        .await
        .unwrap();
    assert!(
        found.to_string().contains("Quokka-marmalade-7731"),
        "{found}"
    );
    client
        .call("context_load", json!({"project_path": p, "detail": "full"}))
        .await
        .unwrap();
    let updated = client
        .call(
            "context_manage",
            json!({"project_path": p, "action": "update", "target": path,
                   "content": UPDATED, "expected_version": version}),
        )
        .await
        .unwrap();
    assert_eq!(updated["is_error"], false, "the update failed: {updated}");
    // Client text that the MCP library logs verbatim (an unknown method, a resource URI):
    // credentials in it never reach the log, whatever the level.
    client
        .request(&format!("tools/{CLIENT_KEY}"), json!({}))
        .await
        .unwrap();
    client
        .request(
            "resources/read",
            json!({"uri": format!("memloop://project/{CLIENT_KEY}/MEMORY.md")}),
        )
        .await
        .unwrap();
}

/// An AWS access key id a client puts in a method name and a resource URI.
const CLIENT_KEY: &str = "AKIAQ3EGV5XK7TZ2WPLM";

fn assert_clean(log: &str, level: &str) {
    assert!(
        log.contains("DEBUG"),
        "MEMLOOP_LOG={level} logged no debug line"
    );
    for (what, secret) in [
        ("the refused token", WRONG),
        ("the accepted token", TOKEN),
        ("the memory's text", "Quokka-marmalade-7731"),
        ("the memory's title", "Zebra-quartz-4410"),
        ("the updated text", "Pangolin-sorbet-5582"),
        ("a credential in a method name or URI", CLIENT_KEY),
    ] {
        if let Some(at) = log.find(secret) {
            let line = log[..at].rsplit('\n').next().unwrap_or_default();
            panic!(
                "MEMLOOP_LOG={level}: {what} is in the log: {}",
                &line.chars().take(300).collect::<String>()
            );
        }
    }
}

async fn no_secret_in_the_log(level: &str, database_url: Option<&str>) {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let (root, home) = (base.join("root"), base.join("home"));
    let project = root.join("vault");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let (mut child, url, log, reader) = start(&root, &home, level, database_url).await;
    exercise(&url, &project).await;
    child.kill().await.unwrap();
    child.wait().await.unwrap();
    // The pipe is closed: the reader ends once it has every line.
    reader.await.unwrap();
    let log = log.lock().unwrap().clone();
    assert_clean(&log, level);
}

#[tokio::test]
async fn debug_and_trace_logs_hold_no_token_and_no_memory_text() {
    for level in ["debug", "trace"] {
        no_secret_in_the_log(level, None).await;
    }
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn debug_and_trace_logs_hold_no_memory_text_on_the_team_store() {
    const PG: &str = "host=127.0.0.1 port=5432 user=root dbname=test";
    let schema = format!("memloop_logs_{}", std::process::id());
    let (admin, conn) = tokio_postgres::connect(PG, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    admin
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}"
        ))
        .await
        .unwrap();
    let url = format!("{PG} options='-c search_path={schema}'");
    for level in ["debug", "trace"] {
        no_secret_in_the_log(level, Some(&url)).await;
    }
    admin
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .unwrap();
}
