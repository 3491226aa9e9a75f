//! Streaming (`Model::stream`) of both providers against a raw loopback server that replays event
//! streams in each API's documented shape, split at chosen byte positions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use memloop_core::message::{ContentBlock, Usage};
use memloop_core::model::{ModelError, StopReason, StreamEvent, ToolChoice};
use memloop_providers::OpenAiCompatModel;
use pretty_assertions::assert_eq;
use serde_json::json;
use support::*;

fn texts(events: &[StreamEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn finished(events: &[StreamEvent]) -> &memloop_core::model::ModelResponse {
    match events.last() {
        Some(StreamEvent::Finished(r)) => r,
        other => panic!("no final response: {other:?}"),
    }
}

/// Split `bytes` into pieces of `n` bytes (so UTF-8 characters and lines break anywhere).
fn pieces(bytes: &[u8], n: usize) -> Vec<Vec<u8>> {
    bytes.chunks(n).map(<[u8]>::to_vec).collect()
}

fn anthropic_start() -> Vec<u8> {
    sse(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_01Stream", "type": "message",
            "role": "assistant", "model": "claude-sonnet-4-5", "content": [], "stop_reason": null,
            "stop_sequence": null, "usage": {"input_tokens": 472, "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 1200, "output_tokens": 2}}}),
    )
}

fn anthropic_end(stop: &str, output_tokens: u64) -> Vec<u8> {
    let mut b = sse(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
               "usage": {"output_tokens": output_tokens}}),
    );
    b.extend(sse("message_stop", json!({"type": "message_stop"})));
    b
}

/// `content_block_start` of a text block, then one delta.
fn text_block(index: usize, text: &str) -> Vec<u8> {
    let mut b = sse(
        "content_block_start",
        json!({"type": "content_block_start", "index": index,
               "content_block": {"type": "text", "text": ""}}),
    );
    b.extend(text_delta(index, text));
    b
}

fn text_delta(index: usize, text: &str) -> Vec<u8> {
    sse(
        "content_block_delta",
        json!({"type": "content_block_delta", "index": index,
               "delta": {"type": "text_delta", "text": text}}),
    )
}

#[tokio::test]
async fn anthropic_thinking_and_text_with_utf8_split_across_chunks() {
    let mut body = anthropic_start();
    body.extend(sse("ping", json!({"type": "ping"})));
    body.extend(sse(
        "content_block_start",
        json!({"type": "content_block_start", "index": 0,
        "content_block": {"type": "thinking", "thinking": ""}}),
    ));
    body.extend(sse(
        "content_block_delta",
        json!({"type": "content_block_delta", "index": 0,
        "delta": {"type": "thinking_delta", "thinking": "The user wants "}}),
    ));
    body.extend(sse(
        "content_block_delta",
        json!({"type": "content_block_delta", "index": 0,
        "delta": {"type": "thinking_delta", "thinking": "a greeting."}}),
    ));
    body.extend(sse(
        "content_block_delta",
        json!({"type": "content_block_delta", "index": 0,
        "delta": {"type": "signature_delta", "signature": "EqQBCgIYAhIM"}}),
    ));
    body.extend(sse(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    // A redacted block arrives whole in its start event.
    body.extend(sse(
        "content_block_start",
        json!({"type": "content_block_start", "index": 1,
        "content_block": {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3p"}}),
    ));
    body.extend(sse(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 1}),
    ));
    body.extend(sse(
        "content_block_start",
        json!({"type": "content_block_start", "index": 2,
        "content_block": {"type": "text", "text": ""}}),
    ));
    for t in ["Grüße ", "aus Köln ", "\u{1F600}!"] {
        body.extend(text_delta(2, t));
    }
    body.extend(sse(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 2}),
    ));
    body.extend(anthropic_end("end_turn", 15));
    // 7-byte pieces: the umlauts, the emoji and the "\n\n" separators all break across chunks.
    let server = SseServer::start(vec![SseReply::ok(pieces(&body, 7))]).await;
    let (events, err) = drain_stream(&anthropic_at(&server.uri, 1), hi()).await;
    assert_eq!(err, None);
    assert_eq!(texts(&events), "Grüße aus Köln \u{1F600}!");
    assert!(events.contains(&StreamEvent::ThinkingDelta {
        index: 0,
        thinking: "a greeting.".into()
    }));
    let r = finished(&events);
    assert_eq!(r.id, "msg_01Stream");
    assert_eq!(r.stop_reason, StopReason::EndTurn);
    assert_eq!(
        r.content,
        vec![
            ContentBlock::Thinking {
                thinking: "The user wants a greeting.".into(),
                signature: Some("EqQBCgIYAhIM".into())
            },
            ContentBlock::RedactedThinking {
                data: "EmwKAhgBEgy3va3p".into()
            },
            ContentBlock::text("Grüße aus Köln \u{1F600}!"),
        ]
    );
    assert_eq!(
        r.usage,
        Usage {
            input_tokens: 472,
            output_tokens: 15,
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: 1200
        }
    );
    assert_eq!(server.bodies()[0]["stream"], json!(true));
}

#[tokio::test]
async fn anthropic_tool_input_split_across_many_events() {
    let input = json!({"path": "src/lib.rs", "pattern": "fn main", "limit": 20});
    let raw = input.to_string();
    let mut body = anthropic_start();
    body.extend(text_block(0, "Let me look."));
    body.extend(sse(
        "content_block_start",
        json!({"type": "content_block_start", "index": 1,
        "content_block": {"type": "tool_use", "id": "toolu_01A", "name": "grep", "input": {}}}),
    ));
    let fragments: Vec<String> = raw
        .chars()
        .collect::<Vec<_>>()
        .chunks(3)
        .map(|c| c.iter().collect())
        .collect();
    for f in &fragments {
        body.extend(sse(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": f}}),
        ));
    }
    body.extend(sse(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 1}),
    ));
    body.extend(anthropic_end("tool_use", 40));
    let server = SseServer::start(vec![SseReply::ok(pieces(&body, 64))]).await;
    let mut req = hi();
    req.tool_choice = Some(ToolChoice::Any);
    req.stop_sequences = vec!["\n\nHuman:".into()];
    req.extra
        .insert("metadata".into(), json!({"user_id": "u-1"}));
    let (events, err) = drain_stream(&anthropic_at(&server.uri, 1), req).await;
    let sent = &server.bodies()[0];
    assert_eq!(sent["tool_choice"], json!({"type": "any"}));
    assert_eq!(sent["stop_sequences"], json!(["\n\nHuman:"]));
    assert_eq!(sent["metadata"], json!({"user_id": "u-1"}));
    assert_eq!(err, None);
    assert!(events.contains(&StreamEvent::ToolUseStart {
        index: 1,
        id: "toolu_01A".into(),
        name: "grep".into()
    }));
    let deltas: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolInputDelta {
                index: 1,
                partial_json,
            } => Some(partial_json.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas.len(), fragments.len());
    assert_eq!(deltas.concat(), raw);
    let r = finished(&events);
    assert_eq!(r.stop_reason, StopReason::ToolUse);
    assert_eq!(
        r.content[1],
        ContentBlock::tool_use("toolu_01A", "grep", input)
    );
}

