//! `memloop mcp --http ADDR`: the same tools over MCP's Streamable HTTP transport (rmcp's server
//! side), behind bearer tokens, over plain HTTP or HTTPS ([`HttpOptions::tls`]).
//!
//! Every request passes [`Tokens`] first: without a valid `Authorization: Bearer` token it gets
//! HTTP 401 (with `WWW-Authenticate: Bearer`); a token used outside its projects, or a read-only
//! token calling a tool that writes, gets HTTP 403 with the reason. Tokens are compared as
//! SHA-256 digests in constant time and never logged. Without tokens the server only binds a
//! loopback address, unless the operator says `insecure_no_auth`.
//!
//! By default the server keeps no session: every request carries all it needs (its token, its
//! project path), so any replica of a server on one store answers any request, for clients of
//! protocol 2026-07-28 and of the older versions alike ([`HttpOptions::sessions`] turns MCP
//! sessions back on). Each token is held to [`TokenLimits`] (requests in flight, request rate);
//! `GET /health` says whether the server is ready ([`MemoryServer::check_ready`]) and
//! `GET /health/live` that it is up, without a token and without counting against any limit;
//! `GET /metrics` answers the Prometheus text of the server's metrics (behind a token for every
//! project when tokens are on, never counted against a limit).

use crate::access::{Access, Grant, TokenScope};
use crate::limits::{Limiter, TokenLimits};
use crate::metrics::Refusal;
use crate::server::{McpServeError, MemoryServer};
use crate::tls::TlsIdentity;
use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited, combinators::BoxBody};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use sha2::{Digest, Sha256};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use subtle::ConstantTimeEq;
use tokio_util::either::Either;
use tokio_util::sync::CancellationToken;
use tower_service::Service;

/// How long a client has to complete the TLS handshake before its connection is dropped.
const TLS_HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The largest request body read (a `context_save` batch is capped well below it).
const MAX_REQUEST_BYTES: usize = 8 * 1024 * 1024;

/// How long a client has to send a request's headers, and how long a keep-alive connection may
/// sit idle before the next request: a client that sends headers slowly, or holds connections
/// open without using them, loses them.
const HEADER_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// A session with no request for this long is closed (its client re-initializes).
const SESSION_IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// How long a client has to send a request's whole body once its headers are in (the default of
/// [`HttpOptions::body_timeout`]): a client that trickles a body loses its connection (HTTP
/// 408), as one that trickles headers does.
pub const BODY_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// How long a new session may wait for its `initialize` request.
const SESSION_INIT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Most open sessions one token may hold (a client needs one; a pool of agents a few dozen).
pub const MAX_SESSIONS_PER_TOKEN: usize = 64;

/// Most open sessions in all (each costs some tens of KB until it closes or idles out). When
/// they are all open, a token holding fewer than its fair share still gets a session: the
/// least recently used session of the token holding the most is closed for it ([`SessionCaps`]).
pub const MAX_SESSIONS: usize = 512;

/// The open sessions and the token each was opened with, to cap them per token and in all.
/// A new session is counted from the moment it is admitted ([`SessionCounts::reserve`]), before
/// the session exists, so concurrent `initialize` requests cannot all pass the check and
/// overshoot the cap. Closed and expired sessions are pruned against the session manager's
/// own table.
struct SessionCounts {
    manager: Arc<LocalSessionManager>,
    per_token: usize,
    total: usize,
    state: std::sync::Mutex<CountState>,
}

/// An open session as [`SessionCounts`] records it.
struct OpenSession {
    /// The digest of the token that opened it.
    owner: [u8; 32],
    /// The `next` it was recorded at.
    stamp: u64,
    /// When a request last named it (or it was opened).
    used: tokio::time::Instant,
}

/// What [`SessionCounts`] holds under its lock.
#[derive(Default)]
struct CountState {
    /// Open sessions by id.
    owners: std::collections::HashMap<String, OpenSession>,
    /// Admitted sessions not yet opened (or refused by the transport), per owner.
    reserved: std::collections::HashMap<[u8; 32], usize>,
    /// A counter stamped on each recorded session: a session recorded after a snapshot of
    /// the manager's table was begun is not pruned for missing from it.
    next: u64,
}

impl CountState {
    fn reserved_total(&self) -> usize {
        self.reserved.values().sum()
    }

    fn release(&mut self, owner: &[u8; 32]) {
        if let Some(n) = self.reserved.get_mut(owner) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.reserved.remove(owner);
            }
        }
    }

    /// The sessions each token holds, open and admitted.
    fn holdings(&self) -> std::collections::HashMap<[u8; 32], usize> {
        let mut held = self.reserved.clone();
        for session in self.owners.values() {
            *held.entry(session.owner).or_insert(0) += 1;
        }
        held
    }

    /// The least recently used open session of the token holding the most open sessions
    /// (of tokens holding as many, the one whose session was used least recently), other than
    /// `except`.
    fn eviction_victim(&self, except: &[u8; 32]) -> Option<String> {
        let mut open: std::collections::HashMap<[u8; 32], (usize, &str, tokio::time::Instant)> =
            std::collections::HashMap::new();
        for (id, session) in self.owners.iter().filter(|(_, s)| s.owner != *except) {
            let entry = open
                .entry(session.owner)
                .or_insert((0, id.as_str(), session.used));
            entry.0 += 1;
            if session.used < entry.2 {
                (entry.1, entry.2) = (id.as_str(), session.used);
            }
        }
        open.into_values()
            .max_by(|a, b| a.0.cmp(&b.0).then(b.2.cmp(&a.2)))
            .map(|(_, id, _)| id.to_owned())
    }

    /// Whole seconds (at least 1) until the least recently used of the open sessions `of`
    /// accepts idles out and frees its place.
    fn retry_after(&self, now: tokio::time::Instant, of: impl Fn(&[u8; 32]) -> bool) -> u64 {
        let oldest = self
            .owners
            .values()
            .filter(|s| of(&s.owner))
            .map(|s| s.used)
            .min();
        let left = oldest.map_or(SESSION_IDLE_TIMEOUT, |used| {
            SESSION_IDLE_TIMEOUT.saturating_sub(now.saturating_duration_since(used))
        });
        left.as_secs().max(1)
    }
}

