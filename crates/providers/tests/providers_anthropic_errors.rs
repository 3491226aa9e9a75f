//! AnthropicModel failure paths against a loopback server: status mapping, retries, malformed
//! bodies, timeouts and cancellation.
// Test helpers outside #[test] fns unwrap too; this is test code.
#![allow(clippy::unwrap_used)]

mod support;

use memloop_core::{
    CancellationToken,
    model::{Model, ModelError, StopReason},
};
use memloop_providers::{AnthropicConfig, AnthropicModel};
use pretty_assertions::assert_eq;
use std::time::{Duration, Instant};
use support::*;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer};

#[tokio::test]
async fn unauthorized_is_auth_and_not_retried() {
    let server = MockServer::start().await;
    mount_expect(&server, reply(401, "anthropic_error_401.json"), 1).await;
    let err = call(&anthropic(&server, 4), hi()).await.unwrap_err();
    assert_eq!(err, ModelError::Auth("invalid x-api-key".into()));
}

#[tokio::test]
async fn prompt_too_long_reports_the_excess() {
    let server = MockServer::start().await;
    mount_expect(
        &server,
        reply(400, "anthropic_error_prompt_too_long.json"),
        1,
    )
    .await;
    let err = call(&anthropic(&server, 4), hi()).await.unwrap_err();
    assert_eq!(
        err,
        ModelError::ContextTooLong {
            message: "prompt is too long: 210000 tokens > 200000 maximum".into(),
            excess_tokens: Some(10_000),
            limit: Some(200_000),
        }
    );
}

#[tokio::test]
async fn input_plus_max_tokens_over_the_limit_is_a_context_error() {
    let server = MockServer::start().await;
    mount_expect(
        &server,
        reply(400, "anthropic_error_input_and_max_tokens.json"),
        1,
    )
    .await;
    let err = call(&anthropic(&server, 4), hi()).await.unwrap_err();
    let ModelError::ContextTooLong { limit, .. } = err else {
        panic!("not a context error: {err:?}");
    };
    assert_eq!(limit, Some(200_000));
}

#[tokio::test]
async fn request_too_large_413_is_neither_a_context_error_nor_retried() {
    let server = MockServer::start().await;
    mount_expect(&server, reply(413, "anthropic_error_413.json"), 1).await;
    let err = call(&anthropic(&server, 4), hi()).await.unwrap_err();
    assert_eq!(
        err,
        ModelError::Http {
            status: 413,
            body: "Request exceeds the maximum allowed number of bytes.".into()
        }
    );
}

#[tokio::test]
async fn conflict_409_is_retried() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(Sequence::new(vec![
            reply(409, "anthropic_error_409.json"),
            reply(200, "anthropic_text.json"),
        ]))
        .expect(2)
        .mount(&server)
        .await;
    let resp = call(&anthropic(&server, 3), hi()).await.unwrap();
    assert_eq!(resp.stop_reason, StopReason::EndTurn);
}

#[tokio::test]
async fn x_should_retry_false_stops_a_retryable_error() {
    let server = MockServer::start().await;
    mount_expect(
        &server,
        reply(500, "anthropic_error_500.json").insert_header("x-should-retry", "false"),
        1,
    )
    .await;
    let err = call(&anthropic(&server, 4), hi()).await.unwrap_err();
    assert_eq!(
        err,
        ModelError::Http {
            status: 500,
            body: "Internal server error".into()
        }
    );
}

#[tokio::test]
async fn x_should_retry_true_retries_an_otherwise_final_error() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(Sequence::new(vec![
            reply(400, "anthropic_error_400.json").insert_header("x-should-retry", "true"),
            reply(200, "anthropic_text.json"),
        ]))
        .expect(2)
        .mount(&server)
        .await;
    let resp = call(&anthropic(&server, 3), hi()).await.unwrap();
    assert_eq!(resp.stop_reason, StopReason::EndTurn);
}

