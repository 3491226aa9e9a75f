//! Stateless replicas over real loopback HTTP: two servers on one PostgreSQL store answer one
//! client's requests in turn (raw HTTP, and the MCP Python SDK through a per-request
//! round-robin proxy), each token is held to its request rate (HTTP 429 with `Retry-After` past
//! the burst) and to its requests in flight, and `/health` says whether the store answers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use memloop_mcp::{McpConfig, ProjectStores, TeamStores, TokenLimits, Tokens};
use memloop_testkit::{FakeEmbedder, Gate};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use support::team::{DropSchema, TestTeam};
use support::{Fixture, HttpSession, s};

const WRITER: &str = "writer-token-0123456789";
const OTHER: &str = "other-token-0123456789";

fn tokens() -> Tokens {
    Tokens::parse(&format!("{WRITER}\n{OTHER}\n")).unwrap()
}

fn team_config(fx: &Fixture, team: Arc<TestTeam>) -> McpConfig {
    let mut config = fx.config();
    config.stores = Some(team as Arc<dyn ProjectStores>);
    config
}

async fn start(config: McpConfig, limits: TokenLimits) -> support::HttpServer {
    support::start_http_with(config, Some(tokens()), None, None, limits).await
}

async fn post(url: &str, token: &str, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(url)
        .bearer_auth(token)
        .header("Accept", "application/json, text/event-stream")
        .json(body)
        .send()
        .await
        .unwrap()
}

fn list(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_initialized_on_one_replica_is_answered_by_another() {
    let fx = Fixture::new();
    let project = fx.project("app");
    let schema = format!("memloop_mcp_{}", uuid::Uuid::new_v4().simple());
    let _drop = DropSchema(schema.clone());
    let a = start(
        team_config(&fx, TestTeam::sharing(&schema, "replica-a")),
        TokenLimits::default(),
    )
    .await;
    let b = start(
        team_config(&fx, TestTeam::sharing(&schema, "replica-b")),
        TokenLimits::default(),
    )
    .await;
    for version in ["2025-03-26", "2025-06-18"] {
        let mut client = HttpSession::open_version(&a.url, WRITER, version).await;
        assert_eq!(client.id(), None, "a stateless server opens no session");
        // A's view of the project before the save (its header cache warm from then on).
        let load = json!({"project_path": s(&project)});
        let before = client.tool("context_load", load.clone()).await;
        let before = before["counts"]["knowledge"].as_u64().unwrap_or(0);
        let list = json!({"project_path": s(&project), "action": "list", "target": "knowledge/"});
        client.tool("context_manage", list.clone()).await;
        client.at(&b.url);
        let saved = client
            .tool(
                "context_save",
                json!({"project_path": s(&project), "entries": [
                    {"type": "knowledge", "title": format!("ledger {version}"),
                     "content": "the ledger closes at five"}]}),
            )
            .await;
        assert_eq!(saved["written"], 1, "{saved}");
        // Saved through B, found through A.
        client.at(&a.url);
        let found = client
            .tool(
                "context_search",
                json!({"project_path": s(&project), "query": "ledger closes"}),
            )
            .await;
        let title = format!("ledger {version}");
        assert!(
            titles(&found["results"]).contains(&title.as_str()),
            "{found}"
        );
        // So are loads and lists through A.
        let loaded = client.tool("context_load", load).await;
        assert_eq!(loaded["counts"]["knowledge"], before + 1, "{loaded}");
        let listed = client.tool("context_manage", list).await;
        assert!(
            titles(&listed["memories"]).contains(&title.as_str()),
            "{listed}"
        );
    }
}

/// The titles of a list of memories in an answer (search results, a listing).
fn titles(memories: &Value) -> Vec<&str> {
    memories
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["title"].as_str())
        .collect()
}

/// A reverse proxy on loopback that sends each request to the next backend in turn (not each
/// connection: a keep-alive connection's requests alternate too), as a round-robin balancer
/// configured per request does. Counts the requests each backend got.
struct RoundRobin {
    url: String,
    counts: Arc<Vec<AtomicUsize>>,
    _stop: tokio_util::sync::DropGuard,
}

