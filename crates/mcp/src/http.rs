//! `memloop mcp --http ADDR`: the same tools over MCP's Streamable HTTP transport (rmcp's server
//! side), behind bearer tokens, over plain HTTP or HTTPS ([`HttpOptions::tls`]).
//!
//! Every request passes [`Tokens`] first: without a valid `Authorization: Bearer` token it gets
//! HTTP 401 (with `WWW-Authenticate: Bearer`); a token used outside its projects, or a read-only
//! token calling a tool that writes, gets HTTP 403 with the reason. Tokens are compared as
//! SHA-256 digests in constant time and never logged. Without tokens the server only binds a
//! loopback address, unless the operator says `insecure_no_auth`.

use crate::server::{McpServeError, MemoryServer};
use crate::tls::TlsIdentity;
use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited, combinators::BoxBody};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
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

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenScope {
    /// `context_load`, `context_search`, `context_manage list`, resources.
    Read,
    /// Everything, including `context_save` and `context_manage` `update` / `delete` /
    /// `init_project`.
    Write,
}

/// One line of a token file.
#[derive(Clone)]
struct TokenRule {
    digest: [u8; 32],
    /// `*`-glob over the `project_path` a tool names; `None`: every project.
    projects: Option<String>,
    scope: TokenScope,
}

