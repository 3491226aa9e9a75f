//! OpenAiCompatModel against a loopback server replaying recorded chat-completions shapes
//! (OpenAI, Ollama, vLLM, llama.cpp).
#![cfg(feature = "providers")]
// Test helpers outside #[test] fns unwrap too; this is test code.
#![allow(clippy::unwrap_used)]

mod support;

use memloop_core::providers::{OpenAiCompatModel, OpenAiConfig};
use memloop_core::{
    CancellationToken, ContentBlock, JsonSchema, MediaSource, Message, Model, ModelError,
    ModelRequest, ModelResponse, Role, StopReason, ToolEffect, ToolResultContent, ToolSpec, Usage,
};
use pretty_assertions::assert_eq;
use serde_json::json;
use std::time::{Duration, Instant};
use support::*;
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn config(server: &MockServer, max_attempts: u32) -> OpenAiConfig {
    let mut c =
        OpenAiConfig::new(format!("{}/v1/", server.uri()), "gpt-4o").with_api_key("sk-test");
    c.retry = fast_retry(max_attempts);
    c.timeout = Some(Duration::from_secs(5));
    c
}

fn model(server: &MockServer, max_attempts: u32) -> OpenAiCompatModel {
    OpenAiCompatModel::new(config(server, max_attempts)).unwrap()
}

async fn serve(server: &MockServer, responder: impl wiremock::Respond + 'static) {
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(responder)
        .mount(server)
        .await;
}

async fn call(m: &OpenAiCompatModel, req: ModelRequest) -> Result<ModelResponse, ModelError> {
    m.complete(req, CancellationToken::new()).await
}

fn hi() -> ModelRequest {
    ModelRequest::new("main", vec![Message::user("hi")])
}

#[tokio::test]
async fn text_with_bearer_system_message_and_cached_usage() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(header("authorization", "Bearer sk-test"))
        .respond_with(reply(200, "openai_text.json"))
        .expect(1)
        .mount(&server)
        .await;
    let mut req = ModelRequest::new("main", vec![Message::user("where are the tests?")]);
    req.system = vec!["You are helpful.".into(), "Project: memloop".into()];
    req.max_tokens = 300;
    let resp = call(&model(&server, 1), req).await.unwrap();
    assert_eq!(resp.id, "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG");
    assert_eq!(resp.stop_reason, StopReason::EndTurn);
    assert_eq!(
        resp.text_content(),
        "The tests live in crates/harness-core/tests and run with cargo test."
    );
    assert_eq!(
        resp.usage,
        Usage {
            input_tokens: 86,
            output_tokens: 300,
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: 1920
        }
    );
    assert_eq!(resp.usage.context_tokens(), 2306);
    assert_eq!(
        bodies(&server).await[0],
        json!({
            "model": "gpt-4o",
            "max_tokens": 300,
            "messages": [
                {"role": "system", "content": "You are helpful.\n\nProject: memloop"},
                {"role": "user", "content": "where are the tests?"}
            ]
        })
    );
}

#[tokio::test]
async fn local_servers_need_no_key() {
    let server = MockServer::start().await;
    serve(&server, reply(200, "openai_text.json")).await;
    let m =
        OpenAiCompatModel::new(OpenAiConfig::new(format!("{}/v1", server.uri()), "llama")).unwrap();
    call(&m, hi()).await.unwrap();
    let reqs = server.received_requests().await.unwrap();
    assert_eq!(reqs[0].url.path(), "/v1/chat/completions");
    assert!(reqs[0].headers.get("authorization").is_none());
}

