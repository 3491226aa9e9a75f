//! `memloop mcp` driven by real clients: the official MCP Python SDK (script in
//! `crates/mcp/tests/python/`), rmcp's client, raw JSON-RPC lines, and 20 concurrent clients.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]
// Some tests need Unix (symlinks, socket pairs) and are compiled out elsewhere, with their helpers.
#![cfg_attr(not(unix), allow(dead_code, unused_imports))]

use rmcp::{
    RoleClient, ServiceExt,
    model::{CallToolRequestParams, ReadResourceRequestParams},
    service::RunningService,
    transport::TokioChildProcess,
};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const BIN: &str = env!("CARGO_BIN_EXE_memloop");

/// A project dir and a `MEMLOOP_HOME`, both temporary.
struct Fixture {
    _tmp: tempfile::TempDir,
    project: PathBuf,
    home: PathBuf,
    outside: PathBuf,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let (project, home, outside) = (root.join("proj"), root.join("home"), root.join("outside"));
    for d in [&project, &home, &outside] {
        std::fs::create_dir_all(d).unwrap();
    }
    Fixture {
        _tmp: tmp,
        project,
        home,
        outside,
    }
}

fn server_command(fx: &Fixture) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.arg("--project")
        .arg(&fx.project)
        .arg("mcp")
        // The tests compare answers with the files on disk: the answers name the memory dir.
        .arg("--reveal-store")
        .env("MEMLOOP_HOME", &fx.home)
        .env_remove("MEMLOOP_MEMORY_DIR")
        .env("MEMLOOP_LOG", "error");
    cmd
}

async fn connect(fx: &Fixture) -> RunningService<RoleClient, ()> {
    let transport = TokioChildProcess::new(server_command(fx)).unwrap();
    ().serve(transport).await.unwrap()
}

async fn call(client: &RunningService<RoleClient, ()>, tool: &'static str, args: Value) -> Value {
    let Value::Object(map) = args else {
        panic!("arguments must be an object")
    };
    let result = client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(map))
        .await
        .unwrap();
    let mut v = result.structured_content.expect("structured result");
    v["is_error"] = json!(result.is_error.unwrap_or(false));
    v
}

fn project_str(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

#[tokio::test]
async fn python_sdk_client_session() {
    let fx = fixture();
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../mcp/tests/python/client_session.py");
    // `.ci/run` installs the SDK into a virtualenv with pinned dependencies and names its python.
    let python = std::env::var("MEMLOOP_MCP_PYTHON").unwrap_or_else(|_| "python3".into());
    let probe = std::process::Command::new(&python)
        .args(["-c", "import mcp.client.stdio"])
        .output();
    match probe {
        Ok(out) if out.status.success() => {}
        other => {
            let why = match other {
                Ok(out) => String::from_utf8_lossy(&out.stderr).into_owned(),
                Err(e) => e.to_string(),
            };
            memloop_testkit::skip_unless_ci(format!(
                "the MCP Python SDK is not available (`.ci/run` installs it; \
                 MEMLOOP_MCP_PYTHON={python}): {why}"
            ));
            return;
        }
    }
    let out = tokio::process::Command::new(&python)
        .arg(&script)
        .arg(BIN)
        .arg(&fx.project)
        .arg(&fx.home)
        .arg(&fx.outside)
        .env("MEMLOOP_LOG", "error")
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "python client failed:\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("all checks passed"));
}

#[tokio::test]
async fn rmcp_client_round_trip() {
    let fx = fixture();
    let client = connect(&fx).await;
    let mut names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "context_load",
            "context_manage",
            "context_save",
            "context_search"
        ]
    );
    let p = project_str(&fx.project);
    let entries = json!([
        {"type": "decision", "title": "Queue", "content": "Use NATS for the job queue."},
        {"type": "todo", "content": "Write the NATS runbook"},
        {"type": "change", "content": "password = hunter2hunter2"},
    ]);
    // A batch is saved whole or not at all: the credential refuses all three.
    let refused = call(
        &client,
        "context_save",
        json!({"project_path": p, "entries": entries}),
    )
    .await;
    assert_eq!(refused["is_error"], true, "{refused}");
    assert_eq!(refused["written"], 0, "{refused}");
    assert_eq!(refused["results"][2]["status"], "refused");
    let saved = call(
        &client,
        "context_save",
        json!({"project_path": p, "entries": [entries[0], entries[1]]}),
    )
    .await;
    assert_eq!(saved["written"], 2, "{saved}");
    let found = call(
        &client,
        "context_search",
        json!({"project_path": p, "query": "job queue nats"}),
    )
    .await;
    assert_eq!(found["results"][0]["path"], "decisions/queue.md", "{found}");
    assert!(found["results"][0]["score"].as_f64().unwrap() > 0.0);
    // The same files the CLI and the library see.
    let dir = PathBuf::from(found["project"]["memory_dir"].as_str().unwrap());
    assert!(dir.starts_with(&fx.home));
    let index = std::fs::read_to_string(dir.join("MEMORY.md")).unwrap();
    assert!(index.contains("decisions/queue.md") && index.contains("todos/"));
    let id = found["project"]["id"].as_str().unwrap().to_owned();
    let read = client
        .read_resource(ReadResourceRequestParams::new(format!(
            "memloop://project/{id}/MEMORY.md"
        )))
        .await
        .unwrap();
    let text = serde_json::to_value(&read.contents[0]).unwrap();
    assert_eq!(text["text"].as_str().unwrap().trim_end(), index.trim_end());
    let outside = call(
        &client,
        "context_load",
        json!({"project_path": project_str(&fx.outside)}),
    )
    .await;
    assert_eq!(outside["is_error"], true, "{outside}");
    client.cancel().await.unwrap();
}