/// A session admitted under the caps: it counts until it is [`opened`](Self::opened), or
/// until it is dropped (the transport refused or failed the `initialize`).
struct Reservation {
    counts: Arc<SessionCounts>,
    owner: [u8; 32],
    done: bool,
}

impl Reservation {
    /// The session was opened as `id`: it counts as an open session from now on.
    fn opened(mut self, id: &str) {
        self.done = true;
        let mut state = self.counts.lock();
        state.release(&self.owner);
        let stamp = state.next;
        state.next += 1;
        state.owners.insert(
            id.to_owned(),
            OpenSession {
                owner: self.owner,
                stamp,
                used: tokio::time::Instant::now(),
            },
        );
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if !self.done {
            self.counts.lock().release(&self.owner);
        }
    }
}

/// A new session refused under the caps (HTTP 429).
#[derive(Debug)]
struct SessionRefused {
    /// Why, for the client.
    reason: String,
    /// Whole seconds until a place should be free (the relevant least recently used session
    /// idles out), at least 1.
    retry_after: u64,
}

impl SessionCounts {
    fn new(manager: Arc<LocalSessionManager>, per_token: usize, total: usize) -> Self {
        Self {
            manager,
            per_token,
            total,
            state: std::sync::Mutex::new(CountState::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CountState> {
        // The state stays consistent whatever panicked while holding it (each change is one
        // insert or decrement), so a poisoned lock is used as it is.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The token (digest) that opened session `id`, when this server recorded it; the
    /// session counts as used now.
    fn touch(&self, id: &str) -> Option<[u8; 32]> {
        let mut state = self.lock();
        let session = state.owners.get_mut(id)?;
        session.used = tokio::time::Instant::now();
        Some(session.owner)
    }

    /// [`Self::reserve`]'s decision under the lock, against the `live` session ids the manager
    /// held (snapshot begun at counter `snapshot_from`): the reservation is counted, and the
    /// session to close for it is named, if any.
    fn admit(
        &self,
        owner: &[u8; 32],
        live: &std::collections::HashSet<String>,
        snapshot_from: u64,
    ) -> Result<Option<String>, SessionRefused> {
        let now = tokio::time::Instant::now();
        let mut state = self.lock();
        state
            .owners
            .retain(|id, s| s.stamp >= snapshot_from || live.contains(id));
        let holdings = state.holdings();
        let mine = holdings.get(owner).copied().unwrap_or(0);
        if mine >= self.per_token {
            return Err(SessionRefused {
                reason: format!(
                    "this token already holds {mine} open MCP sessions (at most {}): close one \
                     (DELETE with its Mcp-Session-Id) or let idle ones expire ({} s)",
                    self.per_token,
                    SESSION_IDLE_TIMEOUT.as_secs()
                ),
                retry_after: state.retry_after(now, |o| o == owner),
            });
        }
        // Sessions the manager holds that were never recorded (their client went away
        // before the answer to its `initialize`) count too, until they idle out.
        let all = (state.owners.len() + state.reserved_total()).max(live.len());
        let mut evicted = None;
        if all >= self.total {
            let holders = holdings.len() + usize::from(!holdings.contains_key(owner));
            let share = (self.total / holders.max(1)).max(1);
            evicted = (mine < share)
                .then(|| state.eviction_victim(owner))
                .flatten();
            let Some(victim) = &evicted else {
                return Err(SessionRefused {
                    reason: format!(
                        "the server holds {all} open MCP sessions (at most {}) and this token \
                         holds {mine}, its share or more ({share}); retry later",
                        self.total
                    ),
                    retry_after: state.retry_after(now, |_| true),
                });
            };
            state.owners.remove(victim);
        }
        *state.reserved.entry(*owner).or_insert(0) += 1;
        Ok(evicted)
    }

    /// Admit a new session for `owner`, counted at once; or why it is refused. The check and
    /// the count are one step under one lock: of concurrent requests past the cap, exactly
    /// the ones that fit are admitted.
    ///
    /// When every place is taken, a token holding fewer sessions than its fair share (the
    /// total cap divided among the tokens holding sessions, this one counted) still gets
    /// one: the least recently used session of the token holding the most is closed for it.
    /// A token at or above its share is refused until a session closes or idles out. So
    /// a few tokens that fill the table cannot lock every other token out.
    async fn reserve(self: &Arc<Self>, owner: &[u8; 32]) -> Result<Reservation, SessionRefused> {
        let snapshot_from = self.lock().next;
        let live: std::collections::HashSet<String> = self
            .manager
            .sessions
            .read()
            .await
            .keys()
            .map(|id| id.to_string())
            .collect();
        let evicted = self.admit(owner, &live, snapshot_from)?;
        // Counted from here: given back if this request goes away while the victim closes.
        let reservation = Reservation {
            counts: self.clone(),
            owner: *owner,
            done: false,
        };
        if let Some(victim) = evicted {
            use rmcp::transport::streamable_http_server::session::SessionManager;
            tracing::info!(
                "the session cap is reached: the least recently used session of the token \
                 holding the most closed for a token below its share"
            );
            let id: Arc<str> = Arc::from(victim.as_str());
            if let Err(e) = self.manager.close_session(&id).await {
                tracing::debug!(error = %e, "an evicted session was already closed");
            }
        }
        Ok(reservation)
    }
}

/// Whether a JSON-RPC body is an `initialize` request (it opens a session).
fn is_initialize(body: &serde_json::Value) -> bool {
    body["method"] == "initialize"
}

/// One line of a token file.
#[derive(Clone)]
struct TokenRule {
    digest: [u8; 32],
    access: Access,
}

/// The tokens a server accepts, from a token file: one per line, `TOKEN [GRANT] [read|write]`
/// (default: every project, `write`), `#` comments and blank lines ignored. The grant
/// ([`Grant`]) is a project glob over canonical paths (`..` removed, symlinks followed; `*`
/// stands for any characters: `/srv/repos/payments*`), `origin:URL` (the team project of a git
/// origin, through any of its checkouts) or `project:ID` (the memory stored under that key). What
/// a token allows is decided in one place, for every tool and resource, on the key the
/// request's memory is stored under: a glob covers it only when every path mapping to it
/// matches.
#[derive(Clone)]
pub struct Tokens {
    rules: Vec<TokenRule>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens")
            .field("count", &self.rules.len())
            .finish_non_exhaustive()
    }
}

/// A token file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    /// It could not be read.
    #[error("cannot read the token file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A line is malformed (the token itself is never echoed).
    #[error("token file line {line}: {reason}")]
    Line {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// No token in it.
    #[error("the token file holds no token")]
    Empty,
    /// Others than its owner may read or write it (as ssh refuses a private key that is).
    #[error(
        "the token file {path} may be read or written by others than its owner (mode {mode:o}): \
         `chmod 600 {path}`"
    )]
    Exposed {
        /// The file.
        path: String,
        /// Its permission bits.
        mode: u32,
    },
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl Tokens {
    /// Parse a token file's text.
    ///
    /// ```
    /// use memloop_mcp::{Access, Grant, ProjectGlob, TokenScope, Tokens};
    /// let t = Tokens::parse("# team\nalpha-token-0123456789\nbeta-token-0123456789 /srv/app* read\n").unwrap();
    /// assert_eq!(t.access_of("alpha-token-0123456789"), Some(Access::full()));
    /// let beta = Access::new(Grant::Paths(ProjectGlob::new("/srv/app*").unwrap()), TokenScope::Read);
    /// assert_eq!(t.access_of("beta-token-0123456789"), Some(beta));
    /// assert!(t.access_of("nope").is_none());
    /// ```
    pub fn parse(text: &str) -> Result<Self, TokenFileError> {
        let mut rules = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = |reason: &str| TokenFileError::Line {
                line: i + 1,
                reason: reason.to_owned(),
            };
            let parts: Vec<&str> = line.split_whitespace().collect();
            let (token, rest) = parts.split_first().ok_or_else(|| bad("empty"))?;
            if token.len() < 16 {
                return Err(bad("a token must be at least 16 characters"));
            }
            let (grant, scope) = match rest {
                [] => (None, TokenScope::Write),
                [s] if is_scope(s) => (None, scope(s)),
                [grant] => (Some(*grant), TokenScope::Write),
                [grant, s] if is_scope(s) => (Some(*grant), scope(s)),
                _ => return Err(bad("expected `TOKEN [GRANT] [read|write]`")),
            };
            let grant = match grant {
                Some(g) => Grant::parse(g).map_err(|e| bad(&e))?,
                None => Grant::Everything,
            };
            rules.push(TokenRule {
                digest: digest(token),
                access: Access::new(grant, scope),
            });
        }
        if rules.is_empty() {
            return Err(TokenFileError::Empty);
        }
        Ok(Self { rules })
    }

    /// Read and parse a token file. On Unix it must be readable and writable by its owner only
    /// (no group or other bits), as ssh requires of a private key.
    pub fn load(path: &Path) -> Result<Self, TokenFileError> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let meta = std::fs::metadata(path).map_err(|source| TokenFileError::Read {
                path: path.display().to_string(),
                source,
            })?;
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                return Err(TokenFileError::Exposed {
                    path: path.display().to_string(),
                    mode,
                });
            }
        }
        let text = std::fs::read_to_string(path).map_err(|source| TokenFileError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text)
    }

    /// What `token` may do; `None` for a token not in the file (HTTP 401).
    pub fn access_of(&self, token: &str) -> Option<Access> {
        let presented = digest(token);
        // Compare with every rule, without stopping early, so timing says nothing.
        let mut found: Option<&TokenRule> = None;
        for rule in &self.rules {
            if bool::from(rule.digest.ct_eq(&presented)) && found.is_none() {
                found = Some(rule);
            }
        }
        found.map(|rule| rule.access.clone())
    }
}

