//! `serve_http`: the tools over Streamable HTTP behind bearer tokens, driven by the official MCP
//! Python SDK's streamable HTTP client and by plain HTTP requests for the refusals.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use memloop_mcp::{HttpOptions, Tokens, check_bind};
use support::{Fixture, s};
use tokio_util::sync::CancellationToken;

const WRITER: &str = "writer-token-0123456789";
const READER: &str = "reader-token-0123456789";

async fn start(fx: &Fixture, tokens: Option<Tokens>) -> support::HttpServer {
    support::start_http(fx, tokens, None).await
}

/// [`start`] with MCP sessions (the default caps).
async fn start_sessions(fx: &Fixture, tokens: Option<Tokens>) -> support::HttpServer {
    support::start_http_with(
        fx.config(),
        tokens,
        None,
        Some(Default::default()),
        Default::default(),
    )
    .await
}

fn tokens(fx: &Fixture) -> Tokens {
    Tokens::parse(&format!(
        "# the team\n{WRITER}\n{READER} {}/* read\n",
        fx.root.display()
    ))
    .unwrap()
}

fn call(tool: &str, project: &str, extra: serde_json::Value) -> serde_json::Value {
    let mut args = serde_json::json!({ "project_path": project });
    if let (Some(a), serde_json::Value::Object(e)) = (args.as_object_mut(), extra) {
        a.extend(e);
    }
    serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": tool, "arguments": args}})
}

async fn post(url: &str, token: Option<&str>, body: &serde_json::Value) -> reqwest::Response {
    let mut req = reqwest::Client::new()
        .post(url)
        .header("Accept", "application/json, text/event-stream")
        .json(body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    req.send().await.unwrap()
}

#[tokio::test]
async fn requests_without_a_valid_token_get_401_and_scopes_are_enforced_with_403() {
    let fx = Fixture::new();
    let project = fx.project("app");
    let server = start(&fx, Some(tokens(&fx))).await;
    let init = serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}});
    for token in [None, Some("wrong-token-0123456789"), Some("")] {
        let r = post(&server.url, token, &init).await;
        assert_eq!(r.status(), 401, "{token:?}");
        assert!(r.headers().get("www-authenticate").is_some());
    }
    assert_eq!(post(&server.url, Some(WRITER), &init).await.status(), 200);
    assert_eq!(post(&server.url, Some(READER), &init).await.status(), 200);

    // A read-only token may search but not save; outside its projects it may do nothing.
    let save = call(
        "context_save",
        &s(&project),
        serde_json::json!({"entries": [{"type": "knowledge", "content": "x"}]}),
    );
    let r = post(&server.url, Some(READER), &save).await;
    assert_eq!(r.status(), 403);
    assert!(r.text().await.unwrap().contains("read-only"));
    let elsewhere = call("context_load", "/somewhere/else", serde_json::json!({}));
    assert_eq!(
        post(&server.url, Some(READER), &elsewhere).await.status(),
        403
    );
    // Nothing was written by the refused save.
    assert!(
        !Fixture::files_under(&fx.base)
            .iter()
            .any(|f| f.ends_with(".md"))
    );
}

#[tokio::test]
async fn the_python_sdk_talks_to_the_server_over_streamable_http() {
    python_sdk_session(false).await;
}

#[tokio::test]
async fn the_python_sdk_talks_to_the_server_with_sessions() {
    python_sdk_session(true).await;
}

/// The MCP Python SDK's streamable HTTP client runs `tests/python/http_session.py` against a
/// server with MCP sessions or without.
async fn python_sdk_session(sessions: bool) {
    let python = std::env::var("MEMLOOP_MCP_PYTHON").unwrap_or_else(|_| "python3".into());
    let probe = std::process::Command::new(&python)
        .args(["-c", "import mcp.client.streamable_http"])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        memloop_testkit::skip_unless_ci(format!(
            "the MCP Python SDK is not available (`.ci/run` installs it; MEMLOOP_MCP_PYTHON={python})"
        ));
        return;
    }
    let fx = Fixture::new();
    let project = fx.project("团队项目");
    let server = if sessions {
        start_sessions(&fx, Some(tokens(&fx))).await
    } else {
        start(&fx, Some(tokens(&fx))).await
    };
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/http_session.py");
    let out = tokio::process::Command::new(&python)
        .arg(&script)
        .arg(&server.url)
        .arg(WRITER)
        .arg(s(&project))
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

