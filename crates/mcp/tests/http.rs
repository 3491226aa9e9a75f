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
