//! [`FileSessionNotes`]: the notes as a Markdown file per session.

use super::config::{Baselines, SessionNotesConfig, UpdateSignal};
use super::edit_tool::{NOTES_UPDATER_PURPOSE, NotesEditTool, NotesUpdaterGate};
use super::fs::{create_if_absent, create_private_dir};
use super::notes::{
    CompactionNotes, SessionMemory, SessionMemoryError, UpdateFuture, UpdateReport, UpdateTrigger,
};
use super::queue::FifoQueue;
use super::template::{
    CONDENSE_REMINDER, DEFAULT_TEMPLATE, DEFAULT_UPDATE_PROMPT, oversized_sections,
};
use crate::events::NotesEvent;
use async_trait::async_trait;
use memloop_core::{
    HookContext,
    message::{Message, MessageId, Role},
};
use memloop_text::render_template;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// File-backed session notes: `<project_dir>/<session-id>/session-memory/summary.md` (dir 0700,
/// file 0600), created from the template on first use and never overwritten.
///
/// ```
/// use memloop_session_notes::{FileSessionNotes, SessionMemory, SessionNotesConfig};
/// let dir = std::env::temp_dir().join("memloop-doc-projects-slug");
/// let sm = FileSessionNotes::new(SessionNotesConfig::new(&dir), "session-1").unwrap();
/// assert!(sm.notes_path().ends_with("session-1/session-memory/summary.md"));
/// assert!(FileSessionNotes::new(SessionNotesConfig::new(&dir), "../x").is_err());
/// ```
#[derive(Clone)]
pub struct FileSessionNotes {
    inner: Arc<Inner>,
}

struct Inner {
    config: SessionNotesConfig,
    path: PathBuf,
    baselines: Mutex<Baselines>,
    queue: FifoQueue,
}

impl std::fmt::Debug for FileSessionNotes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileSessionNotes")
            .field("path", &self.inner.path)
            .finish_non_exhaustive()
    }
}

fn valid_session_id(id: &str) -> bool {
    !id.is_empty()
        && id != "."
        && id != ".."
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> SessionMemoryError + '_ {
    move |source| SessionMemoryError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl FileSessionNotes {
    /// Notes for one session. The session id becomes a directory name, so it must be a plain
    /// name (letters, digits, `-`, `_`, `.`).
    pub fn new(config: SessionNotesConfig, session_id: &str) -> Result<Self, SessionMemoryError> {
        if !valid_session_id(session_id) {
            return Err(SessionMemoryError::InvalidSessionId(session_id.to_owned()));
        }
        let path = config.notes_path(session_id);
        Ok(Self {
            inner: Arc::new(Inner {
                config,
                path,
                baselines: Mutex::new(Baselines::default()),
                queue: FifoQueue::default(),
            }),
        })
    }

    /// The settings.
    pub fn config(&self) -> &SessionNotesConfig {
        &self.inner.config
    }

    /// A copy of the current baselines.
    pub fn baselines(&self) -> Baselines {
        self.inner
            .baselines
            .lock()
            .map(|b| b.clone())
            .unwrap_or_default()
    }

    /// Create the notes file from the template if it does not exist. Returns whether it was
    /// created.
    pub async fn ensure_notes_file(&self) -> Result<bool, SessionMemoryError> {
        self.inner.ensure_notes_file().await
    }

    /// The template in use (custom `template.md` or the default).
    pub async fn template(&self) -> String {
        self.inner.custom("template.md", DEFAULT_TEMPLATE).await
    }

    /// The update prompt for `notes` (custom `prompt.md` or the default, substituted once, plus
    /// the condense reminder when the notes are over their caps).
    pub async fn update_prompt(&self, notes: &str) -> String {
        self.inner.update_prompt(notes).await
    }
}

impl Inner {
    async fn custom(&self, name: &str, default: &str) -> String {
        if let Some(dir) = &self.config.custom_dir {
            match tokio::fs::read_to_string(dir.join(name)).await {
                Ok(text) => return text,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(file = %dir.join(name).display(), error = %e, "cannot read custom session-memory file; using the default")
                }
            }
        }
        default.to_owned()
    }

    async fn ensure_notes_file(&self) -> Result<bool, SessionMemoryError> {
        let dir = self.path.parent().unwrap_or(&self.path);
        create_private_dir(dir).await.map_err(io_err(dir))?;
        let template = self.custom("template.md", DEFAULT_TEMPLATE).await;
        create_if_absent(&self.path, &template)
            .await
            .map_err(io_err(&self.path))
    }

    async fn update_prompt(&self, notes: &str) -> String {
        let prompt = self.custom("prompt.md", DEFAULT_UPDATE_PROMPT).await;
        let path = self.path.display().to_string();
        let mut out = render_template(&prompt, &[("currentNotes", notes), ("notesPath", &path)]);
        let caps = self.config.caps;
        let (over, total) =
            oversized_sections(self.config.counter.as_ref(), notes, caps.max_section_tokens);
        if !over.is_empty() || total > caps.max_total_tokens {
            let list: String = over
                .iter()
                .map(|s| format!("- {} (about {} tokens)\n", s.header, s.tokens))
                .collect();
            let list = if list.is_empty() {
                "- (no single section; the file as a whole is too long)\n".to_owned()
            } else {
                list
            };
            out.push_str(&render_template(
                CONDENSE_REMINDER,
                &[
                    ("totalTokens", &total.to_string()),
                    ("maxTotalTokens", &caps.max_total_tokens.to_string()),
                    ("maxSectionTokens", &caps.max_section_tokens.to_string()),
                    ("sections", &list),
                ],
            ));
        }
        out
    }

    fn signal(&self, ctx: &HookContext, b: &Baselines) -> UpdateSignal {
        let messages = ctx.messages.as_slice();
        let after = b
            .update_marker
            .as_ref()
            .and_then(|id| messages.iter().position(|m| &m.id == id))
            .map_or(0, |i| i + 1);
        let tool_calls = messages[after.min(messages.len())..]
            .iter()
            .map(|m| m.tool_uses().count())
            .sum();
        let last_turn_without_tools = messages
            .iter()
            .rev()
            .find(|m| m.role == Role::Assistant)
            .is_some_and(|m| !m.has_tool_use());
        UpdateSignal {
            context_tokens: ctx.context_tokens,
            tool_calls_since_update: tool_calls,
            last_turn_without_tools,
        }
    }

    async fn run_update(
        self: Arc<Self>,
        ctx: HookContext,
        snapshot: Option<MessageId>,
    ) -> Result<UpdateReport, SessionMemoryError> {
        self.ensure_notes_file().await?;
        let notes = tokio::fs::read_to_string(&self.path)
            .await
            .map_err(io_err(&self.path))?;
        let prompt = self.update_prompt(&notes).await;
        // The parent's tools, plus the edit tool when the parent does not declare it already
        // (then the fork misses the parent's cached prefix); only the edit tool may be called.
        let outcome = ctx
            .fork(NOTES_UPDATER_PURPOSE)
            .tool(Arc::new(NotesEditTool::new(self.path.clone())))
            .gate(Arc::new(NotesUpdaterGate::new(self.path.clone())))
            .max_turns(self.config.max_update_turns)
            .build()
            .run(prompt)
            .await
            .map_err(|e| SessionMemoryError::Updater(e.to_string()))?;
        if let Ok(mut b) = self.baselines.lock() {
            b.last_summarized = snapshot.clone();
        }
        let edits = outcome.tool_calls.saturating_sub(outcome.denied_calls);
        tracing::info!(path = %self.path.display(), tool_calls = outcome.tool_calls, "session notes updated");
        ctx.emit(NotesEvent::NotesUpdated {
            path: self.path.display().to_string(),
        });
        Ok(UpdateReport {
            path: self.path.clone(),
            edits,
            refused: outcome.denied_calls,
            last_summarized: snapshot,
        })
    }
}

