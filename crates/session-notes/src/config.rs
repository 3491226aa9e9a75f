//! Session-memory settings and the update-threshold rule: the first update once the conversation
//! reaches 10,000 tokens, later ones after 5,000 more tokens and either 3 tool calls or an
//! assistant turn without tool calls (defaults).

use memloop_core::{
    message::MessageId,
    tokens::{CharEstimator, TokenCounter},
};
use std::path::PathBuf;
use std::sync::Arc;

/// When the notes are updated. Every number of the rule is a field here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpdateThresholds {
    /// The first update happens once the conversation reaches this many tokens. Default 10,000.
    pub init_tokens: u64,
    /// Later updates need the conversation to have grown by at least this many tokens since the
    /// last update. Default 5,000.
    pub min_tokens_between_updates: u64,
    /// ... and at least this many tool calls since the last update (or a last assistant turn
    /// without tool calls). Default 3.
    pub tool_calls_between_updates: usize,
}

impl Default for UpdateThresholds {
    fn default() -> Self {
        Self {
            init_tokens: 10_000,
            min_tokens_between_updates: 5_000,
            tool_calls_between_updates: 3,
        }
    }
}

/// What the threshold rule looks at after one model response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpdateSignal {
    /// Conversation size now (newest reported usage plus an estimate of the messages after it).
    pub context_tokens: u64,
    /// Tool calls made since the last update.
    pub tool_calls_since_update: usize,
    /// Whether the newest assistant response asked for no tool call.
    pub last_turn_without_tools: bool,
}

/// The bookkeeping the rule compares against. Reset after compaction, so growth is measured from
/// the compacted size.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Baselines {
    /// Whether the first update was started.
    pub initialized: bool,
    /// Conversation size when the last update was started.
    pub tokens_at_last_update: u64,
    /// The newest message the last started update could see; tool calls are counted after it.
    pub update_marker: Option<MessageId>,
    /// The newest message covered by a finished update (what compaction keeps after).
    pub last_summarized: Option<MessageId>,
}

impl UpdateThresholds {
    /// Whether an update is due.
    ///
    /// ```
    /// use memloop_session_notes::{Baselines, UpdateSignal, UpdateThresholds};
    /// let t = UpdateThresholds::default();
    /// let fresh = Baselines::default();
    /// let at = |tokens, tools, no_tools| UpdateSignal {
    ///     context_tokens: tokens, tool_calls_since_update: tools, last_turn_without_tools: no_tools,
    /// };
    /// assert!(!t.is_due(&fresh, at(9_999, 10, true)));
    /// assert!(t.is_due(&fresh, at(10_000, 0, false)));
    /// let later = Baselines { initialized: true, tokens_at_last_update: 10_000, ..Default::default() };
    /// assert!(!t.is_due(&later, at(14_999, 5, true)));
    /// assert!(!t.is_due(&later, at(15_000, 2, false)));
    /// assert!(t.is_due(&later, at(15_000, 3, false)));
    /// assert!(t.is_due(&later, at(15_000, 0, true)));
    /// ```
    pub fn is_due(&self, baselines: &Baselines, signal: UpdateSignal) -> bool {
        if !baselines.initialized {
            return signal.context_tokens >= self.init_tokens;
        }
        let grown = signal
            .context_tokens
            .saturating_sub(baselines.tokens_at_last_update);
        grown >= self.min_tokens_between_updates
            && (signal.tool_calls_since_update >= self.tool_calls_between_updates
                || signal.last_turn_without_tools)
    }
}

/// Size caps of the notes; when over, the update prompt lists the oversized sections (largest
/// first) and asks to condense them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotesCaps {
    /// About this many tokens per section. Default 2,000.
    pub max_section_tokens: u64,
    /// About this many tokens for the whole file. Default 12,000.
    pub max_total_tokens: u64,
}

impl Default for NotesCaps {
    fn default() -> Self {
        Self {
            max_section_tokens: 2_000,
            max_total_tokens: 12_000,
        }
    }
}

/// Settings of [`FileSessionNotes`](super::file::FileSessionNotes).
#[derive(Clone)]
pub struct SessionNotesConfig {
    /// `<base>/projects/<slug>`: the notes live in `<project_dir>/<session-id>/session-memory/`.
    /// Resolve it with the memory crate's path resolution; this module derives nothing itself.
    pub project_dir: PathBuf,
    /// `<base>/session-memory/config`: `template.md` and `prompt.md` found here replace the
    /// defaults. `None` uses the defaults.
    pub custom_dir: Option<PathBuf>,
    /// Whether updates run at all (the host's switch). Default true.
    pub enabled: bool,
    /// When to update.
    pub thresholds: UpdateThresholds,
    /// Size caps and the condense reminder.
    pub caps: NotesCaps,
    /// Model calls the updater may make. Default 6.
    pub max_update_turns: u32,
    /// Estimator for the notes' size.
    pub counter: Arc<dyn TokenCounter>,
}

impl std::fmt::Debug for SessionNotesConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionNotesConfig")
            .field("project_dir", &self.project_dir)
            .field("custom_dir", &self.custom_dir)
            .field("enabled", &self.enabled)
            .field("thresholds", &self.thresholds)
            .field("caps", &self.caps)
            .field("max_update_turns", &self.max_update_turns)
            .finish_non_exhaustive()
    }
}

impl SessionNotesConfig {
    /// Defaults for a project dir.
    pub fn new(project_dir: impl Into<PathBuf>) -> Self {
        Self {
            project_dir: project_dir.into(),
            custom_dir: None,
            enabled: true,
            thresholds: UpdateThresholds::default(),
            caps: NotesCaps::default(),
            max_update_turns: 6,
            counter: Arc::new(CharEstimator),
        }
    }

    /// Use the custom template/prompt dir of a config home: `<base>/session-memory/config`.
    pub fn with_config_home(mut self, base: impl Into<PathBuf>) -> Self {
        self.custom_dir = Some(base.into().join("session-memory").join("config"));
        self
    }

    /// The directory of one session: `<project_dir>/<session_id>` (its notes, and the full text
    /// of tool results cut during compaction).
    pub fn session_dir(&self, session_id: &str) -> PathBuf {
        self.project_dir.join(session_id)
    }

    /// The notes file of one session.
    pub fn notes_path(&self, session_id: &str) -> PathBuf {
        self.session_dir(session_id)
            .join("session-memory")
            .join("summary.md")
    }
}
