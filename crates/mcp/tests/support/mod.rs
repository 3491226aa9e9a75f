//! An in-process client for `MemoryServer` over a duplex pipe (the real MCP protocol, rmcp's
//! client), and a fixture with a root of projects and a `MEMLOOP_HOME`.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod team;

use memloop_host::env::EnvVars;
use memloop_mcp::{
    HttpOptions, McpConfig, McpLimits, MemoryServer, SessionCaps, TlsIdentity, TokenLimits, Tokens,
};
use rmcp::{
    RoleClient, ServiceExt,
    model::{CallToolRequestParams, ReadResourceRequestParams},
    service::RunningService,
};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

pub struct Fixture {
    _tmp: tempfile::TempDir,
    pub base: PathBuf,
    pub root: PathBuf,
    pub home: PathBuf,
    pub user_home: PathBuf,
}

impl Fixture {
    pub fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        let (root, home, user_home) = (base.join("root"), base.join("mlhome"), base.join("user"));
        for d in [&root, &home, &user_home] {
            std::fs::create_dir_all(d).unwrap();
        }
        Self {
            _tmp: tmp,
            base,
            root,
            home,
            user_home,
        }
    }

    /// A project dir under the root.
    pub fn project(&self, name: &str) -> PathBuf {
        let p = self.root.join(name);
        std::fs::create_dir_all(&p).unwrap();
        p
    }

    pub fn config(&self) -> McpConfig {
        McpConfig {
            roots: vec![self.root.clone()],
            allow_any_project: false,
            env: EnvVars::from_pairs([
                ("MEMLOOP_HOME", self.home.to_string_lossy().into_owned()),
                ("HOME", self.user_home.to_string_lossy().into_owned()),
            ]),
            claude: false,
            memory_dir: None,
            limits: McpLimits::default(),
            no_claude_md: false,
            embedder: None,
            summaries: Default::default(),
            stores: None,
            cache_bytes: None,
            reveal_store: false,
        }
    }

    /// Every file under `dir`, relative, sorted.
    pub fn files_under(dir: &Path) -> Vec<String> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in entries.flatten() {
                let p = e.path();
                if e.file_type().unwrap().is_dir() {
                    stack.push(p.clone());
                }
                out.push(p.strip_prefix(dir).unwrap().to_string_lossy().into_owned());
            }
        }
        out.sort();
        out
    }
}