/// The tokens a server accepts, from a token file: one per line, `TOKEN [PROJECT-GLOB]
/// [read|write]` (default: every project, `write`), `#` comments and blank lines ignored. The
/// glob matches the `project_path` a tool call names, `*` standing for any characters
/// (`/srv/repos/payments*`).
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
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl Tokens {
    /// Parse a token file's text.
    ///
    /// ```
    /// use memloop_mcp::{TokenScope, Tokens};
    /// let t = Tokens::parse("# team\nalpha-token-0123456789\nbeta-token-0123456789 /srv/app* read\n").unwrap();
    /// assert_eq!(t.scope_of("alpha-token-0123456789", Some("/any")), Ok(TokenScope::Write));
    /// assert_eq!(t.scope_of("beta-token-0123456789", Some("/srv/app1")), Ok(TokenScope::Read));
    /// assert!(t.scope_of("beta-token-0123456789", Some("/srv/other")).is_err());
    /// assert!(t.scope_of("nope", None).is_err());
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
            let (projects, scope) = match rest {
                [] => (None, TokenScope::Write),
                [s] if is_scope(s) => (None, scope(s)),
                [glob] => (Some((*glob).to_owned()), TokenScope::Write),
                [glob, s] if is_scope(s) => (Some((*glob).to_owned()), scope(s)),
                _ => return Err(bad("expected `TOKEN [PROJECT-GLOB] [read|write]`")),
            };
            rules.push(TokenRule {
                digest: digest(token),
                projects,
                scope,
            });
        }
        if rules.is_empty() {
            return Err(TokenFileError::Empty);
        }
        Ok(Self { rules })
    }

    /// Read and parse a token file.
    pub fn load(path: &Path) -> Result<Self, TokenFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| TokenFileError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text)
    }

    /// The scope `token` has for `project` (`None`: a request naming no project), or why it
    /// has none: 401 (unknown token) or 403 (outside its projects).
    pub fn scope_of(&self, token: &str, project: Option<&str>) -> Result<TokenScope, StatusCode> {
        let presented = digest(token);
        // Compare with every rule, without stopping early, so timing says nothing.
        let mut found: Option<&TokenRule> = None;
        for rule in &self.rules {
            if bool::from(rule.digest.ct_eq(&presented)) && found.is_none() {
                found = Some(rule);
            }
        }
        let rule = found.ok_or(StatusCode::UNAUTHORIZED)?;
        match (&rule.projects, project) {
            (Some(glob), Some(p)) if !glob_match(glob, p) => Err(StatusCode::FORBIDDEN),
            _ => Ok(rule.scope),
        }
    }

    fn known(&self, token: &str) -> bool {
        self.scope_of(token, None).is_ok()
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

/// `*` matches any run of characters (also `/`); everything else matches itself.
fn glob_match(glob: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (glob.chars().collect(), text.chars().collect());
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && p[pi] != '*' && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
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

fn bearer(req: &http::request::Parts) -> Option<&str> {
    let value = req.headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// The tool calls of a JSON-RPC body (one message or a batch): (tool, project_path, writes).
fn tool_calls(body: &[u8]) -> Vec<(String, Option<String>, bool)> {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) else {
        return Vec::new();
    };
    let messages = match value {
        serde_json::Value::Array(v) => v,
        one => vec![one],
    };
    messages
        .iter()
        .filter(|m| m["method"] == "tools/call")
        .map(|m| {
            let name = m["params"]["name"].as_str().unwrap_or_default().to_owned();
            let args = &m["params"]["arguments"];
            let project = args["project_path"].as_str().map(str::to_owned);
            let writes = match name.as_str() {
                "context_save" => true,
                "context_manage" => args["action"].as_str() != Some("list"),
                "context_load" | "context_search" => false,
                _ => true, // an unknown tool is treated as a write
            };
            (name, project, writes)
        })
        .collect()
}

/// Why `token` may not send `body`, if it may not.
fn refusal(tokens: &Tokens, token: &str, body: &[u8]) -> Option<(StatusCode, String)> {
    for (tool, project, writes) in tool_calls(body) {
        match tokens.scope_of(token, project.as_deref()) {
            Err(status) => {
                return Some((
                    status,
                    format!(
                        "this token is not valid for project {}",
                        project.unwrap_or_default()
                    ),
                ));
            }
            Ok(TokenScope::Read) if writes => {
                return Some((
                    StatusCode::FORBIDDEN,
                    format!("this token is read-only; `{tool}` writes"),
                ));
            }
            Ok(_) => {}
        }
    }
    None
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
    let mcp = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let tokens = options.tokens.map(Arc::new);
    let acceptor = options.tls.as_ref().map(TlsIdentity::acceptor);
    tracing::info!(%addr, auth = tokens.is_some(), tls = acceptor.is_some(), "MCP server listening (streamable HTTP)");
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
        let (mcp, tokens) = (mcp.clone(), tokens.clone());
        let service = hyper::service::service_fn(move |req: Request<Incoming>| {
            let (mut mcp, tokens) = (mcp.clone(), tokens.clone());
            async move {
                let (parts, body) = req.into_parts();
                let token = match &tokens {
                    Some(t) => match bearer(&parts) {
                        Some(tok) if t.known(tok) => Some(tok.to_owned()),
                        _ => {
                            tracing::info!(%peer, "request without a valid token refused");
                            return Ok::<_, Infallible>(plain(
                                StatusCode::UNAUTHORIZED,
                                "a valid `Authorization: Bearer` token is required",
                            ));
                        }
                    },
                    None => None,
                };
                let bytes = match Limited::new(body, MAX_REQUEST_BYTES).collect().await {
                    Ok(c) => c.to_bytes(),
                    Err(_) => {
                        return Ok(plain(
                            StatusCode::PAYLOAD_TOO_LARGE,
                            "request body too large or unreadable",
                        ));
                    }
                };
                if let (Some(t), Some(tok)) = (&tokens, &token)
                    && let Some((status, why)) = refusal(t, tok, &bytes)
                {
                    tracing::info!(%peer, %status, "tool call refused by token scope");
                    return Ok(plain(status, &why));
                }
                mcp.call(Request::from_parts(parts, Full::new(bytes))).await
            }
        });
        let shutdown = options.shutdown.clone();
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            // With TLS, the handshake first; a client that fails it (plain HTTP, an untrusted
            // certificate, garbage) loses its own connection only.
            let io = match acceptor {
                None => Either::Left(stream),
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
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
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
    use super::*;

    #[test]
    fn globs_match_paths_in_any_script() {
        assert!(glob_match("/srv/app*", "/srv/app1"));
        assert!(glob_match("*", "/x/y"));
        assert!(glob_match("/srv/*/api", "/srv/团队/api"));
        assert!(!glob_match("/srv/app*", "/srv/other"));
        assert!(!glob_match("/srv/app", "/srv/app2"));
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
        let t = Tokens::parse("0123456789abcdef read\n").unwrap();
        assert_eq!(
            t.scope_of("0123456789abcdef", Some("/x")),
            Ok(TokenScope::Read)
        );
        assert!(!format!("{t:?}").contains("0123456789abcdef"));
    }

    #[test]
    fn read_tokens_may_not_write() {
        let t = Tokens::parse("0123456789abcdef /srv/* read\n").unwrap();
        let save = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"context_save","arguments":{"project_path":"/srv/a"}}}"#;
        let list = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"context_manage","arguments":{"project_path":"/srv/a","action":"list"}}}"#;
        let other = br#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"context_load","arguments":{"project_path":"/home/x"}}}]"#;
        assert_eq!(
            refusal(&t, "0123456789abcdef", save).map(|r| r.0),
            Some(StatusCode::FORBIDDEN)
        );
        assert!(refusal(&t, "0123456789abcdef", list).is_none());
        assert_eq!(
            refusal(&t, "0123456789abcdef", other).map(|r| r.0),
            Some(StatusCode::FORBIDDEN)
        );
    }
}