/// `memloop mcp` over stdio pipes, spoken to in raw JSON-RPC lines, past its `initialize`.
async fn initialized_raw_server(
    fx: &Fixture,
) -> (
    tokio::process::Child,
    tokio::process::ChildStdin,
    tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
) {
    let mut child = server_command(fx)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    stdin
        .write_all(format!("{init}\n").as_bytes())
        .await
        .unwrap();
    let first: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(first["id"], 1);
    (child, stdin, lines)
}

/// A line that is not JSON and an unknown method do not stop the server; the unknown method
/// gets a JSON-RPC error.
#[tokio::test]
async fn malformed_requests_get_errors_and_the_server_keeps_serving() {
    let fx = fixture();
    let (mut child, mut stdin, mut lines) = initialized_raw_server(&fx).await;
    let send = |v: &str| format!("{v}\n");
    for line in [
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        "{this is not json",
        r#"{"jsonrpc":"2.0","id":2,"method":"no/such/method"}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#,
    ] {
        stdin.write_all(send(line).as_bytes()).await.unwrap();
    }
    let mut by_id = std::collections::HashMap::new();
    while by_id.len() < 2 {
        let v: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        by_id.insert(v["id"].as_i64().unwrap(), v);
    }
    assert_eq!(by_id[&2]["error"]["code"], -32601);
    assert_eq!(by_id[&3]["result"]["tools"].as_array().unwrap().len(), 4);
    drop(stdin);
    assert!(child.wait().await.unwrap().success());
}

/// The server turns transparent huge pages off for itself (the allocator would otherwise have
/// the kernel zero a 2 MiB page each time it touches memory it gave back): once it answers,
/// the kernel reports THP off for the process.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn the_server_runs_without_transparent_huge_pages() {
    let fx = fixture();
    let (mut child, stdin, _lines) = initialized_raw_server(&fx).await;
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id().unwrap())).unwrap();
    let thp = status
        .lines()
        .find_map(|l| l.strip_prefix("THP_enabled:"))
        .expect("the kernel reports THP_enabled (Linux 5.0 and later)");
    assert_eq!(thp.trim(), "0", "{status}");
    drop(stdin);
    assert!(child.wait().await.unwrap().success());
}

