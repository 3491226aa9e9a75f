//! [`TranscriptHook`]: the writer, as a hook on the agent loop.

use crate::file::{TranscriptDir, TranscriptRecord};
use memloop_core::message::{Message, Role};
use memloop_core::model::ModelResponse;
use memloop_core::{Hook, HookContext, hooks::PendingAttachment};
use std::sync::Mutex;

/// Writes the main agent's conversation to `<dir>/<session id>.jsonl`, append-only, one message
/// per line, as the conversation grows.
///
/// It appends every message not written yet after each model response (the turn's answer
/// included) and at the next turn's start (what a failed turn left). A message is written once it can no
/// longer change (attachments land on the newest user message, so that one waits for the model
/// call that follows it). After a compaction or `Agent::clear` it writes a reset line and, for
/// a compaction, the compacted conversation, so the conversation after the last reset is the
/// one to resume.
///
/// Resuming: started on a conversation whose start is already this session's transcript (the
/// host rebuilt the agent from [`Transcript::conversation`](crate::Transcript::conversation)),
/// it appends only what is new; on any other conversation under an existing session id it
/// writes a `resume` reset first. A write that fails is logged and retried at the next hook
/// point; it never fails the turn.
#[derive(Debug)]
pub struct TranscriptHook {
    dir: TranscriptDir,
    /// Messages of the current conversation already written; `None` before the first write.
    written: Mutex<Option<usize>>,
}

impl TranscriptHook {
    /// A writer into `dir`.
    pub fn new(dir: TranscriptDir) -> Self {
        Self {
            dir,
            written: Mutex::new(None),
        }
    }

    /// Where it writes.
    pub fn dir(&self) -> &TranscriptDir {
        &self.dir
    }

    /// Where this writer stands on first use: how much of `messages` the session's transcript
    /// already holds, and the reset to write first when it holds another conversation.
    fn start(&self, session: &str, messages: &[Message]) -> (usize, Option<TranscriptRecord>) {
        let existing = match self.dir.load(session) {
            Ok(t) => t.conversation(),
            Err(_) => return (0, None),
        };
        let prefix = existing.len() <= messages.len()
            && existing.iter().zip(messages).all(|(a, b)| a.id == b.id);
        if prefix {
            (existing.len(), None)
        } else {
            (0, Some(TranscriptRecord::reset(session, "resume")))
        }
    }

    /// Append `messages[written..upto]`.
    fn sync(&self, ctx: &HookContext, settled_only: bool) {
        let Ok(mut written) = self.written.lock() else {
            return;
        };
        let messages = &ctx.messages;
        let (from, reset) = match *written {
            Some(n) => (n.min(messages.len()), None),
            None => self.start(&ctx.session_id, messages),
        };
        let mut upto = messages.len();
        if settled_only && messages.last().is_some_and(|m| m.role == Role::User) {
            upto -= 1;
        }
        if from >= upto && reset.is_none() {
            *written = Some(from);
            return;
        }
        let mut records: Vec<TranscriptRecord> = reset.into_iter().collect();
        records.extend(
            messages[from..upto.max(from)]
                .iter()
                .filter_map(|m| TranscriptRecord::for_message(&ctx.session_id, m).ok()),
        );
        match self.dir.append(&ctx.session_id, &records) {
            Ok(()) => *written = Some(upto.max(from)),
            Err(e) => {
                tracing::warn!(error = %e, "transcript write failed; retried at the next turn");
                // The reset is written again next time: the state stays "not started".
                if written.is_some() {
                    *written = Some(from);
                }
            }
        }
    }

    /// A reset line, then the whole current conversation.
    fn restart(&self, ctx: &HookContext, reason: &str) {
        let Ok(mut written) = self.written.lock() else {
            return;
        };
        let mut records = vec![TranscriptRecord::reset(&ctx.session_id, reason)];
        records.extend(
            ctx.messages
                .iter()
                .filter_map(|m| TranscriptRecord::for_message(&ctx.session_id, m).ok()),
        );
        match self.dir.append(&ctx.session_id, &records) {
            Ok(()) => *written = Some(ctx.messages.len()),
            Err(e) => tracing::warn!(error = %e, reason, "transcript reset failed"),
        }
    }
}

#[async_trait::async_trait]
impl Hook for TranscriptHook {
    async fn on_turn_start(
        &self,
        ctx: &HookContext,
        _user_text: &str,
    ) -> Option<PendingAttachment> {
        self.sync(ctx, true);
        None
    }

    async fn after_sampling(&self, ctx: &HookContext, _response: &ModelResponse) {
        self.sync(ctx, false);
    }

    async fn on_compacted(&self, ctx: &HookContext) {
        self.restart(ctx, "compaction");
    }

    async fn on_cleared(&self, ctx: &HookContext) {
        self.restart(ctx, "clear");
    }
}
