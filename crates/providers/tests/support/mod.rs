//! Shared helpers for the provider tests: fixtures, fast retry policies, recorded bodies.
#![allow(dead_code)]

use memloop_core::{
    CancellationToken,
    message::Message,
    model::{Model, ModelError, ModelRequest, ModelResponse},
};
use memloop_providers::{
    AnthropicConfig, AnthropicModel, OpenAiCompatModel, OpenAiConfig, RetryPolicy,
};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use wiremock::{MockServer, Request, Respond, ResponseTemplate};

/// The bytes of `tests/fixtures/<name>`.
pub fn fixture_bytes(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()))
}

/// A fixture as JSON.
pub fn fixture(name: &str) -> serde_json::Value {
    serde_json::from_slice(&fixture_bytes(name)).unwrap()
}

/// A JSON response with a fixture body.
pub fn reply(status: u16, name: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_raw(fixture_bytes(name), "application/json")
}

/// Retries with millisecond backoff, so tests never sleep for long.
pub fn fast_retry(max_attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        initial_backoff: Duration::from_millis(2),
        max_backoff: Duration::from_millis(10),
        max_retry_after: Duration::from_secs(5),
    }
}

/// The JSON bodies the server received, in order.
pub async fn bodies(server: &MockServer) -> Vec<serde_json::Value> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect()
}

/// Answers the n-th request with the n-th template (the last one repeats).
pub struct Sequence {
    templates: Vec<ResponseTemplate>,
    next: AtomicUsize,
}

impl Sequence {
    /// A sequence of templates.
    pub fn new(templates: Vec<ResponseTemplate>) -> Self {
        Self {
            templates,
            next: AtomicUsize::new(0),
        }
    }
}

impl Respond for Sequence {
    fn respond(&self, _request: &Request) -> ResponseTemplate {
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        self.templates[n.min(self.templates.len() - 1)].clone()
    }
}

/// Bodies no provider should ever send, and that must never make us panic.
pub fn hostile_bodies(valid: &[u8]) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"<html><body><h1>502 Bad Gateway</h1></body></html>".to_vec(),
        b"null".to_vec(),
        b"[]".to_vec(),
        b"{}".to_vec(),
        b"{\"content\": 7}".to_vec(),
        b"{\"choices\": [{}]}".to_vec(),
        b"{\"choices\": [{\"message\": {\"tool_calls\": [{\"function\": {}}]}}]}".to_vec(),
        b"{\"content\": [{\"type\": \"text\"}]}".to_vec(),
        b"{\"content\": [{\"type\": \"tool_use\", \"id\": 3}]}".to_vec(),
        vec![0xff, 0xfe, 0x00, 0x7b],
        "{\"content\": [{\"type\": \"text\", \"text\": \"\u{1F600}"
            .as_bytes()
            .to_vec(),
    ];
    let valid = valid.trim_ascii_end();
    for cut in [1, valid.len() / 3, valid.len() / 2, valid.len() - 1] {
        out.push(valid[..cut].to_vec());
    }
    out
}

/// Answer every POST with `template`, expecting exactly `times` requests (checked on drop).
pub async fn mount_expect(server: &MockServer, template: impl Respond + 'static, times: u64) {
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(template)
        .expect(times)
        .mount(server)
        .await;
}

/// A server answering the n-th POST with the n-th of [`hostile_bodies`], and those bodies.
pub async fn hostile_server(valid_fixture: &str) -> (MockServer, Vec<Vec<u8>>) {
    let cases = hostile_bodies(&fixture_bytes(valid_fixture));
    let server = MockServer::start().await;
    let templates = cases
        .iter()
        .map(|b| ResponseTemplate::new(200).set_body_raw(b.clone(), "application/json"))
        .collect();
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(Sequence::new(templates))
        .mount(&server)
        .await;
    (server, cases)
}

/// A one-line user request.
pub fn hi() -> ModelRequest {
    ModelRequest::new("main", vec![Message::user("hi")])
}

/// One call with a fresh cancellation token.
pub async fn call(m: &impl Model, req: ModelRequest) -> Result<ModelResponse, ModelError> {
    m.complete(req, CancellationToken::new()).await
}

/// Answer POSTs to `path` with `responder`.
pub async fn serve(server: &MockServer, path: &str, responder: impl Respond + 'static) {
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .and(wiremock::matchers::path(path))
        .respond_with(responder)
        .mount(server)
        .await;
}

/// An Anthropic model pointed at `server`, with fast retries and a 5 s timeout.
pub fn anthropic(server: &MockServer, max_attempts: u32) -> AnthropicModel {
    anthropic_at(&server.uri(), max_attempts)
}

/// An Anthropic model pointed at `uri` (see [`anthropic`]).
pub fn anthropic_at(uri: &str, max_attempts: u32) -> AnthropicModel {
    let mut config = AnthropicConfig::new("sk-ant-test", "claude-sonnet-4-5");
    config.base_url = uri.to_owned();
    config.retry = fast_retry(max_attempts);
    config.timeout = Some(Duration::from_secs(5));
    AnthropicModel::new(config).unwrap()
}

/// OpenAI settings for `server` (`{uri}/v1/`, key `sk-test`), fast retries, a 5 s timeout.
pub fn openai_config(server: &MockServer, max_attempts: u32) -> OpenAiConfig {
    openai_config_at(&server.uri(), max_attempts)
}

