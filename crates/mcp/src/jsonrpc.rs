//! What the HTTP transport accepts as a JSON-RPC message, before rmcp sees it: one JSON-RPC 2.0
//! object (no batches: MCP's Streamable HTTP carries one message per POST), with a string or
//! integer id, an object for `params`, and for `tools/call` a string `name` and object
//! `arguments`. Anything else is answered with a JSON-RPC error naming what is wrong, never
//! echoing more than [`MAX_ECHO_CHARS`] of what was sent. And two requests of one session may
//! not be in flight under one id ([`Flights`]).

use crate::echo::{MAX_ECHO_CHARS, echo};
use bytes::Bytes;
use http::{Response, StatusCode, header};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use serde_json::{Value, json};
use std::collections::HashSet;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

/// JSON-RPC's "parse error".
const PARSE_ERROR: i64 = -32700;
/// JSON-RPC's "invalid request".
const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC's "method not found".
const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC's "invalid params".
const INVALID_PARAMS: i64 = -32602;
/// The first code of JSON-RPC's implementation-defined server errors: a request refused by the
/// per-token limits.
const OVER_LIMIT: i64 = -32000;

/// A message refused before dispatch: its JSON-RPC error, and the HTTP status that carries it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Bad {
    status: StatusCode,
    code: i64,
    message: String,
    /// The request's id when it has a valid one (the error answers it), else `null`.
    id: Value,
}

impl Bad {
    /// An invalid request (HTTP 400, -32600, id `null`).
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            code: INVALID_REQUEST,
            message: message.into(),
            id: Value::Null,
        }
    }

    fn params(id: &Value, message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::OK,
            code: INVALID_PARAMS,
            message: message.into(),
            id: id.clone(),
        }
    }

    /// A request whose id is already in flight in its session.
    pub(crate) fn duplicate_id(id: &Value) -> Self {
        Self {
            status: StatusCode::CONFLICT,
            code: INVALID_REQUEST,
            message: "a request with this id is already in flight in this session; use a new \
                      id for each request"
                .into(),
            id: id.clone(),
        }
    }
}

/// The HTTP 429 the server sends, whatever limit refused the request (a token's rate or
/// concurrency, a session cap): `Retry-After` (whole seconds, at least 1) and a JSON-RPC error
/// (code -32000) with the request's `id` when it is known (else `null`) and the reason.
pub(crate) fn too_many(
    id: Option<&Value>,
    message: impl Into<String>,
    retry_after_secs: u64,
) -> Response<BoxBody<Bytes, Infallible>> {
    let id = id
        .filter(|id| id.is_string() || id.is_i64() || id.is_u64())
        .cloned()
        .unwrap_or(Value::Null);
    let mut r = refusal(Bad {
        status: StatusCode::TOO_MANY_REQUESTS,
        code: OVER_LIMIT,
        message: message.into(),
        id,
    });
    r.headers_mut().insert(
        header::RETRY_AFTER,
        header::HeaderValue::from(retry_after_secs.max(1)),
    );
    r
}

/// The request methods the MCP library dispatches (MCP's client requests). A request naming
/// any other method is answered here, with its name cut, never handed to the library (which
/// answers and logs an unknown method's whole name).
const REQUEST_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "server/discover",
    "completion/complete",
    "logging/setLevel",
    "prompts/get",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "resources/directory/read",
    "subscriptions/listen",
    "tools/call",
    "tools/list",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
    "skills/list",
    "skills/get",
];

/// A posted body as one JSON value, or why not: a body that is not JSON is a parse error
/// (-32700); one with a key twice in one object (at any depth) is an invalid request (-32600),
/// since parsers disagree on which of the two counts. Both HTTP 400.
pub(crate) fn parse(body: &[u8]) -> Result<Value, Bad> {
    let value = serde_json::from_slice::<Value>(body).map_err(|e| Bad {
        status: StatusCode::BAD_REQUEST,
        code: PARSE_ERROR,
        message: format!("the request body is not JSON: {e}"),
        id: Value::Null,
    })?;
    if let Err(e) = serde_json::from_slice::<UniqueKeys>(body) {
        return Err(Bad::invalid(format!(
            "the request body is not one JSON-RPC message: {e}"
        )));
    }
    Ok(value)
}

/// A JSON value whose objects hold each key once (at any depth); only checked, not kept.
struct UniqueKeys;

impl<'de> serde::Deserialize<'de> for UniqueKeys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(UniqueKeysVisitor)
    }
}

struct UniqueKeysVisitor;

