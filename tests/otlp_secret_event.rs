//! A refused credential reaches the trace as an event of the tool call that tried to save it,
//! naming the pattern and never the secret: exported over OTLP/HTTP (protobuf) to a loopback
//! receiver answering as a collector does. The model is the scripted one (it says so).
#![cfg(feature = "otel")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop::MemorySetup;
use memloop::core::Agent;
use memloop::host::env::EnvVars;
use memloop::memory::paths::MemoryDirResolver;
use memloop::otel::{OtlpConfig, OtlpExport};
use memloop::testkit::{ScriptStep, ScriptedModel};
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

/// One turn of a scripted agent (it answers "Noted, I will not store it.") asked `message`,
/// with memory set up from `env` and traces exported to a loopback receiver; the bodies of the
/// trace requests, joined.
async fn exported_turn(env: &[(&str, &str)], message: &str) -> Vec<u8> {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&server)
        .await;
    let (home, project) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut vars = vec![("MEMLOOP_HOME", home.path().to_str().unwrap())];
    vars.extend_from_slice(env);
    let resolver = MemoryDirResolver::new(project.path())
        .managed_settings(project.path().join("no-managed-settings.json"));
    let memory = MemorySetup::with_resolver(resolver, EnvVars::from_pairs(vars))
        .unwrap()
        .without_compaction()
        .extraction(false)
        .recall(false);
    let model = ScriptedModel::new().then(ScriptStep::text("Noted, I will not store it."));
    let config = OtlpConfig::new(&server.uri());
    let export = tokio::task::spawn_blocking(move || OtlpExport::start(&config))
        .await
        .unwrap()
        .unwrap();
    let subscriber = tracing_subscriber::registry().with(export.layer());
    let message = message.to_owned();
    async move {
        let mut agent = memory
            .attach(Agent::builder(Arc::new(model)))
            .unwrap()
            .build();
        agent.run_turn(&message).await.unwrap();
    }
    .with_subscriber(subscriber)
    .await;
    tokio::task::spawn_blocking(move || export.shutdown())
        .await
        .unwrap()
        .unwrap();
    server
        .received_requests()
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.url.path() == "/v1/traces")
        .flat_map(|r| r.body)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_content_is_captured_only_on_request_and_never_a_secret() {
    let message = format!("The staging database password is {SECRET}; the host is db-stage-3.");
    let has = |all: &[u8], needle: &str| all.windows(needle.len()).any(|w| w == needle.as_bytes());

    // By default: no message text at all.
    let all = exported_turn(&[], &message).await;
    assert!(has(&all, "chat scripted"));
    assert!(!has(&all, "db-stage-3") && !has(&all, "Noted, I will not store it"));
    assert!(!has(&all, "gen_ai.input.messages"));

    // Asked for with the standard switch: the request and the answer, the secret redacted.
    let all = exported_turn(
        &[("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")],
        &message,
    )
    .await;
    assert!(has(&all, "gen_ai.input.messages") && has(&all, "gen_ai.output.messages"));
    assert!(has(&all, "gen_ai.system_instructions"));
    assert!(has(&all, "db-stage-3"), "the message text was not captured");
    assert!(has(&all, "Noted, I will not store it"));
    assert!(has(&all, memloop::memory::secrets::REDACTED_PREFIX));
    assert!(!has(&all, SECRET), "the secret reached the trace");
}