fn is_scope(s: &str) -> bool {
    matches!(s, "read" | "write")
}

fn scope(s: &str) -> TokenScope {
    if s == "read" {
        TokenScope::Read
    } else {
        TokenScope::Write
    }
}

/// How `serve_http` serves.
#[derive(Debug)]
pub struct HttpOptions {
    /// Where to listen.
    pub addr: SocketAddr,
    /// The accepted tokens; `None` serves without authentication (loopback only, unless
    /// `insecure_no_auth`).
    pub tokens: Option<Tokens>,
    /// Allow a non-loopback bind without tokens.
    pub insecure_no_auth: bool,
    /// Serve HTTPS with this certificate and key; `None`: plain HTTP.
    pub tls: Option<TlsIdentity>,
    /// Stops the server when cancelled.
    pub shutdown: CancellationToken,
    /// `None` (the default of the CLI): no MCP sessions, every request stands alone, so any
    /// replica answers any request. `Some`: clients of protocols before 2026-07-28 open
    /// sessions (held in this process's memory, capped per token and in all by these caps);
    /// a client must then reach the replica that opened its session.
    pub sessions: Option<SessionCaps>,
    /// Per-token limits on requests in flight and on request rate (HTTP 429 past them).
    pub limits: TokenLimits,
    /// How long a client has to send a request's body ([`BODY_READ_TIMEOUT`] by default).
    pub body_timeout: std::time::Duration,
}