/// OpenAI settings for `uri` (see [`openai_config`]).
pub fn openai_config_at(uri: &str, max_attempts: u32) -> OpenAiConfig {
    let mut c = OpenAiConfig::new(format!("{uri}/v1/"), "gpt-4o").with_api_key("sk-test");
    c.retry = fast_retry(max_attempts);
    c.timeout = Some(Duration::from_secs(5));
    c
}

/// An OpenAI-compatible model for `server` (see [`openai_config`]).
pub fn openai(server: &MockServer, max_attempts: u32) -> OpenAiCompatModel {
    OpenAiCompatModel::new(openai_config(server, max_attempts)).unwrap()
}

/// What a raw loopback SSE server sends on one connection.
#[derive(Debug, Clone)]
pub struct SseReply {
    /// HTTP status.
    pub status: u16,
    /// Body pieces, each written and flushed as one HTTP chunk.
    pub chunks: Vec<Vec<u8>>,
    /// Close the connection without the terminating chunk (a cut connection).
    pub cut: bool,
}

impl SseReply {
    /// A 200 event stream written in `chunks`.
    pub fn ok(chunks: Vec<Vec<u8>>) -> Self {
        Self {
            status: 200,
            chunks,
            cut: false,
        }
    }

    /// A 200 event stream cut after `chunks`.
    pub fn cut(chunks: Vec<Vec<u8>>) -> Self {
        Self {
            status: 200,
            chunks,
            cut: true,
        }
    }
}

/// A raw HTTP/1.1 loopback server for streams: the n-th connection gets the n-th reply (the last
/// repeats), written with chunked transfer encoding and flushed piece by piece, so tests control
/// exactly where the bytes split. Records each request's JSON body.
pub struct SseServer {
    /// `http://127.0.0.1:<port>`.
    pub uri: String,
    bodies: std::sync::Arc<std::sync::Mutex<Vec<serde_json::Value>>>,
}

impl SseServer {
    /// Start serving `replies`.
    pub async fn start(replies: Vec<SseReply>) -> Self {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let uri = format!("http://{}", listener.local_addr().unwrap());
        let bodies = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = bodies.clone();
        tokio::spawn(async move {
            let mut n = 0usize;
            while let Ok((mut sock, _)) = listener.accept().await {
                let reply = replies[n.min(replies.len() - 1)].clone();
                n += 1;
                let seen = seen.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut tmp = [0u8; 4096];
                    let body_start = loop {
                        let k = sock.read(&mut tmp).await.unwrap();
                        if k == 0 {
                            return;
                        }
                        buf.extend_from_slice(&tmp[..k]);
                        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break p + 4;
                        }
                    };
                    let head = String::from_utf8_lossy(&buf[..body_start]).to_ascii_lowercase();
                    let len: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .map(|v| v.trim().parse().unwrap())
                        .unwrap_or(0);
                    while buf.len() < body_start + len {
                        let k = sock.read(&mut tmp).await.unwrap();
                        if k == 0 {
                            break;
                        }
                        buf.extend_from_slice(&tmp[..k]);
                    }
                    if let Ok(v) = serde_json::from_slice(&buf[body_start..]) {
                        seen.lock().unwrap().push(v);
                    }
                    let head = format!(
                        "HTTP/1.1 {} X\r\ncontent-type: text/event-stream\r\n\
                         transfer-encoding: chunked\r\nconnection: close\r\n\r\n",
                        reply.status
                    );
                    if sock.write_all(head.as_bytes()).await.is_err() {
                        return;
                    }
                    let _ = sock.flush().await;
                    for c in &reply.chunks {
                        let mut framed = format!("{:x}\r\n", c.len()).into_bytes();
                        framed.extend_from_slice(c);
                        framed.extend_from_slice(b"\r\n");
                        if sock.write_all(&framed).await.is_err() {
                            return;
                        }
                        let _ = sock.flush().await;
                        // Let the client read each piece separately.
                        tokio::task::yield_now().await;
                    }
                    if !reply.cut {
                        let _ = sock.write_all(b"0\r\n\r\n").await;
                    }
                    let _ = sock.shutdown().await;
                });
            }
        });
        Self { uri, bodies }
    }

    /// The JSON bodies received so far, in order.
    pub fn bodies(&self) -> Vec<serde_json::Value> {
        self.bodies.lock().unwrap().clone()
    }
}

/// `event: <name>\ndata: <json>\n\n`.
pub fn sse(event: &str, data: serde_json::Value) -> Vec<u8> {
    format!("event: {event}\ndata: {data}\n\n").into_bytes()
}

/// `data: <json>\n\n` (the chat-completions shape).
pub fn sse_data(data: serde_json::Value) -> Vec<u8> {
    format!("data: {data}\n\n").into_bytes()
}

/// Everything a stream yielded, the error (if any) last.
pub async fn drain_stream(
    m: &impl Model,
    req: ModelRequest,
) -> (Vec<memloop_core::model::StreamEvent>, Option<ModelError>) {
    use futures::StreamExt;
    let mut s = m.stream(req, CancellationToken::new());
    let mut events = Vec::new();
    while let Some(item) = s.next().await {
        match item {
            Ok(e) => events.push(e),
            Err(e) => return (events, Some(e)),
        }
    }
    (events, None)
}

/// `v` without any `cache_control` keys (where cache breakpoints sit is tested on its own; the
/// content around them is compared with this).
pub fn without_cache_marks(v: &serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::Object(map) => serde_json::Value::Object(
            map.iter()
                .filter(|(k, _)| k.as_str() != "cache_control")
                .map(|(k, v)| (k.clone(), without_cache_marks(v)))
                .collect(),
        ),
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.iter().map(without_cache_marks).collect())
        }
        other => other.clone(),
    }
}
