//! Messages between rig and memloop: the one place that maps rig's `Message` (user content,
//! assistant content, tool calls and results, reasoning, media) to memloop's and back.
//!
//! What has no counterpart is said where it is dropped: rig's system messages (memloop keeps the
//! system prompt outside the conversation), audio and video (memloop's messages carry text,
//! images and documents), provider-only assistant items (`Opaque`) and reasoning signatures.

use memloop::core::message::{
    ContentBlock, MediaSource, Message as MlMessage, Role, ToolResultContent as MlToolResult,
};
use rig_core::completion::Message as RigMessage;
use rig_core::message::{
    AssistantContent, AssistantMessage, CallId, DocumentMediaType, DocumentSourceKind, Image,
    ImageMediaType, MimeType, Reasoning, Text, ToolName, ToolResult, ToolResultContent,
    UserContent,
};
use std::collections::HashMap;

/// The name rig needs on a tool result whose call is not in the converted messages (memloop's
/// tool results carry only the call's id).
const UNKNOWN_TOOL: &str = "tool";

/// rig's messages as memloop's, in order. System messages are left out (memloop keeps the
/// system prompt outside the conversation); a message left with no content is left out.
pub fn to_memloop(messages: &[RigMessage]) -> Vec<MlMessage> {
    messages.iter().filter_map(message_to_memloop).collect()
}

/// memloop's messages as rig's, in order. A tool result is named after the tool call with its
/// id earlier in `messages`.
pub fn to_rig(messages: &[MlMessage]) -> Vec<RigMessage> {
    let mut names: HashMap<&str, &str> = HashMap::new();
    let mut out = Vec::with_capacity(messages.len());
    for message in messages {
        for (id, name, _) in message.tool_uses() {
            names.insert(id, name);
        }
        if let Some(converted) = message_to_rig(message, &names) {
            out.push(converted);
        }
    }
    out
}

fn message_to_memloop(message: &RigMessage) -> Option<MlMessage> {
    let (role, content) = match message {
        RigMessage::System { .. } => return None,
        RigMessage::User { content } => (
            Role::User,
            content
                .iter()
                .filter_map(user_to_memloop)
                .collect::<Vec<_>>(),
        ),
        RigMessage::Assistant(turn) => (
            Role::Assistant,
            turn.content
                .iter()
                .filter_map(assistant_to_memloop)
                .collect::<Vec<_>>(),
        ),
    };
    (!content.is_empty()).then(|| MlMessage::new(role, content))
}

fn user_to_memloop(content: &UserContent) -> Option<ContentBlock> {
    match content {
        UserContent::Text(text) => Some(ContentBlock::text(text.text())),
        UserContent::ToolResult(result) => Some(ContentBlock::ToolResult {
            tool_use_id: result.call.wire().into_owned(),
            content: tool_result_to_memloop(&result.content),
            is_error: result.is_error,
        }),
        UserContent::Image(image) => {
            media_source(&image.data, image_mime(image.media_type.as_ref()))
                .map(|source| ContentBlock::Image { source })
        }
        UserContent::Document(document) => match &document.data {
            // A text document (rig's RAG context) is text to memloop.
            DocumentSourceKind::String(text) => Some(ContentBlock::text(text.clone())),
            data => media_source(
                data,
                document
                    .media_type
                    .as_ref()
                    .map_or("application/pdf", MimeType::to_mime_type),
            )
            .map(|source| ContentBlock::Document { source }),
        },
        UserContent::Audio(_) | UserContent::Video(_) => {
            tracing::debug!("memloop-rig: audio or video content left out of memloop's messages");
            None
        }
    }
}