/// The most MCP sessions a server keeps open at once ([`HttpOptions::sessions`]): per token
/// and in all. The caps are hard: a session counts from the moment its `initialize` is
/// admitted, so concurrent `initialize` requests cannot overshoot.
///
/// A token at `per_token` is refused. When `total` sessions are open, the total is shared
/// fairly: a token holding fewer than its share (`total` divided by the number of tokens
/// holding sessions, itself counted; at least 1) still gets a session, and the least recently
/// used session of the token holding the most is closed for it (that client gets 404 and opens
/// a session again, subject to the same rule); a token holding its share or more is refused.
/// So a few tokens that fill the table cannot lock the others out. Every refusal is HTTP 429
/// with `Retry-After` (the whole seconds until the least recently used session concerned
/// idles out, at least 1) and a JSON-RPC error (-32000) answering the `initialize`'s id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionCaps {
    /// Most open sessions one token may hold (default [`MAX_SESSIONS_PER_TOKEN`]).
    pub per_token: usize,
    /// Most open sessions in all (default [`MAX_SESSIONS`]).
    pub total: usize,
}

impl Default for SessionCaps {
    fn default() -> Self {
        Self {
            per_token: MAX_SESSIONS_PER_TOKEN,
            total: MAX_SESSIONS,
        }
    }
}

/// Check `options` before binding: a non-loopback address needs tokens (or the explicit
/// `insecure_no_auth`). The answer is the warning to print, if any: a non-loopback address
/// served over plain HTTP (with [`HttpOptions::tls`] there is none).
pub fn check_bind(options: &HttpOptions) -> Result<Option<String>, McpServeError> {
    let public = !options.addr.ip().is_loopback();
    if public && options.tokens.is_none() && !options.insecure_no_auth {
        return Err(McpServeError(format!(
            "refusing to serve {} without tokens: pass --token-file FILE (or --insecure-no-auth \
             to serve every client on the network without authentication)",
            options.addr
        )));
    }
    Ok((public && options.tls.is_none()).then(|| {
        format!(
            "serving {} over plain HTTP: tokens and memories cross the network unencrypted; put \
             a TLS-terminating reverse proxy in front of it or pass --tls-cert and --tls-key",
            options.addr
        )
    }))
}

type HttpResponse = Response<BoxBody<Bytes, Infallible>>;

fn plain(status: StatusCode, text: &str) -> HttpResponse {
    let mut r = Response::new(
        Full::new(Bytes::from(format!("{text}\n")))
            .map_err(|never| match never {})
            .boxed(),
    );
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    if status == StatusCode::UNAUTHORIZED {
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer realm=\"memloop\""),
        );
    }
    r
}

/// The request headers the MCP library may log verbatim (a malformed `Host`, a protocol
/// version that disagrees with the body's, a session or event id it cannot resume), with the
/// most characters each may hold: a longer one is refused (HTTP 400) before the library sees
/// it. `Host` may hold a DNS name (at most 253 characters) with a port; the others are ids and
/// dates.
const LOGGED_HEADERS: &[(&str, usize)] = &[
    ("host", 261),
    ("mcp-session-id", crate::echo::MAX_ECHO_CHARS),
    ("mcp-protocol-version", crate::echo::MAX_ECHO_CHARS),
    ("last-event-id", crate::echo::MAX_ECHO_CHARS),
];