/// stdin and stdout as socket pairs (how Node's `child_process` spawns a server; the other
/// tests use pipes): the server reads and writes them through the runtime, a save and a search
/// in Russian and Chinese round-trip, and closing stdin ends the server.
#[cfg(unix)]
#[tokio::test]
async fn serves_over_socket_pairs() {
    use std::io::{BufRead, Write};
    use std::os::fd::OwnedFd;
    use std::os::unix::net::UnixStream;
    let fx = fixture();
    let (ours_in, theirs_in) = UnixStream::pair().unwrap();
    let (ours_out, theirs_out) = UnixStream::pair().unwrap();
    let mut child = server_command(&fx)
        .env("MEMLOOP_LOG", "memloop_mcp=debug")
        .stdin(Stdio::from(OwnedFd::from(theirs_in)))
        .stdout(Stdio::from(OwnedFd::from(theirs_out)))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut log = child.stderr.take().unwrap();
    let project = project_str(&fx.project);
    let exchange = tokio::task::spawn_blocking(move || {
        // A hung server fails the test instead of hanging it.
        ours_out
            .set_read_timeout(Some(std::time::Duration::from_secs(60)))
            .unwrap();
        let mut input = &ours_in;
        let mut lines = std::io::BufReader::new(&ours_out).lines();
        let mut send = |v: Value| writeln!(input, "{v}").unwrap();
        let mut answer = |id: i64| loop {
            let v: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
            if v["id"] == id {
                return v;
            }
        };
        send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "socketpair", "version": "1"}}}),
        );
        assert_eq!(answer(1)["result"]["serverInfo"]["name"], "memloop");
        send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        let tool = |id: i64, name: &str, arguments: Value| {
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": name, "arguments": arguments}})
        };
        send(tool(
            2,
            "context_save",
            json!({"project_path": project, "entries": [
            {"type": "decision", "title": "Деплой по вторникам",
             "content": "Деплой только по вторникам, 部署只在周二进行。"}]}),
        ));
        let saved = answer(2);
        assert_eq!(saved["result"]["isError"], false, "{saved}");
        send(tool(
            3,
            "context_search",
            json!({"project_path": project, "query": "周二 部署"}),
        ));
        let found = answer(3);
        let text = found["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(text.contains("Деплой по вторникам"), "{text}");
        ours_in.shutdown(std::net::Shutdown::Write).unwrap();
    });
    exchange.await.unwrap();
    let mut stderr = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut log, &mut stderr)
        .await
        .unwrap();
    assert!(child.wait().await.unwrap().success());
    assert!(!stderr.contains("blocking thread"), "{stderr}");

    // Neither a pipe nor a socket (`/dev/null`, a regular file): tokio's blocking streams.
    let out = tempfile::NamedTempFile::new().unwrap();
    let mut child = server_command(&fx)
        .env("MEMLOOP_LOG", "memloop_mcp=debug")
        .stdin(Stdio::null())
        .stdout(Stdio::from(out.reopen().unwrap()))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr)
        .await
        .unwrap();
    child.wait().await.unwrap(); // no client: it ends with "connection closed"
    assert!(
        stderr.contains("stdin read on a blocking thread"),
        "{stderr}"
    );
    assert!(
        stderr.contains("stdout written on a blocking thread"),
        "{stderr}"
    );
}

/// 20 clients (20 server processes) write into one memory dir at once; every entry and every
/// index line survives.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_concurrent_clients_lose_nothing() {
    const CLIENTS: usize = 20;
    const PER_CLIENT: usize = 4;
    let fx = Arc::new(fixture());
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        clients.push(connect(&fx).await);
    }
    let barrier = Arc::new(tokio::sync::Barrier::new(CLIENTS));
    let p = project_str(&fx.project);
    let tasks = clients.into_iter().enumerate().map(|(c, client)| {
        let (barrier, p) = (barrier.clone(), p.clone());
        tokio::spawn(async move {
            let entries: Vec<Value> = (0..PER_CLIENT)
                .map(|i| {
                    let kind = if i % 2 == 0 { "knowledge" } else { "change" };
                    json!({"type": kind, "title": format!("client {c} fact {i}"),
                           "content": format!("Fact number {i} from client {c}.")})
                })
                .collect();
            barrier.wait().await;
            let saved = call(
                &client,
                "context_save",
                json!({"project_path": p, "entries": entries}),
            )
            .await;
            assert_eq!(saved["written"], PER_CLIENT, "{saved}");
            client.cancel().await.unwrap();
        })
    });
    for t in futures::future::join_all(tasks).await {
        t.unwrap();
    }
    let client = connect(&fx).await;
    let listed = call(
        &client,
        "context_manage",
        json!({"project_path": p, "action": "list"}),
    )
    .await;
    assert_eq!(
        listed["memories"].as_array().unwrap().len(),
        CLIENTS * PER_CLIENT
    );
    let dir = PathBuf::from(listed["project"]["memory_dir"].as_str().unwrap());
    let index = std::fs::read_to_string(dir.join("MEMORY.md")).unwrap();
    for m in listed["memories"].as_array().unwrap() {
        assert!(
            index.contains(m["path"].as_str().unwrap()),
            "{m} missing from index"
        );
    }
    client.cancel().await.unwrap();
}

