//! What exporting traces costs a turn: one agent turn (a tool call and an answer from the
//! scripted model, which says so: two model requests, one tool call) with no subscriber, with a
//! plain `tracing` registry, and with the OTLP export layer (spans and metrics) sending to a
//! loopback receiver. The export leaves from the exporter's own thread in batches; what the turn
//! pays is building the spans and handing them over.
//!
//! `cargo bench --features otel --bench telemetry_overhead -- --warm-up-time 1 --measurement-time 5`
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use async_trait::async_trait;
use criterion::{Criterion, criterion_group, criterion_main};
use memloop::core::Agent;
use memloop::core::telemetry::otlp::{OtlpConfig, OtlpExport};
use memloop::core::testing::{ScriptStep, ScriptedModel};
use memloop::core::tool::{Tool, ToolContext, ToolEffect, ToolOutput, ToolSpec};
use serde_json::json;
use std::sync::Arc;
use tracing::instrument::WithSubscriber;
use tracing_subscriber::layer::SubscriberExt;

struct Echo;

#[async_trait]
impl Tool for Echo {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "echo".into(),
            description: "Echo the input.".into(),
            input_schema: json!({"type": "object"}),
            effect: ToolEffect::ReadOnly,
        }
    }
    async fn call(&self, input: serde_json::Value, _ctx: &ToolContext) -> ToolOutput {
        ToolOutput::ok(input.to_string())
    }
}

fn model() -> ScriptedModel {
    ScriptedModel::new().on_purpose("main", |req| {
        let answered = req
            .messages
            .last()
            .is_some_and(|m| m.tool_result_ids().next().is_some());
        Some(match answered {
            false => ScriptStep::tool("echo", json!({"q": 1})),
            true => ScriptStep::text("done"),
        })
    })
}

async fn turn(model: &ScriptedModel) {
    let mut agent = Agent::builder(Arc::new(model.clone()))
        .tool(Arc::new(Echo))
        .build();
    agent.run_turn("what is in the box?").await.unwrap();
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(wiremock::MockServer::start());
    rt.block_on(
        wiremock::Mock::given(wiremock::matchers::method("POST"))
            .respond_with(wiremock::ResponseTemplate::new(200))
            .mount(&server),
    );
    let model = model();
    let mut group = c.benchmark_group("telemetry_overhead");
    group.bench_function("turn/no_subscriber", |b| {
        b.iter(|| rt.block_on(turn(&model)))
    });
    // Each subscriber built once, as a host builds it, and shared by every turn.
    let registry = tracing::Dispatch::new(tracing_subscriber::registry());
    group.bench_function("turn/registry", |b| {
        b.iter(|| rt.block_on(turn(&model).with_subscriber(registry.clone())))
    });
    let config = OtlpConfig::new(&server.uri());
    let export = OtlpExport::start(&config).unwrap();
    let exporting = tracing::Dispatch::new(tracing_subscriber::registry().with(export.layer()));
    group.bench_function("turn/otlp_export", |b| {
        b.iter(|| rt.block_on(turn(&model).with_subscriber(exporting.clone())))
    });
    group.finish();
    drop(exporting);
    let _ = export.shutdown();
}

criterion_group!(benches, bench);
criterion_main!(benches);