/// The refusal for a request with a header of [`LOGGED_HEADERS`] longer than its bound, or
/// with a `Host` that is not an authority (the library logs that one whole).
fn overlong_header(parts: &http::request::Parts) -> Option<crate::jsonrpc::Bad> {
    for (name, max) in LOGGED_HEADERS {
        for value in parts.headers.get_all(*name) {
            if value.len() > *max {
                return Some(crate::jsonrpc::Bad::invalid(format!(
                    "the `{name}` header may hold at most {max} bytes"
                )));
            }
        }
    }
    let host = parts.headers.get(header::HOST)?;
    let valid = host
        .to_str()
        .ok()
        .is_some_and(|h| http::uri::Authority::try_from(h).is_ok());
    (!valid).then(|| crate::jsonrpc::Bad::invalid("the `Host` header is not a host[:port]"))
}

/// What a balancer asks at `/health` (ready: the store answers) or `/health/live` (the process
/// serves).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HealthProbe {
    Ready,
    Live,
}

impl HealthProbe {
    fn of(path: &str) -> Option<Self> {
        match path.trim_end_matches('/') {
            "/health" | "/health/ready" => Some(Self::Ready),
            "/health/live" => Some(Self::Live),
            _ => None,
        }
    }
}

/// The answer to a health probe: 200 `{"status":"ok"}`, or 503 `{"status":"unavailable",
/// "reason":...}` when the store is not ready. The reason names no URL, host or path.
async fn health_answer(
    server: &MemoryServer,
    probe: HealthProbe,
    method: &http::Method,
) -> HttpResponse {
    if method != http::Method::GET && method != http::Method::HEAD {
        let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "use GET or HEAD");
        r.headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let (status, body) = match probe {
        HealthProbe::Live => (StatusCode::OK, serde_json::json!({"status": "ok"})),
        HealthProbe::Ready => match server.check_ready().await {
            Ok(()) => (StatusCode::OK, serde_json::json!({"status": "ok"})),
            Err(e) => {
                tracing::warn!(reason = %e, "health check: not ready");
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    serde_json::json!({"status": "unavailable", "reason": e.0}),
                )
            }
        },
    };
    let mut r = Response::new(
        Full::new(Bytes::from(body.to_string()))
            .map_err(|never| match never {})
            .boxed(),
    );
    *r.status_mut() = status;
    let headers = r.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    headers.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    r
}

/// Where the metrics are scraped (Prometheus text).
const METRICS_PATH: &str = "/metrics";

/// The answer to `GET /metrics`: the Prometheus text exposition (format 0.0.4) of `server`'s
/// metrics. They count every project's calls, so with tokens only a token for every project
/// (read-only is enough) may read them; a token limited to some projects gets 403.
fn metrics_answer(server: &MemoryServer, access: &Access, method: &http::Method) -> HttpResponse {
    if method != http::Method::GET && method != http::Method::HEAD {
        let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "use GET or HEAD");
        r.headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    if access.is_limited() {
        server.metrics().refused(Refusal::Forbidden);
        return plain(
            StatusCode::FORBIDDEN,
            "the metrics cover every project: only a token for every project may read them",
        );
    }
    let mut r = Response::new(
        Full::new(Bytes::from(server.metrics_snapshot().prometheus()))
            .map_err(|never| match never {})
            .boxed(),
    );
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    r.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    r
}