/// A memory dir that cannot be opened (a file where the dir should be) is answered with
/// `available: false` and a reason, and the server keeps serving.
#[tokio::test]
async fn a_broken_backend_answers_unavailable() {
    let fx = fixture();
    let blocker = fx.home.join("not-a-dir");
    std::fs::write(&blocker, "x").unwrap();
    let mut cmd = server_command(&fx);
    cmd.env("MEMLOOP_MEMORY_DIR", &blocker);
    let client = ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap();
    let p = project_str(&fx.project);
    let saved = call(
        &client,
        "context_save",
        json!({"project_path": p, "entries": [{"type": "todo", "content": "x"}]}),
    )
    .await;
    assert_eq!(saved["available"], false, "{saved}");
    assert!(!saved["reason"].as_str().unwrap().is_empty());
    assert_eq!(saved["is_error"], false);
    let init = call(
        &client,
        "context_manage",
        json!({"project_path": p, "action": "init_project"}),
    )
    .await;
    assert_eq!(init["available"], false, "{init}");
    assert_eq!(client.list_all_tools().await.unwrap().len(), 4);
    client.cancel().await.unwrap();
}

/// The server loads the model it found in the Hugging Face cache (opened lazily) as it starts,
/// not at the first `context_search`: with a cached model that cannot load, the warning comes
/// before any tool is called.
#[cfg(feature = "candle")]
#[tokio::test]
async fn the_cached_embedding_model_loads_at_start_up() {
    let fx = fixture();
    let hub = fx.home.join("hub");
    let repo = hub.join("models--intfloat--multilingual-e5-small");
    let snapshot = repo.join("snapshots/r1");
    std::fs::create_dir_all(&snapshot).unwrap();
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs/main"), "r1").unwrap();
    for file in [
        "modules.json",
        "config.json",
        "tokenizer.json",
        "model.safetensors",
    ] {
        std::fs::write(snapshot.join(file), "{truncated").unwrap();
    }
    let mut server = server_command(&fx)
        .env_remove("MEMLOOP_EMBED_MODEL")
        .env("HF_HUB_CACHE", &hub)
        .env("MEMLOOP_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(server.stderr.take().unwrap()).lines();
    let seen = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let mut seen = Vec::new();
        while let Some(line) = lines.next_line().await.unwrap() {
            let done = line.contains("embedding model did not load");
            seen.push(line);
            if done {
                break;
            }
        }
        seen
    })
    .await
    .expect("no load warning before any call");
    assert!(
        seen.last().unwrap().contains(".json") || seen.last().unwrap().contains(".safetensors"),
        "the warning names the file: {seen:?}"
    );
    server.kill().await.unwrap();
}