impl<'de> serde::de::Visitor<'de> for UniqueKeysVisitor {
    type Value = UniqueKeys;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }
    fn visit_i64<E>(self, _: i64) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }
    fn visit_u64<E>(self, _: u64) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }
    fn visit_f64<E>(self, _: f64) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }
    fn visit_str<E>(self, _: &str) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }
    fn visit_unit<E>(self) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }
    fn visit_none<E>(self) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<UniqueKeys, D::Error> {
        serde::Deserialize::deserialize(d)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<UniqueKeys, A::Error> {
        while seq.next_element::<UniqueKeys>()?.is_some() {}
        Ok(UniqueKeys)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<UniqueKeys, A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(serde::de::Error::custom(format!(
                    "the key `{}` appears twice in one object (each key may appear once)",
                    echo(&key)
                )));
            }
            map.next_value::<UniqueKeys>()?;
        }
        Ok(UniqueKeys)
    }
}

/// Check one posted message; `tools` are the names a `tools/call` may give.
pub(crate) fn check(message: &Value, tools: &[String]) -> Result<(), Bad> {
    let Value::Object(m) = message else {
        return Err(Bad::invalid(match message {
            Value::Array(_) => "JSON-RPC batches are not accepted: send one message per request",
            _ => "a JSON-RPC message must be a JSON object",
        }));
    };
    if m.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(Bad::invalid("`jsonrpc` must be \"2.0\""));
    }
    if let Some(id) = m.get("id")
        && !(id.is_string() || id.is_i64() || id.is_u64())
    {
        return Err(Bad::invalid(
            "`id` must be a string or an integer (not null, a fraction, an object or an array)",
        ));
    }
    // The MCP library logs a request's id with each error it answers: an id is short.
    if let Some(Value::String(id)) = m.get("id")
        && id.chars().nth(MAX_ECHO_CHARS).is_some()
    {
        return Err(Bad::invalid(format!(
            "a string `id` may hold at most {MAX_ECHO_CHARS} characters"
        )));
    }
    let Some(method) = m.get("method") else {
        if m.contains_key("id") && (m.contains_key("result") || m.contains_key("error")) {
            return Ok(()); // a response to a request of the server's
        }
        return Err(Bad::invalid("a JSON-RPC request needs a `method`"));
    };
    let Some(method) = method.as_str() else {
        return Err(Bad::invalid("`method` must be a string"));
    };
    if let Some(params) = m.get("params")
        && !params.is_object()
    {
        return Err(Bad::invalid("`params` must be an object"));
    }
    let id = m.get("id").cloned().unwrap_or(Value::Null);
    if m.contains_key("id") && !REQUEST_METHODS.contains(&method) {
        return Err(Bad {
            status: StatusCode::OK,
            code: METHOD_NOT_FOUND,
            message: format!("method not found: `{}`", echo(method)),
            id,
        });
    }
    // The MCP library logs the protocol version an `initialize` asks for when its header
    // disagrees: a version is a short string (a date).
    if method == "initialize"
        && let Some(Value::String(version)) = message["params"].get("protocolVersion")
        && version.chars().nth(MAX_ECHO_CHARS).is_some()
    {
        return Err(Bad::params(
            &id,
            format!("`params.protocolVersion` may hold at most {MAX_ECHO_CHARS} characters"),
        ));
    }
    if method == "tools/call" && m.contains_key("id") {
        let params = &message["params"];
        let Some(name) = params["name"].as_str() else {
            return Err(Bad::params(&id, "tools/call needs `params.name`, a string"));
        };
        if !tools.iter().any(|t| t == name) {
            return Err(Bad::params(
                &id,
                format!(
                    "unknown tool `{}`: this server has {}",
                    echo(name),
                    tools.join(", ")
                ),
            ));
        }
        if !matches!(params.get("arguments"), None | Some(Value::Object(_))) {
            return Err(Bad::params(&id, "`params.arguments` must be an object"));
        }
    }
    Ok(())
}

/// `message` with what the MCP library logs of it verbatim made loggable: a cancellation's
/// `reason` (logged at `INFO` with the cancelled request) is cut and redacted
/// ([`crate::logs::client_text`]). Whether anything changed (then the body is written again).
pub(crate) fn tame(message: &mut Value) -> bool {
    if message["method"] != "notifications/cancelled" {
        return false;
    }
    let Some(reason) = message.get_mut("params").and_then(|p| p.get_mut("reason")) else {
        return false;
    };
    let Value::String(text) = reason else {
        return false;
    };
    let logged = crate::logs::client_text(text);
    if logged == *text {
        return false;
    }
    *text = logged;
    true
}

