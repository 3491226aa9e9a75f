//! Strategy 1: session-memory compaction, tried first. The session notes become the summary
//! and the most recent messages are kept verbatim.

use crate::config::SessionMemoryCompactConfig;
use crate::keep::{KeepBounds, KeepPlan, plan_keep};
use crate::notes::summary_text;
use memloop_core::CancellationToken;
use memloop_core::{
    invariants::check_invariants,
    message::{Message, MessageKind},
    tokens::{TokenCounter, estimate_message, estimate_messages},
};
use memloop_session_notes::{CompactionNotes, SessionMemory};
use std::sync::Arc;
use tokio::time::Instant;

/// Why session-memory compaction did not apply (the compactor then falls back to the LLM
/// summary).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DeclineReason {
    /// Switched off, or no session memory configured.
    #[error("session-memory compaction is disabled")]
    Disabled,
    /// No notes file exists yet.
    #[error("no session notes file")]
    NoNotesFile,
    /// The notes still equal the template: nothing was written yet.
    #[error("the session notes are still the empty template")]
    NotesAreTemplate,
    /// The notes say which message they cover last, but it is no longer in the conversation.
    #[error("the last summarized message {0} is no longer in the conversation")]
    LastSummarizedMissing(String),
    /// Even compacted, the conversation would be over the auto-compact threshold.
    #[error(
        "the compacted conversation ({tokens} tokens) would still be over the threshold ({threshold})"
    )]
    StillOverThreshold {
        /// Estimated tokens of the result.
        tokens: u64,
        /// The auto-compact threshold.
        threshold: u64,
    },
    /// The notes could not be read.
    #[error("cannot read the session notes: {0}")]
    NotesUnavailable(String),
    /// The result would break an API invariant (e.g. a conversation that was already broken).
    #[error("the compacted conversation breaks an invariant: {0}")]
    BrokenInvariants(String),
}

/// A planned session-memory compaction.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionMemoryCompaction {
    /// Boundary marker, summary, kept messages.
    pub messages: Vec<Message>,
    /// The keep plan.
    pub plan: KeepPlan,
    /// Estimated tokens of the result.
    pub tokens_after: u64,
}

/// Wait for an in-flight notes update: poll every `poll_interval` for at most `wait_for_update`,
/// and not at all for an update that started more than `stale_update` ago. Uses tokio time, so a
/// paused test clock drives it. Stops at once when `cancel` fires. Returns whether the wait ended
/// with no update in flight.
pub async fn wait_for_update(
    memory: &dyn SessionMemory,
    cfg: &SessionMemoryCompactConfig,
    cancel: &CancellationToken,
) -> bool {
    let began = Instant::now();
    loop {
        if cancel.is_cancelled() {
            tracing::debug!("stopped waiting for the session-notes update: cancelled");
            return false;
        }
        let Some(since) = memory.update_in_flight_since() else {
            return true;
        };
        if since.elapsed() > cfg.stale_update {
            tracing::info!(
                started_secs_ago = since.elapsed().as_secs(),
                "not waiting for a stale session-notes update"
            );
            return false;
        }
        if began.elapsed() >= cfg.wait_for_update {
            tracing::info!("gave up waiting for the session-notes update");
            return false;
        }
        let left = cfg.wait_for_update.saturating_sub(began.elapsed());
        tokio::select! {
            _ = cancel.cancelled() => {}
            _ = tokio::time::sleep(cfg.poll_interval.min(left)) => {}
        }
    }
}

/// Build the compacted conversation from `notes`, or say why not. Kept messages lose their
/// provider usage (it described the old, longer context).
pub fn plan_session_memory_compaction(
    messages: &[Message],
    notes: &CompactionNotes,
    counter: &dyn TokenCounter,
    cfg: &SessionMemoryCompactConfig,
    threshold: u64,
) -> Result<SessionMemoryCompaction, DeclineReason> {
    if notes.is_template {
        return Err(DeclineReason::NotesAreTemplate);
    }
    let last = match &notes.last_summarized {
        Some(id) => Some(
            messages
                .iter()
                .rposition(|m| &m.id == id)
                .ok_or_else(|| DeclineReason::LastSummarizedMissing(id.to_string()))?,
        ),
        None => None,
    };
    let tokens: Vec<u64> = messages
        .iter()
        .map(|m| estimate_message(counter, m))
        .collect();
    let bounds = KeepBounds {
        min_tokens: cfg.min_tokens,
        min_text_messages: cfg.min_text_messages,
        max_tokens: cfg.max_tokens,
    };
    let plan = plan_keep(messages, &tokens, last, bounds);
    let summary = Message::user(summary_text(
        &notes.content,
        &notes.path,
        cfg.max_section_chars,
    ))
    .with_kind(MessageKind::CompactSummary);
    let boundary = Message::user(format!(
        "Conversation compacted: {} earlier messages replaced by the session notes.",
        plan.start
    ))
    .with_kind(MessageKind::CompactBoundary);
    let mut out = Vec::with_capacity(messages.len() - plan.start + 2);
    out.push(boundary);
    out.push(summary);
    // Usage on kept responses measured the pre-compaction context; drop it so the next count is
    // an estimate of what is really left.
    out.extend(messages[plan.start..].iter().map(|m| {
        let mut m = m.clone();
        m.usage = None;
        m
    }));
    let tokens_after = estimate_messages(counter, &out[1..2]) + plan.tokens;
    if tokens_after >= threshold {
        return Err(DeclineReason::StillOverThreshold {
            tokens: tokens_after,
            threshold,
        });
    }
    check_invariants(&out).map_err(|e| DeclineReason::BrokenInvariants(e.to_string()))?;
    Ok(SessionMemoryCompaction {
        messages: out,
        plan,
        tokens_after,
    })
}

/// Strategy 1 end to end: checks, the wait (cut short by `cancel`), the plan.
pub async fn session_memory_compaction(
    memory: Option<&Arc<dyn SessionMemory>>,
    messages: &[Message],
    counter: &dyn TokenCounter,
    cfg: &SessionMemoryCompactConfig,
    threshold: u64,
    cancel: &CancellationToken,
) -> Result<SessionMemoryCompaction, DeclineReason> {
    let memory = match memory {
        Some(m) if cfg.enabled && m.is_enabled() => m,
        _ => return Err(DeclineReason::Disabled),
    };
    wait_for_update(memory.as_ref(), cfg, cancel).await;
    let notes = memory
        .notes_for_compaction()
        .await
        .map_err(|e| DeclineReason::NotesUnavailable(e.to_string()))?
        .ok_or(DeclineReason::NoNotesFile)?;
    plan_session_memory_compaction(messages, &notes, counter, cfg, threshold)
}
