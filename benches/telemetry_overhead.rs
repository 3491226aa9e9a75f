//! What exporting traces costs a turn: one agent turn (a tool call and an answer from the
//! scripted model, which says so: two model requests, one tool call) with no subscriber, with a
//! plain `tracing` registry, and with the OTLP export layer (spans and metrics) sending to a
//! loopback receiver. The export leaves from the exporter's own thread in batches; what the turn
//! pays is building the spans and handing them over.
//!
//! The same turn is then run against a real provider path: `OpenAiCompatModel` streaming from a
//! loopback server that speaks OpenAI's chat-completions SSE (a tool call, then an answer), which
//! answers at once. That is the cheapest turn a real model can give (no inference time), so the
//! export's share of it is an upper bound on its share of any real turn.
//!
//! `cargo bench --features otel,providers --bench telemetry_overhead -- --warm-up-time 1 --measurement-time 5`
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use criterion::{Criterion, criterion_group, criterion_main};
use memloop::core::Agent;
use memloop::core::model::Model;
use memloop::otel::{OtlpConfig, OtlpExport};
use memloop::providers::{OpenAiCompatModel, OpenAiConfig};
use memloop::testkit::Echo;
use serde_json::json;
use std::sync::Arc;
use tracing::instrument::WithSubscriber;
use tracing_subscriber::layer::SubscriberExt;

async fn turn(model: Arc<dyn Model>) {
    let mut agent = Agent::builder(model).tool(Arc::new(Echo)).build();
    agent.run_turn("what is in the box?").await.unwrap();
}

/// OpenAI's streamed chat completion: a call of `echo` while no tool result was sent, then an
/// answer; usage last, as `stream_options.include_usage` asks.
struct OpenAiStream;

impl wiremock::Respond for OpenAiStream {
    fn respond(&self, request: &wiremock::Request) -> wiremock::ResponseTemplate {
        let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
        let answered = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["role"] == "tool");
        let chunk = |delta: serde_json::Value, finish: serde_json::Value| {
            json!({"id": "chatcmpl-bench", "object": "chat.completion.chunk", "model": "bench",
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        };
        let events = match answered {
            false => vec![
                chunk(
                    json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_1",
                           "type": "function",
                           "function": {"name": "echo", "arguments": "{\"q\":1}"}}]}),
                    json!(null),
                ),
                chunk(json!({}), json!("tool_calls")),
            ],
            true => vec![
                chunk(
                    json!({"role": "assistant", "content": "It holds "}),
                    json!(null),
                ),
                chunk(json!({"content": "one echo."}), json!(null)),
                chunk(json!({}), json!("stop")),
            ],
        };
        let mut sse: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
        sse.push_str(&format!(
            "data: {}\n\ndata: [DONE]\n\n",
            json!({"id": "chatcmpl-bench", "choices": [],
                   "usage": {"prompt_tokens": 120, "completion_tokens": 9}})
        ));
        wiremock::ResponseTemplate::new(200).set_body_raw(sse, "text/event-stream")
    }
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // The collector keeps nothing: a receiver that stored every batch would grow through the run
    // and bill the turn for it.
    let server = rt.block_on(
        wiremock::MockServer::builder()
            .disable_request_recording()
            .start(),
    );
    rt.block_on(
        wiremock::Mock::given(wiremock::matchers::method("POST"))
            .respond_with(wiremock::ResponseTemplate::new(200))
            .mount(&server),
    );
    let model_server = rt.block_on(wiremock::MockServer::start());
    rt.block_on(
        wiremock::Mock::given(wiremock::matchers::path("/v1/chat/completions"))
            .respond_with(OpenAiStream)
            .mount(&model_server),
    );
    let scripted: Arc<dyn Model> = Arc::new(Echo::once_then("done"));
    let mut openai = OpenAiConfig::new(format!("{}/v1/", model_server.uri()), "bench");
    openai.api_key = Some("sk-bench".into());
    let http: Arc<dyn Model> = Arc::new(OpenAiCompatModel::new(openai).unwrap());

    // Each subscriber built once, as a host builds it, and shared by every turn.
    let registry = tracing::Dispatch::new(tracing_subscriber::registry());
    let config = OtlpConfig::new(&server.uri());
    let export = OtlpExport::start(&config).unwrap();
    let exporting = tracing::Dispatch::new(tracing_subscriber::registry().with(export.layer()));
    let mut group = c.benchmark_group("telemetry_overhead");
    for (name, model) in [("turn", &scripted), ("http_turn", &http)] {
        group.bench_function(format!("{name}/no_subscriber"), |b| {
            b.iter(|| rt.block_on(turn(model.clone())))
        });
        group.bench_function(format!("{name}/registry"), |b| {
            b.iter(|| rt.block_on(turn(model.clone()).with_subscriber(registry.clone())))
        });
        group.bench_function(format!("{name}/otlp_export"), |b| {
            b.iter(|| rt.block_on(turn(model.clone()).with_subscriber(exporting.clone())))
        });
    }
    group.finish();
    drop(exporting);
    let _ = export.shutdown();
}

criterion_group!(benches, bench);
criterion_main!(benches);