/// The id of a request (a message with a `method` and an `id`), as its JSON text.
pub(crate) fn request_id(message: &Value) -> Option<String> {
    (message.get("method").is_some())
        .then(|| message.get("id"))
        .flatten()
        .map(Value::to_string)
}

/// The HTTP answer for a refused message: its JSON-RPC error.
pub(crate) fn refusal(bad: Bad) -> Response<BoxBody<Bytes, Infallible>> {
    let body = json!({
        "jsonrpc": "2.0",
        "id": bad.id,
        "error": {"code": bad.code, "message": bad.message},
    });
    let mut r = Response::new(
        Full::new(Bytes::from(body.to_string()))
            .map_err(|never| match never {})
            .boxed(),
    );
    *r.status_mut() = bad.status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    r
}

/// The request ids in flight, per session.
#[derive(Clone, Default)]
pub(crate) struct Flights(Arc<Mutex<HashSet<(String, String)>>>);

impl Flights {
    /// Mark `id` in flight in `session`; `None` when it already is.
    pub(crate) fn begin(&self, session: &str, id: String) -> Option<InFlight> {
        let key = (session.to_owned(), id);
        let mut set = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        set.insert(key.clone()).then(|| InFlight {
            flights: self.clone(),
            key,
        })
    }
}

/// A request id in flight; it lands when this is dropped.
pub(crate) struct InFlight {
    flights: Flights,
    key: (String, String),
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.flights
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.key);
    }
}

/// An answer's body that keeps what its request holds (its id in flight, its place under the
/// token's limits) until it ends (or is dropped).
pub(crate) struct Releasing<G> {
    inner: BoxBody<Bytes, Infallible>,
    _held: G,
}

impl<G: Send + Sync + Unpin + 'static> Releasing<G> {
    /// `inner`, holding `held` until it ends.
    pub(crate) fn wrap(inner: BoxBody<Bytes, Infallible>, held: G) -> BoxBody<Bytes, Infallible> {
        BoxBody::new(Self { inner, _held: held })
    }
}

impl<G: Unpin> hyper::body::Body for Releasing<G> {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(message: &Value) -> Result<(), Bad> {
        super::check(message, &["context_load".to_owned()])
    }

    #[test]
    fn messages_that_are_not_one_json_rpc_request_are_refused_with_minus_32600() {
        for bad in [
            json!([]),
            json!([{"jsonrpc": "2.0", "id": 1, "method": "ping"}]),
            json!(null),
            json!(42),
            json!({"jsonrpc": "2.0", "id": 1}),
            json!({"jsonrpc": "1.0", "id": 1, "method": "ping"}),
            json!({"jsonrpc": "2.0", "id": null, "method": "ping"}),
            json!({"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}),
            json!({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]}),
            json!({"jsonrpc": "2.0", "id": 1, "method": 7}),
        ] {
            let refused = check(&bad).unwrap_err();
            assert_eq!(
                (refused.status, refused.code),
                (StatusCode::BAD_REQUEST, -32600),
                "{bad}"
            );
        }
        for good in [
            json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
            json!({"jsonrpc": "2.0", "id": "a", "method": "tools/list", "params": {}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 3, "result": {}}),
        ] {
            assert_eq!(check(&good), Ok(()), "{good}");
        }
    }

    #[test]
    fn a_tool_call_with_a_bad_name_or_arguments_is_invalid_params_and_echoes_little() {
        let call = |params: Value| json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params});
        for params in [
            json!({"name": null}),
            json!({"name": 5}),
            json!({"name": "context_load", "arguments": "x"}),
            json!({"name": "context_load", "arguments": [1]}),
        ] {
            let refused = check(&call(params.clone())).unwrap_err();
            assert_eq!(
                (refused.code, refused.id.clone()),
                (-32602, json!(9)),
                "{params}"
            );
        }
        let long = "x".repeat(100_000);
        let refused = check(&call(json!({"name": long}))).unwrap_err();
        assert!(
            refused.message.contains("unknown tool `xxx"),
            "{}",
            refused.message
        );
        assert!(refused.message.len() < 300, "{}", refused.message.len());
        let escaped = check(&call(json!({"name": "\u{1b}]0;pwn\u{7}"}))).unwrap_err();
        assert!(!escaped.message.contains('\u{1b}'), "{}", escaped.message);
    }

    #[test]
    fn an_id_is_in_flight_once_per_session_until_its_answer_ends() {
        let flights = Flights::default();
        let first = flights.begin("s1", "1".into());
        assert!(first.is_some());
        assert!(flights.begin("s1", "1".into()).is_none());
        assert!(flights.begin("s2", "1".into()).is_some());
        drop(first);
        assert!(flights.begin("s1", "1".into()).is_some());
    }
}
