//! [`AgentConfig`]: the agent's settings.

use crate::clearing::ToolResultClearing;
use crate::model::RequestOptions;
use std::path::PathBuf;
use std::time::Duration;

/// Agent settings.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// Session id (random by default).
    pub session_id: String,
    /// Working directory handed to tools.
    pub cwd: PathBuf,
    /// Model calls allowed in one user turn before the guard stops it. Default 25.
    pub max_iterations: u32,
    /// `max_tokens` of main-agent requests. Default 8,192.
    pub max_tokens: u32,
    /// Check conversation invariants before every request. Default true.
    pub validate_invariants: bool,
    /// Default timeout of [`Agent::drain`](crate::Agent::drain). Default 60 s.
    pub drain_timeout: Duration,
    /// Temperature, tool choice, stop sequences and extra body fields of main-agent requests.
    pub request: RequestOptions,
    /// How long one tool call may run before it is stopped and reported as an error.
    /// Default 10 minutes.
    pub tool_timeout: Duration,
    /// Tool output beyond this many bytes is cut in the middle (head and tail kept, at character
    /// boundaries) with a note saying how much was elided, before it enters the conversation.
    /// Default 100,000.
    pub max_tool_output_bytes: usize,
    /// Where the full text of a cut tool output is kept (`<dir>/tool-results/<call id>.txt`),
    /// so the note left in the conversation can point at it. `None` (the default) keeps nothing;
    /// `MemorySetup` sets the session dir when compaction is on.
    pub spill_dir: Option<PathBuf>,
    /// Clear the content of old tool results once the conversation crosses a trigger, before
    /// any compaction is considered (see [`crate::clearing`]). `None` (the default) never clears.
    pub tool_result_clearing: Option<ToolResultClearing>,
    /// Record what the main agent's model requests send and get back on their `chat` spans
    /// (see [`ContentCapture`](crate::telemetry::ContentCapture)). `None` (the default) records
    /// no message text.
    pub capture_content: Option<crate::telemetry::ContentCapture>,
}

impl AgentConfig {
    /// Default of [`tool_timeout`](Self::tool_timeout), for the main agent and forks.
    pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(600);
    /// Default of [`max_tool_output_bytes`](Self::max_tool_output_bytes), for the main agent and
    /// forks.
    pub const DEFAULT_MAX_TOOL_OUTPUT_BYTES: usize = 100_000;
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            session_id: uuid::Uuid::new_v4().to_string(),
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
            max_iterations: 25,
            max_tokens: 8_192,
            validate_invariants: true,
            drain_timeout: Duration::from_secs(60),
            request: RequestOptions::default(),
            tool_timeout: Self::DEFAULT_TOOL_TIMEOUT,
            max_tool_output_bytes: Self::DEFAULT_MAX_TOOL_OUTPUT_BYTES,
            spill_dir: None,
            tool_result_clearing: None,
            capture_content: None,
        }
    }
}