#[test]
fn a_network_bind_needs_tokens_or_an_explicit_opt_out() {
    let options = |tokens: Option<Tokens>, insecure: bool| HttpOptions {
        addr: "0.0.0.0:8765".parse().unwrap(),
        tokens,
        insecure_no_auth: insecure,
        tls: None,
        shutdown: CancellationToken::new(),
        sessions: None,
        limits: Default::default(),
        body_timeout: memloop_mcp::BODY_READ_TIMEOUT,
    };
    let err = check_bind(&options(None, false)).unwrap_err();
    assert!(err.to_string().contains("--token-file"), "{err}");
    let t = Tokens::parse(WRITER).unwrap();
    let warning = check_bind(&options(Some(t), false)).unwrap();
    assert!(warning.unwrap().contains("unencrypted"));
    assert!(check_bind(&options(None, true)).unwrap().is_some());
    let local = HttpOptions {
        addr: "127.0.0.1:0".parse().unwrap(),
        tokens: None,
        insecure_no_auth: false,
        tls: None,
        shutdown: CancellationToken::new(),
        sessions: None,
        limits: Default::default(),
        body_timeout: memloop_mcp::BODY_READ_TIMEOUT,
    };
    assert_eq!(check_bind(&local).unwrap(), None);
}

/// A raw loopback connection; `Ok(0)` from a read means the server closed it.
async fn read_until_closed(stream: &mut tokio::net::TcpStream, what: &str) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    // Bounded: a server that never closes fails the test instead of hanging it.
    let closed = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(
        closed.is_ok(),
        "the server kept the connection open: {what}"
    );
    got
}

#[tokio::test]
async fn slow_headers_and_idle_connections_are_timed_out() {
    use tokio::io::AsyncWriteExt;
    let fx = Fixture::new();
    let server = start(&fx, Some(tokens(&fx))).await;
    let addr = server
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    // Headers that never end.
    let mut slow = tokio::net::TcpStream::connect(&addr).await.unwrap();
    slow.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        .await
        .unwrap();
    read_until_closed(&mut slow, "headers that never end").await;
    // A connection that never sends anything.
    let mut idle = tokio::net::TcpStream::connect(&addr).await.unwrap();
    read_until_closed(&mut idle, "a connection that sends nothing").await;
}

#[tokio::test]
async fn malformed_bodies_get_400_and_sessions_are_capped_per_token() {
    let fx = Fixture::new();
    let server = start_sessions(&fx, Some(tokens(&fx))).await;
    let client = reqwest::Client::new();
    for body in ["{not json", "", "\u{feff}{}"] {
        let r = client
            .post(&server.url)
            .bearer_auth(WRITER)
            .header("Accept", "application/json, text/event-stream")
            .header("Content-Type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{body:?}");
        assert!(r.text().await.unwrap().contains("not JSON"));
    }

    let init = serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}});
    for i in 0..memloop_mcp::MAX_SESSIONS_PER_TOKEN {
        let r = post(&server.url, Some(WRITER), &init).await;
        assert_eq!(r.status(), 200, "session {i}");
        assert!(r.headers().get("mcp-session-id").is_some());
        // The answer carries no empty SSE event (clients parse every `data:` as JSON).
        let text = r.text().await.unwrap();
        assert!(
            text.lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .all(|d| !d.trim().is_empty()),
            "{text:?}"
        );
    }
    let r = post(&server.url, Some(WRITER), &init).await;
    assert_eq!(r.status(), 429);
    assert!(r.text().await.unwrap().contains("open MCP sessions"));
    // Another token is not affected by the first one's sessions.
    assert_eq!(post(&server.url, Some(READER), &init).await.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_initializes_past_the_session_cap_get_exactly_the_cap() {
    const CAP: usize = 3;
    const EXTRA: usize = 5;
    let fx = Fixture::new();
    let stop = CancellationToken::new();
    let options = HttpOptions {
        addr: "127.0.0.1:0".parse().unwrap(),
        tokens: Some(tokens(&fx)),
        insecure_no_auth: false,
        tls: None,
        shutdown: stop.clone(),
        sessions: Some(memloop_mcp::SessionCaps {
            per_token: CAP,
            total: 100,
        }),
        limits: Default::default(),
        body_timeout: memloop_mcp::BODY_READ_TIMEOUT,
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    let server = memloop_mcp::MemoryServer::new(fx.config());
    tokio::spawn(async move { memloop_mcp::serve_http(server, options, Some(tx)).await });
    let url = format!("http://{}/mcp", rx.await.unwrap());
    let init = serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}});
    // All at once: whatever the interleaving, exactly CAP are admitted.
    let answers = futures::future::join_all((0..CAP + EXTRA).map(|_| async {
        let r = post(&url, Some(WRITER), &init).await;
        let status = r.status().as_u16();
        (status, r.text().await.unwrap())
    }))
    .await;
    let ok = answers.iter().filter(|(s, _)| *s == 200).count();
    let refused: Vec<_> = answers.iter().filter(|(s, _)| *s == 429).collect();
    assert_eq!((ok, refused.len()), (CAP, EXTRA), "{answers:?}");
    assert!(
        refused.iter().all(|(_, t)| t.contains("at most 3")),
        "{refused:?}"
    );
    stop.cancel();
}

