//! AnthropicModel against a loopback server replaying recorded Messages API shapes.
// Test helpers outside #[test] fns unwrap too; this is test code.
#![allow(clippy::unwrap_used)]

mod support;

use memloop_core::{
    message::{ContentBlock, MediaSource, Message, Role, Usage},
    model::{JsonSchema, ModelError, ModelRequest, StopReason},
    tool::{ToolEffect, ToolSpec},
};
use memloop_providers::{AnthropicConfig, AnthropicModel};
use pretty_assertions::assert_eq;
use serde_json::json;
use support::*;
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn weather_tool() -> ToolSpec {
    ToolSpec {
        name: "get_weather".into(),
        description: "Current weather for a location".into(),
        input_schema: json!({"type": "object", "properties": {"location": {"type": "string"}},
                             "required": ["location"]}),
        effect: ToolEffect::ReadOnly,
    }
}

#[tokio::test]
async fn text_response_headers_system_blocks_and_cache_usage() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .and(header("x-api-key", "sk-ant-test"))
        .and(header("anthropic-version", "2023-06-01"))
        .respond_with(reply(200, "anthropic_text.json"))
        .expect(1)
        .mount(&server)
        .await;
    let m = anthropic(&server, 1);
    let mut req = ModelRequest::new("main", vec![Message::user("where are the tests?")]);
    req.system = vec![
        "You are helpful.".into(),
        "".into(),
        "Project: memloop".into(),
    ];
    req.max_tokens = 1000;
    req.temperature = Some(0.2);
    let resp = call(&m, req).await.unwrap();

    assert_eq!(resp.id, "msg_01XFDUDYJgAACzvnptvVoYEL");
    assert_eq!(resp.model, "claude-sonnet-4-5-20250929");
    assert_eq!(resp.stop_reason, StopReason::EndTurn);
    assert_eq!(
        resp.text_content(),
        "The tests live in crates/providers/tests and run with cargo test."
    );
    assert_eq!(
        resp.usage,
        Usage {
            input_tokens: 25,
            output_tokens: 19,
            cache_creation_input_tokens: 1832,
            cache_read_input_tokens: 14210
        }
    );
    let body = &bodies(&server).await[0];
    assert_eq!(
        body,
        &json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 1000,
            "temperature": 0.2f32,
            "system": [
                {"type": "text", "text": "You are helpful."},
                {"type": "text", "text": "Project: memloop", "cache_control": {"type": "ephemeral"}}
            ],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "where are the tests?",
                "cache_control": {"type": "ephemeral"}}]}]
        })
    );
}

#[tokio::test]
async fn tool_use_round_trip() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(Sequence::new(vec![
            reply(200, "anthropic_tool_use.json"),
            reply(200, "anthropic_tool_final.json"),
        ]))
        .mount(&server)
        .await;
    let m = anthropic(&server, 1);
    let mut messages = vec![Message::user("Weather in SF?")];
    let mut req = ModelRequest::new("main", messages.clone());
    req.tools = vec![weather_tool()];
    let first = call(&m, req.clone()).await.unwrap();
    assert_eq!(first.stop_reason, StopReason::ToolUse);
    let input = json!({"location": "San Francisco, CA", "unit": "celsius"});
    assert_eq!(
        first.content[1],
        ContentBlock::tool_use(
            "toolu_01A09q90qw90lq917835lq9",
            "get_weather",
            input.clone()
        )
    );
    messages.push(first.into_message());
    messages.push(Message::new(
        Role::User,
        vec![ContentBlock::tool_result(
            "toolu_01A09q90qw90lq917835lq9",
            "15C, fog",
            false,
        )],
    ));
    req.messages = messages;
    let second = call(&m, req).await.unwrap();
    assert_eq!(
        second.text_content(),
        "It is 15 degrees and foggy in San Francisco."
    );
    // null cache fields count as zero
    assert_eq!(second.usage.cache_read_input_tokens, 0);

    let sent = bodies(&server).await;
    assert_eq!(
        sent[0]["tools"],
        json!([{"name": "get_weather", "description": "Current weather for a location",
                "input_schema": weather_tool().input_schema}])
    );
    assert!(sent[0].get("tool_choice").is_none());
    assert_eq!(
        without_cache_marks(&sent[1]["messages"]),
        json!([
            {"role": "user", "content": [{"type": "text", "text": "Weather in SF?"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "I'll check the weather in San Francisco for you."},
                {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "get_weather", "input": input}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01A09q90qw90lq917835lq9", "content": "15C, fog"}
            ]}
        ])
    );
}

