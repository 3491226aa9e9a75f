//! OpenAiCompatModel against a loopback server replaying recorded chat-completions shapes
//! (OpenAI, Ollama, vLLM, llama.cpp).
// Test helpers outside #[test] fns unwrap too; this is test code.
#![allow(clippy::unwrap_used)]

mod support;

use memloop_core::{
    message::{ContentBlock, MediaSource, Message, Role, ToolResultContent, Usage},
    model::{JsonSchema, ModelRequest, StopReason},
    tool::{ToolEffect, ToolSpec},
};
use memloop_providers::{OpenAiCompatModel, OpenAiConfig};
use pretty_assertions::assert_eq;
use serde_json::json;
use support::*;
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

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
    let resp = call(&openai(&server, 1), req).await.unwrap();
    assert_eq!(resp.id, "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG");
    assert_eq!(resp.stop_reason, StopReason::EndTurn);
    assert_eq!(
        resp.text_content(),
        "The tests live in crates/providers/tests and run with cargo test."
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
    serve(
        &server,
        "/v1/chat/completions",
        reply(200, "openai_text.json"),
    )
    .await;
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
        "/v1/chat/completions",
        Sequence::new(vec![
            reply(200, "openai_tool_calls.json"),
            reply(200, "openai_tool_final.json"),
        ]),
    )
    .await;
    let m = openai(&server, 1);
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
    serve(
        &server,
        "/v1/chat/completions",
        reply(200, "ollama_tool_calls.json"),
    )
    .await;
    let resp = call(&openai(&server, 1), hi()).await.unwrap();
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
    serve(
        &server,
        "/v1/chat/completions",
        reply(200, "vllm_reasoning.json"),
    )
    .await;
    let resp = call(&openai(&server, 1), hi()).await.unwrap();
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
    serve(
        &server,
        "/v1/chat/completions",
        reply(200, "openai_structured.json"),
    )
    .await;
    let schema = json!({"type": "object", "properties": {"selected_memories":
        {"type": "array", "items": {"type": "string"}}}, "required": ["selected_memories"]});
    let mut req = ModelRequest::new("memory_selector", vec![Message::user("which?")]);
    req.response_schema = Some(JsonSchema {
        name: "memory selection".into(),
        schema: schema.clone(),
    });
    let resp = call(&openai(&server, 1), req).await.unwrap();
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
    serve(
        &server,
        "/v1/chat/completions",
        reply(200, "openai_refusal.json"),
    )
    .await;
    let resp = call(&openai(&server, 1), hi()).await.unwrap();
    assert_eq!(resp.stop_reason, StopReason::Refusal);
    assert_eq!(
        resp.text_content(),
        "I'm sorry, I cannot assist with that request."
    );
}

#[tokio::test]
async fn images_and_error_results_map_to_chat_parts() {
    let server = MockServer::start().await;
    serve(
        &server,
        "/v1/chat/completions",
        reply(200, "openai_text.json"),
    )
    .await;
    let mut c = openai_config(&server, 1);
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
                ContentBlock::RedactedThinking {
                    data: "opaque".into(),
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

/// A model for `server` whose base URL is `{uri}/v1` (what local servers are configured with).
fn local(server: &MockServer) -> OpenAiCompatModel {
    let config = OpenAiConfig::new(format!("{}/v1", server.uri()), "tiny");
    OpenAiCompatModel::new(config).unwrap()
}

#[tokio::test]
async fn context_window_from_llama_cpp_props() {
    let server = MockServer::start().await;
    Mock::given(wiremock::matchers::method("GET"))
        .and(wiremock::matchers::path("/props"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "default_generation_settings": {"n_ctx": 2048, "temperature": 0.8},
            "total_slots": 1,
            "model_path": "tiny.gguf"
        })))
        .expect(1)
        .mount(&server)
        .await;
    assert_eq!(local(&server).context_window().await, Some(2048));
}

#[tokio::test]
async fn context_window_from_ollama_show() {
    let server = MockServer::start().await;
    Mock::given(wiremock::matchers::method("POST"))
        .and(wiremock::matchers::path("/api/show"))
        .and(wiremock::matchers::body_json(json!({"model": "tiny"})))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "parameters": "stop \"<|im_end|>\"\nnum_ctx 8192",
            "model_info": {"general.architecture": "qwen2", "qwen2.context_length": 32768}
        })))
        .mount(&server)
        .await;
    assert_eq!(local(&server).context_window().await, Some(8192));

    // Without num_ctx the trained length counts.
    let server = MockServer::start().await;
    Mock::given(wiremock::matchers::method("POST"))
        .and(wiremock::matchers::path("/api/show"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "model_info": {"general.architecture": "llama", "llama.context_length": 131072}
        })))
        .mount(&server)
        .await;
    assert_eq!(local(&server).context_window().await, Some(131_072));
}

#[tokio::test]
async fn context_window_from_vllm_models_or_none() {
    let server = MockServer::start().await;
    Mock::given(wiremock::matchers::method("GET"))
        .and(wiremock::matchers::path("/v1/models"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "object": "list",
            "data": [{"id": "other", "max_model_len": 4096}, {"id": "tiny", "object": "model", "max_model_len": 16384}]
        })))
        .mount(&server)
        .await;
    assert_eq!(local(&server).context_window().await, Some(16_384));
    // A server with none of these endpoints (404 everywhere) reports nothing.
    let bare = MockServer::start().await;
    assert_eq!(local(&bare).context_window().await, None);
}