#[tokio::test]
async fn closing_a_session_answers_204() {
    let fx = Fixture::new();
    let server = start_sessions(&fx, Some(tokens(&fx))).await;
    let session = support::HttpSession::open(&server.url, WRITER).await;
    let id = session.id().unwrap().to_owned();
    let r = reqwest::Client::new()
        .delete(&server.url)
        .bearer_auth(WRITER)
        .header("Mcp-Session-Id", &id)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    // The session is gone.
    let r = reqwest::Client::new()
        .post(&server.url)
        .bearer_auth(WRITER)
        .header("Accept", "application/json, text/event-stream")
        .header("Mcp-Session-Id", &id)
        .json(&serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
}

/// The server's log as a host writes it (events [`memloop_mcp::loggable`] lets through, at
/// every level), captured by a real `tracing` subscriber layer.
#[derive(Clone, Default)]
struct LogCapture(std::sync::Arc<std::sync::Mutex<String>>);

struct LineFields<'a>(&'a mut String);

impl tracing::field::Visit for LineFields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!(" {}={value:?}", field.name()));
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.push_str(&format!(" {}={value}", field.name()));
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for LogCapture {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        let mut line = format!("{} {}", event.metadata().level(), event.metadata().target());
        event.record(&mut LineFields(&mut line));
        line.push('\n');
        self.0.lock().unwrap().push_str(&line);
    }
}

impl LogCapture {
    /// Capture the current thread's events (a `#[tokio::test]` runs the server on it).
    fn start() -> (Self, tracing::subscriber::DefaultGuard) {
        use tracing_subscriber::Layer;
        use tracing_subscriber::layer::SubscriberExt;
        let capture = Self::default();
        let layer = capture
            .clone()
            .with_filter(tracing_subscriber::filter::filter_fn(memloop_mcp::loggable));
        let guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));
        (capture, guard)
    }

    fn text(&self) -> String {
        self.0.lock().unwrap().clone()
    }
}

/// The longest run of `c` in `text`.
fn longest_run(text: &str, c: char) -> usize {
    text.split(|x| x != c)
        .map(|run| run.chars().count())
        .max()
        .unwrap_or(0)
}

