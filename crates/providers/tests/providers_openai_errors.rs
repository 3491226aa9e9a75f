//! OpenAiCompatModel failure paths against a loopback server: status mapping, retries, malformed
//! bodies, timeouts and cancellation.
//! (OpenAI, Ollama, vLLM, llama.cpp).
// Test helpers outside #[test] fns unwrap too; this is test code.
#![allow(clippy::unwrap_used)]

mod support;

use memloop_core::{
    CancellationToken,
    model::{Model, ModelError},
};
use memloop_providers::OpenAiCompatModel;
use pretty_assertions::assert_eq;
use serde_json::json;
use std::time::{Duration, Instant};
use support::*;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

#[tokio::test]
async fn unauthorized_is_auth() {
    let server = MockServer::start().await;
    mount_expect(&server, reply(401, "openai_error_401.json"), 1).await;
    let err = call(&openai(&server, 3), hi()).await.unwrap_err();
    assert!(
        matches!(&err, ModelError::Auth(m) if m.starts_with("Incorrect API key")),
        "{err:?}"
    );
}

#[tokio::test]
async fn context_length_exceeded_openai_and_llama_cpp() {
    let server = MockServer::start().await;
    serve(
        &server,
        "/v1/chat/completions",
        Sequence::new(vec![
            reply(400, "openai_error_context.json"),
            reply(400, "llamacpp_error_context.json"),
        ]),
    )
    .await;
    let m = openai(&server, 3);
    let err = call(&m, hi()).await.unwrap_err();
    assert!(
        matches!(
            err,
            ModelError::ContextTooLong {
                excess_tokens: Some(2512),
                limit: Some(128_000),
                ..
            }
        ),
        "{err:?}"
    );
    let err = call(&m, hi()).await.unwrap_err();
    assert!(
        matches!(
            err,
            ModelError::ContextTooLong {
                excess_tokens: Some(928),
                limit: Some(8_192),
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(bodies(&server).await.len(), 2, "not retried");
}

#[tokio::test]
async fn rate_limit_retry_after_seconds_then_success() {
    let server = MockServer::start().await;
    serve(
        &server,
        "/v1/chat/completions",
        Sequence::new(vec![
            reply(429, "openai_error_429.json").insert_header("retry-after", "0.2"),
            reply(200, "openai_text.json"),
        ]),
    )
    .await;
    let start = Instant::now();
    call(&openai(&server, 2), hi()).await.unwrap();
    assert!(start.elapsed() >= Duration::from_millis(200));
    assert_eq!(bodies(&server).await.len(), 2);
}

#[tokio::test]
async fn unavailable_then_garbage_proxy_page() {
    let server = MockServer::start().await;
    serve(
        &server,
        "/v1/chat/completions",
        Sequence::new(vec![
            ResponseTemplate::new(503).set_body_string("upstream connect error"),
            ResponseTemplate::new(200).set_body_string("<html>oops</html>"),
        ]),
    )
    .await;
    let err = call(&openai(&server, 3), hi()).await.unwrap_err();
    let ModelError::InvalidResponse(msg) = err else {
        panic!("{err:?}")
    };
    assert!(msg.contains("<html>oops</html>"), "{msg}");
}

#[tokio::test]
async fn overload_exhaustion_reports_the_last_error() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(503).set_body_json(json!({"error": "model is loading"})),
        )
        .expect(2)
        .mount(&server)
        .await;
    let err = call(&openai(&server, 2), hi()).await.unwrap_err();
    assert_eq!(err, ModelError::Overloaded("model is loading".into()));
}

#[tokio::test]
async fn hostile_bodies_never_panic() {
    let (server, cases) = hostile_server("openai_tool_calls.json").await;
    let m = openai(&server, 1);
    for body in &cases {
        let err = call(&m, hi()).await.unwrap_err();
        assert!(
            matches!(err, ModelError::InvalidResponse(_)),
            "{:?} -> {err:?}",
            String::from_utf8_lossy(body)
        );
    }
}

#[tokio::test]
async fn timeout_and_cancellation() {
    let server = MockServer::start().await;
    serve(
        &server,
        "/v1/chat/completions",
        reply(200, "openai_text.json").set_delay(Duration::from_secs(10)),
    )
    .await;
    let mut c = openai_config(&server, 1);
    c.timeout = Some(Duration::from_millis(100));
    let err = call(&OpenAiCompatModel::new(c).unwrap(), hi())
        .await
        .unwrap_err();
    assert_eq!(err, ModelError::Timeout);

    let cancel = CancellationToken::new();
    cancel.cancel();
    let start = Instant::now();
    let err = openai(&server, 3).complete(hi(), cancel).await.unwrap_err();
    assert_eq!(err, ModelError::Cancelled);
    assert!(start.elapsed() < Duration::from_secs(5));
}
