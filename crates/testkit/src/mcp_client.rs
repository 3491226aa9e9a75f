//! A small MCP client over Streamable HTTP: JSON-RPC over keep-alive POSTs, answers as JSON or
//! SSE, with or without a session. For tests and the load client, where the official SDKs cost
//! more CPU per call than the server they measure.

use serde_json::{Value, json};
use std::time::Duration;

/// Why a tool call did not complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpCallError {
    /// The request never got an HTTP answer (connection refused or dropped, timeout).
    Transport(String),
    /// The server answered with a status other than 200.
    Status {
        /// The HTTP status.
        status: u16,
        /// `Retry-After` in whole seconds, when the server sent one (a 429 does).
        retry_after: Option<u64>,
        /// The body, for the message.
        body: String,
    },
    /// A 200 whose body holds no JSON-RPC result for the request (or a JSON-RPC error).
    Protocol(String),
}

impl std::fmt::Display for McpCallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Transport(e) => write!(f, "transport: {e}"),
            Self::Status { status, body, .. } => write!(f, "HTTP {status}: {body}"),
            Self::Protocol(e) => write!(f, "protocol: {e}"),
        }
    }
}

impl std::error::Error for McpCallError {}

/// An MCP client on one keep-alive connection pool. It initializes lazily; when the server
/// hands out a session (`Mcp-Session-Id`), later requests carry it, and a 404 (a server or
/// replica that does not know the session) makes the next call initialize again. A stateless
/// server hands out none, and every request stands alone.
///
/// ```no_run
/// # async fn demo() -> Result<(), memloop_testkit::McpCallError> {
/// use memloop_testkit::McpHttp;
/// let mut client = McpHttp::new("http://127.0.0.1:8080/mcp").with_token("secret-token");
/// let found = client
///     .call("context_search", serde_json::json!({"project_path": "/work/repo", "query": "deploy"}))
///     .await?;
/// assert!(found["is_error"] == false);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct McpHttp {
    http: reqwest::Client,
    url: String,
    token: Option<String>,
    protocol: String,
    session: Option<String>,
    initialized: bool,
    next_id: u64,
    timeout: Duration,
    headers: Vec<(String, String)>,
}