/// Titles that differ only outside ASCII (Cyrillic, CJK, emoji) each get their own file: every
/// save reports `written` at a different path and every content survives; saving the same title
/// again updates its file; a keyed entry saved under the old naming rule is updated in place.
#[tokio::test]
async fn titles_in_any_script_never_share_a_file() {
    let fx = fixture();
    let client = connect(&fx).await;
    let p = project_str(&fx.project);
    let entries = [
        ("decision", "Использовать Postgres", "Берём Postgres 16."),
        ("decision", "Не использовать Postgres", "Postgres не берём."),
        ("knowledge", "数据库", "数据库在 db01 上。"),
        ("knowledge", "缓存", "缓存用 Redis。"),
        ("knowledge", "🎉", "party emoji note"),
        ("knowledge", "🚀", "rocket emoji note"),
        ("todo", "Café", "accented todo"),
        ("todo", "Cafe", "plain todo"),
    ];
    let saved = call(
        &client,
        "context_save",
        json!({"project_path": p, "entries": entries
            .iter()
            .map(|(t, title, content)| json!({"type": t, "title": title, "content": content}))
            .collect::<Vec<_>>()}),
    )
    .await;
    assert_eq!(saved["written"], entries.len(), "{saved}");
    let paths: Vec<String> = (0..entries.len())
        .map(|i| saved["results"][i]["path"].as_str().unwrap().to_owned())
        .collect();
    let distinct: std::collections::BTreeSet<&String> = paths.iter().collect();
    assert_eq!(distinct.len(), entries.len(), "{paths:?}");
    assert!(
        paths[0].starts_with("decisions/ispolzovat-postgres_"),
        "{paths:?}"
    );
    assert_eq!(paths[7], "todos/cafe.md");
    let dir = PathBuf::from(saved["project"]["memory_dir"].as_str().unwrap());
    for ((_, _, content), path) in entries.iter().zip(&paths) {
        let text = std::fs::read_to_string(dir.join(path)).unwrap();
        assert!(text.contains(content), "{path}: {text}");
    }
    // The same title again: the same file, updated.
    let again = call(
        &client,
        "context_save",
        json!({"project_path": p, "entries": [
            {"type": "decision", "title": "Использовать Postgres", "content": "Берём Postgres 17."},
        ]}),
    )
    .await;
    assert_eq!(again["results"][0]["path"], paths[0].as_str(), "{again}");
    assert_eq!(again["results"][0]["created"], false, "{again}");
    let text = std::fs::read_to_string(dir.join(&paths[0])).unwrap();
    assert!(text.contains("Postgres 17") && !text.contains("Postgres 16"));
    // A decision saved by an older version under the old rule (`decisions/postgres.md`) is
    // updated there, not duplicated.
    std::fs::write(
        dir.join("decisions/postgres.md"),
        "---\nname: Выбор Postgres\ndescription: old\ntype: project\n---\nold body\n",
    )
    .unwrap();
    let legacy = call(
        &client,
        "context_save",
        json!({"project_path": p, "entries": [
            {"type": "decision", "title": "Выбор Postgres", "content": "new body"},
        ]}),
    )
    .await;
    assert_eq!(
        legacy["results"][0]["path"], "decisions/postgres.md",
        "{legacy}"
    );
    let text = std::fs::read_to_string(dir.join("decisions/postgres.md")).unwrap();
    assert!(text.contains("new body"), "{text}");
    client.cancel().await.unwrap();
}