#[tokio::test]
async fn thinking_blocks_parse_and_go_back_signed() {
    let server = MockServer::start().await;
    serve(
        &server,
        "/v1/messages",
        reply(200, "anthropic_thinking.json"),
    )
    .await;
    let mut config = AnthropicConfig::new("k", "claude-sonnet-4-5");
    config.base_url = server.uri();
    config.thinking_budget_tokens = Some(2048);
    config.prompt_caching = false;
    let m = AnthropicModel::new(config).unwrap();
    let mut req = ModelRequest::new("main", vec![Message::user("27 * 453?")]);
    req.system = vec!["sys".into()];
    req.temperature = Some(1.0);
    let resp = call(&m, req.clone()).await.unwrap();
    // thinking, redacted_thinking (kept as-is) and text
    assert_eq!(resp.content.len(), 3);
    assert_eq!(
        resp.content[1],
        ContentBlock::RedactedThinking {
            data: "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB8URj2pLmJsU+6kxd9YJtuFoZ".into()
        }
    );
    let ContentBlock::Thinking {
        thinking,
        signature,
    } = &resp.content[0]
    else {
        panic!("expected thinking, got {:?}", resp.content[0]);
    };
    assert!(thinking.contains("12231"));
    assert!(signature.as_deref().unwrap().starts_with("EqQBCgIYAhIM"));
    assert_eq!(resp.text_content(), "27 * 453 = 12,231");

    let mut messages = req.messages.clone();
    messages.push(resp.clone().into_message());
    messages.push(Message::user("thanks"));
    // unsigned thinking (e.g. from another provider) cannot be sent back
    messages.push(Message::new(
        Role::Assistant,
        vec![ContentBlock::Thinking {
            thinking: "local".into(),
            signature: None,
        }],
    ));
    req.messages = messages;
    call(&m, req).await.unwrap();
    let sent = bodies(&server).await;
    assert_eq!(
        sent[0]["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048})
    );
    assert!(
        sent[0].get("temperature").is_none(),
        "thinking requires the default temperature"
    );
    assert_eq!(sent[0]["system"], json!([{"type": "text", "text": "sys"}]));
    let msgs = sent[1]["messages"].as_array().unwrap();
    assert_eq!(msgs[1]["content"][0]["type"], "thinking");
    assert_eq!(msgs[1]["content"][0]["signature"], json!(signature));
    // the redacted block goes back byte for byte, in its place
    let original = fixture("anthropic_thinking.json");
    assert_eq!(msgs[1]["content"], original["content"]);
    assert_eq!(
        msgs[3]["content"],
        json!([{"type": "text", "text": "(empty)"}])
    );
    // a small side query goes without thinking (the budget must stay below max_tokens)
    let mut small = ModelRequest::new("memory_selector", vec![Message::user("q")]);
    small.max_tokens = 256;
    call(&m, small).await.unwrap();
    assert!(bodies(&server).await[2].get("thinking").is_none());
}

#[tokio::test]
async fn images_documents_and_error_results_keep_their_shape() {
    let server = MockServer::start().await;
    serve(&server, "/v1/messages", reply(200, "anthropic_text.json")).await;
    let m = anthropic(&server, 1);
    let png = MediaSource::Base64 {
        media_type: "image/png".into(),
        data: "iVBORw0KGgo=".into(),
    };
    let pdf = MediaSource::Url {
        url: "https://example.com/spec.pdf".into(),
    };
    let messages = vec![
        Message::new(
            Role::User,
            vec![
                ContentBlock::Image { source: png },
                ContentBlock::Document { source: pdf },
                ContentBlock::text("describe"),
            ],
        ),
        Message::new(
            Role::Assistant,
            vec![ContentBlock::tool_use("t1", "read", json!({}))],
        ),
        Message::new(
            Role::User,
            vec![ContentBlock::tool_result("t1", "denied", true)],
        ),
    ];
    call(&m, ModelRequest::new("main", messages)).await.unwrap();
    let sent = &without_cache_marks(&bodies(&server).await[0]["messages"]);
    assert_eq!(
        sent[0]["content"],
        json!([
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
            {"type": "document", "source": {"type": "url", "url": "https://example.com/spec.pdf"}},
            {"type": "text", "text": "describe"}
        ])
    );
    assert_eq!(
        sent[2]["content"],
        json!([{"type": "tool_result", "tool_use_id": "t1", "content": "denied", "is_error": true}])
    );
}

#[tokio::test]
async fn structured_output_forces_the_schema_tool() {
    let server = MockServer::start().await;
    serve(
        &server,
        "/v1/messages",
        reply(200, "anthropic_structured.json"),
    )
    .await;
    let m = anthropic(&server, 1);
    let schema = json!({"type": "object", "properties": {"selected_memories":
        {"type": "array", "items": {"type": "string"}}}, "required": ["selected_memories"]});
    let mut req = ModelRequest::new("memory_selector", vec![Message::user("which memories?")]);
    req.max_tokens = 256;
    req.response_schema = Some(JsonSchema {
        name: "memory selection".into(),
        schema: schema.clone(),
    });
    let resp = call(&m, req).await.unwrap();
    assert_eq!(resp.stop_reason, StopReason::EndTurn);
    assert_eq!(resp.content.len(), 1);
    let parsed: serde_json::Value = serde_json::from_str(&resp.text_content()).unwrap();
    assert_eq!(
        parsed,
        json!({"selected_memories": ["feedback_testing.md", "user_role.md"]})
    );
    let sent = &bodies(&server).await[0];
    assert_eq!(
        sent["tool_choice"],
        json!({"type": "tool", "name": "memory_selection"})
    );
    assert_eq!(sent["tools"][0]["name"], "memory_selection");
    assert_eq!(sent["tools"][0]["input_schema"], schema);
}

#[tokio::test]
async fn structured_output_wraps_non_object_schemas_and_rejects_a_missing_call() {
    let server = MockServer::start().await;
    let wrapped = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "names", "input": {"value": ["a.md"]}}],
        "stop_reason": "tool_use", "usage": {"input_tokens": 5, "output_tokens": 3}});
    let no_call = fixture("anthropic_text.json");
    Mock::given(method("POST"))
        .respond_with(Sequence::new(vec![
            ResponseTemplate::new(200).set_body_json(wrapped),
            ResponseTemplate::new(200).set_body_json(no_call),
        ]))
        .mount(&server)
        .await;
    let m = anthropic(&server, 1);
    let mut req = ModelRequest::new("s", vec![Message::user("q")]);
    req.response_schema = Some(JsonSchema {
        name: "names".into(),
        schema: json!({"type": "array", "items": {"type": "string"}}),
    });
    let resp = call(&m, req.clone()).await.unwrap();
    assert_eq!(resp.text_content(), r#"["a.md"]"#);
    assert_eq!(
        bodies(&server).await[0]["tools"][0]["input_schema"]["properties"]["value"]["type"],
        "array"
    );
    let err = call(&m, req).await.unwrap_err();
    assert!(
        matches!(&err, ModelError::InvalidResponse(m) if m.contains("names")),
        "{err:?}"
    );
}

