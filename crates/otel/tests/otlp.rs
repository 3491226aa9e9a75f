//! The loop's spans reach a real OTLP/HTTP receiver (the test kit's loopback `OtlpReceiver`,
//! answering as a collector does, on `/v1/traces`) in OpenTelemetry's wire form: names from `otel.name`, the GenAI
//! attributes, the nesting (a chat and a tool call under their turn, the turn under its agent),
//! the resource from the standard variables. The model is the scripted one (it says so).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop_core::Agent;
use memloop_core::message::Usage;
use memloop_host::env::EnvVars;
use memloop_otel::{OtlpConfig, OtlpExport};
use memloop_testkit::{Echo, OtlpReceiver, ScriptStep, ScriptedModel, span_attr as attr};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use tracing::instrument::WithSubscriber;
use tracing_subscriber::layer::SubscriberExt;

/// Run one turn with the spans exported as `env` says; the turn's outcome.
async fn traced_turn(env: EnvVars, model: &ScriptedModel) -> bool {
    let config = OtlpConfig::from_env(&env).unwrap().unwrap();
    // The exporter's HTTP client blocks on its own thread: build and stop it off the runtime.
    let export = tokio::task::spawn_blocking(move || OtlpExport::start(&config))
        .await
        .unwrap()
        .unwrap();
    let subscriber = tracing_subscriber::registry().with(export.layer());
    let model = model.clone();
    let ok = async move {
        let mut agent = Agent::builder(Arc::new(model)).tool(Arc::new(Echo)).build();
        let ok = agent.run_turn("what is in the box?").await.is_ok();
        drop(agent); // ends the agent's span
        ok
    }
    .with_subscriber(subscriber)
    .await;
    let _ = tokio::task::spawn_blocking(move || export.shutdown())
        .await
        .unwrap();
    ok
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_reach_an_otlp_receiver_with_names_attributes_and_nesting() {
    let receiver = OtlpReceiver::start().unwrap();
    let env = EnvVars::from_pairs([
        ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url.clone()),
        ("OTEL_SERVICE_NAME", "memloop-test".into()),
        (
            "OTEL_RESOURCE_ATTRIBUTES",
            "deployment.environment=ci".into(),
        ),
    ]);
    let model = Echo::once_then("done");
    assert!(traced_turn(env, &model).await);

    let mut spans: Vec<Span> = Vec::new();
    let mut services = Vec::new();
    for request in receiver.requests() {
        if request.path != "/v1/traces" {
            continue; // the metrics have a test of their own
        }
        assert_eq!(
            request.content_type.as_deref(),
            Some("application/x-protobuf")
        );
        let body = ExportTraceServiceRequest::decode(request.body.as_slice()).unwrap();
        for rs in body.resource_spans {
            let resource = rs.resource.unwrap_or_default();
            for kv in &resource.attributes {
                if let Some(AnyValue::StringValue(s)) =
                    kv.value.as_ref().and_then(|v| v.value.as_ref())
                {
                    services.push(format!("{}={s}", kv.key));
                }
            }
            for ss in rs.scope_spans {
                spans.extend(ss.spans);
            }
        }
    }
    assert!(
        services.contains(&"service.name=memloop-test".to_owned()),
        "{services:?}"
    );
    assert!(
        services.contains(&"deployment.environment=ci".to_owned()),
        "{services:?}"
    );

    let by_name: HashMap<&str, Vec<&Span>> = spans.iter().fold(HashMap::new(), |mut m, s| {
        m.entry(s.name.as_str()).or_default().push(s);
        m
    });
    let one = |name: &str| -> &Span {
        let found = by_name
            .get(name)
            .unwrap_or_else(|| panic!("no `{name}` in {:?}", by_name.keys()));
        assert_eq!(found.len(), 1, "{name}");
        found[0]
    };
    let agent = one("invoke_agent main");
    let turn = one("turn");
    let tool = one("execute_tool echo");
    let chats = &by_name["chat scripted"];
    assert_eq!(chats.len(), model.requests_for("main").len());
    assert_eq!(chats.len(), 2);
    assert_eq!(turn.parent_span_id, agent.span_id);
    assert_eq!(tool.parent_span_id, turn.span_id);
    for chat in chats {
        assert_eq!(chat.parent_span_id, turn.span_id);
        assert_eq!(chat.trace_id, agent.trace_id);
        assert_eq!(attr(chat, "gen_ai.operation.name").as_deref(), Some("chat"));
        assert_eq!(
            attr(chat, "gen_ai.provider.name").as_deref(),
            Some("memloop.scripted")
        );
        assert_eq!(
            attr(chat, "gen_ai.request.model").as_deref(),
            Some("scripted")
        );
        assert!(attr(chat, "gen_ai.usage.input_tokens").is_some());
        // Client spans, as the conventions make model calls.
        assert_eq!(chat.kind, 3, "SPAN_KIND_CLIENT");
    }
    assert_eq!(attr(tool, "gen_ai.tool.name").as_deref(), Some("echo"));
    // No message text.
    for s in &spans {
        for kv in &s.attributes {
            assert!(!format!("{:?}", kv.value).contains("box"), "{kv:?}");
        }
    }
}