/// The MCP Inspector's CLI mode (`npx @modelcontextprotocol/inspector@0.15.0 --cli`, pinned:
/// later versions need Node 22), one call per run, `memloop mcp` as the server.
fn inspector(fx: &Fixture, method: &[&str]) -> Option<Value> {
    let ci = memloop_testkit::under_ci();
    let mut cmd = std::process::Command::new("npx");
    cmd.args(["-y", "@modelcontextprotocol/inspector@0.15.0", "--cli"])
        .arg("-e")
        .arg(format!("MEMLOOP_HOME={}", fx.home.display()))
        .arg("-e")
        .arg("MEMLOOP_LOG=error")
        .arg(BIN)
        .arg("--project")
        .arg(&fx.project)
        .arg("mcp")
        .arg("--reveal-store")
        .args(method)
        .env_remove("MEMLOOP_MEMORY_DIR");
    let out = match cmd.output() {
        Ok(out) => out,
        Err(e) => {
            memloop_testkit::skip_unless_ci(format!(
                "npx (Node 20) is required for the Inspector test: {e}"
            ));
            return None;
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    match serde_json::from_str::<Value>(&stdout) {
        Ok(v) => Some(v),
        Err(_) if !out.status.success() && !ci && stderr.contains("ENOTFOUND") => {
            eprintln!("skipping: the npm registry is not reachable: {stderr}");
            None
        }
        Err(e) => panic!("inspector {method:?}: {e}\nstdout: {stdout}\nstderr: {stderr}"),
    }
}

fn tool_call<'a>(tool: &'a str, args: &'a [String]) -> Vec<&'a str> {
    let mut v = vec!["--method", "tools/call", "--tool-name", tool];
    for a in args {
        v.push("--tool-arg");
        v.push(a);
    }
    v
}

#[cfg(unix)]
#[test]
fn mcp_inspector_cli_session_with_the_hostile_cases() {
    let fx = fixture();
    let p = format!("project_path={}", fx.project.display());
    let Some(tools) = inspector(&fx, &["--method", "tools/list"]) else {
        return;
    };
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 4, "{names:?}");

    // A batch with one oversized entry: saved whole or not at all, so nothing is written and
    // the answer says which entry to fix.
    let big = "x".repeat(70_000);
    let good = json!({ "type": "decision", "title": "Database", "content": "Use Postgres 16." });
    let entries = json!([good, { "type": "knowledge", "title": "big", "content": big }]);
    let args = [p.clone(), format!("entries={entries}")];
    let r = inspector(&fx, &tool_call("context_save", &args)).unwrap();
    let results = &r["structuredContent"]["results"];
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(results[0]["status"], "not_written", "{r}");
    assert_eq!(results[1]["code"], "too_large", "{r}");
    // The good entry alone is written.
    let args = [p.clone(), format!("entries={}", json!([good]))];
    let r = inspector(&fx, &tool_call("context_save", &args)).unwrap();
    assert_eq!(
        r["structuredContent"]["results"][0]["status"], "written",
        "{r}"
    );

    // A symlink out of the memory dir: a tool error, for update as for delete.
    let mem = PathBuf::from(
        r["structuredContent"]["project"]["memory_dir"]
            .as_str()
            .unwrap(),
    );
    let target = fx.outside.join("t.md");
    std::fs::write(&target, "keep").unwrap();
    std::os::unix::fs::symlink(&target, mem.join("decisions/link.md")).unwrap();
    for action in ["update", "delete"] {
        let args = [
            p.clone(),
            format!("action={action}"),
            "target=decisions/link.md".into(),
            "content=new".into(),
        ];
        let r = inspector(&fx, &tool_call("context_manage", &args)).unwrap();
        assert_eq!(r["isError"], true, "{action}: {r}");
        assert!(r["structuredContent"].get("available").is_none(), "{r}");
    }
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");

    // A credential in a hand-written file never comes back.
    let token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
    std::fs::write(
        mem.join("decisions/bot.md"),
        format!("---\nname: bot\ndescription: bot\n---\nThe bot token is {token}\n"),
    )
    .unwrap();
    let args = [p.clone(), "query=bot token".into()];
    let r = inspector(&fx, &tool_call("context_search", &args)).unwrap();
    assert!(!r.to_string().contains(token), "{r}");
    assert!(r.to_string().contains("[redacted: "), "{r}");

    // A project whose own settings point its memory outside it.
    let cloned = fx.project.join("cloned");
    std::fs::create_dir_all(cloned.join(".memloop")).unwrap();
    let stolen = fx.outside.join("stolen");
    std::fs::write(
        cloned.join(".memloop/settings.local.json"),
        json!({ "memory_dir": stolen }).to_string(),
    )
    .unwrap();
    let args = [
        format!("project_path={}", cloned.display()),
        format!("entries={}", json!([{ "type": "todo", "content": "x" }])),
    ];
    let r = inspector(&fx, &tool_call("context_save", &args)).unwrap();
    assert_eq!(r["isError"], true, "{r}");
    assert!(!stolen.exists());

    // The index resource: listed without a tool call, one MIME type.
    let listed = inspector(&fx, &["--method", "resources/list"]).unwrap();
    let res = &listed["resources"][0];
    assert_eq!(res["mimeType"], "text/markdown", "{listed}");
    let uri = res["uri"].as_str().unwrap().to_owned();
    let read = inspector(&fx, &["--method", "resources/read", "--uri", &uri]).unwrap();
    assert_eq!(read["contents"][0]["mimeType"], "text/markdown", "{read}");
    assert!(!read.to_string().contains(token));
}

/// `memloop mcp --summary-fallback-url`: a summary pending when the server process is killed
/// (its endpoint down) is written by the next process (endpoint up), from a real loopback
/// OpenAI-compatible server.
#[tokio::test]
async fn a_killed_server_leaves_its_pending_summary_to_the_next_one() {
    let fx = fixture();
    let down = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/v1", l.local_addr().unwrap())
    };
    let mut first = server_command(&fx);
    first.args(["--summary-fallback-url", &down]);
    let client = ().serve(TokioChildProcess::new(first).unwrap()).await.unwrap();
    let p = project_str(&fx.project);
    let saved = call(
        &client,
        "context_save",
        json!({"project_path": p, "entries": [
            {"type": "decision", "title": "Queue", "content": "Use NATS for the job queue; Kafka is too heavy."}
        ]}),
    )
    .await;
    assert_eq!(saved["results"][0]["summary_state"], "pending", "{saved}");
    let dir = PathBuf::from(saved["project"]["memory_dir"].as_str().unwrap());
    let file = dir.join(saved["results"][0]["path"].as_str().unwrap());
    client.cancel().await.unwrap(); // the process ends with the summary still pending
    assert!(
        std::fs::read_to_string(&file)
            .unwrap()
            .contains("memloop:summary pending")
    );

    let up = memloop_testkit::json_server(|_| {
        let text = json!({"abstract": "Job queue: NATS", "overview": "NATS runs the job queue; Kafka was rejected as too heavy."}).to_string();
        json!({"id": "c", "model": "local", "choices": [{"index": 0, "finish_reason": "stop",
               "message": {"role": "assistant", "content": text}}]})
    }).unwrap();
    let mut second = server_command(&fx);
    second.args(["--summary-fallback-url", &format!("{up}/v1")]);
    let client = ().serve(TokioChildProcess::new(second).unwrap()).await.unwrap();
    // Another process writes the file, then drops its pending record: wait for both (bounded),
    // then check through the server. The record goes only after the write, so reading the file
    // alone would race with its removal.
    let queue = dir.join(".memloop-summaries");
    let queue_empty = || !queue.read_dir().unwrap().any(|_| true);
    let mut written = String::new();
    for _ in 0..600 {
        written = std::fs::read_to_string(&file).unwrap();
        if written.contains("memloop:overview") && queue_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        written.contains("description: \"Job queue: NATS\"")
            || written.contains("description: Job queue: NATS"),
        "{written}"
    );
    let found = call(
        &client,
        "context_search",
        json!({"project_path": p, "query": "nats queue"}),
    )
    .await;
    assert_eq!(
        found["results"][0]["content"], "NATS runs the job queue; Kafka was rejected as too heavy.",
        "{found}"
    );
    assert!(queue_empty(), "the pending record outlived the summary");
    client.cancel().await.unwrap();
}

