//! One trace per HTTP request: the request's server span, the W3C trace context a client sends
//! with it, and the spans of the request's steps made its children.
//!
//! - [`request_span`]: the HTTP server span of a request to the MCP endpoint (`POST /mcp`, kind
//!   server, `http.request.method`, `url.path`, `http.response.status_code`). With the crate's
//!   `otel` feature (the `memloop` binary has it), a valid `traceparent` header (and its
//!   `tracestate`) makes it the child of the client's span, in the client's trace; without one
//!   (or with a malformed one) the request starts a trace of its own. This is the one place that
//!   reads the trace context.
//! - [`auth_span`]: the bearer token's check, a child of the request's span.
//! - [`RequestSpan`]: the request's span, carried in the request's extensions to the tool call
//!   (which the MCP library runs on a task of its own): the `tools/call` span is its child
//!   ([`parent_of`]), and the project resolution, store calls and PostgreSQL statements are
//!   children of that.
//!
//! No header value, token or body is recorded.

use http::{Request, Response};
use std::future::Future;

/// The span of the HTTP request a tool call came in (in its `http::request::Parts`' extensions).
#[derive(Clone, Debug)]
pub(crate) struct RequestSpan(pub(crate) tracing::Span);

/// The server span of `req` (a request that is not a health probe: those are not traced).
pub(crate) fn request_span<B>(req: &Request<B>) -> tracing::Span {
    let method = req.method().as_str();
    let path = req.uri().path();
    // The span's name is the method and the route: the server has one (`/mcp`).
    let name = match path {
        "/mcp" => format!("{method} /mcp"),
        _ => method.to_owned(),
    };
    let span = tracing::info_span!(
        "http",
        otel.name = %name,
        otel.kind = "server",
        otel.status_code = tracing::field::Empty,
        http.request.method = method,
        url.path = path,
        http.response.status_code = tracing::field::Empty,
        error.type = tracing::field::Empty,
    );
    adopt_client_context(&span, req.headers());
    span
}

/// Run `serve` (the answer to one request) inside `span`, then record the answer's status.
pub(crate) async fn serve<B, E>(
    span: tracing::Span,
    serve: impl Future<Output = Result<Response<B>, E>>,
) -> Result<Response<B>, E> {
    let answer = tracing::Instrument::instrument(serve, span.clone()).await;
    if let Ok(r) = &answer {
        let status = r.status().as_u16();
        span.record("http.response.status_code", status);
        // A server span is an error at 5xx only (4xx is the client's).
        if status >= 500 {
            span.record("error.type", status);
            span.record("otel.status_code", "ERROR");
        }
    }
    answer
}

/// The span of a request's authentication (its bearer token, which it never records).
pub(crate) fn auth_span() -> tracing::Span {
    tracing::info_span!(
        "authenticate",
        otel.kind = "internal",
        otel.status_code = tracing::field::Empty,
        error.type = tracing::field::Empty,
    )
}

/// Record on `span` (an [`auth_span`]) that the token was refused.
pub(crate) fn auth_refused(span: &tracing::Span) {
    span.record("error.type", "unauthenticated");
    span.record("otel.status_code", "ERROR");
}

/// The span of the HTTP request that carried the call of `extensions` (the call's
/// `RequestContext` extensions), when it came over HTTP.
pub(crate) fn parent_of(extensions: &rmcp::model::Extensions) -> Option<tracing::Span> {
    extensions
        .get::<http::request::Parts>()?
        .extensions
        .get::<RequestSpan>()
        .map(|s| s.0.clone())
}

/// Make `span` the child of the client's span named by `headers`' `traceparent` (and carry its
/// `tracestate`), when there is a valid one.
#[cfg(feature = "otel")]
fn adopt_client_context(span: &tracing::Span, headers: &http::HeaderMap) {
    use opentelemetry::propagation::TextMapPropagator as _;
    use opentelemetry::trace::TraceContextExt as _;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    let context = opentelemetry_sdk::propagation::TraceContextPropagator::new()
        .extract(&HeaderExtractor(headers));
    if context.span().span_context().is_valid() {
        // Without an OpenTelemetry layer there is nothing to link; that is not an error.
        if let Err(e) = span.set_parent(context) {
            tracing::trace!(error = %e, "trace context not applied");
        }
    }
}

/// Without the `otel` feature no span is exported, and there is no trace to join.
#[cfg(not(feature = "otel"))]
fn adopt_client_context(_span: &tracing::Span, _headers: &http::HeaderMap) {}

/// The request's headers as the propagator reads them.
#[cfg(feature = "otel")]
struct HeaderExtractor<'a>(&'a http::HeaderMap);

#[cfg(feature = "otel")]
impl opentelemetry::propagation::Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}