/// A collector that is not there costs the turn nothing: the turn completes, and the export
/// reports the failure at shutdown instead of failing the agent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_collector_never_fails_a_turn() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let env = EnvVars::from_pairs([(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        format!("http://127.0.0.1:{port}"),
    )]);
    assert!(traced_turn(env, &Echo::once_then("done")).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_calls_reach_the_receiver_as_genai_client_metrics() {
    use opentelemetry_proto::tonic::metrics::v1::metric::Data;
    let receiver = OtlpReceiver::start().unwrap();
    let env = EnvVars::from_pairs([("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url.clone())]);
    // Each answer reports 1,200 input and 30 output tokens.
    let usage = Usage {
        input_tokens: 1200,
        output_tokens: 30,
        ..Usage::default()
    };
    let model = ScriptedModel::new().on_purpose("main", move |req| {
        let answered = req
            .messages
            .last()
            .is_some_and(|m| m.tool_result_ids().next().is_some());
        Some(
            match answered {
                false => ScriptStep::tool("echo", json!({"q": 1})),
                true => ScriptStep::text("done"),
            }
            .with_usage(usage),
        )
    });
    assert!(traced_turn(env, &model).await);
    let calls = model.requests_for("main").len() as u64;
    assert_eq!(calls, 2);

    // Every histogram point of a metric: its count and sum, by token type.
    let mut durations = 0u64;
    let mut tokens: HashMap<String, (u64, f64)> = HashMap::new();
    for request in receiver.requests() {
        if request.path != "/v1/metrics" {
            continue;
        }
        let body = ExportMetricsServiceRequest::decode(request.body.as_slice()).unwrap();
        for rm in body.resource_metrics {
            for sm in rm.scope_metrics {
                for metric in sm.metrics {
                    let Some(Data::Histogram(h)) = metric.data else {
                        continue;
                    };
                    for point in h.data_points {
                        let attr = |key: &str| {
                            point
                                .attributes
                                .iter()
                                .find(|kv| kv.key == key)
                                .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
                                    AnyValue::StringValue(s) => Some(s.clone()),
                                    _ => None,
                                })
                        };
                        assert_eq!(attr("gen_ai.operation.name").as_deref(), Some("chat"));
                        assert_eq!(
                            attr("gen_ai.provider.name").as_deref(),
                            Some("memloop.scripted")
                        );
                        match metric.name.as_str() {
                            "gen_ai.client.operation.duration" => durations += point.count,
                            "gen_ai.client.token.usage" => {
                                let kind = attr("gen_ai.token.type").unwrap();
                                let entry = tokens.entry(kind).or_default();
                                entry.0 += point.count;
                                entry.1 += point.sum.unwrap_or_default();
                            }
                            other => panic!("unexpected metric {other}"),
                        }
                    }
                }
            }
        }
    }
    // One duration per model request, one token count per request and token type, flushed at
    // shutdown (the export interval is a minute).
    assert_eq!(durations, calls);
    assert_eq!(tokens.get("input").map(|t| t.0), Some(calls), "{tokens:?}");
    assert_eq!(tokens.get("output").map(|t| t.0), Some(calls), "{tokens:?}");
    assert_eq!(tokens["input"].1, 2400.0, "{tokens:?}");
    assert_eq!(tokens["output"].1, 60.0, "{tokens:?}");
}