async fn round_robin(backends: Vec<String>) -> RoundRobin {
    use http_body_util::{BodyExt, Full};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let counts: Arc<Vec<AtomicUsize>> =
        Arc::new(backends.iter().map(|_| AtomicUsize::new(0)).collect());
    let next = Arc::new(AtomicUsize::new(0));
    let backends = Arc::new(backends);
    let http = reqwest::Client::new();
    let (done, counted) = (stop.clone(), counts.clone());
    tokio::spawn(async move {
        loop {
            let (stream, _) = tokio::select! {
                () = done.cancelled() => return,
                a = listener.accept() => a.unwrap(),
            };
            let (backends, next, http, counts) = (
                backends.clone(),
                next.clone(),
                http.clone(),
                counted.clone(),
            );
            let service =
                hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let (backends, next, http, counts) =
                        (backends.clone(), next.clone(), http.clone(), counts.clone());
                    async move {
                        let i = next.fetch_add(1, Ordering::SeqCst) % backends.len();
                        counts[i].fetch_add(1, Ordering::SeqCst);
                        let (parts, body) = req.into_parts();
                        let body = body.collect().await.unwrap().to_bytes();
                        let mut out = http.request(parts.method.clone(), &backends[i]).body(body);
                        for (name, value) in &parts.headers {
                            if name != hyper::header::HOST && name != hyper::header::CONTENT_LENGTH
                            {
                                out = out.header(name, value);
                            }
                        }
                        let answer = out.send().await.unwrap();
                        let mut response = hyper::Response::builder().status(answer.status());
                        for (name, value) in answer.headers() {
                            if name != hyper::header::CONTENT_LENGTH
                                && name != hyper::header::TRANSFER_ENCODING
                            {
                                response = response.header(name, value);
                            }
                        }
                        let bytes = answer.bytes().await.unwrap();
                        Ok::<_, std::convert::Infallible>(response.body(Full::new(bytes)).unwrap())
                    }
                });
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    RoundRobin {
        url: format!("http://{addr}/mcp"),
        counts,
        _stop: stop.drop_guard(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_works_through_a_round_robin_balancer_over_two_replicas() {
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
    let schema = format!("memloop_mcp_{}", uuid::Uuid::new_v4().simple());
    let _drop = DropSchema(schema.clone());
    let a = start(
        team_config(&fx, TestTeam::sharing(&schema, "replica-a")),
        TokenLimits::default(),
    )
    .await;
    let b = start(
        team_config(&fx, TestTeam::sharing(&schema, "replica-b")),
        TokenLimits::default(),
    )
    .await;
    let balancer = round_robin(vec![a.url.clone(), b.url.clone()]).await;
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/http_session.py");
    let out = tokio::process::Command::new(&python)
        .arg(&script)
        .arg(&balancer.url)
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
    // Both replicas answered part of the client's requests.
    let counts: Vec<usize> = balancer
        .counts
        .iter()
        .map(|c| c.load(Ordering::SeqCst))
        .collect();
    assert!(counts.iter().all(|&n| n >= 2), "{counts:?}");
}

#[tokio::test]
async fn past_the_burst_a_token_gets_429_with_retry_after_and_a_json_rpc_error() {
    let fx = Fixture::new();
    // One request per 1000 s: the bucket does not refill during the test.
    let server = start(
        fx.config(),
        TokenLimits {
            concurrent: 0,
            rate: 0.001,
            burst: 3,
        },
    )
    .await;
    let health = reqwest::Client::new();
    for path in ["/health", "/health/live"] {
        for _ in 0..5 {
            let r = health
                .get(format!("http://{}{path}", server.addr))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200, "{path}");
        }
    }
    // Refused tokens are not counted against anyone.
    assert_eq!(
        post(&server.url, "nobody-0123456789abc", &list(1))
            .await
            .status(),
        401
    );
    for i in 0..3 {
        let r = post(&server.url, WRITER, &list(i)).await;
        assert_eq!(r.status(), 200, "request {i}");
    }
    let r = post(&server.url, WRITER, &list(9)).await;
    assert_eq!(r.status(), 429);
    assert_eq!(
        r.headers().get("retry-after").and_then(|v| v.to_str().ok()),
        Some("1000")
    );
    let error: Value = r.json().await.unwrap();
    assert_eq!(error["jsonrpc"], "2.0", "{error}");
    assert_eq!(error["error"]["code"], -32000, "{error}");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("per second"),
        "{error}"
    );
    // Another token has its own bucket; health is still answered.
    assert_eq!(post(&server.url, OTHER, &list(1)).await.status(), 200);
    let r = health
        .get(format!("http://{}/health", server.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_past_its_requests_in_flight_gets_429_until_one_is_answered() {
    let fx = Fixture::new();
    let project = fx.project("app");
    // Query embeddings wait at the gate: a search on it stays in flight as long as the test
    // wants, held in its query embedding.
    let held = Arc::new(Gate::new());
    let mut config = fx.config();
    config.embedder = Some(Arc::new(
        FakeEmbedder::constant(vec![1.0, 0.0])
            .with_model_id("held")
            .hold_queries(held.clone()),
    ));
    let server = start(
        config,
        TokenLimits {
            concurrent: 1,
            rate: 0.0,
            burst: 1,
        },
    )
    .await;
    let mut client = HttpSession::open(&server.url, WRITER).await;
    let saved = client
        .tool(
            "context_save",
            json!({"project_path": s(&project), "entries": [
                {"type": "knowledge", "title": "ledger", "content": "the ledger closes at five"}]}),
        )
        .await;
    assert_eq!(saved["written"], 1, "{saved}");
    let search = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "context_search", "arguments": {"project_path": s(&project), "query": "ledger"}}});
    let first = tokio::spawn({
        let (url, search) = (server.url.clone(), search.clone());
        async move {
            let r = post(&url, WRITER, &search).await;
            (r.status().as_u16(), r.text().await.unwrap())
        }
    });
    held.wait_entered(1).await; // the search is in flight, held in its query embedding
    let r = post(&server.url, WRITER, &list(8)).await;
    assert_eq!(r.status(), 429);
    assert_eq!(
        r.headers().get("retry-after").and_then(|v| v.to_str().ok()),
        Some("1")
    );
    let error: Value = r.json().await.unwrap();
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("in flight"),
        "{error}"
    );
    // Another token is not held back by it.
    assert_eq!(post(&server.url, OTHER, &list(8)).await.status(), 200);
    held.release(1);
    let (status, body) = first.await.unwrap();
    assert_eq!(status, 200);
    assert!(body.contains("ledger"), "{body}");
    // Answered: the token may send again.
    assert_eq!(post(&server.url, WRITER, &list(9)).await.status(), 200);
}

async fn health(server: &support::HttpServer, path: &str) -> (u16, Value) {
    let r = reqwest::Client::new()
        .get(format!("http://{}{path}", server.addr))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap())
}

