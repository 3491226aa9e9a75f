//! Anthropic-shaped conversation messages.
//!
//! A [`Message`] is one record of the conversation: a role, a list of [`ContentBlock`]s, the
//! provider-reported [`Usage`] for assistant responses and some [`MessageMeta`] that the harness
//! needs (the response id that groups split streaming records, compaction markers, the files a tool
//! result wrote). Tool-use / tool-result pairing is what compaction and the invariant checker must
//! preserve, which is why the shape follows the Anthropic Messages API.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::PathBuf;

/// A unique, stable identifier of one message.
///
/// ```
/// use memloop_core::message::MessageId;
/// let a = MessageId::new();
/// let b = MessageId::new();
/// assert_ne!(a, b);
/// assert_eq!(MessageId::from("m1").as_str(), "m1");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MessageId(String);

impl MessageId {
    /// A fresh random (UUID v4) id.
    pub fn new() -> Self {
        Self(uuid::Uuid::new_v4().to_string())
    }

    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for MessageId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for MessageId {
    fn from(s: &str) -> Self {
        Self(s.to_owned())
    }
}

impl From<String> for MessageId {
    fn from(s: String) -> Self {
        Self(s)
    }
}

/// Who authored a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The human (or the harness speaking for it: tool results, attachments).
    User,
    /// The model.
    Assistant,
}

/// Token usage reported by a provider for one model response.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Uncached input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens written to the prompt cache.
    #[serde(default)]
    pub cache_creation_input_tokens: u64,
    /// Input tokens read from the prompt cache.
    #[serde(default)]
    pub cache_read_input_tokens: u64,
}

impl Usage {
    /// The size of the context after this response: input + cache creation + cache read + output
    /// tokens (the figure the conversation token count starts from).
    ///
    /// ```
    /// use memloop_core::message::Usage;
    /// let u = Usage { input_tokens: 10, output_tokens: 5, cache_creation_input_tokens: 100, cache_read_input_tokens: 1000 };
    /// assert_eq!(u.context_tokens(), 1115);
    /// ```
    pub fn context_tokens(&self) -> u64 {
        self.input_tokens
            .saturating_add(self.cache_creation_input_tokens)
            .saturating_add(self.cache_read_input_tokens)
            .saturating_add(self.output_tokens)
    }
}

/// The source of an image or document block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum MediaSource {
    /// Inline base64 data.
    Base64 {
        /// MIME type, e.g. `image/png`.
        media_type: String,
        /// Base64-encoded bytes.
        data: String,
    },
    /// A URL the provider fetches.
    Url {
        /// The URL.
        url: String,
    },
}

/// Content of a tool result: plain text or nested blocks (text and images).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ToolResultContent {
    /// Plain text.
    Text(String),
    /// Structured blocks.
    Blocks(Vec<ContentBlock>),
}

impl ToolResultContent {
    /// All text in the result, blocks joined by newlines.
    pub fn text(&self) -> String {
        match self {
            Self::Text(t) => t.clone(),
            Self::Blocks(blocks) => blocks
                .iter()
                .filter_map(ContentBlock::as_text)
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

impl From<String> for ToolResultContent {
    fn from(s: String) -> Self {
        Self::Text(s)
    }
}

impl From<&str> for ToolResultContent {
    fn from(s: &str) -> Self {
        Self::Text(s.to_owned())
    }
}

/// One block of message content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// The model asks for a tool call.
    ToolUse {
        /// Call id, echoed by the matching [`ContentBlock::ToolResult`].
        id: String,
        /// Tool name.
        name: String,
        /// JSON input.
        input: serde_json::Value,
    },
    /// The result of a tool call.
    ToolResult {
        /// The id of the [`ContentBlock::ToolUse`] this answers.
        tool_use_id: String,
        /// The result.
        content: ToolResultContent,
        /// Whether the call failed (or was denied).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
    /// Extended thinking.
    Thinking {
        /// The thinking text.
        thinking: String,
        /// Provider signature, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// Extended thinking the provider encrypted (flagged by its safety systems). It carries no
    /// readable text; the API requires it back unchanged in later turns.
    RedactedThinking {
        /// The opaque encrypted payload, passed through as received.
        data: String,
    },
    /// An image.
    Image {
        /// Where the image comes from.
        source: MediaSource,
    },
    /// A document (PDF, ...).
    Document {
        /// Where the document comes from.
        source: MediaSource,
    },
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text { text: text.into() }
    }

    /// A tool-use block.
    pub fn tool_use(
        id: impl Into<String>,
        name: impl Into<String>,
        input: serde_json::Value,
    ) -> Self {
        Self::ToolUse {
            id: id.into(),
            name: name.into(),
            input,
        }
    }

    /// A tool-result block.
    pub fn tool_result(
        tool_use_id: impl Into<String>,
        content: impl Into<String>,
        is_error: bool,
    ) -> Self {
        Self::ToolResult {
            tool_use_id: tool_use_id.into(),
            content: ToolResultContent::Text(content.into()),
            is_error,
        }
    }

    /// The text of a text block.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Self::Text { text } => Some(text),
            _ => None,
        }
    }
}

/// What kind of record a message is, beyond its role.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageKind {
    /// An ordinary conversation message.
    #[default]
    Normal,
    /// Marks where a compaction happened; everything before it was summarised.
    CompactBoundary,
    /// The summary (session notes or LLM summary) that replaced compacted history.
    CompactSummary,
}