#[tokio::test]
async fn the_agent_loop_runs_a_tool_turn_over_http() {
    let server = MockServer::start().await;
    mount_expect(
        &server,
        Sequence::new(vec![
            reply(200, "anthropic_tool_use.json"),
            reply(200, "anthropic_tool_final.json"),
        ]),
        2,
    )
    .await;
    let mut agent = memloop_core::Agent::builder(std::sync::Arc::new(anthropic(&server, 1)))
        .tool(std::sync::Arc::new(Weather))
        .build();
    let out = agent.run_turn("Weather in SF?").await.unwrap();
    assert_eq!(out.text, "It is 15 degrees and foggy in San Francisco.");
    assert_eq!(out.iterations, 2);
    let sent = bodies(&server).await;
    assert_eq!(sent[1]["tools"][0]["name"], "get_weather");
    let last = sent[1]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        without_cache_marks(&last),
        json!({"role": "user", "content": [{"type": "tool_result",
            "tool_use_id": "toolu_01A09q90qw90lq917835lq9",
            "content": "15C, fog in \"San Francisco, CA\""}]})
    );
}

struct Weather;

#[async_trait::async_trait]
impl memloop_core::tool::Tool for Weather {
    fn spec(&self) -> ToolSpec {
        weather_tool()
    }

