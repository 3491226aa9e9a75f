//! Traced end to end: a client that sends a W3C `traceparent` through HAProxy to replicas of
//! `memloop mcp --http` on PostgreSQL (exporting to a loopback OTLP receiver) finds its trace in
//! the replica's spans: the HTTP server span is the child of the client's span, and under it the
//! authentication, the tool call, the project resolution, each store call and each PostgreSQL
//! statement, with the OpenTelemetry attributes and without the memory's text or the token.
//! A request without a `traceparent` gets a trace of its own.
#![cfg(all(unix, feature = "postgres"))]
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/replicas.rs"]
mod replicas;

use memloop_testkit::{McpHttp, OtlpReceiver, skip_unless_ci, span_attr};
use opentelemetry_proto::tonic::trace::v1::Span;
use replicas::{Backend, Haproxy, Schema, Server, haproxy_available};
use serde_json::json;
use std::net::SocketAddr;

const TOKEN: &str = "trace-token-0123456789abcdef";
/// The memory saved: no span may carry any of it.
const TEXT: &str = "The ledger wombat reconciles invoices every night at 02:00 UTC.";
/// The client's trace, and its two spans (one per call).
const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const SAVE_SPAN: &str = "00f067aa0ba902b7";
const SEARCH_SPAN: &str = "a3ce929d0e0e4736";

/// OTLP span kinds.
const INTERNAL: i32 = 1;
const SERVER: i32 = 2;
const CLIENT: i32 = 3;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The spans whose parent is `parent`.
fn children<'a>(spans: &'a [Span], parent: &Span) -> Vec<&'a Span> {
    spans
        .iter()
        .filter(|s| s.trace_id == parent.trace_id && s.parent_span_id == parent.span_id)
        .collect()
}

/// Every span under `root` (itself excluded), depth first.
fn descendants<'a>(spans: &'a [Span], root: &Span) -> Vec<&'a Span> {
    let mut found = Vec::new();
    let mut stack = vec![root];
    while let Some(s) = stack.pop() {
        for child in children(spans, s) {
            found.push(child);
            stack.push(child);
        }
    }
    found
}

fn named<'a>(spans: &[&'a Span], name: &str) -> Vec<&'a Span> {
    spans.iter().copied().filter(|s| s.name == name).collect()
}

/// The HTTP server span of the request the client sent as span `client_span`: checked, with
/// everything under it.
fn request_tree<'a>(spans: &'a [Span], client_span: &str) -> (&'a Span, Vec<&'a Span>) {
    let roots: Vec<&Span> = spans
        .iter()
        .filter(|s| hex(&s.parent_span_id) == client_span)
        .collect();
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(roots.len(), 1, "no one child of {client_span} in {names:?}");
    let http = roots[0];
    assert_eq!(hex(&http.trace_id), TRACE, "the client's trace");
    assert_eq!(http.trace_state, "vendor=opaque", "the client's tracestate");
    assert_eq!(http.name, "POST /mcp");
    assert_eq!(http.kind, SERVER);
    assert_eq!(
        span_attr(http, "http.request.method").as_deref(),
        Some("POST")
    );
    assert_eq!(span_attr(http, "url.path").as_deref(), Some("/mcp"));
    assert_eq!(
        span_attr(http, "http.response.status_code").as_deref(),
        Some("200")
    );
    (http, descendants(spans, http))
}