/// `serve_http` on a free loopback port, over `fx`'s config; stopped when the guard drops.
pub struct HttpServer {
    /// The bound address.
    pub addr: std::net::SocketAddr,
    /// `http://ADDR/mcp`.
    pub url: String,
    stop: tokio_util::sync::CancellationToken,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Start `serve_http` for `fx` with `tokens` (plain HTTP without `tls`).
pub async fn start_http(
    fx: &Fixture,
    tokens: Option<Tokens>,
    tls: Option<TlsIdentity>,
) -> HttpServer {
    start_http_config(fx.config(), tokens, tls).await
}

/// Start `serve_http` over `config` with `tokens` (plain HTTP without `tls`), without sessions
/// and with the default per-token limits.
pub async fn start_http_config(
    config: McpConfig,
    tokens: Option<Tokens>,
    tls: Option<TlsIdentity>,
) -> HttpServer {
    start_http_with(config, tokens, tls, None, Default::default()).await
}

/// [`start_http_config`] with MCP sessions (`Some` caps) and per-token `limits`.
pub async fn start_http_with(
    config: McpConfig,
    tokens: Option<Tokens>,
    tls: Option<TlsIdentity>,
    sessions: Option<SessionCaps>,
    limits: TokenLimits,
) -> HttpServer {
    let stop = tokio_util::sync::CancellationToken::new();
    let options = HttpOptions {
        addr: "127.0.0.1:0".parse().unwrap(),
        tokens,
        insecure_no_auth: false,
        tls,
        shutdown: stop.clone(),
        sessions,
        limits,
        body_timeout: memloop_mcp::BODY_READ_TIMEOUT,
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    let server = MemoryServer::new(config);
    tokio::spawn(async move { memloop_mcp::serve_http(server, options, Some(tx)).await });
    let addr = rx.await.unwrap();
    HttpServer {
        addr,
        url: format!("http://{addr}/mcp"),
        stop,
    }
}

pub type Client = RunningService<RoleClient, ()>;

/// Serve `config` in this process and connect rmcp's client to it.
pub async fn connect(config: McpConfig) -> Client {
    connect_with_server(config).await.0
}

/// [`connect`], also returning a clone of the server (it shares the open stores and the
/// summariser with the one serving the client).
pub async fn connect_with_server(config: McpConfig) -> (Client, MemoryServer) {
    let (client_io, server_io) = tokio::io::duplex(1 << 22);
    let server = MemoryServer::new(config);
    let handle = server.clone();
    tokio::spawn(async move {
        let (r, w) = tokio::io::split(server_io);
        if let Ok(running) = server.serve((r, w)).await {
            let _ = running.waiting().await;
        }
    });
    let (r, w) = tokio::io::split(client_io);
    (().serve((r, w)).await.unwrap(), handle)
}

/// Call `tool`; the structured answer with `is_error` added.
pub async fn call(client: &Client, tool: &'static str, args: Value) -> Value {
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

/// `resources/read` of `uri`: (text, mime type).
pub async fn read_resource(client: &Client, uri: &str) -> (String, Option<String>) {
    let r = client
        .read_resource(ReadResourceRequestParams::new(uri))
        .await
        .unwrap();
    let v = serde_json::to_value(&r.contents[0]).unwrap();
    (
        v["text"].as_str().unwrap_or_default().to_owned(),
        v["mimeType"].as_str().map(str::to_owned),
    )
}

pub fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

pub async fn save(client: &Client, project: &Path, entries: Value) -> Value {
    call(
        client,
        "context_save",
        json!({ "project_path": s(project), "entries": entries }),
    )
    .await
}

/// A raw Streamable HTTP MCP session over loopback: initialize, then JSON-RPC requests with
/// the session id and a bearer token.
pub struct HttpSession {
    http: reqwest::Client,
    url: String,
    token: String,
    id: Option<String>,
    next: u64,
    /// The protocol version sent in `MCP-Protocol-Version` (none for 2025-03-26).
    version: Option<String>,
}

/// The JSON-RPC message of an answer: a JSON body, or the last `data:` of an SSE stream.
pub fn http_message(body: &str) -> Value {
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        return v;
    }
    body.lines()
        .rev()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .find_map(|d| serde_json::from_str::<Value>(d).ok())
        .unwrap_or(Value::Null)
}

impl HttpSession {
    /// Open a session at `url` with `token` (protocol 2025-03-26).
    pub async fn open(url: &str, token: &str) -> Self {
        Self::open_version(url, token, "2025-03-26").await
    }

    /// Open a session at `url` with `token`, in protocol `version`: after 2025-03-26 every
    /// request names it in `MCP-Protocol-Version`.
    pub async fn open_version(url: &str, token: &str, version: &str) -> Self {
        let mut session = Self {
            http: reqwest::Client::new(),
            url: url.to_owned(),
            token: token.to_owned(),
            id: None,
            next: 1,
            version: None,
        };
        let (status, answer) = session
            .send(
                json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": version, "capabilities": {},
                "clientInfo": {"name": "tests", "version": "0"}}}),
            )
            .await;
        assert_eq!(status, 200);
        assert_eq!(answer["result"]["protocolVersion"], version, "{answer}");
        session.version = (version != "2025-03-26").then(|| version.to_owned());
        session
            .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        session
    }

    /// Send the next requests to `url` (another replica): without sessions any replica
    /// answers them.
    pub fn at(&mut self, url: &str) {
        self.url = url.to_owned();
    }

    /// The session id the server gave.
    pub fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    /// POST one JSON-RPC message: the status and the answer's message.
    pub async fn send(&mut self, body: Value) -> (u16, Value) {
        let mut req = self
            .http
            .post(&self.url)
            .bearer_auth(&self.token)
            .header("Accept", "application/json, text/event-stream")
            .json(&body);
        if let Some(id) = &self.id {
            req = req.header("Mcp-Session-Id", id);
        }
        if let Some(version) = &self.version {
            req = req.header("MCP-Protocol-Version", version);
        }
        let r = req.send().await.unwrap();
        if let Some(id) = r.headers().get("mcp-session-id") {
            self.id = Some(id.to_str().unwrap().to_owned());
        }
        let status = r.status().as_u16();
        (status, http_message(&r.text().await.unwrap()))
    }

    /// Send one JSON-RPC request (the next id): the status and the answer's message.
    pub async fn request(&mut self, method: &str, params: Value) -> (u16, Value) {
        self.next += 1;
        let id = self.next;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await
    }

    /// Call `tool`: the status and the whole answer (a refusal by access is HTTP 403).
    pub async fn call_tool(&mut self, name: &str, args: Value) -> (u16, Value) {
        self.request("tools/call", json!({"name": name, "arguments": args}))
            .await
    }

    /// Call `tool`, which must answer 200: its structured answer with `is_error` added.
    pub async fn tool(&mut self, name: &str, args: Value) -> Value {
        let (status, v) = self.call_tool(name, args).await;
        assert_eq!(status, 200, "{v}");
        let mut out = v["result"]["structuredContent"].clone();
        assert!(out.is_object(), "{v}");
        out["is_error"] = json!(v["result"]["isError"].as_bool().unwrap_or(false));
        out
    }
}