/// Harness bookkeeping attached to a message. Never sent to a provider.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageMeta {
    /// Provider response id. Assistant records sharing one id (split streaming records, thinking
    /// blocks) belong together and are never separated by compaction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_id: Option<String>,
    /// The record kind.
    #[serde(default, skip_serializing_if = "is_normal")]
    pub kind: MessageKind,
    /// Files written by the tool calls answered in this message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files_written: Vec<PathBuf>,
}

fn is_normal(kind: &MessageKind) -> bool {
    *kind == MessageKind::Normal
}

/// One record of the conversation.
///
/// ```
/// use memloop_core::message::{Message, Role};
/// let m = Message::user("hello");
/// assert_eq!(m.role, Role::User);
/// assert_eq!(m.text(), "hello");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Unique id.
    pub id: MessageId,
    /// Author.
    pub role: Role,
    /// Content blocks.
    pub content: Vec<ContentBlock>,
    /// Provider usage, on assistant responses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Harness bookkeeping.
    #[serde(default)]
    pub meta: MessageMeta,
}

/// A user message with one text block (so `agent.run_turn("hi")` works).
impl From<&str> for Message {
    fn from(text: &str) -> Self {
        Self::user(text)
    }
}

/// A user message with one text block.
impl From<String> for Message {
    fn from(text: String) -> Self {
        Self::user(text)
    }
}

/// A user message with one text block.
impl From<&String> for Message {
    fn from(text: &String) -> Self {
        Self::user(text.as_str())
    }
}

impl Message {
    /// A message with a fresh id.
    pub fn new(role: Role, content: Vec<ContentBlock>) -> Self {
        Self {
            id: MessageId::new(),
            role,
            content,
            usage: None,
            meta: MessageMeta::default(),
        }
    }

    /// A user message with one text block.
    pub fn user(text: impl Into<String>) -> Self {
        Self::new(Role::User, vec![ContentBlock::text(text)])
    }

    /// An assistant message with one text block.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self::new(Role::Assistant, vec![ContentBlock::text(text)])
    }

    /// Replace the id (builder style; handy in tests).
    pub fn with_id(mut self, id: impl Into<MessageId>) -> Self {
        self.id = id.into();
        self
    }

    /// Set the usage (builder style).
    pub fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = Some(usage);
        self
    }

    /// Set the kind (builder style).
    pub fn with_kind(mut self, kind: MessageKind) -> Self {
        self.meta.kind = kind;
        self
    }

    /// Set the provider response id (builder style).
    pub fn with_response_id(mut self, response_id: impl Into<String>) -> Self {
        self.meta.response_id = Some(response_id.into());
        self
    }

    /// All text blocks joined by newlines.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(ContentBlock::as_text)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Whether any block is non-empty text.
    pub fn has_text(&self) -> bool {
        self.content
            .iter()
            .any(|b| b.as_text().is_some_and(|t| !t.trim().is_empty()))
    }

    /// The tool-use blocks as `(id, name, input)`.
    pub fn tool_uses(&self) -> impl Iterator<Item = (&str, &str, &serde_json::Value)> {
        self.content.iter().filter_map(|b| match b {
            ContentBlock::ToolUse { id, name, input } => Some((id.as_str(), name.as_str(), input)),
            _ => None,
        })
    }

    /// The ids answered by tool-result blocks.
    pub fn tool_result_ids(&self) -> impl Iterator<Item = &str> {
        self.content.iter().filter_map(|b| match b {
            ContentBlock::ToolResult { tool_use_id, .. } => Some(tool_use_id.as_str()),
            _ => None,
        })
    }

    /// Whether this message asks for at least one tool call.
    pub fn has_tool_use(&self) -> bool {
        self.tool_uses().next().is_some()
    }

    /// Whether this is a compaction boundary marker.
    pub fn is_compact_boundary(&self) -> bool {
        self.meta.kind == MessageKind::CompactBoundary
    }
}