fn assistant_to_memloop(content: &AssistantContent) -> Option<ContentBlock> {
    match content {
        AssistantContent::Text(text) => Some(ContentBlock::text(text.text())),
        AssistantContent::ToolCall(call) => Some(ContentBlock::tool_use(
            call.id.wire().into_owned(),
            call.function.name.as_str(),
            call.function.arguments_value(),
        )),
        AssistantContent::Reasoning(reasoning) if reasoning.redacted => {
            Some(ContentBlock::RedactedThinking {
                data: reasoning.text.clone(),
            })
        }
        AssistantContent::Reasoning(reasoning) => Some(ContentBlock::Thinking {
            thinking: reasoning.text.clone(),
            signature: None,
        }),
        AssistantContent::Image(image) => {
            media_source(&image.data, image_mime(image.media_type.as_ref()))
                .map(|source| ContentBlock::Image { source })
        }
        // Provider-only items (`Opaque`) and whatever rig adds later.
        _ => None,
    }
}

fn tool_result_to_memloop(content: &[ToolResultContent]) -> MlToolResult {
    if let [ToolResultContent::Text(text)] = content {
        return MlToolResult::Text(text.text().to_owned());
    }
    MlToolResult::Blocks(
        content
            .iter()
            .filter_map(|part| match part {
                ToolResultContent::Text(text) => Some(ContentBlock::text(text.text())),
                ToolResultContent::Json { value } => Some(ContentBlock::text(value.to_string())),
                ToolResultContent::Image(image) => {
                    media_source(&image.data, image_mime(image.media_type.as_ref()))
                        .map(|source| ContentBlock::Image { source })
                }
            })
            .collect(),
    )
}

fn image_mime(media_type: Option<&ImageMediaType>) -> &'static str {
    media_type.map_or("image/png", MimeType::to_mime_type)
}

fn media_source(data: &DocumentSourceKind, mime: &str) -> Option<MediaSource> {
    match data {
        DocumentSourceKind::Base64(data) => Some(MediaSource::Base64 {
            media_type: mime.to_owned(),
            data: data.clone(),
        }),
        DocumentSourceKind::Url(url) => Some(MediaSource::Url { url: url.clone() }),
        _ => {
            tracing::debug!("memloop-rig: media other than base64 or a URL left out");
            None
        }
    }
}

fn message_to_rig(message: &MlMessage, names: &HashMap<&str, &str>) -> Option<RigMessage> {
    match message.role {
        Role::User => {
            let content: Vec<UserContent> = message
                .content
                .iter()
                .filter_map(|block| user_to_rig(block, names))
                .collect();
            (!content.is_empty()).then_some(RigMessage::User { content })
        }
        Role::Assistant => {
            let content: Vec<AssistantContent> = message
                .content
                .iter()
                .filter_map(assistant_to_rig)
                .collect();
            (!content.is_empty()).then(|| RigMessage::Assistant(AssistantMessage::new(content)))
        }
    }
}

fn user_to_rig(block: &ContentBlock, names: &HashMap<&str, &str>) -> Option<UserContent> {
    match block {
        ContentBlock::Text { text } => Some(UserContent::Text(Text::new(text.clone()))),
        ContentBlock::ToolResult {
            tool_use_id,
            content,
            is_error,
        } => {
            let name = names
                .get(tool_use_id.as_str())
                .copied()
                .unwrap_or(UNKNOWN_TOOL);
            let name = ToolName::new(name).ok()?;
            Some(UserContent::ToolResult(ToolResult {
                call: CallId::from_wire(tool_use_id.clone()),
                name,
                content: tool_result_to_rig(content),
                is_error: *is_error,
            }))
        }
        ContentBlock::Image { source } => Some(UserContent::Image(image_to_rig(source))),
        ContentBlock::Document { source } => Some(match source {
            MediaSource::Base64 { media_type, data } => UserContent::document_base64(
                data.clone(),
                DocumentMediaType::from_mime_type(media_type),
            ),
            MediaSource::Url { url } => UserContent::document_url(url.clone(), None),
        }),
        // Thinking and tool calls are the assistant's; a user message never carries them.
        ContentBlock::ToolUse { .. }
        | ContentBlock::Thinking { .. }
        | ContentBlock::RedactedThinking { .. } => None,
    }
}

