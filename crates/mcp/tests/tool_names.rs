//! Each tool is declared once: the name a client lists is the name its call's span carries
//! (`gen_ai.tool.name`, `tools/call {tool}`). The lib's own test checks the same names against
//! the authorization table, so router, span and declaration cannot disagree.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use support::{Fixture, call, connect, s};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing_subscriber::layer::{Context, SubscriberExt};

/// The tool name of every `tools/call` span.
#[derive(Clone, Default)]
struct ToolSpans(Arc<Mutex<Vec<(String, String)>>>);

struct ToolName<'a>(&'a mut Option<String>, &'a mut Option<String>);

impl Visit for ToolName<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let text = format!("{value:?}").trim_matches('"').to_owned();
        match field.name() {
            "gen_ai.tool.name" => *self.0 = Some(text),
            "otel.name" => *self.1 = Some(text),
            _ => {}
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.record_debug(field, &value);
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for ToolSpans {
    fn on_new_span(&self, attrs: &Attributes<'_>, _: &Id, _: Context<'_, S>) {
        if attrs.metadata().name() != "tools/call" {
            return;
        }
        let (mut tool, mut otel) = (None, None);
        attrs.record(&mut ToolName(&mut tool, &mut otel));
        self.0
            .lock()
            .unwrap()
            .push((tool.unwrap_or_default(), otel.unwrap_or_default()));
    }
}

#[tokio::test]
async fn every_listed_tool_is_traced_under_the_name_it_is_listed_by() {
    let spans = ToolSpans::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(spans.clone()));
    let f = Fixture::new();
    let project = f.project("名前-имя");
    let client = connect(f.config()).await;
    let mut listed: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    listed.sort();
    // Arguments every tool accepts: the project, and what each requires besides.
    let args = |tool: &str| -> Value {
        let mut a = json!({"project_path": s(&project)});
        match tool {
            "context_search" => a["query"] = json!("базы данных"),
            "context_save" => {
                a["entries"] = json!([{"type": "knowledge", "title": "Café", "content": "é"}]);
            }
            "context_manage" => a["action"] = json!("list"),
            _ => {}
        }
        a
    };
    for tool in &listed {
        let name: &'static str = Box::leak(tool.clone().into_boxed_str());
        call(&client, name, args(tool)).await;
    }
    let mut traced: Vec<String> = Vec::new();
    for (tool, otel) in spans.0.lock().unwrap().iter() {
        assert_eq!(*otel, format!("tools/call {tool}"));
        traced.push(tool.clone());
    }
    traced.sort();
    assert_eq!(traced, listed);
    assert_eq!(listed.len(), 4, "{listed:?}");
}
