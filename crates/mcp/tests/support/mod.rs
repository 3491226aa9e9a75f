//! An in-process client for `MemoryServer` over a duplex pipe (the real MCP protocol, rmcp's
//! client), and a fixture with a root of projects and a `MEMLOOP_HOME`.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod team;

use memloop_host::env::EnvVars;
use memloop_mcp::{
    HttpOptions, McpConfig, McpLimits, MemoryServer, SessionCaps, TlsIdentity, TokenLimits, Tokens,
};
use memloop_testkit::McpHttp;
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

/// A Streamable HTTP MCP session over loopback with a bearer token: [`McpHttp`] with the
/// assertions the tests share (the session opens, a tool answers 200).
pub struct HttpSession(McpHttp);

impl HttpSession {
    /// Open a session at `url` with `token` (protocol 2025-03-26).
    pub async fn open(url: &str, token: &str) -> Self {
        Self::open_version(url, token, "2025-03-26").await
    }

    /// Open a session at `url` with `token`, in protocol `version`: after 2025-03-26 every
    /// request names it in `MCP-Protocol-Version`.
    pub async fn open_version(url: &str, token: &str, version: &str) -> Self {
        let mut client = McpHttp::new(url).with_token(token).with_protocol(version);
        let result = client.initialize().await.unwrap();
        assert_eq!(result["protocolVersion"], version, "{result}");
        Self(client)
    }

    /// Send the next requests to `url` (another replica): without sessions any replica
    /// answers them.
    pub fn at(&mut self, url: &str) {
        self.0.set_url(url);
    }

    /// The session id the server gave.
    pub fn id(&self) -> Option<&str> {
        self.0.session()
    }

    /// POST one JSON-RPC message: the status and the answer's message.
    pub async fn send(&mut self, body: Value) -> (u16, Value) {
        self.0.send(&body).await.unwrap()
    }

    /// Send one JSON-RPC request (the next id): the status and the answer's message.
    pub async fn request(&mut self, method: &str, params: Value) -> (u16, Value) {
        self.0.request(method, params).await.unwrap()
    }

    /// Call `tool`: the status and the whole answer (a refusal by access is HTTP 403).
    pub async fn call_tool(&mut self, name: &str, args: Value) -> (u16, Value) {
        self.request("tools/call", json!({"name": name, "arguments": args}))
            .await
    }

    /// Call `tool`, which must answer 200: its structured answer with `is_error` added.
    pub async fn tool(&mut self, name: &str, args: Value) -> Value {
        self.0.call(name, args).await.unwrap()
    }
}

/// Write `n` memories into `project`'s memory dir straight through its store (batches of 500),
/// memory `i` at the path and with the document `memory(i)` gives.
pub async fn fill(
    fx: &Fixture,
    project: &Path,
    n: usize,
    memory: impl Fn(usize) -> (String, memloop_store::MemoryDoc),
) {
    let dir = memloop_paths::project_dir(&fx.home, project).join("memory");
    let store = memloop_files::FileMemoryStore::open(dir).unwrap();
    write_all(&store, n, memory).await;
}

/// Write `n` memories straight through `store` (batches of 500), memory `i` at the path and
/// with the document `memory(i)` gives.
pub async fn write_all(
    store: &dyn memloop_store::MemoryStore,
    n: usize,
    memory: impl Fn(usize) -> (String, memloop_store::MemoryDoc),
) {
    use memloop_store::{CheckedWrite, ExpectedVersion, WriteMode};
    let limits = McpLimits::default().write_limits();
    for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
        let writes = chunk
            .iter()
            .map(|i| {
                let (path, doc) = memory(*i);
                let w = CheckedWrite::check(&path, &doc, WriteMode::Overwrite, limits).unwrap();
                (w, ExpectedVersion::Any)
            })
            .collect();
        store.write_checked_batch(writes).await.unwrap();
    }
}

/// The runtime a bench drives the server on: two workers, as the machines measured have cores.
pub fn bench_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}