fn assistant_to_rig(block: &ContentBlock) -> Option<AssistantContent> {
    match block {
        ContentBlock::Text { text } => Some(AssistantContent::text(text.clone())),
        ContentBlock::ToolUse { id, name, input } => Some(AssistantContent::tool_call(
            id.clone(),
            ToolName::new(name.clone()).ok()?,
            input.clone(),
        )),
        ContentBlock::Thinking { thinking, .. } => Some(AssistantContent::Reasoning(
            Reasoning::new(thinking.clone()),
        )),
        ContentBlock::RedactedThinking { data } => {
            let mut reasoning = Reasoning::new(data.clone());
            reasoning.redacted = true;
            Some(AssistantContent::Reasoning(reasoning))
        }
        ContentBlock::Image { source } => Some(AssistantContent::Image(image_to_rig(source))),
        ContentBlock::ToolResult { .. } | ContentBlock::Document { .. } => None,
    }
}

fn tool_result_to_rig(content: &MlToolResult) -> Vec<ToolResultContent> {
    match content {
        MlToolResult::Text(text) => vec![ToolResultContent::text(text.clone())],
        MlToolResult::Blocks(blocks) => blocks
            .iter()
            .filter_map(|block| match block {
                ContentBlock::Text { text } => Some(ToolResultContent::text(text.clone())),
                ContentBlock::Image { source } => {
                    Some(ToolResultContent::Image(image_to_rig(source)))
                }
                _ => None,
            })
            .collect(),
    }
}

fn image_to_rig(source: &MediaSource) -> Image {
    let (data, media_type) = match source {
        MediaSource::Base64 { media_type, data } => (
            DocumentSourceKind::Base64(data.clone()),
            ImageMediaType::from_mime_type(media_type),
        ),
        MediaSource::Url { url } => (DocumentSourceKind::Url(url.clone()), None),
    };
    Image {
        data,
        media_type,
        ..Image::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A turn with a tool call and its result goes to memloop and back unchanged in what both
    /// sides carry: texts, the call's id, name and arguments, the result and its error flag.
    #[test]
    fn a_tool_round_survives_both_ways() {
        let rig = vec![
            RigMessage::system("be brief"),
            RigMessage::user("save the rule"),
            RigMessage::Assistant(AssistantMessage::new(vec![
                AssistantContent::reasoning("the user wants it kept"),
                AssistantContent::tool_call(
                    "call-1",
                    ToolName::new("memory_write").unwrap_or_else(|_| unreachable!()),
                    serde_json::json!({"path": "pnpm.md"}),
                ),
            ])),
            RigMessage::User {
                content: vec![UserContent::ToolResult(ToolResult {
                    call: CallId::from_wire("call-1"),
                    name: ToolName::new("memory_write").unwrap_or_else(|_| unreachable!()),
                    content: vec![ToolResultContent::text("saved")],
                    is_error: true,
                })],
            },
            RigMessage::assistant("done"),
        ];
        let memloop = to_memloop(&rig);
        assert_eq!(memloop.len(), 4, "the system message is left out");
        assert_eq!(memloop[0].text(), "save the rule");
        assert_eq!(
            memloop[1].tool_uses().collect::<Vec<_>>(),
            vec![(
                "call-1",
                "memory_write",
                &serde_json::json!({"path": "pnpm.md"})
            )]
        );
        assert_eq!(
            memloop[2].content,
            vec![ContentBlock::ToolResult {
                tool_use_id: "call-1".into(),
                content: MlToolResult::Text("saved".into()),
                is_error: true,
            }]
        );
        assert_eq!(to_rig(&memloop), rig[1..].to_vec());
    }

    /// A tool result whose call is not among the messages still converts, under a stand-in name.
    #[test]
    fn an_orphan_tool_result_gets_a_stand_in_name() {
        let memloop = vec![MlMessage::new(
            Role::User,
            vec![ContentBlock::tool_result("call-9", "ok", false)],
        )];
        let rig = to_rig(&memloop);
        let RigMessage::User { content } = &rig[0] else {
            unreachable!("a user message")
        };
        let UserContent::ToolResult(result) = &content[0] else {
            unreachable!("a tool result")
        };
        assert_eq!(result.name.as_str(), UNKNOWN_TOOL);
    }
}