#[tokio::test]
async fn anthropic_error_event_before_output_is_retried() {
    let mut overloaded = anthropic_start();
    overloaded.extend(sse(
        "error",
        json!({"type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ));
    let mut ok = anthropic_start();
    ok.extend(text_block(0, "fine now"));
    ok.extend(anthropic_end("end_turn", 3));
    let server =
        SseServer::start(vec![SseReply::ok(vec![overloaded]), SseReply::ok(vec![ok])]).await;
    let (events, err) = drain_stream(&anthropic_at(&server.uri, 3), hi()).await;
    assert_eq!(err, None);
    assert_eq!(texts(&events), "fine now");
    assert_eq!(server.bodies().len(), 2);
}

#[tokio::test]
async fn anthropic_error_event_after_output_is_a_typed_error_not_retried() {
    let mut body = anthropic_start();
    body.extend(text_block(0, "Half an ans"));
    body.extend(sse(
        "error",
        json!({"type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ));
    let server = SseServer::start(vec![SseReply::ok(vec![body])]).await;
    let (events, err) = drain_stream(&anthropic_at(&server.uri, 3), hi()).await;
    assert_eq!(texts(&events), "Half an ans");
    match err {
        Some(ModelError::Stream {
            message, emitted, ..
        }) => {
            assert_eq!(emitted, 1);
            assert!(
                message.contains("overloaded_error: Overloaded"),
                "{message}"
            );
        }
        other => panic!("expected a stream error, got {other:?}"),
    }
    assert_eq!(server.bodies().len(), 1, "output was emitted: no retry");
}

#[tokio::test]
async fn anthropic_cut_connection_mid_stream_is_a_typed_error() {
    let mut body = anthropic_start();
    body.extend(text_block(0, "The answer is"));
    // Half of the next event, then the connection dies.
    let next = text_delta(0, " forty-two");
    body.extend_from_slice(&next[..next.len() / 2]);
    let server = SseServer::start(vec![SseReply::cut(vec![body])]).await;
    let (events, err) = drain_stream(&anthropic_at(&server.uri, 3), hi()).await;
    assert_eq!(texts(&events), "The answer is");
    assert!(
        matches!(err, Some(ModelError::Stream { emitted: 1, .. })),
        "{err:?}"
    );
    assert_eq!(server.bodies().len(), 1);
}

#[tokio::test]
async fn malformed_event_is_a_typed_error() {
    let mut body = anthropic_start();
    body.extend(b"event: content_block_delta\ndata: {\"type\": \"content_block_delta\", \"ind\n\n");
    let server = SseServer::start(vec![SseReply::ok(vec![body])]).await;
    let (_, err) = drain_stream(&anthropic_at(&server.uri, 3), hi()).await;
    match err {
        Some(ModelError::Stream {
            message,
            retryable: false,
            ..
        }) => {
            assert!(message.contains("malformed"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.bodies().len(), 1, "a malformed event is not retried");
}

fn chunk(delta: serde_json::Value, finish: Option<&str>) -> Vec<u8> {
    sse_data(
        json!({"id": "chatcmpl-S1", "object": "chat.completion.chunk", "created": 1731000000,
        "model": "gpt-4o-2024-08-06", "choices": [{"index": 0, "delta": delta, "logprobs": null,
        "finish_reason": finish}]}),
    )
}

fn usage_chunk() -> Vec<u8> {
    sse_data(
        json!({"id": "chatcmpl-S1", "object": "chat.completion.chunk", "created": 1731000000,
        "model": "gpt-4o-2024-08-06", "choices": [], "usage": {"prompt_tokens": 120,
        "completion_tokens": 9, "total_tokens": 129, "prompt_tokens_details": {"cached_tokens": 100}}}),
    )
}

#[tokio::test]
async fn openai_text_stream_with_usage_chunk_and_done() {
    let mut body = chunk(json!({"role": "assistant", "content": ""}), None);
    for t in ["Ça ", "marche ", "très ", "bien \u{2728}"] {
        body.extend(chunk(json!({"content": t}), None));
    }
    body.extend(chunk(json!({}), Some("stop")));
    body.extend(usage_chunk());
    body.extend(b"data: [DONE]\n\n");
    let server = SseServer::start(vec![SseReply::ok(pieces(&body, 5))]).await;
    let mut req = hi();
    req.tool_choice = Some(ToolChoice::None);
    req.stop_sequences = vec!["END".into()];
    req.extra.insert("seed".into(), json!(7));
    let (events, err) = drain_stream(&openai(&server_uri(&server.uri), 1), req).await;
    assert_eq!(err, None);
    assert_eq!(texts(&events), "Ça marche très bien \u{2728}");
    let r = finished(&events);
    assert_eq!(r.id, "chatcmpl-S1");
    assert_eq!(r.stop_reason, StopReason::EndTurn);
    assert_eq!(
        r.usage,
        Usage {
            input_tokens: 20,
            output_tokens: 9,
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: 100
        }
    );
    let sent = &server.bodies()[0];
    assert_eq!(sent["stream"], json!(true));
    assert_eq!(sent["stream_options"], json!({"include_usage": true}));
    assert_eq!(sent["tool_choice"], json!("none"));
    assert_eq!(sent["stop"], json!(["END"]));
    assert_eq!(sent["seed"], json!(7));
}

/// The provider for a raw server (support's `openai` takes a wiremock server).
fn server_uri(uri: &str) -> String {
    uri.to_owned()
}

fn openai(uri: &str, attempts: u32) -> OpenAiCompatModel {
    OpenAiCompatModel::new(openai_config_at(uri, attempts)).unwrap()
}

#[tokio::test]
async fn openai_tool_call_arguments_in_many_fragments() {
    let args = json!({"city": "Paris", "units": "metric", "days": [1, 2, 3]}).to_string();
    let mut body = chunk(
        json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0,
        "id": "call_abc", "type": "function", "function": {"name": "weather", "arguments": ""}}]}),
        None,
    );
    let frags: Vec<String> = args
        .chars()
        .collect::<Vec<_>>()
        .chunks(2)
        .map(|c| c.iter().collect())
        .collect();
    for f in &frags {
        body.extend(chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": f}}]}),
            None,
        ));
    }
    body.extend(chunk(
        json!({"tool_calls": [{"index": 1, "id": "call_def", "type": "function",
        "function": {"name": "clock", "arguments": "{}"}}]}),
        None,
    ));
    body.extend(chunk(json!({}), Some("tool_calls")));
    body.extend(usage_chunk());
    body.extend(b"data: [DONE]\n\n");
    let server = SseServer::start(vec![SseReply::ok(pieces(&body, 33))]).await;
    let (events, err) = drain_stream(&openai(&server.uri, 1), hi()).await;
    assert_eq!(err, None);
    let n = events
        .iter()
        .filter(|e| matches!(e, StreamEvent::ToolInputDelta { index: 0, .. }))
        .count();
    assert_eq!(n, frags.len());
    let r = finished(&events);
    assert_eq!(r.stop_reason, StopReason::ToolUse);
    assert_eq!(
        r.content,
        vec![
            ContentBlock::tool_use("call_abc", "weather", serde_json::from_str(&args).unwrap()),
            ContentBlock::tool_use("call_def", "clock", json!({})),
        ]
    );
}

#[tokio::test]
async fn llama_cpp_stream_with_reasoning_and_no_usage() {
    // llama-server: no `event:` lines, reasoning_content deltas, timings instead of usage.
    let mut body = Vec::new();
    for r in ["Think", "ing."] {
        body.extend(sse_data(
            json!({"choices": [{"finish_reason": null, "index": 0,
            "delta": {"reasoning_content": r}}], "created": 1, "id": "chatcmpl-llama",
            "model": "local", "object": "chat.completion.chunk"}),
        ));
    }
    body.extend(sse_data(
        json!({"choices": [{"finish_reason": null, "index": 0,
        "delta": {"content": "Hello"}}], "id": "chatcmpl-llama", "model": "local",
        "object": "chat.completion.chunk"}),
    ));
    body.extend(sse_data(
        json!({"choices": [{"finish_reason": "length", "index": 0, "delta": {}}],
        "id": "chatcmpl-llama", "model": "local", "object": "chat.completion.chunk",
        "timings": {"predicted_n": 3}}),
    ));
    body.extend(b"data: [DONE]\n\n");
    let server = SseServer::start(vec![SseReply::ok(vec![body])]).await;
    let (events, err) = drain_stream(&openai(&server.uri, 1), hi()).await;
    assert_eq!(err, None);
    let r = finished(&events);
    assert_eq!(r.stop_reason, StopReason::MaxTokens);
    assert_eq!(
        r.content,
        vec![
            ContentBlock::Thinking {
                thinking: "Thinking.".into(),
                signature: None
            },
            ContentBlock::text("Hello"),
        ]
    );
}

#[tokio::test]
async fn openai_cut_before_any_delta_is_retried_then_succeeds() {
    let mut ok = chunk(json!({"content": "ok"}), None);
    ok.extend(chunk(json!({}), Some("stop")));
    ok.extend(b"data: [DONE]\n\n");
    let server = SseServer::start(vec![
        SseReply::cut(vec![b"data: {\"id\": \"chatcmpl".to_vec()]),
        SseReply::ok(vec![ok]),
    ])
    .await;
    let (events, err) = drain_stream(&openai(&server.uri, 3), hi()).await;
    assert_eq!(err, None);
    assert_eq!(texts(&events), "ok");
    assert_eq!(server.bodies().len(), 2);
}

#[tokio::test]
async fn openai_cut_after_a_delta_is_not_retried() {
    let body = chunk(json!({"content": "partial"}), None);
    let server = SseServer::start(vec![SseReply::cut(vec![body])]).await;
    let (events, err) = drain_stream(&openai(&server.uri, 3), hi()).await;
    assert_eq!(texts(&events), "partial");
    assert!(
        matches!(err, Some(ModelError::Stream { emitted: 1, .. })),
        "{err:?}"
    );
    assert_eq!(server.bodies().len(), 1);
}

#[tokio::test]
async fn openai_error_chunk_is_a_typed_error() {
    let mut body = chunk(json!({"content": "so"}), None);
    body.extend(sse_data(
        json!({"error": {"message": "model crashed", "type": "server_error"}}),
    ));
    let server = SseServer::start(vec![SseReply::ok(vec![body])]).await;
    let (_, err) = drain_stream(&openai(&server.uri, 3), hi()).await;
    assert!(
        matches!(&err, Some(ModelError::Stream { message, emitted: 1, .. }) if message.contains("model crashed")),
        "{err:?}"
    );
}