    async fn call(
        &self,
        input: serde_json::Value,
        _ctx: &memloop_core::tool::ToolContext,
    ) -> memloop_core::tool::ToolOutput {
        memloop_core::tool::ToolOutput::ok(format!("15C, fog in {}", input["location"]))
    }
}

/// Whether a content block or system section carries a cache breakpoint.
fn marked(v: &serde_json::Value) -> bool {
    v.get("cache_control") == Some(&json!({"type": "ephemeral"}))
}

#[tokio::test]
async fn cache_breakpoints_sit_on_the_conversation_within_the_limit() {
    let server = MockServer::start().await;
    serve(&server, "/v1/messages", reply(200, "anthropic_text.json")).await;
    let m = anthropic(&server, 1);
    // Two user turns, the second one mid tool loop.
    let messages = vec![
        Message::user("first question"),
        Message::assistant("first answer"),
        Message::user("second question"),
        Message::new(
            Role::Assistant,
            vec![
                ContentBlock::RedactedThinking {
                    data: "opaque".into(),
                },
                ContentBlock::tool_use("t1", "read", json!({})),
            ],
        ),
        Message::new(
            Role::User,
            vec![ContentBlock::tool_result("t1", "ok", false)],
        ),
    ];
    let mut req = ModelRequest::new("main", messages);
    req.system = vec!["a".into(), "b".into()];
    req.tools = vec![weather_tool()];
    call(&m, req).await.unwrap();
    let body = &bodies(&server).await[0];
    let msgs = body["messages"].as_array().unwrap();
    let blocks: Vec<&serde_json::Value> = body["system"]
        .as_array()
        .unwrap()
        .iter()
        .chain(msgs.iter().flat_map(|m| m["content"].as_array().unwrap()))
        .chain(body["tools"].as_array().unwrap())
        .collect();
    let count = blocks.iter().filter(|b| marked(b)).count();
    assert!(count <= 4, "{count} breakpoints");
    assert_eq!(count, 3);
    // The system prompt's last section, the last message, and the message before the last
    // user turn (the first answer).
    assert!(marked(&body["system"][1]));
    assert!(marked(&msgs[4]["content"][0]));
    assert!(marked(&msgs[1]["content"][0]));
    assert!(!marked(&msgs[3]["content"][0]), "thinking is never marked");

    // Caching off: no marker anywhere.
    let mut config = AnthropicConfig::new("k", "claude-sonnet-4-5");
    config.base_url = server.uri();
    config.prompt_caching = false;
    let plain = AnthropicModel::new(config).unwrap();
    call(&plain, hi()).await.unwrap();
    let body = &bodies(&server).await[1];
    assert_eq!(without_cache_marks(body), *body);
}

/// Keeps the context of the last stop hook.
struct CaptureStop(std::sync::Arc<std::sync::Mutex<Option<memloop_core::HookContext>>>);

#[async_trait::async_trait]
impl memloop_core::Hook for CaptureStop {
    async fn on_stop(&self, ctx: memloop_core::HookContext) {
        *self.0.lock().unwrap() = Some(ctx);
    }
}

