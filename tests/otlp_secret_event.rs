//! A refused credential reaches the trace as an event of the tool call that tried to save it,
//! naming the pattern and never the secret: exported over OTLP/HTTP (protobuf) to a loopback
//! receiver answering as a collector does. The model is the scripted one (it says so).
#![cfg(feature = "otel")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop::MemorySetup;
use memloop::core::Agent;
use memloop::core::telemetry::otlp::{OtlpConfig, OtlpExport};
use memloop::core::testing::{ScriptStep, ScriptedModel};
use memloop::memory::env::EnvVars;
use memloop::memory::paths::MemoryDirResolver;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tracing::instrument::WithSubscriber;
use tracing_subscriber::layer::SubscriberExt;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const SECRET: &str = "Qw7zLp2Vn9xK4mRt";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_secret_is_a_span_event_without_the_secret() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/traces"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&server)
        .await;
    let (home, project) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let env = EnvVars::from_pairs([("MEMLOOP_HOME", home.path().to_str().unwrap())]);
    let resolver = MemoryDirResolver::new(project.path())
        .managed_settings(project.path().join("no-managed-settings.json"));
    let memory = MemorySetup::with_resolver(resolver, env)
        .unwrap()
        .without_compaction()
        .extraction(false)
        .recall(false);
    let store = memory.store().unwrap().clone();
    // The main model tries to save the admin password, then answers.
    let model = ScriptedModel::new().on_purpose("main", |req| {
        let answered = req
            .messages
            .last()
            .is_some_and(|m| m.tool_result_ids().next().is_some());
        Some(match answered {
            false => ScriptStep::tool(
                "memory_write",
                json!({
                    "topic": "reference_admin", "type": "reference", "name": "Admin login",
                    "description": "how to log in to the admin console",
                    "content": format!("admin password: {SECRET}")
                }),
            ),
            true => ScriptStep::text("I cannot store that."),
        })
    });

    let config = OtlpConfig::new(&server.uri());
    let export = tokio::task::spawn_blocking(move || OtlpExport::start(&config))
        .await
        .unwrap()
        .unwrap();
    let subscriber = tracing_subscriber::registry().with(export.layer());
    let setup = memory.clone();
    async move {
        let mut agent = setup
            .attach(Agent::builder(Arc::new(model)))
            .unwrap()
            .build();
        agent.run_turn("remember the admin password").await.unwrap();
        agent.drain(Duration::from_secs(10)).await;
    }
    .with_subscriber(subscriber)
    .await;
    tokio::task::spawn_blocking(move || export.shutdown())
        .await
        .unwrap()
        .unwrap();

    // Nothing was stored.
    assert!(store.scan().await.unwrap().is_empty());
    // The trace holds the refusal, under the tool call's span, and not the secret.
    let bodies: Vec<Vec<u8>> = server
        .received_requests()
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.url.path() == "/v1/traces")
        .map(|r| r.body)
        .collect();
    let all: Vec<u8> = bodies.concat();
    let has = |needle: &str| all.windows(needle.len()).any(|w| w == needle.as_bytes());
    assert!(has("memory write refused: looks like a credential"));
    assert!(has("memloop.secret.pattern"));
    assert!(has("execute_tool memory_write"));
    assert!(!has(SECRET), "the secret reached the trace");
}
