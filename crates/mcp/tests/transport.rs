//! The HTTP transport against clients that misbehave, over real loopback connections: a session
//! is its opener's (another token can neither post into it nor close it), a body trickled
//! byte by byte loses its connection, two requests of one session in flight with one id get a
//! JSON-RPC error instead of a lost answer, and what is not one JSON-RPC request is refused with
//! a JSON-RPC error that repeats little of it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use memloop_mcp::{HttpOptions, McpConfig, MemoryServer, Tokens};
use memloop_testkit::{FakeEmbedder, Gate};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use support::{Fixture, HttpSession, s};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const OWNER: &str = "owner-token-0123456789";
const OTHER: &str = "other-token-0123456789";

/// `serve_http` over `config` with the two tokens and `body_timeout`, with MCP sessions or
/// without.
async fn serve(
    config: McpConfig,
    body_timeout: Duration,
    sessions: bool,
) -> (
    String,
    std::net::SocketAddr,
    tokio_util::sync::CancellationToken,
) {
    let stop = tokio_util::sync::CancellationToken::new();
    let options = HttpOptions {
        addr: "127.0.0.1:0".parse().unwrap(),
        tokens: Some(Tokens::parse(&format!("{OWNER}\n{OTHER} read\n")).unwrap()),
        insecure_no_auth: false,
        tls: None,
        shutdown: stop.clone(),
        sessions: sessions.then(Default::default),
        limits: Default::default(),
        body_timeout,
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    let server = MemoryServer::new(config);
    tokio::spawn(async move { memloop_mcp::serve_http(server, options, Some(tx)).await });
    let addr = rx.await.unwrap();
    (format!("http://{addr}/mcp"), addr, stop)
}

async fn raw(
    url: &str,
    token: &str,
    session: Option<&str>,
    method: reqwest::Method,
    body: Option<String>,
) -> (u16, String) {
    let mut req = reqwest::Client::new()
        .request(method, url)
        .bearer_auth(token)
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json");
    if let Some(id) = session {
        req = req.header("Mcp-Session-Id", id);
    }
    if let Some(body) = body {
        req = req.body(body);
    }
    let r = req.send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

#[tokio::test]
async fn a_session_is_its_openers_alone() {
    let fx = Fixture::new();
    let project = fx.project("app");
    let (url, _, _stop) = serve(fx.config(), memloop_mcp::BODY_READ_TIMEOUT, true).await;
    let mut owner = HttpSession::open(&url, OWNER).await;
    let id = owner.id().unwrap().to_owned();
    let load = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "context_load", "arguments": {"project_path": s(&project)}}});
    // Another token posts into it, then tries to close it: both as for a session that does
    // not exist.
    let (status, _) = raw(
        &url,
        OTHER,
        Some(&id),
        reqwest::Method::POST,
        Some(load.to_string()),
    )
    .await;
    assert_eq!(status, 404);
    let (status, _) = raw(&url, OTHER, Some(&id), reqwest::Method::DELETE, None).await;
    assert_eq!(status, 404);
    // The owner's session is still there.
    let answer = owner
        .tool("context_load", json!({"project_path": s(&project)}))
        .await;
    assert_eq!(answer["is_error"], false, "{answer}");
    let (status, _) = raw(&url, OWNER, Some(&id), reqwest::Method::DELETE, None).await;
    assert_eq!(status, 204);
}