#[tokio::test]
async fn a_forks_request_prefix_is_byte_identical_to_the_parents_last_request() {
    use memloop_core::fork::ForkedAgentBuilder;
    let server = MockServer::start().await;
    mount_expect(
        &server,
        Sequence::new(vec![
            reply(200, "anthropic_tool_use.json"),
            reply(200, "anthropic_tool_final.json"),
            // the fork asks for the tool; its gate denies it; then it answers
            reply(200, "anthropic_tool_use.json"),
            reply(200, "anthropic_text.json"),
        ]),
        4,
    )
    .await;
    let captured = std::sync::Arc::new(std::sync::Mutex::new(None));
    let mut agent = memloop_core::Agent::builder(std::sync::Arc::new(anthropic(&server, 1)))
        .tool(std::sync::Arc::new(Weather))
        .section(std::sync::Arc::new(
            memloop_core::prompt::StaticSection::new("persona", "You are terse."),
        ))
        .hook(std::sync::Arc::new(CaptureStop(captured.clone())))
        .build();
    agent.run_turn("Weather in SF?").await.unwrap();
    assert!(
        agent
            .drain(std::time::Duration::from_secs(5))
            .await
            .completed
    );
    let ctx = captured.lock().unwrap().clone().unwrap();
    let out = ForkedAgentBuilder::new(ctx.clone(), "extractor")
        .max_turns(2)
        .build()
        .run("Note what matters.")
        .await
        .unwrap();
    assert_eq!(
        out.denied_calls, 1,
        "the default fork gate denies every call"
    );
    let sent = bodies(&server).await;
    let (parent, fork) = (&sent[1], &sent[2]);
    let bytes = |v: &serde_json::Value| serde_json::to_string(v).unwrap();
    assert_eq!(bytes(&fork["tools"]), bytes(&parent["tools"]));
    assert_eq!(bytes(&fork["system"]), bytes(&parent["system"]));
    let parent_msgs = parent["messages"].as_array().unwrap();
    let fork_msgs = fork["messages"].as_array().unwrap();
    assert!(fork_msgs.len() > parent_msgs.len());
    // Breakpoints move with the end of each request; the content up to the fork point does not.
    for (p, f) in parent_msgs.iter().zip(fork_msgs) {
        assert_eq!(
            bytes(&without_cache_marks(f)),
            bytes(&without_cache_marks(p))
        );
    }
    // The fork's second request (after the denied call) still shares that prefix.
    let again = sent[3]["messages"].as_array().unwrap();
    for (p, f) in parent_msgs.iter().zip(again) {
        assert_eq!(
            bytes(&without_cache_marks(f)),
            bytes(&without_cache_marks(p))
        );
    }
    assert_eq!(bytes(&sent[3]["tools"]), bytes(&parent["tools"]));
}

#[tokio::test]
async fn tool_history_without_tools_declares_them_and_forbids_calls() {
    let server = MockServer::start().await;
    serve(&server, "/v1/messages", reply(200, "anthropic_text.json")).await;
    let m = anthropic(&server, 1);
    let messages = vec![
        Message::user("q"),
        Message::new(
            Role::Assistant,
            vec![ContentBlock::tool_use("t1", "read", json!({}))],
        ),
        Message::new(
            Role::User,
            vec![
                ContentBlock::tool_result("t1", "ok", false),
                ContentBlock::text("Summarise."),
            ],
        ),
    ];
    // Asking for auto tool use changes nothing: the declared tools are not callable.
    let mut req = ModelRequest::new("compact_summary", messages);
    req.tool_choice = Some(memloop_core::model::ToolChoice::Auto);
    call(&m, req).await.unwrap();
    let body = &bodies(&server).await[0];
    let names: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["read"]);
    assert_eq!(body["tool_choice"], json!({"type": "none"}));
    // Without tool blocks nothing is added.
    call(&m, hi()).await.unwrap();
    let plain = &bodies(&server).await[1];
    assert!(plain.get("tools").is_none() && plain.get("tool_choice").is_none());
}

#[tokio::test]
async fn turn_usage_reports_cache_reads_and_writes() {
    use memloop_core::events::{AgentEvent, VecSink};
    let server = MockServer::start().await;
    serve(&server, "/v1/messages", reply(200, "anthropic_text.json")).await;
    let sink = VecSink::default();
    let mut agent = memloop_core::Agent::builder(std::sync::Arc::new(anthropic(&server, 1)))
        .events(std::sync::Arc::new(sink.clone()))
        .build();
    agent.run_turn("where are the tests?").await.unwrap();
    let usage = sink
        .events()
        .into_iter()
        .find_map(|e| match e {
            AgentEvent::TurnFinished { usage, .. } => Some(usage),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        usage,
        Usage {
            input_tokens: 25,
            output_tokens: 19,
            cache_creation_input_tokens: 1832,
            cache_read_input_tokens: 14210
        }
    );
}
