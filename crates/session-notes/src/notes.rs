//! The [`SessionMemory`] trait compaction uses, and the types of its API.

use async_trait::async_trait;
use memloop_core::{HookContext, message::MessageId};
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use tokio::time::Instant;

/// Errors of session memory.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionMemoryError {
    /// The session id cannot name a directory.
    #[error("invalid session id `{0}`: use letters, digits, `-`, `_` or `.` (not `.`/`..`)")]
    InvalidSessionId(String),
    /// A file operation failed.
    #[error("session notes I/O on {path}: {source}")]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// An edit was refused (not found, ambiguous, or it touches a fixed line).
    #[error("edit refused: {0}")]
    InvalidEdit(String),
    /// The forked updater failed.
    #[error("session notes update failed: {0}")]
    Updater(String),
    /// Session memory is switched off.
    #[error("session memory is disabled")]
    Disabled,
}

/// What compaction needs to know about the notes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionNotes {
    /// The notes text.
    pub content: String,
    /// Where the full notes live (the summary points there when it truncates).
    pub path: PathBuf,
    /// Whether the content still equals the template (nothing written yet).
    pub is_template: bool,
    /// The newest message the notes cover, if known.
    pub last_summarized: Option<MessageId>,
    /// Since when an update is queued or running, if one is (tokio time).
    pub update_in_flight_since: Option<Instant>,
}

/// Why an update was requested.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateTrigger {
    /// The thresholds said so (post-sampling hook).
    Auto,
    /// The host asked (`/summary`): thresholds bypassed.
    Manual,
}

/// What one update did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdateReport {
    /// The notes file.
    pub path: PathBuf,
    /// Edits the updater applied.
    pub edits: u32,
    /// Tool calls the gate or the tool refused.
    pub refused: u32,
    /// The newest message the notes now cover.
    pub last_summarized: Option<MessageId>,
}

/// A queued update: runs when its turn in the FIFO comes.
pub type UpdateFuture =
    Pin<Box<dyn Future<Output = Result<UpdateReport, SessionMemoryError>> + Send + 'static>>;

/// Per-session notes, pluggable. Object-safe; compaction holds `Arc<dyn SessionMemory>`.
#[async_trait]
pub trait SessionMemory: Send + Sync {
    /// Whether session memory is switched on.
    fn is_enabled(&self) -> bool;

    /// The notes file.
    fn notes_path(&self) -> PathBuf;

    /// The current notes, `None` when no file exists yet.
    async fn current_notes(&self) -> Result<Option<String>, SessionMemoryError>;

    /// Whether the thresholds call for an update after the response that ends `ctx.messages`.
    fn should_update(&self, ctx: &HookContext) -> bool;

    /// Queue an update of the notes from `ctx`'s conversation. The FIFO place and the baselines
    /// are taken when this is called; the returned future runs the updater when its turn comes.
    /// Thresholds are not checked here.
    fn update(&self, ctx: &HookContext, trigger: UpdateTrigger) -> UpdateFuture;

    /// A manual update (`/summary`): bypasses the thresholds and waits for the result.
    async fn manual_update(&self, ctx: &HookContext) -> Result<UpdateReport, SessionMemoryError> {
        self.update(ctx, UpdateTrigger::Manual).await
    }

    /// Since when an update is queued or running, if one is (tokio time). Compaction waits for
    /// it (briefly, and not for an update that started long ago).
    fn update_in_flight_since(&self) -> Option<Instant>;

    /// What compaction needs, `None` when no notes file exists.
    async fn notes_for_compaction(&self) -> Result<Option<CompactionNotes>, SessionMemoryError>;

    /// After compaction: measure growth from `context_tokens` and treat `summarized` (the
    /// compaction summary message) as the newest covered message.
    fn reset_baselines(&self, context_tokens: u64, summarized: Option<MessageId>);
}