#[tokio::test]
async fn a_trickled_body_loses_its_connection() {
    let fx = Fixture::new();
    let (_, addr, _stop) = serve(fx.config(), Duration::from_millis(300), false).await;
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {OTHER}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: 1000000\r\n\r\n{{"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    // Nothing more is sent: the server answers 408 and closes, within its body timeout (the
    // test's own bound is only there so a regression fails instead of hanging).
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(60), stream.read_to_end(&mut answer))
        .await
        .expect("the connection was held open")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_request_with_an_id_in_flight_gets_an_error_and_the_first_its_answer() {
    duplicate_ids_in_flight(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_sessions_one_id_in_flight_twice_gets_two_answers() {
    duplicate_ids_in_flight(false).await;
}

/// Two requests with one id in flight. Of one session (with sessions): the second gets HTTP 409
/// and a JSON-RPC error, the first its answer. Without sessions (clients sharing a token number
/// their requests alike): each gets its own answer.
async fn duplicate_ids_in_flight(sessions: bool) {
    let fx = Fixture::new();
    let project = fx.project("app");
    // Query embeddings wait at the gate: a search on it stays in flight as long as the test
    // wants, held in its query embedding.
    let held = Arc::new(Gate::new());
    let mut config = fx.config();
    config.embedder = Some(Arc::new(
        FakeEmbedder::constant(vec![1.0, 0.0])
            .with_model_id("held-v1")
            .hold_queries(held.clone()),
    ));
    let (url, _, _stop) = serve(config, memloop_mcp::BODY_READ_TIMEOUT, sessions).await;
    let mut session = HttpSession::open(&url, OWNER).await;
    let saved = session
        .tool(
            "context_save",
            json!({"project_path": s(&project), "entries": [
                {"type": "knowledge", "title": "ledger", "content": "the ledger closes at five"}]}),
        )
        .await;
    assert_eq!(saved["written"], 1, "{saved}");
    let id = session.id().map(str::to_owned);
    assert_eq!(id.is_some(), sessions);
    let search = |id: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "context_search",
            "arguments": {"project_path": s(&project), "query": "ledger"}}})
        .to_string()
    };
    let first = tokio::spawn({
        let (url, id, body) = (url.clone(), id.clone(), search(7));
        async move {
            raw(
                &url,
                OWNER,
                id.as_deref(),
                reqwest::Method::POST,
                Some(body),
            )
            .await
        }
    });
    held.wait_entered(1).await; // the first search is in flight, held in its query embedding
    if !sessions {
        let list = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"}).to_string();
        let (status, body) = raw(&url, OWNER, None, reqwest::Method::POST, Some(list)).await;
        assert_eq!(status, 200, "{body}");
        let answer = memloop_testkit::McpHttp::message(&body);
        assert_eq!(answer["id"], 7, "{body}");
        assert!(answer["result"]["tools"].is_array(), "{body}");
        held.release(1);
        let (status, body) = first.await.unwrap();
        assert_eq!(status, 200);
        assert!(
            body.contains("ledger") && !body.contains("\"tools\""),
            "{body}"
        );
        return;
    }
    let (status, body) = raw(
        &url,
        OWNER,
        id.as_deref(),
        reqwest::Method::POST,
        Some(search(7)),
    )
    .await;
    assert_eq!(status, 409, "{body}");
    let error: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (error["id"].clone(), error["error"]["code"].clone()),
        (json!(7), json!(-32600)),
        "{body}"
    );
    held.release(1);
    let (status, body) = first.await.unwrap();
    assert_eq!(status, 200);
    assert!(body.contains("ledger"), "{body}");
    // Once answered, the id is free again.
    let again = tokio::spawn({
        let (url, id, body) = (url.clone(), id.clone(), search(7));
        async move {
            raw(
                &url,
                OWNER,
                id.as_deref(),
                reqwest::Method::POST,
                Some(body),
            )
            .await
        }
    });
    held.wait_entered(2).await; // the gate counts every arrival: this is the second search
    held.release(1);
    assert_eq!(again.await.unwrap().0, 200);
}

#[tokio::test]
async fn what_is_not_one_json_rpc_request_is_refused_with_a_json_rpc_error() {
    let fx = Fixture::new();
    let (url, _, _stop) = serve(fx.config(), memloop_mcp::BODY_READ_TIMEOUT, true).await;
    let session = HttpSession::open(&url, OWNER).await;
    let id = session.id().unwrap().to_owned();
    for (body, status, code) in [
        ("[]", 400, -32600),
        (r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#, 400, -32600),
        ("null", 400, -32600),
        ("42", 400, -32600),
        (r#"{"jsonrpc":"2.0","id":1}"#, 400, -32600),
        (r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#, 400, -32600),
        (
            r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            400,
            -32600,
        ),
        (
            r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#,
            400,
            -32600,
        ),
        (r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#, 400, -32600),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}"#,
            400,
            -32600,
        ),
        (
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":null}}"#,
            200,
            -32602,
        ),
        (
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":5}}"#,
            200,
            -32602,
        ),
        (
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"context_load","arguments":"x"}}"#,
            200,
            -32602,
        ),
        (
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"context_load","arguments":[]}}"#,
            200,
            -32602,
        ),
    ] {
        let (got, text) = raw(
            &url,
            OWNER,
            Some(&id),
            reqwest::Method::POST,
            Some(body.to_owned()),
        )
        .await;
        let answer: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        assert_eq!(
            (got, answer["error"]["code"].clone()),
            (status, json!(code)),
            "{body}: {text}"
        );
    }
    // An unknown tool is named, boundedly.
    let huge = "t".repeat(100_000);
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": huge}});
    let (_, text) = raw(
        &url,
        OWNER,
        Some(&id),
        reqwest::Method::POST,
        Some(body.to_string()),
    )
    .await;
    assert!(
        text.contains("unknown tool `tttt") && text.len() < 1_000,
        "{}",
        &text[..200.min(text.len())]
    );
}

#[tokio::test]
async fn a_refusal_repeats_a_bounded_part_of_what_was_sent() {
    let fx = Fixture::new();
    let project = fx.project("app");
    let (url, _, _stop) = serve(fx.config(), memloop_mcp::BODY_READ_TIMEOUT, false).await;
    let mut session = HttpSession::open(&url, OWNER).await;
    let saved = session
        .tool(
            "context_save",
            json!({"project_path": s(&project), "entries": [{"type": "todo", "content": "x"}]}),
        )
        .await;
    assert_eq!(saved["written"], 1, "{saved}");
    let target = format!("knowledge/{}.md", "x".repeat(100_000));
    let answer = session
        .tool(
            "context_manage",
            json!({"project_path": s(&project), "action": "delete", "target": target}),
        )
        .await;
    assert_eq!(answer["is_error"], true, "{}", &answer.to_string()[..300]);
    assert!(
        answer.to_string().len() < 8_000,
        "{} bytes",
        answer.to_string().len()
    );
}
