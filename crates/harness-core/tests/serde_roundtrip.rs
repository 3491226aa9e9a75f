//! Every content block and message shape survives a JSON round trip unchanged.

use memloop_core::message::{
    ContentBlock, MediaSource, Message, MessageKind, Role, ToolResultContent, Usage,
};
use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde_json::json;

fn every_block() -> Vec<ContentBlock> {
    vec![
        ContentBlock::text("hello"),
        ContentBlock::tool_use("toolu_1", "read", json!({"path": "a.md", "n": [1, 2]})),
        ContentBlock::tool_result("toolu_1", "contents", false),
        ContentBlock::tool_result("toolu_2", "boom", true),
        ContentBlock::ToolResult {
            tool_use_id: "toolu_3".into(),
            content: ToolResultContent::Blocks(vec![ContentBlock::text("nested")]),
            is_error: false,
        },
        ContentBlock::Thinking {
            thinking: "let me think".into(),
            signature: Some("sig".into()),
        },
        ContentBlock::Thinking {
            thinking: "unsigned".into(),
            signature: None,
        },
        ContentBlock::RedactedThinking {
            data: "EmwKAhgBEgy3va3p".into(),
        },
        ContentBlock::Image {
            source: MediaSource::Base64 {
                media_type: "image/png".into(),
                data: "iVBORw0KGgo=".into(),
            },
        },
        ContentBlock::Document {
            source: MediaSource::Url {
                url: "https://example.invalid/a.pdf".into(),
            },
        },
    ]
}

#[test]
fn every_block_kind_round_trips() {
    for block in every_block() {
        let json = serde_json::to_string(&block).unwrap();
        let back: ContentBlock = serde_json::from_str(&json).unwrap();
        assert_eq!(back, block, "{json}");
    }
}

#[test]
fn blocks_use_the_anthropic_wire_shape() {
    assert_eq!(
        serde_json::to_value(ContentBlock::tool_use("t", "read", json!({}))).unwrap(),
        json!({"type": "tool_use", "id": "t", "name": "read", "input": {}})
    );
    assert_eq!(
        serde_json::to_value(ContentBlock::tool_result("t", "x", true)).unwrap(),
        json!({"type": "tool_result", "tool_use_id": "t", "content": "x", "is_error": true})
    );
    // is_error defaults to false when absent.
    let parsed: ContentBlock =
        serde_json::from_value(json!({"type": "tool_result", "tool_use_id": "t", "content": "x"}))
            .unwrap();
    assert_eq!(parsed, ContentBlock::tool_result("t", "x", false));
}

#[test]
fn full_message_round_trips_with_usage_and_meta() {
    let mut m = Message::new(Role::Assistant, every_block())
        .with_id("msg_1")
        .with_usage(Usage {
            input_tokens: 1,
            output_tokens: 2,
            cache_creation_input_tokens: 3,
            cache_read_input_tokens: 4,
        })
        .with_response_id("resp_1")
        .with_kind(MessageKind::CompactSummary);
    m.meta.files_written.push("/tmp/mem/a.md".into());
    let json = serde_json::to_string_pretty(&m).unwrap();
    let back: Message = serde_json::from_str(&json).unwrap();
    assert_eq!(back, m);
}

#[test]
fn garbage_is_an_error_not_a_panic() {
    assert!(serde_json::from_str::<ContentBlock>(r#"{"type":"nope"}"#).is_err());
    assert!(serde_json::from_str::<Message>("{").is_err());
}

proptest! {
    #[test]
    fn arbitrary_text_and_tool_input_round_trip(text in ".*", key in "[a-z]{1,8}", n in any::<i64>()) {
        let m = Message::new(Role::User, vec![
            ContentBlock::text(text.clone()),
            ContentBlock::tool_use("id", "t", json!({ key: n, "s": text })),
        ]);
        let back: Message = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        prop_assert_eq!(back, m);
    }
}