#[tokio::test]
async fn tool_call_round_trip() {
    let server = MockServer::start().await;
    serve(
        &server,
        Sequence::new(vec![
            reply(200, "openai_tool_calls.json"),
            reply(200, "openai_tool_final.json"),
        ]),
    )
    .await;
    let m = model(&server, 1);
    let tool = ToolSpec {
        name: "get_current_weather".into(),
        description: "Weather now".into(),
        input_schema: json!({"type": "object", "properties": {"location": {"type": "string"}}}),
        effect: ToolEffect::ReadOnly,
    };
    let mut req = ModelRequest::new("main", vec![Message::user("Boston weather?")]);
    req.tools = vec![tool.clone()];
    let first = call(&m, req.clone()).await.unwrap();
    assert_eq!(first.stop_reason, StopReason::ToolUse);
    assert_eq!(
        first.content,
        vec![ContentBlock::tool_use(
            "call_abc123",
            "get_current_weather",
            json!({"location": "Boston, MA"})
        )]
    );
    req.messages.push(first.into_message());
    req.messages.push(Message::new(
        Role::User,
        vec![
            ContentBlock::tool_result("call_abc123", "22C sunny", false),
            ContentBlock::text("and tomorrow?"),
        ],
    ));
    let second = call(&m, req).await.unwrap();
    assert_eq!(
        second.text_content(),
        "It is 22 degrees and sunny in Boston."
    );
    let sent = bodies(&server).await;
    assert_eq!(
        sent[0]["tools"],
        json!([{"type": "function", "function": {"name": "get_current_weather",
                "description": "Weather now", "parameters": tool.input_schema}}])
    );
    assert_eq!(
        sent[1]["messages"],
        json!([
            {"role": "user", "content": "Boston weather?"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_abc123", "type": "function",
                "function": {"name": "get_current_weather", "arguments": "{\"location\":\"Boston, MA\"}"}}]},
            {"role": "tool", "tool_call_id": "call_abc123", "content": "22C sunny"},
            {"role": "user", "content": "and tomorrow?"}
        ])
    );
}