impl McpHttp {
    /// A client of the MCP endpoint at `url` (e.g. `http://127.0.0.1:8080/mcp`), speaking
    /// protocol `2025-06-18`, with a 30 s timeout per request.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            http: reqwest::Client::builder()
                .pool_max_idle_per_host(1)
                .build()
                .unwrap_or_default(),
            url: url.into(),
            token: None,
            protocol: "2025-06-18".into(),
            session: None,
            initialized: false,
            next_id: 1,
            timeout: Duration::from_secs(30),
            headers: Vec::new(),
        }
    }

    /// Send `Authorization: Bearer <token>` with every request.
    pub fn with_token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Send the header `name: value` with every request (e.g. a W3C `traceparent`).
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// The protocol version to ask for in `initialize` and send in `MCP-Protocol-Version` (which
    /// `2025-03-26` does not have: then no such header is sent). From `2026-07-28` on there is no
    /// `initialize`: each request carries the version in `_meta`.
    pub fn with_protocol(mut self, version: impl Into<String>) -> Self {
        self.protocol = version.into();
        self
    }

    /// Whether the protocol is 2026-07-28 or later: no handshake, and every request carries the
    /// client's protocol version and capabilities itself.
    fn stateless_protocol(&self) -> bool {
        self.protocol.as_str() >= "2026-07-28"
    }

    /// The session the server gave, if any.
    pub fn session(&self) -> Option<&str> {
        self.session.as_deref()
    }

    /// Send the next requests to `url` (another replica of the same server), keeping the
    /// session and the request ids.
    pub fn set_url(&mut self, url: impl Into<String>) {
        self.url = url.into();
    }

    /// POST one JSON-RPC message: the status, the `Retry-After` seconds, the session header and
    /// the body.
    async fn post(
        &self,
        body: &Value,
    ) -> Result<(u16, Option<u64>, Option<String>, String), McpCallError> {
        let mut req = self
            .http
            .post(&self.url)
            .header("Accept", "application/json, text/event-stream")
            .timeout(self.timeout)
            .json(body);
        if self.protocol != "2025-03-26" {
            req = req.header("MCP-Protocol-Version", &self.protocol);
        }
        if let Some(token) = &self.token {
            req = req.bearer_auth(token);
        }
        if let Some(session) = &self.session {
            req = req.header("Mcp-Session-Id", session);
        }
        for (name, value) in &self.headers {
            req = req.header(name, value);
        }
        if self.stateless_protocol() {
            // Protocol 2026-07-28 names the method and the tool in headers, so a balancer can
            // route without reading the body.
            if let Some(method) = body["method"].as_str() {
                req = req.header("Mcp-Method", method);
            }
            if let Some(name) = body["params"]["name"].as_str() {
                req = req.header("Mcp-Name", name);
            }
        }
        let response = req
            .send()
            .await
            .map_err(|e| McpCallError::Transport(e.to_string()))?;
        let status = response.status().as_u16();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let retry_after = header("retry-after").and_then(|v| v.trim().parse().ok());
        let session = header("mcp-session-id");
        let text = response
            .text()
            .await
            .map_err(|e| McpCallError::Transport(e.to_string()))?;
        Ok((status, retry_after, session, text))
    }

    /// The JSON-RPC messages of a JSON or SSE body, in order.
    fn messages(text: &str) -> Vec<Value> {
        match serde_json::from_str(text) {
            Ok(whole) => vec![whole],
            Err(_) => text
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str(d.trim()).ok())
                .collect(),
        }
    }

    /// The JSON-RPC response with `id` in a JSON or SSE body.
    fn response(text: &str, id: u64) -> Option<Value> {
        Self::messages(text).into_iter().find(|v| v["id"] == id)
    }

    /// The JSON-RPC message of an answer body: the JSON body, or the last `data:` message of an
    /// SSE stream; `Null` when there is none.
    pub fn message(body: &str) -> Value {
        Self::messages(body).pop().unwrap_or(Value::Null)
    }

    /// POST one JSON-RPC message as it is (no initialization first): the HTTP status and the
    /// answer's message (see [`McpHttp::message`]). For requests [`McpHttp::call`] does not
    /// make, and for what a server says to malformed ones.
    pub async fn send(&mut self, message: &Value) -> Result<(u16, Value), McpCallError> {
        let (status, _, _, text) = self.post(message).await?;
        Ok((status, Self::message(&text)))
    }

    /// Send the request `method` with `params` under the next id (see [`McpHttp::send`]).
    pub async fn request(
        &mut self,
        method: &str,
        params: Value,
    ) -> Result<(u16, Value), McpCallError> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await
    }

    fn status_error(status: u16, retry_after: Option<u64>, body: String) -> McpCallError {
        McpCallError::Status {
            status,
            retry_after,
            body,
        }
    }

    /// `initialize` and `notifications/initialized`; keeps the session the server gives.
    /// Returns the server's `initialize` result (its protocol version, capabilities and
    /// instructions).
    pub async fn initialize(&mut self) -> Result<Value, McpCallError> {
        self.session = None;
        let id = self.next_id;
        self.next_id += 1;
        let init = json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
            "protocolVersion": self.protocol, "capabilities": {},
            "clientInfo": {"name": "memloop-testkit", "version": env!("CARGO_PKG_VERSION")}}});
        let (status, retry_after, session, text) = self.post(&init).await?;
        if status != 200 {
            return Err(Self::status_error(status, retry_after, text));
        }
        let Some(answer) = Self::response(&text, id).filter(|a| a["result"].is_object()) else {
            return Err(McpCallError::Protocol(format!("initialize: {text}")));
        };
        self.session = session;
        let (status, retry_after, _, text) = self
            .post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await?;
        if !(200..300).contains(&status) {
            return Err(Self::status_error(status, retry_after, text));
        }
        self.initialized = true;
        Ok(answer["result"].clone())
    }

    /// Call `tool` with `args`: its structured answer with `is_error` added (a tool error is an
    /// answer, not an `Err`), or why the call did not complete. Before protocol 2026-07-28 the
    /// first call initializes; from it on, no call does (each request says who is asking).
    pub async fn call(&mut self, tool: &str, args: Value) -> Result<Value, McpCallError> {
        let mut params = json!({"name": tool, "arguments": args});
        if self.stateless_protocol() {
            params["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": self.protocol,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo":
                    {"name": "memloop-testkit", "version": env!("CARGO_PKG_VERSION")},
            });
        } else if !self.initialized {
            self.initialize().await?;
        }
        let id = self.next_id;
        self.next_id += 1;
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
        let (status, retry_after, _, text) = self.post(&body).await?;
        if status != 200 {
            if status == 404 && self.session.is_some() {
                // A server (or replica) that does not know the session: start a new one.
                self.initialized = false;
            }
            return Err(Self::status_error(status, retry_after, text));
        }
        let v = Self::response(&text, id)
            .ok_or_else(|| McpCallError::Protocol(format!("{tool}: no response in {text}")))?;
        let result = &v["result"];
        let mut out = result["structuredContent"].clone();
        if !out.is_object() {
            return Err(McpCallError::Protocol(format!("{tool}: {v}")));
        }
        out["is_error"] = json!(result["isError"].as_bool().unwrap_or(false));
        Ok(out)
    }
}