#[async_trait]
impl SessionMemory for FileSessionNotes {
    fn is_enabled(&self) -> bool {
        self.inner.config.enabled
    }

    fn notes_path(&self) -> PathBuf {
        self.inner.path.clone()
    }

    async fn current_notes(&self) -> Result<Option<String>, SessionMemoryError> {
        match tokio::fs::read_to_string(&self.inner.path).await {
            Ok(t) => Ok(Some(t)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err(&self.inner.path)(e)),
        }
    }

    fn should_update(&self, ctx: &HookContext) -> bool {
        if !self.is_enabled() || !ctx.is_main() {
            return false;
        }
        let Ok(b) = self.inner.baselines.lock() else {
            return false;
        };
        let signal = self.inner.signal(ctx, &b);
        self.inner.config.thresholds.is_due(&b, signal)
    }

    fn update(&self, ctx: &HookContext, trigger: UpdateTrigger) -> UpdateFuture {
        if !self.is_enabled() {
            return Box::pin(async { Err(SessionMemoryError::Disabled) });
        }
        let snapshot = ctx.messages.last().map(|m: &Message| m.id.clone());
        if let Ok(mut b) = self.inner.baselines.lock() {
            b.initialized = true;
            b.tokens_at_last_update = ctx.context_tokens;
            b.update_marker = snapshot.clone();
        }
        tracing::debug!(
            ?trigger,
            tokens = ctx.context_tokens,
            "session notes update queued"
        );
        let ticket = self.inner.queue.enqueue();
        let inner = self.inner.clone();
        let ctx = ctx.clone();
        Box::pin(async move {
            let queue = inner.queue.clone();
            queue.run(ticket, inner.run_update(ctx, snapshot)).await
        })
    }

    fn update_in_flight_since(&self) -> Option<tokio::time::Instant> {
        self.inner.queue.in_flight_since()
    }

    async fn notes_for_compaction(&self) -> Result<Option<CompactionNotes>, SessionMemoryError> {
        let Some(content) = self.current_notes().await? else {
            return Ok(None);
        };
        let template = self.inner.custom("template.md", DEFAULT_TEMPLATE).await;
        let last_summarized = self
            .inner
            .baselines
            .lock()
            .ok()
            .and_then(|b| b.last_summarized.clone());
        Ok(Some(CompactionNotes {
            is_template: content.trim() == template.trim(),
            content,
            path: self.inner.path.clone(),
            last_summarized,
            update_in_flight_since: self.inner.queue.in_flight_since(),
        }))
    }

    fn reset_baselines(&self, context_tokens: u64, summarized: Option<MessageId>) {
        if let Ok(mut b) = self.inner.baselines.lock() {
            b.tokens_at_last_update = context_tokens;
            b.update_marker = summarized.clone();
            b.last_summarized = summarized;
        }
    }
}