/// `memloop mcp --http`: a real process on a free loopback port, found from its stderr line.
struct HttpServer {
    child: tokio::process::Child,
    url: String,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

async fn http_server(fx: &Fixture, extra: &[&str]) -> HttpServer {
    let mut child = tokio::process::Command::new(BIN)
        .env("MEMLOOP_HOME", &fx.home)
        .env("MEMLOOP_LOG", "error")
        .arg("--project")
        .arg(&fx.project)
        .args(["mcp", "--http", "127.0.0.1:0"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let url = loop {
        let line = tokio::time::timeout(std::time::Duration::from_secs(60), lines.next_line())
            .await
            .expect("the server prints its address")
            .unwrap()
            .expect("the server exited before listening");
        if let Some(url) = line.strip_prefix("memloop: serving MCP on ") {
            break url.to_owned();
        }
    };
    HttpServer { child, url }
}

#[tokio::test]
async fn http_transport_with_tokens_and_the_inspector_over_http() {
    let fx = fixture();
    let tokens = fx.home.join("tokens");
    std::fs::write(&tokens, "# team\nteam-token-0123456789abcdef\n").unwrap();
    #[cfg(unix)]
    std::fs::set_permissions(&tokens, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let guarded = http_server(&fx, &["--token-file", tokens.to_str().unwrap()]).await;
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let status = reqwest::Client::new()
        .post(&guarded.url)
        .header("Accept", "application/json, text/event-stream")
        .json(&list)
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 401);
    drop(guarded);

    // A network address without tokens is refused before binding.
    let out = std::process::Command::new(BIN)
        .env("MEMLOOP_HOME", &fx.home)
        .args(["mcp", "--http", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--token-file"));

    // The Inspector's CLI mode over HTTP (loopback, no tokens).
    let open = http_server(&fx, &[]).await;
    let p = format!("project_path={}", fx.project.display());
    let mut cmd = std::process::Command::new("npx");
    cmd.args(["-y", "@modelcontextprotocol/inspector@0.15.0", "--cli"])
        .arg(&open.url)
        .args([
            "--transport",
            "http",
            "--method",
            "tools/call",
            "--tool-name",
        ])
        .args([
            "context_search",
            "--tool-arg",
            &p,
            "--tool-arg",
            "query=数据库",
        ]);
    let out = match cmd.output() {
        Ok(out) if out.status.success() => out,
        other => {
            let why = format!("{other:?}");
            memloop_testkit::skip_unless_ci(format!(
                "the MCP Inspector CLI is not available: {why}"
            ));
            return;
        }
    };
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["isError"], false, "{answer}");
    assert!(
        answer["structuredContent"]["results"].is_array(),
        "{answer}"
    );
}

/// A self-signed certificate for `localhost`: (cert file, key file, cert PEM).
fn localhost_cert(dir: &Path) -> (PathBuf, PathBuf, String) {
    let generated = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let (cert, key) = (dir.join("证书.pem"), dir.join("ключ.pem"));
    let pem = generated.cert.pem();
    std::fs::write(&cert, &pem).unwrap();
    std::fs::write(&key, generated.signing_key.serialize_pem()).unwrap();
    (cert, key, pem)
}

#[tokio::test]
async fn https_with_tls_cert_and_key_flags_or_their_variables() {
    let fx = fixture();
    let (cert, key, pem) = localhost_cert(&fx.home);
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}});
    let client = reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(pem.as_bytes()).unwrap())
        .build()
        .unwrap();
    let flags = http_server(
        &fx,
        &[
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
    )
    .await;
    assert!(flags.url.starts_with("https://127.0.0.1:"), "{}", flags.url);
    let url = flags.url.replace("127.0.0.1", "localhost");
    let r = client
        .post(&url)
        .header("Accept", "application/json, text/event-stream")
        .json(&init)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().contains("memloop"));
    // Plain HTTP on the TLS port gets no answer.
    let plain = reqwest::Client::new()
        .post(url.replace("https://", "http://"))
        .json(&init)
        .send()
        .await;
    assert!(plain.is_err(), "{plain:?}");
    drop(flags);

