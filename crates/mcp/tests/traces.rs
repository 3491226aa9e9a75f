//! Every tool call is a span a tracing backend understands: `tools/call {tool}` (kind server)
//! with the MCP and GenAI attributes, `error.type` when refused, and never the arguments or the
//! answer (they hold memory text). Captured by a real `tracing` subscriber layer.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::json;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use support::{Fixture, call, connect, s};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, SubscriberExt};

type Spans = Arc<Mutex<Vec<(u64, BTreeMap<String, String>)>>>;

/// Every span's fields (recorded later ones included), by span id.
#[derive(Clone, Default)]
struct Capture(Spans);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(
            field.name().to_owned(),
            format!("{value:?}").trim_matches('"').to_owned(),
        );
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        fields.insert("name".to_owned(), attrs.metadata().name().to_owned());
        attrs.record(&mut Fields(&mut fields));
        self.0.lock().unwrap().push((id.into_u64(), fields));
    }
    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        let mut spans = self.0.lock().unwrap();
        if let Some((_, fields)) = spans.iter_mut().rev().find(|(i, _)| *i == id.into_u64()) {
            values.record(&mut Fields(fields));
        }
    }
}

#[tokio::test]
async fn each_tool_call_is_a_server_span_without_memory_text() {
    let capture = Capture::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(capture.clone()));
    let f = Fixture::new();
    let project = f.project("traced");
    let client = connect(f.config()).await;
    let secret_free = "The billing service uses PostgreSQL 16 with pgbouncer in front.";
    let saved = call(
        &client,
        "context_save",
        json!({"project_path": s(&project), "entries": [
            {"type": "knowledge", "title": "Billing database", "content": secret_free}
        ]}),
    )
    .await;
    assert_eq!(saved["is_error"], false, "{saved}");
    call(
        &client,
        "context_search",
        json!({"project_path": s(&project), "query": "billing database"}),
    )
    .await;
    let refused = call(
        &client,
        "context_save",
        json!({"project_path": s(&project), "entries": [
            {"type": "knowledge", "title": "Admin", "content": "admin password: Qw7zLp2Vn9xK4mRt"}
        ]}),
    )
    .await;
    assert_eq!(refused["is_error"], true, "{refused}");

    let spans: Vec<BTreeMap<String, String>> = capture
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, f)| f["name"] == "tools/call")
        .map(|(_, f)| f.clone())
        .collect();
    let names: Vec<&str> = spans.iter().map(|f| f["otel.name"].as_str()).collect();
    assert_eq!(
        names,
        [
            "tools/call context_save",
            "tools/call context_search",
            "tools/call context_save"
        ]
    );
    for span in &spans {
        assert_eq!(span["otel.kind"], "server");
        assert_eq!(span["mcp.method.name"], "tools/call");
        assert_eq!(span["gen_ai.operation.name"], "execute_tool");
        assert!(span.contains_key("jsonrpc.request.id"));
    }
    assert_eq!(spans[1]["gen_ai.tool.name"], "context_search");
    assert!(!spans[0].contains_key("error.type"), "{:?}", spans[0]);
    assert_eq!(spans[2]["error.type"], "tool_error");
    assert_eq!(spans[2]["otel.status_code"], "ERROR");
    // No memory text in any span of the server.
    let all = format!("{:?}", capture.0.lock().unwrap());
    assert!(
        !all.contains("pgbouncer") && !all.contains("Qw7zLp2Vn9xK4mRt"),
        "{all}"
    );
}