fn bearer(req: &http::request::Parts) -> Option<&str> {
    let value = req.headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// Serve `server`'s tools over Streamable HTTP at `options.addr` until `options.shutdown` is
/// cancelled. The bound address is sent on `bound` once listening (port 0 picks a free one).
pub async fn serve_http(
    server: MemoryServer,
    options: HttpOptions,
    bound: Option<tokio::sync::oneshot::Sender<SocketAddr>>,
) -> Result<(), McpServeError> {
    if let Some(warning) = check_bind(&options)? {
        tracing::warn!("{warning}");
    }
    let listener = tokio::net::TcpListener::bind(options.addr)
        .await
        .map_err(|e| McpServeError(format!("cannot listen on {}: {e}", options.addr)))?;
    let addr = listener
        .local_addr()
        .map_err(|e| McpServeError(e.to_string()))?;
    let mut config = StreamableHttpServerConfig::default();
    config.cancellation_token = options.shutdown.child_token();
    if !addr.ip().is_loopback() {
        // Host validation guards loopback servers against DNS rebinding; a server on the
        // network is reached under names only its operator knows (tokens guard it).
        config = config.disable_allowed_hosts();
    }
    // Without sessions every request is served on its own (rmcp's stateless path, for the
    // older protocols too), and a simple answer is one JSON body rather than an SSE stream.
    config.legacy_session_mode = options.sessions.is_some();
    config.json_response = options.sessions.is_none();
    // With the `otel` feature, the metrics also leave through the process's OTLP export (the
    // global meter provider; without one, nothing is collected).
    #[cfg(feature = "otel")]
    crate::metrics::observe(
        &opentelemetry::global::meter("memloop-mcp"),
        &server.metrics_source(),
    );
    let gate = server.clone();
    let tool_names: Arc<[String]> = server.tool_names().into();
    // No SSE priming events: they carry an empty `data:` that clients try to parse as JSON.
    config.sse_retry = None;
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(SESSION_IDLE_TIMEOUT);
    sessions.session_config.init_timeout = Some(SESSION_INIT_TIMEOUT);
    sessions.session_config.sse_retry = None;
    let sessions = Arc::new(sessions);
    let counts = options.sessions.map(|caps| {
        Arc::new(SessionCounts::new(
            sessions.clone(),
            caps.per_token,
            caps.total,
        ))
    });
    let health = server.clone();
    let mcp = StreamableHttpService::new(move || Ok(server.clone()), sessions, config);
    let tokens = options.tokens.map(Arc::new);
    let flights = crate::jsonrpc::Flights::default();
    let limiter = Limiter::new(options.limits);
    let body_timeout = options.body_timeout;
    let acceptor = options.tls.as_ref().map(TlsIdentity::acceptor);
    tracing::info!(%addr, auth = tokens.is_some(), tls = acceptor.is_some(), sessions = counts.is_some(), "MCP server listening (streamable HTTP)");
    if let Some(tx) = bound {
        let _ = tx.send(addr);
    }
    loop {
        let accepted = tokio::select! {
            () = options.shutdown.cancelled() => return Ok(()),
            a = listener.accept() => a,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                continue;
            }
        };
        // Small request/answer exchanges on keep-alive connections: without this, Nagle's
        // algorithm holds each answer's last segment until the client's delayed ACK (~40 ms).
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "TCP_NODELAY not set");
        }
        let (mcp, tokens, gate, counts, flights, tool_names, limiter, health) = (
            mcp.clone(),
            tokens.clone(),
            gate.clone(),
            counts.clone(),
            flights.clone(),
            tool_names.clone(),
            limiter.clone(),
            health.clone(),
        );
        let service = hyper::service::service_fn(move |req: Request<Incoming>| {
            let (mut mcp, tokens, gate, counts, flights, tool_names, limiter, health) = (
                mcp.clone(),
                tokens.clone(),
                gate.clone(),
                counts.clone(),
                flights.clone(),
                tool_names.clone(),
                limiter.clone(),
                health.clone(),
            );
            // Health first: no token, no limit, no body, no span.
            if let Some(probe) = HealthProbe::of(req.uri().path()) {
                return Either::Left(async move {
                    Ok::<_, Infallible>(health_answer(&health, probe, req.method()).await)
                });
            }
            // One trace per request (crate::trace): its span, the client's child when it says so.
            let span = crate::trace::request_span(&req);
            Either::Right(crate::trace::serve(span.clone(), async move {
                let (mut parts, body) = req.into_parts();
                // Limits and sessions are counted per token (its digest; one bucket without
                // tokens).
                let mut owner = [0u8; 32];
                let auth = crate::trace::auth_span();
                let access = match &tokens {
                    Some(t) => match auth.in_scope(|| {
                        bearer(&parts).and_then(|tok| {
                            owner = digest(tok);
                            t.access_of(tok)
                        })
                    }) {
                        Some(access) => access,
                        None => {
                            crate::trace::auth_refused(&auth);
                            tracing::info!(%peer, "request without a valid token refused");
                            gate.metrics().refused(Refusal::Unauthorized);
                            return Ok(plain(
                                StatusCode::UNAUTHORIZED,
                                "a valid `Authorization: Bearer` token is required",
                            ));
                        }
                    },
                    None => Access::full(),
                };
                drop(auth);
                // The metrics: behind a token, never counted against its limits.
                if parts.uri.path() == METRICS_PATH {
                    return Ok(metrics_answer(&gate, &access, &parts.method));
                }
                let admitted = match limiter.admit(&owner, tokio::time::Instant::now()) {
                    Ok(a) => a,
                    Err(refused) => {
                        tracing::info!(%peer, reason = %refused.reason, "request over the token's limits refused");
                        gate.metrics().refused(Refusal::TokenLimit);
                        // The body is not read: the request's id is not known.
                        return Ok(crate::jsonrpc::too_many(
                            None,
                            refused.reason,
                            refused.retry_after,
                        ));
                    }
                };
                if let Some(bad) = overlong_header(&parts) {
                    tracing::info!(%peer, "request with an overlong or malformed header refused");
                    return Ok(crate::jsonrpc::refusal(bad));
                }
                // A session is its opener's: another token naming it is answered as for a
                // session that does not exist, and cannot post into it or close it.
                let session = match &counts {
                    Some(_) => parts
                        .headers
                        .get("mcp-session-id")
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned),
                    None => None,
                };
                if let (Some(id), Some(counts)) = (&session, &counts)
                    && counts.touch(id).is_some_and(|o| o != owner)
                {
                    tracing::info!(%peer, "a session named by another token refused");
                    return Ok(plain(StatusCode::NOT_FOUND, "no such MCP session"));
                }
                let read = Limited::new(body, MAX_REQUEST_BYTES).collect();
                let mut bytes = match tokio::time::timeout(body_timeout, read).await {
                    Ok(Ok(c)) => c.to_bytes(),
                    Ok(Err(_)) => {
                        return Ok(plain(
                            StatusCode::PAYLOAD_TOO_LARGE,
                            "request body too large or unreadable",
                        ));
                    }
                    Err(_) => {
                        tracing::info!(%peer, "request body not sent in time; refused");
                        let mut r = plain(
                            StatusCode::REQUEST_TIMEOUT,
                            "the request body was not sent in time",
                        );
                        r.headers_mut().insert(
                            header::CONNECTION,
                            header::HeaderValue::from_static("close"),
                        );
                        return Ok(r);
                    }
                };
                let mut reservation = None;
                let mut in_flight = None;
                if parts.method == http::Method::POST {
                    let mut message = match crate::jsonrpc::parse(&bytes) {
                        Ok(m) => m,
                        Err(bad) => return Ok(crate::jsonrpc::refusal(bad)),
                    };
                    if let Err(bad) = crate::jsonrpc::check(&message, &tool_names) {
                        if let Some(method) = message.get("method").and_then(|m| m.as_str()) {
                            tracing::debug!(%peer, method = %crate::logs::client_text(method), "JSON-RPC message refused before dispatch");
                        }
                        return Ok(crate::jsonrpc::refusal(bad));
                    }
                    if crate::jsonrpc::tame(&mut message) {
                        bytes = Bytes::from(message.to_string());
                    }
                    // Two requests of one session in flight with one id would share one answer
                    // channel, and one would never be answered. Without sessions each request
                    // has its own answer: clients sharing a token (each numbering its requests
                    // from 0) may send one id at once.
                    if let (Some(key), Some(id)) = (&session, crate::jsonrpc::request_id(&message))
                    {
                        match flights.begin(key, id) {
                            Some(flight) => in_flight = Some(flight),
                            None => {
                                return Ok(crate::jsonrpc::refusal(
                                    crate::jsonrpc::Bad::duplicate_id(&message["id"]),
                                ));
                            }
                        }
                    }
                    let opens_session =
                        is_initialize(&message) && !parts.headers.contains_key("mcp-session-id");
                    if let Some(counts) = &counts
                        && opens_session
                    {
                        match counts.reserve(&owner).await {
                            Ok(r) => reservation = Some(r),
                            Err(refused) => {
                                tracing::warn!(%peer, "new MCP session refused: session cap reached");
                                gate.metrics().refused(Refusal::SessionCap);
                                return Ok(crate::jsonrpc::too_many(
                                    message.get("id"),
                                    refused.reason,
                                    refused.retry_after,
                                ));
                            }
                        }
                    }
                    // The answer's status for a refused call; the tools enforce the same rule
                    // again (the Access travels with the request), so nothing depends on this
                    // check. Only a POST carries calls.
                    if let Err(denied) = gate.check_request(&access, &message).await {
                        tracing::info!(%peer, "tool call refused by the token's access");
                        gate.metrics().refused(Refusal::Forbidden);
                        return Ok(plain(StatusCode::FORBIDDEN, &denied.to_string()));
                    }
                }
                parts.extensions.insert(access);
                parts
                    .extensions
                    .insert(crate::trace::RequestSpan(span.clone()));
                if tokens.is_some() {
                    parts
                        .extensions
                        .insert(crate::batch::Caller(crate::batch::caller_of_digest(&owner)));
                }
                let closing = parts.method == http::Method::DELETE;
                let mut response = mcp.call(Request::from_parts(parts, Full::new(bytes))).await;
                // The request counts as in flight (its id in its session, and against the
                // token's limit) until the answer's body (an SSE stream) has ended.
                if let Ok(r) = &mut response {
                    let body = std::mem::replace(
                        r.body_mut(),
                        Full::new(Bytes::new()).map_err(|n| match n {}).boxed(),
                    );
                    *r.body_mut() = crate::jsonrpc::Releasing::wrap(body, (in_flight, admitted));
                }
                // A closed session is answered 204 No Content, not 202: clients (the Python
                // SDK among them) take anything but 200 or 204 for a failed termination.
                if closing
                    && let Ok(r) = &mut response
                    && r.status() == StatusCode::ACCEPTED
                {
                    *r.status_mut() = StatusCode::NO_CONTENT;
                }
                // The admitted session counts as open under its id; without one (the
                // transport refused the `initialize`) the reservation is dropped here.
                if let Some(reservation) = reservation
                    && let Ok(r) = &response
                    && let Some(id) = r
                        .headers()
                        .get("mcp-session-id")
                        .and_then(|v| v.to_str().ok())
                {
                    reservation.opened(id);
                }
                response
            }))
        });
        let shutdown = options.shutdown.clone();
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            // With TLS, the handshake first; a client that fails it (plain HTTP, an untrusted
            // certificate, garbage) loses its own connection only.
            let io = match acceptor {
                None => {
                    // The first request's bytes must come as promptly as its headers must end
                    // (HTTP/1's header timeout starts with them).
                    let mut byte = [0u8; 1];
                    let first = tokio::select! {
                        r = tokio::time::timeout(HEADER_READ_TIMEOUT, stream.peek(&mut byte)) => r,
                        () = shutdown.cancelled() => return,
                    };
                    if !matches!(first, Ok(Ok(n)) if n > 0) {
                        tracing::debug!(%peer, "connection sent nothing; dropped");
                        return;
                    }
                    Either::Left(stream)
                }
                Some(acceptor) => {
                    let handshake = tokio::select! {
                        r = tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)) => r,
                        () = shutdown.cancelled() => return,
                    };
                    match handshake {
                        Ok(Ok(tls)) => Either::Right(tls),
                        Ok(Err(e)) => {
                            tracing::info!(%peer, error = %e, "TLS handshake failed; connection dropped");
                            return;
                        }
                        Err(_) => {
                            tracing::info!(%peer, "TLS handshake timed out; connection dropped");
                            return;
                        }
                    }
                }
            };
            let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            builder
                .http1()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT);
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(io), service);
            tokio::select! {
                r = conn => if let Err(e) = r {
                    tracing::debug!(error = %e, "HTTP connection ended with an error");
                },
                () = shutdown.cancelled() => {}
            }
        });
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[cfg(unix)]
    #[test]
    fn a_token_file_others_may_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("tokens");
        std::fs::write(&file, "0123456789abcdef\n").unwrap();
        for (mode, ok) in [
            (0o644, false),
            (0o640, false),
            (0o604, false),
            (0o600, true),
            (0o400, true),
        ] {
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
            let loaded = Tokens::load(&file);
            assert_eq!(loaded.is_ok(), ok, "{mode:o}: {loaded:?}");
            if !ok {
                assert!(loaded.unwrap_err().to_string().contains("chmod 600"));
            }
        }
    }

    #[test]
    fn token_files_are_checked_without_echoing_tokens() {
        let err = Tokens::parse("short\n").err().map(|e| e.to_string());
        assert!(
            err.as_deref().is_some_and(|e| !e.contains("short")),
            "{err:?}"
        );
        assert!(Tokens::parse("# nothing\n\n").is_err());
        assert!(Tokens::parse("0123456789abcdef /a read extra\n").is_err());
        assert!(Tokens::parse("0123456789abcdef /srv/../x* read\n").is_err());
        let t = Tokens::parse("0123456789abcdef read\n").unwrap();
        assert_eq!(
            t.access_of("0123456789abcdef"),
            Some(Access::new(Grant::Everything, TokenScope::Read))
        );
        assert!(!format!("{t:?}").contains("0123456789abcdef"));
    }

    /// Open a real session in `manager` (so pruning sees it live) and record it.
    async fn open_one(manager: &LocalSessionManager, r: Reservation) -> String {
        use rmcp::transport::streamable_http_server::session::SessionManager;
        let (id, _transport) = manager.create_session().await.unwrap();
        r.opened(&id);
        id.to_string()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_initializes_past_the_cap_get_exactly_the_cap() {
        const CAP: usize = 5;
        const EXTRA: usize = 7;
        let manager = Arc::new(LocalSessionManager::default());
        let counts = Arc::new(SessionCounts::new(manager.clone(), CAP, 100));
        let owner = [7u8; 32];
        // Every request is admitted or refused before any session is opened: a check that
        // counted only opened sessions would admit all of them.
        let admitted = Arc::new(tokio::sync::Barrier::new(CAP + EXTRA));
        let tasks: Vec<_> = (0..CAP + EXTRA)
            .map(|_| {
                let (counts, manager, admitted) =
                    (counts.clone(), manager.clone(), admitted.clone());
                tokio::spawn(async move {
                    let reservation = counts.reserve(&owner).await;
                    admitted.wait().await;
                    match reservation {
                        Ok(r) => Ok(open_one(&manager, r).await),
                        Err(why) => Err(why.reason),
                    }
                })
            })
            .collect();
        let mut opened = Vec::new();
        let mut refused = Vec::new();
        for t in tasks {
            match t.await.unwrap() {
                Ok(id) => opened.push(id),
                Err(why) => refused.push(why),
            }
        }
        assert_eq!((opened.len(), refused.len()), (CAP, EXTRA), "{refused:?}");
        assert!(
            refused.iter().all(|r| r.contains("at most 5")),
            "{refused:?}"
        );
        assert_eq!(manager.sessions.read().await.len(), CAP);
        // Still full; another token is not affected.
        assert!(counts.reserve(&owner).await.is_err());
        let other = counts.reserve(&[8u8; 32]).await.unwrap();
        // A reservation given back (the `initialize` failed) frees its place.
        drop(other);
        assert_eq!(counts.lock().reserved_total(), 0);
        // A closed session frees its place.
        {
            use rmcp::transport::streamable_http_server::session::SessionManager;
            let id: Arc<str> = Arc::from(opened[0].as_str());
            manager.close_session(&id).await.unwrap();
        }
        let again = counts.reserve(&owner).await.unwrap();
        assert!(counts.reserve(&owner).await.is_err());
        open_one(&manager, again).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn the_total_cap_is_hard_under_concurrent_initializes_of_many_tokens() {
        const TOTAL: usize = 4;
        let manager = Arc::new(LocalSessionManager::default());
        let counts = Arc::new(SessionCounts::new(manager.clone(), 100, TOTAL));
        let admitted = Arc::new(tokio::sync::Barrier::new(TOTAL + 3));
        let tasks: Vec<_> = (0..TOTAL + 3)
            .map(|i| {
                let (counts, manager, admitted) =
                    (counts.clone(), manager.clone(), admitted.clone());
                tokio::spawn(async move {
                    let reservation = counts.reserve(&[i as u8; 32]).await;
                    admitted.wait().await;
                    match reservation {
                        Ok(r) => Some(open_one(&manager, r).await),
                        Err(why) => {
                            assert!(why.reason.contains("retry later"), "{why:?}");
                            None
                        }
                    }
                })
            })
            .collect();
        let mut opened = 0;
        for t in tasks {
            opened += usize::from(t.await.unwrap().is_some());
        }
        assert_eq!(opened, TOTAL);
        assert_eq!(manager.sessions.read().await.len(), TOTAL);
    }
}
