//! The server's metrics through the OTLP export (`memloop-otel`, as the CLI runs it with
//! `OTEL_EXPORTER_OTLP_ENDPOINT`): a loopback receiver gets the same counts `GET /metrics`
//! shows, flushed at the export's shutdown. A process of its own: the export sets the
//! process's global meter provider.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use memloop_host::env::EnvVars;
use memloop_otel::{OtlpConfig, OtlpExport};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::metrics::v1::{metric::Data, number_data_point};
use prost::Message as _;
use std::collections::HashMap;
use support::{Fixture, s};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_reach_an_otlp_receiver_with_the_scraped_counts() {
    let receiver = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&receiver)
        .await;
    let env = EnvVars::from_pairs([("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.uri())]);
    let config = OtlpConfig::from_env(&env).unwrap().unwrap();
    // The exporter's HTTP client blocks on its own thread: build and stop it off the runtime.
    let export = tokio::task::spawn_blocking(move || OtlpExport::start(&config))
        .await
        .unwrap()
        .unwrap();

    let fx = Fixture::new();
    let project = fx.project("exported");
    let server = support::start_http(&fx, None, None).await;
    for i in 0..2 {
        let body = serde_json::json!({"jsonrpc": "2.0", "id": i, "method": "tools/call",
            "params": {"name": "context_load", "arguments": {"project_path": s(&project)}}});
        let r = reqwest::Client::new()
            .post(&server.url)
            .header("Accept", "application/json, text/event-stream")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    let scraped = reqwest::get(format!("http://{}/metrics", server.addr))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        scraped
            .lines()
            .any(|l| l == "memloop_mcp_requests_total{tool=\"context_load\",status=\"ok\"} 2"),
        "{scraped}"
    );
    let _ = tokio::task::spawn_blocking(move || export.shutdown())
        .await
        .unwrap();

    // The last value of each (metric, attributes) point received.
    let mut points: HashMap<(String, Vec<(String, String)>), f64> = HashMap::new();
    for request in receiver.received_requests().await.unwrap() {
        if request.url.path() != "/v1/metrics" {
            continue;
        }
        let body = ExportMetricsServiceRequest::decode(request.body.as_slice()).unwrap();
        for metric in body
            .resource_metrics
            .into_iter()
            .flat_map(|r| r.scope_metrics)
            .flat_map(|s| s.metrics)
        {
            let data_points = match metric.data {
                Some(Data::Sum(s)) => {
                    assert!(s.is_monotonic, "{}", metric.name);
                    s.data_points
                }
                Some(Data::Gauge(g)) => g.data_points,
                _ => continue,
            };
            for p in data_points {
                let mut attrs: Vec<(String, String)> = p
                    .attributes
                    .iter()
                    .map(|kv| {
                        let v = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                            Some(AnyValue::StringValue(s)) => s.clone(),
                            other => format!("{other:?}"),
                        };
                        (kv.key.clone(), v)
                    })
                    .collect();
                attrs.sort();
                let v = match p.value {
                    Some(number_data_point::Value::AsInt(i)) => i as f64,
                    Some(number_data_point::Value::AsDouble(d)) => d,
                    None => continue,
                };
                points.insert((metric.name.clone(), attrs), v);
            }
        }
    }
    let point = |name: &str, attrs: &[(&str, &str)]| {
        let mut attrs: Vec<(String, String)> = attrs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        attrs.sort();
        points.get(&(name.to_owned(), attrs)).copied()
    };
    let load_ok = [("tool", "context_load"), ("status", "ok")];
    assert_eq!(
        point("memloop.mcp.requests", &load_ok),
        Some(2.0),
        "{points:?}"
    );
    assert_eq!(
        point(
            "memloop.mcp.requests",
            &[("tool", "context_save"), ("status", "ok")]
        ),
        Some(0.0)
    );
    let inf = [("tool", "context_load"), ("status", "ok"), ("le", "+Inf")];
    assert_eq!(
        point("memloop.mcp.request.duration.bucket", &inf),
        Some(2.0)
    );
    assert!(point("memloop.mcp.request.duration.sum", &load_ok).unwrap() > 0.0);
    assert_eq!(
        point("memloop.mcp.refusals", &[("kind", "unauthorized")]),
        Some(0.0)
    );
    assert!(point("memloop.cache.bytes", &[]).is_some(), "{points:?}");
    assert_eq!(point("memloop.cache.evictions", &[]), Some(0.0));
    // Files on disk: no pool.
    assert!(!points.keys().any(|(n, _)| n.starts_with("memloop.pg")));
}