#[tokio::test]
async fn health_is_ok_on_a_readable_memory_dir_and_503_on_an_unreadable_one() {
    let fx = Fixture::new();
    let server = start(fx.config(), TokenLimits::default()).await;
    assert_eq!(
        health(&server, "/health").await,
        (200, json!({"status": "ok"}))
    );
    assert_eq!(
        health(&server, "/health/live").await,
        (200, json!({"status": "ok"}))
    );
    // The memory dirs' home is a regular file: nothing can be read or written there.
    let blocked = fx.base.join("blocked");
    std::fs::write(&blocked, "not a directory").unwrap();
    let mut config = fx.config();
    config.memory_dir = Some(blocked.join("memory"));
    let broken = start(config, TokenLimits::default()).await;
    let (status, body) = health(&broken, "/health").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["status"], "unavailable");
    let text = body.to_string();
    assert!(!text.contains(&s(&fx.base)), "{text}");
    assert!(text.contains("memory directory"), "{text}");
    // Live all the same: the process serves.
    assert_eq!(health(&broken, "/health/live").await.0, 200);
}

#[tokio::test]
async fn health_is_ok_while_the_database_answers_and_503_when_it_does_not() {
    let fx = Fixture::new();
    let schema = format!("memloop_mcp_{}", uuid::Uuid::new_v4().simple());
    let _drop = DropSchema(schema.clone());
    let up = start(
        team_config(&fx, TestTeam::sharing(&schema, "health-up")),
        TokenLimits::default(),
    )
    .await;
    assert_eq!(health(&up, "/health").await, (200, json!({"status": "ok"})));
    // A database on a port nobody listens on (bound, then closed).
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut config = fx.config();
    let url = format!("postgres://root@127.0.0.1:{port}/test");
    config.stores = Some(Arc::new(TeamStores::new(
        url.clone(),
        memloop_host::env::EnvVars::from_process(),
    )));
    let down = start(config, TokenLimits::default()).await;
    let (status, body) = health(&down, "/health").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(
        body,
        json!({"status": "unavailable", "reason": "the postgres store does not answer"})
    );
    assert!(!body.to_string().contains(&port.to_string()));
    assert_eq!(health(&down, "/health/live").await.0, 200);
}