#[tokio::test]
async fn local_server_tool_calls_without_ids_or_valid_arguments() {
    let server = MockServer::start().await;
    serve(&server, reply(200, "ollama_tool_calls.json")).await;
    let resp = call(&model(&server, 1), hi()).await.unwrap();
    assert_eq!(
        resp.stop_reason,
        StopReason::ToolUse,
        "finish_reason stop with tool calls"
    );
    let calls: Vec<_> = resp
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::ToolUse { id, name, input } => {
                Some((id.clone(), name.clone(), input.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 2);
    assert!(calls[0].0.starts_with("call_") && calls[1].0.starts_with("call_"));
    assert_ne!(calls[0].0, calls[1].0);
    // broken JSON stays visible to the tool (and so to the model) as a string
    assert_eq!(calls[0].2, json!("{\"path\": \"src/main.rs\""));
    assert_eq!(calls[1].2, json!({}));
}

#[tokio::test]
async fn reasoning_content_becomes_thinking() {
    let server = MockServer::start().await;
    serve(&server, reply(200, "vllm_reasoning.json")).await;
    let resp = call(&model(&server, 1), hi()).await.unwrap();
    assert!(
        matches!(&resp.content[0], ContentBlock::Thinking { thinking, signature: None }
        if thinking.contains("9.8 is larger"))
    );
    assert_eq!(resp.text_content(), "9.8 is greater than 9.11.");
    assert_eq!(resp.usage.input_tokens, 18);
    assert_eq!(resp.usage.output_tokens, 103);
}

#[tokio::test]
async fn structured_output_uses_response_format() {
    let server = MockServer::start().await;
    serve(&server, reply(200, "openai_structured.json")).await;
    let schema = json!({"type": "object", "properties": {"selected_memories":
        {"type": "array", "items": {"type": "string"}}}, "required": ["selected_memories"]});
    let mut req = ModelRequest::new("memory_selector", vec![Message::user("which?")]);
    req.response_schema = Some(JsonSchema {
        name: "memory selection".into(),
        schema: schema.clone(),
    });
    let resp = call(&model(&server, 1), req).await.unwrap();
    let parsed: serde_json::Value = serde_json::from_str(&resp.text_content()).unwrap();
    assert_eq!(
        parsed["selected_memories"],
        json!(["feedback_testing.md", "user_role.md"])
    );
    assert_eq!(
        bodies(&server).await[0]["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "memory_selection", "schema": schema, "strict": false}})
    );
}

#[tokio::test]
async fn refusal_is_reported() {
    let server = MockServer::start().await;
    serve(&server, reply(200, "openai_refusal.json")).await;
    let resp = call(&model(&server, 1), hi()).await.unwrap();
    assert_eq!(resp.stop_reason, StopReason::Refusal);
    assert_eq!(
        resp.text_content(),
        "I'm sorry, I cannot assist with that request."
    );
}

#[tokio::test]
async fn images_and_error_results_map_to_chat_parts() {
    let server = MockServer::start().await;
    serve(&server, reply(200, "openai_text.json")).await;
    let mut c = config(&server, 1);
    c.use_max_completion_tokens = true;
    let m = OpenAiCompatModel::new(c).unwrap();
    let png = MediaSource::Base64 {
        media_type: "image/png".into(),
        data: "iVBORw0KGgo=".into(),
    };
    let messages = vec![
        Message::new(
            Role::User,
            vec![
                ContentBlock::text("look"),
                ContentBlock::Image {
                    source: png.clone(),
                },
            ],
        ),
        Message::new(
            Role::Assistant,
            vec![
                ContentBlock::Thinking {
                    thinking: "hmm".into(),
                    signature: None,
                },
                ContentBlock::text("reading"),
                ContentBlock::tool_use("c1", "read", json!({"p": 1})),
            ],
        ),
        Message::new(
            Role::User,
            vec![ContentBlock::ToolResult {
                tool_use_id: "c1".into(),
                content: ToolResultContent::Blocks(vec![
                    ContentBlock::text("no such file"),
                    ContentBlock::Image { source: png },
                ]),
                is_error: true,
            }],
        ),
    ];
    call(&m, ModelRequest::new("main", messages)).await.unwrap();
    let sent = &bodies(&server).await[0];
    assert_eq!(sent["max_completion_tokens"], 4096);
    assert_eq!(
        sent["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]},
            {"role": "assistant", "content": "reading", "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "read", "arguments": "{\"p\":1}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "Error: no such file\n[1 non-text block(s) omitted]"}
        ])
    );
}

#[tokio::test]
async fn unauthorized_is_auth() {
    let server = MockServer::start().await;
    mount_expect(&server, reply(401, "openai_error_401.json"), 1).await;
    let err = call(&model(&server, 3), hi()).await.unwrap_err();
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
        Sequence::new(vec![
            reply(400, "openai_error_context.json"),
            reply(400, "llamacpp_error_context.json"),
        ]),
    )
    .await;
    let m = model(&server, 3);
    let err = call(&m, hi()).await.unwrap_err();
    assert!(
        matches!(
            err,
            ModelError::ContextTooLong {
                excess_tokens: Some(2512),
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
        Sequence::new(vec![
            reply(429, "openai_error_429.json").insert_header("retry-after", "0.2"),
            reply(200, "openai_text.json"),
        ]),
    )
    .await;
    let start = Instant::now();
    call(&model(&server, 2), hi()).await.unwrap();
    assert!(start.elapsed() >= Duration::from_millis(200));
    assert_eq!(bodies(&server).await.len(), 2);
}

#[tokio::test]
async fn unavailable_then_garbage_proxy_page() {
    let server = MockServer::start().await;
    serve(
        &server,
        Sequence::new(vec![
            ResponseTemplate::new(503).set_body_string("upstream connect error"),
            ResponseTemplate::new(200).set_body_string("<html>oops</html>"),
        ]),
    )
    .await;
    let err = call(&model(&server, 3), hi()).await.unwrap_err();
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
    let err = call(&model(&server, 2), hi()).await.unwrap_err();
    assert_eq!(err, ModelError::Overloaded("model is loading".into()));
}

#[tokio::test]
async fn hostile_bodies_never_panic() {
    let (server, cases) = hostile_server("openai_tool_calls.json").await;
    let m = model(&server, 1);
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
        reply(200, "openai_text.json").set_delay(Duration::from_secs(10)),
    )
    .await;
    let mut c = config(&server, 1);
    c.timeout = Some(Duration::from_millis(100));
    let err = call(&OpenAiCompatModel::new(c).unwrap(), hi())
        .await
        .unwrap_err();
    assert_eq!(err, ModelError::Timeout);

    let cancel = CancellationToken::new();
    cancel.cancel();
    let start = Instant::now();
    let err = model(&server, 3).complete(hi(), cancel).await.unwrap_err();
    assert_eq!(err, ModelError::Cancelled);
    assert!(start.elapsed() < Duration::from_secs(5));
}