/// The PostgreSQL statement spans among `under`, checked: client spans with the database
/// attributes.
fn statements<'a>(under: &[&'a Span]) -> Vec<&'a Span> {
    let found: Vec<&Span> = under
        .iter()
        .copied()
        .filter(|s| span_attr(s, "db.system.name").as_deref() == Some("postgresql"))
        .collect();
    for s in &found {
        assert_eq!(s.kind, CLIENT, "{}", s.name);
        assert_eq!(span_attr(s, "db.namespace").as_deref(), Some("test"));
        let operation = span_attr(s, "db.operation.name").unwrap();
        let summary = span_attr(s, "db.query.summary").unwrap();
        assert!(summary.starts_with(&operation), "{summary} / {operation}");
        assert_eq!(s.name, summary);
        if let Some(table) = span_attr(s, "db.collection.name") {
            assert_eq!(summary, format!("{operation} {table}"));
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clients_trace_reaches_through_haproxy_to_every_store_call_and_statement() {
    if !haproxy_available() {
        return skip_unless_ci("haproxy is not installed (`.ci/run` installs Debian's haproxy)");
    }
    let receiver = OtlpReceiver::start().unwrap();
    let schema = Schema::new("trace").await;
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let (root, home) = (base.join("root"), base.join("home"));
    let project = root.join("ledger");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let tokens = base.join("tokens");
    std::fs::write(&tokens, format!("{TOKEN}\n")).unwrap();
    std::fs::set_permissions(&tokens, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let tokens = tokens.to_str().unwrap().to_owned();
    let extra = ["--token-file", tokens.as_str()];
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url.as_str()),
        ("OTEL_SERVICE_NAME", "memloop-replica"),
    ];
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let mut replicas = Vec::new();
    for _ in 0..2 {
        replicas.push(Server::start_with_env(&schema.url(), &root, &home, any, &extra, &env).await);
    }
    let backends: Vec<Backend> = replicas.iter().map(|r| Backend::from(r.addr)).collect();
    let haproxy = Haproxy::start(&base, &backends).await;
    let path = project.to_str().unwrap();
    let client = |span: Option<&str>| {
        let c = McpHttp::new(haproxy.url())
            .with_token(TOKEN)
            .with_protocol("2026-07-28");
        match span {
            Some(span) => c
                .with_header("traceparent", format!("00-{TRACE}-{span}-01"))
                .with_header("tracestate", "vendor=opaque"),
            None => c,
        }
    };
    let saved = client(Some(SAVE_SPAN))
        .call(
            "context_save",
            json!({"project_path": path, "entries": [
                {"type": "knowledge", "title": "Ledger reconciliation", "content": TEXT}
            ]}),
        )
        .await
        .unwrap();
    assert_eq!(saved["is_error"], false, "{saved}");
    let found = client(Some(SEARCH_SPAN))
        .call(
            "context_search",
            json!({"project_path": path, "query": "ledger wombat"}),
        )
        .await
        .unwrap();
    assert!(
        found.to_string().contains("Ledger reconciliation"),
        "{found}"
    );
    let untraced = client(None)
        .call("context_load", json!({"project_path": path}))
        .await
        .unwrap();
    assert_eq!(untraced["is_error"], false, "{untraced}");
    // Stopped as an operator stops them: each flushes its spans on the way out.
    drop(haproxy);
    for r in &mut replicas {
        assert!(r.terminate().await.success());
    }
    let spans = receiver.spans();

    for (client_span, tool) in [(SAVE_SPAN, "context_save"), (SEARCH_SPAN, "context_search")] {
        let (http, under) = request_tree(&spans, client_span);
        let direct = children(&spans, http);
        assert_eq!(named(&direct, "authenticate").len(), 1, "{tool}");
        let calls = named(&direct, &format!("tools/call {tool}"));
        assert_eq!(calls.len(), 1, "{tool}");
        let call = calls[0];
        assert_eq!(call.kind, SERVER);
        let in_call = descendants(&spans, call);
        let resolved = named(&in_call, "resolve_project");
        assert_eq!(resolved.len(), 1, "{tool}");
        assert_eq!(resolved[0].kind, INTERNAL);
        let store_calls: Vec<&Span> = in_call
            .iter()
            .copied()
            .filter(|s| s.name.starts_with("store "))
            .collect();
        assert!(!store_calls.is_empty(), "{tool}: no store call");
        for s in &store_calls {
            assert_eq!(
                span_attr(s, "memloop.store.operation").map(|o| format!("store {o}")),
                Some(s.name.clone())
            );
        }
        // Statements run inside the tool call (opening the project's store, its store
        // calls), and some inside a store call.
        let sql = statements(&in_call);
        assert!(!sql.is_empty(), "{tool}: no PostgreSQL statement span");
        assert_eq!(sql.len(), statements(&under).len(), "{tool}");
        assert!(
            store_calls
                .iter()
                .any(|c| !statements(&descendants(&spans, c)).is_empty()),
            "{tool}: no statement inside a store call"
        );
        if tool == "context_save" {
            let batch = named(&store_calls, "store write_batch");
            assert_eq!(batch.len(), 1, "{tool}");
            let written = statements(&descendants(&spans, batch[0]));
            let summaries: Vec<String> = written
                .iter()
                .map(|s| span_attr(s, "db.query.summary").unwrap())
                .collect();
            for expected in ["BEGIN", "INSERT memloop_memories", "COMMIT"] {
                assert!(
                    summaries.iter().any(|s| s == expected),
                    "{expected} not in {summaries:?}"
                );
            }
        }
    }

    // The request without a trace context is the root of a trace of its own.
    let loads: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name == "tools/call context_load")
        .collect();
    assert_eq!(loads.len(), 1);
    let load_http = spans
        .iter()
        .find(|s| s.span_id == loads[0].parent_span_id)
        .unwrap();
    assert_eq!(load_http.name, "POST /mcp");
    assert!(load_http.parent_span_id.is_empty(), "a root span");
    assert_ne!(hex(&load_http.trace_id), TRACE);

    // No memory text and no token in any attribute or event of any span.
    for s in &spans {
        let values: Vec<String> = s
            .attributes
            .iter()
            .chain(s.events.iter().flat_map(|e| e.attributes.iter()))
            .map(|kv| format!("{:?}", kv.value))
            .chain(std::iter::once(s.name.clone()))
            .collect();
        for v in values {
            assert!(
                !v.contains("wombat") && !v.contains("invoices") && !v.contains(TOKEN),
                "{}: {v}",
                s.name
            );
        }
    }
}