#[tokio::test]
async fn rate_limit_honours_retry_after_then_succeeds() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(Sequence::new(vec![
            reply(429, "anthropic_error_429.json").insert_header("retry-after-ms", "150"),
            reply(200, "anthropic_text.json"),
        ]))
        .mount(&server)
        .await;
    let start = Instant::now();
    let resp = call(&anthropic(&server, 3), hi()).await.unwrap();
    assert!(
        start.elapsed() >= Duration::from_millis(150),
        "waited {:?}",
        start.elapsed()
    );
    assert_eq!(resp.stop_reason, StopReason::EndTurn);
    assert_eq!(bodies(&server).await.len(), 2);
}

#[tokio::test]
async fn rate_limit_with_a_hint_beyond_the_cap_fails_at_once() {
    let server = MockServer::start().await;
    mount_expect(
        &server,
        reply(429, "anthropic_error_429.json").insert_header("retry-after", "3600"),
        1,
    )
    .await;
    let err = call(&anthropic(&server, 3), hi()).await.unwrap_err();
    assert_eq!(
        err,
        ModelError::RateLimited {
            retry_after: Some(Duration::from_secs(3600))
        }
    );
}

#[tokio::test]
async fn overload_529_exhausts_the_attempts() {
    let server = MockServer::start().await;
    mount_expect(&server, reply(529, "anthropic_error_529.json"), 3).await;
    let err = call(&anthropic(&server, 3), hi()).await.unwrap_err();
    assert_eq!(err, ModelError::Overloaded("Overloaded".into()));
}

#[tokio::test]
async fn server_error_then_success() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(Sequence::new(vec![
            reply(500, "anthropic_error_500.json"),
            reply(200, "anthropic_tool_use.json"),
        ]))
        .expect(2)
        .mount(&server)
        .await;
    let resp = call(&anthropic(&server, 2), hi()).await.unwrap();
    assert_eq!(resp.stop_reason, StopReason::ToolUse);
}

#[tokio::test]
async fn garbage_and_truncated_bodies_are_invalid_responses() {
    let (server, cases) = hostile_server("anthropic_tool_use.json").await;
    let m = anthropic(&server, 3);
    for body in &cases {
        let err = call(&m, hi()).await.unwrap_err();
        let ModelError::InvalidResponse(msg) = &err else {
            panic!("body {:?} gave {err:?}", String::from_utf8_lossy(body));
        };
        assert!(msg.len() < 700, "excerpt too long: {msg}");
    }
    assert_eq!(
        bodies(&server).await.len(),
        cases.len(),
        "malformed bodies are not retried"
    );
}

#[tokio::test]
async fn an_error_in_a_200_body_is_mapped() {
    let server = MockServer::start().await;
    serve(
        &server,
        "/v1/messages",
        reply(200, "anthropic_error_529.json"),
    )
    .await;
    let err = call(&anthropic(&server, 1), hi()).await.unwrap_err();
    assert_eq!(err, ModelError::Overloaded("Overloaded".into()));
}

#[tokio::test]
async fn each_attempt_times_out() {
    let server = MockServer::start().await;
    serve(
        &server,
        "/v1/messages",
        reply(200, "anthropic_text.json").set_delay(Duration::from_secs(3)),
    )
    .await;
    let mut config = AnthropicConfig::new("k", "m");
    config.base_url = server.uri();
    config.timeout = Some(Duration::from_millis(100));
    config.retry = fast_retry(2);
    let start = Instant::now();
    let err = AnthropicModel::new(config)
        .unwrap()
        .complete(hi(), CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(err, ModelError::Timeout);
    assert!(start.elapsed() < Duration::from_secs(2));
    assert_eq!(bodies(&server).await.len(), 2, "a timeout is retried");
}

#[tokio::test]
async fn cancellation_ends_the_call_promptly() {
    let server = MockServer::start().await;
    serve(
        &server,
        "/v1/messages",
        reply(200, "anthropic_text.json").set_delay(Duration::from_secs(10)),
    )
    .await;
    let m = anthropic(&server, 3);
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let start = Instant::now();
    let (result, ()) = tokio::join!(m.complete(hi(), cancel), async move {
        // wait until the request reached the server, then cancel
        while server
            .received_requests()
            .await
            .unwrap_or_default()
            .is_empty()
        {
            tokio::task::yield_now().await;
        }
        trigger.cancel();
    });
    assert_eq!(result.unwrap_err(), ModelError::Cancelled);
    assert!(start.elapsed() < Duration::from_secs(5));
}