/// A raw POST of `body` (bytes as given) with `token`.
async fn post_raw(url: &str, token: &str, body: String) -> reqwest::Response {
    reqwest::Client::new()
        .post(url)
        .bearer_auth(token)
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn client_names_are_cut_before_they_are_echoed_or_logged_and_credentials_never_logged() {
    let (log, _guard) = LogCapture::start();
    let fx = Fixture::new();
    let server = start(&fx, Some(tokens(&fx))).await;
    let max = memloop_mcp::MAX_ECHO_CHARS;
    // Unknown methods of a million characters, in several scripts: the answer echoes at most
    // MAX_ECHO_CHARS of it, and so does the log.
    for (fill, prefix) in [
        ('x', "tools/"),
        ('方', "工具/"),
        ('м', "инструмент/"),
        ('é', "outil/"),
    ] {
        let method = format!("{prefix}{}", fill.to_string().repeat(1_000_000));
        let body = serde_json::json!({"jsonrpc": "2.0", "id": 7, "method": method});
        let r = post(&server.url, Some(WRITER), &body).await;
        assert_eq!(r.status(), 200, "{prefix}");
        let answer: serde_json::Value = r.json().await.unwrap();
        assert_eq!(answer["id"], 7, "{answer}");
        assert_eq!(answer["error"]["code"], -32601, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(longest_run(message, fill) <= max, "{}", message.len());
        assert!(message.contains('…'), "{message}");
        let logged = log.text();
        assert!(
            longest_run(&logged, fill) <= max,
            "{fill}: {} in a row logged",
            longest_run(&logged, fill)
        );
    }
    // Credentials in a method name never reach the log (nor a long id, nor a long header).
    let key = "AKIAQ3EGV5XK7TZ2WPLM";
    for method in [
        format!("tools/ {key}"),
        format!("工具/ {key} секрет"),
        // Glued after letters or `_`.
        format!("tools/x{key}"),
        format!("x_{key}"),
    ] {
        let body = serde_json::json!({"jsonrpc": "2.0", "id": 8, "method": method});
        let r = post(&server.url, Some(WRITER), &body).await;
        assert_eq!(r.status(), 200);
        let answer: serde_json::Value = r.json().await.unwrap();
        assert_eq!(answer["error"]["code"], -32601, "{answer}");
    }
    // A resource URI is answered "not found" with the URI cut, and logged cut and redacted.
    let uri = format!("memloop://project/{key}/{}", "u".repeat(100_000));
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 9, "method": "resources/read",
        "params": {"uri": uri}});
    let r = post(&server.url, Some(WRITER), &body).await;
    let answer: serde_json::Value = r.json().await.unwrap();
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(longest_run(message, 'u') <= max, "{}", message.len());
    assert!(!message.contains(key), "{message}");
    let long_id = "i".repeat(100_000);
    let r = post(
        &server.url,
        Some(WRITER),
        &serde_json::json!({"jsonrpc": "2.0", "id": long_id, "method": "tools/list"}),
    )
    .await;
    assert_eq!(r.status(), 400);
    let answer: serde_json::Value = r.json().await.unwrap();
    assert_eq!(
        (answer["error"]["code"].clone(), answer["id"].clone()),
        (serde_json::json!(-32600), serde_json::Value::Null)
    );
    let r = reqwest::Client::new()
        .post(&server.url)
        .bearer_auth(WRITER)
        .header("Accept", "application/json, text/event-stream")
        .header("Mcp-Protocol-Version", "v".repeat(10_000))
        .json(&initialize(1))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    // Notifications reach the MCP library in a session: a cancellation's reason is logged cut
    // and redacted, and the library's INFO event holding a whole notification is not logged.
    let server = start_sessions(&fx, Some(tokens(&fx))).await;
    let session = open_session(&server.url, WRITER).await;
    let post = |_: &str, _: Option<&str>, body: &serde_json::Value| {
        reqwest::Client::new()
            .post(&server.url)
            .bearer_auth(WRITER)
            .header("Accept", "application/json, text/event-stream")
            .header("Mcp-Session-Id", &session)
            .json(body)
            .send()
    };
    let r = post(
        &server.url,
        Some(WRITER),
        &serde_json::json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 1, "reason": format!("{key} {}", "r".repeat(100_000))}}),
    )
    .await
    .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    // The MCP library logs every notification whole at INFO: not in the log.
    for notification in [
        serde_json::json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": "t", "progress": 1, "message": format!("{key} {}", "n".repeat(100_000))}}),
        serde_json::json!({"jsonrpc": "2.0", "method": format!("vendor/{key}/{}", "n".repeat(100_000))}),
    ] {
        let r = post(&server.url, Some(WRITER), &notification)
            .await
            .unwrap();
        assert!(r.status().is_success(), "{}", r.status());
    }
    let logged = log.text();
    assert!(!logged.contains(key), "a credential is in the log");
    for c in ['i', 'v', 'r', 'n', 'u'] {
        assert!(
            longest_run(&logged, c) <= max,
            "{c}: {}",
            longest_run(&logged, c)
        );
    }
}

/// A server with `caps` sessions and three tokens, each for every project.
async fn start_capped(
    fx: &Fixture,
    caps: memloop_mcp::SessionCaps,
    limits: memloop_mcp::TokenLimits,
) -> support::HttpServer {
    let tokens = Tokens::parse(&format!("{WRITER}\n{READER}\n{THIRD}\n")).unwrap();
    support::start_http_with(fx.config(), Some(tokens), None, Some(caps), limits).await
}

const THIRD: &str = "third-token-0123456789";

fn initialize(id: u64) -> serde_json::Value {
    serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}})
}

