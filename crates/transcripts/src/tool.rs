//! The main agent's search over past sessions, and the prompt guidance that goes with it.

use crate::file::TranscriptDir;
use crate::search::SearchOptions;
use async_trait::async_trait;
use memloop_core::prompt::SystemSection;
use memloop_core::tool::{Tool, ToolContext, ToolEffect, ToolOutput, ToolSpec};
use serde_json::{Value, json};

/// Name of the transcript search tool.
pub const TRANSCRIPT_SEARCH: &str = "transcript_search";

/// Largest number of hits the model may ask for.
const MAX_LIMIT: usize = 20;

/// `transcript_search {query, limit?}`: messages of past sessions (the current one left out)
/// containing every word of the query, newest session first, bounded by [`SearchOptions`].
#[derive(Debug, Clone)]
pub struct TranscriptSearchTool {
    dir: TranscriptDir,
    options: SearchOptions,
}

impl TranscriptSearchTool {
    /// Search `dir` with the default bounds.
    pub fn new(dir: TranscriptDir) -> Self {
        Self {
            dir,
            options: SearchOptions::default(),
        }
    }

    /// Replace the bounds (builder style; `exclude_session` is set per call).
    pub fn with_options(mut self, options: SearchOptions) -> Self {
        self.options = options;
        self
    }
}

#[async_trait]
impl Tool for TranscriptSearchTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: TRANSCRIPT_SEARCH.into(),
            description: "Search the transcripts of past conversations in this project for \
                messages containing every word of `query` (case-insensitive), newest first. Use \
                specific terms (an error message, a file or function name, a command); check \
                memory first."
                .into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "words that must all appear"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": "hits to return (default 10)"}
                },
                "required": ["query"]
            }),
            effect: ToolEffect::ReadOnly,
        }
    }

    async fn call(&self, input: Value, ctx: &ToolContext) -> ToolOutput {
        let Some(query) = input.get("query").and_then(Value::as_str) else {
            return ToolOutput::error(format!("{TRANSCRIPT_SEARCH}: `query` is required"));
        };
        let mut options = self.options.clone();
        if let Some(limit) = input.get("limit").and_then(Value::as_u64) {
            options.limit = usize::try_from(limit)
                .unwrap_or(MAX_LIMIT)
                .clamp(1, MAX_LIMIT);
        }
        options.exclude_session = Some(ctx.session_id.clone());
        let dir = self.dir.clone();
        let query = query.to_owned();
        let found = tokio::task::spawn_blocking(move || dir.search(&query, &options)).await;
        match found {
            Ok(Ok(hits)) if hits.is_empty() => {
                ToolOutput::ok("No past session has a message with all of these words.")
            }
            Ok(Ok(hits)) => ToolOutput::ok(
                hits.iter()
                    .map(|h| {
                        format!(
                            "[session {} · {} · {}] {}",
                            h.session_id, h.timestamp, h.role, h.snippet
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n"),
            ),
            Ok(Err(e)) => ToolOutput::error(format!("{TRANSCRIPT_SEARCH} failed: {e}")),
            Err(e) => ToolOutput::error(format!("{TRANSCRIPT_SEARCH} failed: {e}")),
        }
    }
}

const GUIDANCE: &str = include_str!("../templates/past_context.md");

/// The "searching past context" guidance of the memory prompt, placed after the memory section:
/// memory first, past transcripts second (with [`TRANSCRIPT_SEARCH`]), specific terms. Register
/// it only where the agent has that tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct PastContextSection;

impl PastContextSection {
    /// Section name.
    pub const NAME: &'static str = "past_context";

    /// The guidance text.
    pub fn text() -> &'static str {
        GUIDANCE.trim_end()
    }
}

#[async_trait]
impl SystemSection for PastContextSection {
    fn name(&self) -> &str {
        Self::NAME
    }

    async fn compute(&self) -> Option<String> {
        Some(Self::text().to_owned())
    }
}
