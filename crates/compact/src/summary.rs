//! Strategy 2: LLM summary compaction, the fallback: one forked call, retried with the oldest
//! API rounds dropped when the prompt itself is too long. The fork declares the parent's tools
//! (the summarised history holds tool calls, which the APIs accept only alongside tool
//! declarations, and the same tools keep the parent's cached prefix) and its default gate
//! denies every call.

use crate::config::SummaryCompactConfig;
use crate::rounds::drop_oldest_rounds;
use memloop_core::compaction::CompactionError;
use memloop_core::{
    AgentError, HookContext,
    fork::ForkedAgentBuilder,
    message::{Message, MessageKind},
    model::ModelError,
    tokens::TokenCounter,
};
use memloop_text::render_template;
use std::sync::Arc;

/// The instruction sent to the summarizer.
pub const SUMMARY_PROMPT: &str = include_str!("../templates/summary_prompt.md");
/// Wrapper of the summary in the new conversation (variable `summary`).
pub const SUMMARY_MESSAGE: &str = include_str!("../templates/summary_message.md");

/// Summarize `ctx.messages` and return the new conversation: boundary marker + summary message.
pub async fn summary_compaction(
    ctx: &HookContext,
    cfg: &SummaryCompactConfig,
    counter: &dyn TokenCounter,
) -> Result<Vec<Message>, CompactionError> {
    let mut messages: Vec<Message> = ctx.messages.as_ref().clone();
    let mut retries = 0;
    let summary = loop {
        let mut base = ctx.clone();
        base.messages = Arc::new(messages.clone());
        let run = ForkedAgentBuilder::new(base, "compact_summary")
            .max_turns(1)
            .max_tokens(cfg.max_output_tokens)
            .build()
            .run(SUMMARY_PROMPT)
            .await;
        match run {
            Ok(out) => break out.final_text,
            Err(AgentError::Model(ModelError::ContextTooLong { excess_tokens, .. })) => {
                if retries >= cfg.max_retries {
                    return Err(CompactionError::TooLong {
                        dropped_attempts: retries,
                    });
                }
                retries += 1;
                messages = drop_oldest_rounds(&messages, excess_tokens, cfg.drop_fraction, counter)
                    .ok_or(CompactionError::TooLong {
                        dropped_attempts: retries,
                    })?;
                tracing::info!(
                    retries,
                    kept = messages.len(),
                    "summary prompt too long; dropped the oldest rounds"
                );
            }
            Err(AgentError::Cancelled) => return Err(CompactionError::Cancelled),
            // The fork already trimmed and cut its request and still could not fit.
            Err(AgentError::ContextBlocked(_)) => {
                return Err(CompactionError::TooLong {
                    dropped_attempts: retries,
                });
            }
            Err(e) => return Err(CompactionError::Summarizer(Box::new(e))),
        }
    };
    if summary.trim().is_empty() {
        return Err(CompactionError::EmptySummary);
    }
    let boundary = Message::user("Conversation compacted: earlier messages replaced by a summary.")
        .with_kind(MessageKind::CompactBoundary);
    let text = render_template(SUMMARY_MESSAGE, &[("summary", summary.trim())]);
    let summary = Message::user(text.trim_end()).with_kind(MessageKind::CompactSummary);
    Ok(vec![boundary, summary])
}