    // The same through MEMLOOP_TLS_CERT / MEMLOOP_TLS_KEY, on a network address: no plain-HTTP
    // warning.
    let tokens = fx.home.join("tokens");
    std::fs::write(&tokens, "team-token-0123456789abcdef\n").unwrap();
    #[cfg(unix)]
    std::fs::set_permissions(&tokens, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let mut child = tokio::process::Command::new(BIN)
        .env("MEMLOOP_HOME", &fx.home)
        .env("MEMLOOP_LOG", "error")
        .env("MEMLOOP_TLS_CERT", &cert)
        .env("MEMLOOP_TLS_KEY", &key)
        .arg("--project")
        .arg(&fx.project)
        .args(["mcp", "--http", "0.0.0.0:0", "--token-file"])
        .arg(&tokens)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut before = Vec::new();
    let url = loop {
        let line = tokio::time::timeout(std::time::Duration::from_secs(60), lines.next_line())
            .await
            .expect("the server prints its address")
            .unwrap()
            .expect("the server exited before listening");
        match line.strip_prefix("memloop: serving MCP on ") {
            Some(url) => break url.to_owned(),
            None => before.push(line),
        }
    };
    assert!(url.starts_with("https://0.0.0.0:"), "{url}");
    assert!(!before.iter().any(|l| l.contains("warning")), "{before:?}");
    let port = url.rsplit(':').next().unwrap().trim_end_matches("/mcp");
    let r = client
        .post(format!("https://localhost:{port}/mcp"))
        .bearer_auth("team-token-0123456789abcdef")
        .header("Accept", "application/json, text/event-stream")
        .json(&init)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let _ = child.start_kill();

    // Unusable files stop it at startup, naming the file.
    let missing = fx.home.join("нет-сертификата.pem");
    let out = std::process::Command::new(BIN)
        .env("MEMLOOP_HOME", &fx.home)
        .args(["mcp", "--http", "127.0.0.1:0", "--tls-cert"])
        .arg(&missing)
        .arg("--tls-key")
        .arg(&key)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("нет-сертификата.pem"), "{err}");
    let out = std::process::Command::new(BIN)
        .env("MEMLOOP_HOME", &fx.home)
        .args(["mcp", "--http", "127.0.0.1:0", "--tls-cert"])
        .arg(&cert)
        .arg("--tls-key")
        .arg(&cert)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("证书.pem") && err.contains("private key"),
        "{err}"
    );
    // One without the other is refused by the argument parser.
    let out = std::process::Command::new(BIN)
        .args(["mcp", "--http", "127.0.0.1:0", "--tls-cert"])
        .arg(&cert)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--tls-key"));
}