/// Open a session for `token`; its id.
async fn open_session(url: &str, token: &str) -> String {
    let r = post(url, Some(token), &initialize(0)).await;
    assert_eq!(r.status(), 200, "{token}");
    r.headers()["mcp-session-id"].to_str().unwrap().to_owned()
}

/// A 429 as the server must send every one: `Retry-After` (whole seconds, at least 1) and a
/// JSON-RPC error answering `id`; its message.
async fn assert_too_many(r: reqwest::Response, id: serde_json::Value) -> String {
    assert_eq!(r.status(), 429);
    let retry: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(retry >= 1);
    assert_eq!(r.headers()["content-type"], "application/json");
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["jsonrpc"], "2.0", "{body}");
    assert_eq!(body["id"], id, "{body}");
    assert_eq!(body["error"]["code"], -32000, "{body}");
    body["error"]["message"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_full_session_table_still_admits_a_token_below_its_share() {
    let fx = Fixture::new();
    let caps = memloop_mcp::SessionCaps {
        per_token: 3,
        total: 4,
    };
    let server = start_capped(&fx, caps, Default::default()).await;
    // Two tokens fill the table.
    let mut writer = Vec::new();
    for _ in 0..3 {
        writer.push(open_session(&server.url, WRITER).await);
    }
    open_session(&server.url, READER).await;
    // A third token still gets a session: the writer's least recently used one is closed.
    open_session(&server.url, THIRD).await;
    let mut gone = 0;
    for id in &writer {
        let r = reqwest::Client::new()
            .post(&server.url)
            .bearer_auth(WRITER)
            .header("Accept", "application/json, text/event-stream")
            .header("Mcp-Session-Id", id)
            .json(&serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
            .send()
            .await
            .unwrap();
        gone += usize::from(r.status() == 404);
    }
    assert_eq!(gone, 1, "one session of the largest holder is closed");
    // Every token now holds its share (4 / 3 tokens, at least 1) or more: refused, with
    // Retry-After and a JSON-RPC error answering the initialize.
    for token in [WRITER, READER, THIRD] {
        let message = assert_too_many(
            post(&server.url, Some(token), &initialize(42)).await,
            serde_json::json!(42),
        )
        .await;
        assert!(message.contains("retry later"), "{message}");
    }
}

#[tokio::test]
async fn every_429_has_retry_after_and_a_json_rpc_error() {
    let fx = Fixture::new();
    // Per token: at most 1 session.
    let caps = memloop_mcp::SessionCaps {
        per_token: 1,
        total: 100,
    };
    let server = start_capped(&fx, caps, Default::default()).await;
    open_session(&server.url, WRITER).await;
    let message = assert_too_many(
        post(&server.url, Some(WRITER), &initialize(5)).await,
        serde_json::json!(5),
    )
    .await;
    assert!(message.contains("open MCP sessions"), "{message}");
    // The token's rate: one request, then none for a long while.
    let limits = memloop_mcp::TokenLimits {
        concurrent: 0,
        rate: 0.001,
        burst: 1,
    };
    let server = start_capped(&fx, Default::default(), limits).await;
    open_session(&server.url, WRITER).await;
    // The body is not read past the limit: the id is not known.
    assert_too_many(
        post(&server.url, Some(WRITER), &initialize(6)).await,
        serde_json::Value::Null,
    )
    .await;
}

#[tokio::test]
async fn duplicated_json_keys_get_400_with_a_json_rpc_error() {
    let fx = Fixture::new();
    let project = fx.project("dup");
    let server = start(&fx, Some(tokens(&fx))).await;
    let p = s(&project);
    for body in [
        r#"{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/list"}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":1,"\u006dethod":"ping","method":"tools/list"}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}"#.to_owned(),
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"context_load","name":"context_search","arguments":{{"project_path":"{p}"}}}}}}"#
        ),
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"context_search","arguments":{{"project_path":"{p}","query":"数据库","query":"база данных"}}}}}}"#
        ),
    ] {
        let r = post_raw(&server.url, WRITER, body.clone()).await;
        assert_eq!(r.status(), 400, "{body}");
        assert_eq!(r.headers()["content-type"], "application/json", "{body}");
        let answer: serde_json::Value = r.json().await.unwrap();
        assert_eq!(answer["error"]["code"], -32600, "{answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("appears twice"),
            "{answer}"
        );
    }
    // The same keys once each are served.
    let r = post_raw(
        &server.url,
        WRITER,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#.to_owned(),
    )
    .await;
    assert_eq!(r.status(), 200);
}
