//! The rig hook that runs memloop's per-turn memory around each prompt: recall before the first
//! model call, next to the user's message; once the run finished, the turn's messages to
//! memloop (extraction, the session notes).

use crate::convert;
use memloop::MemorySession;
use memloop::core::message::Message as MlMessage;
use rig_agent::agent::{
    AgentHook, HookContext, RunSettled, RunStart, RunStartAction, SettledOutcome,
};
use rig_core::completion::Message;
use rig_core::message::UserContent;
use std::sync::Arc;
use std::time::Duration;

/// How long a run waits for recall before its first model call, unless
/// [`MemoryHook::recall_deadline`] says otherwise.
pub const DEFAULT_RECALL_DEADLINE: Duration = Duration::from_secs(2);

/// The user's message as the session recorded it at this run's start (with what recall
/// attached), handed back to `after_turn` under the same id.
#[derive(Clone)]
struct TurnStart(MlMessage);

/// memloop's memory around each rig run, for `AgentBuilder::add_hook`:
///
/// - at the run's start ([`AgentHook::on_run_start`]) memloop's recall looks for the memories
///   relevant to the user's message ([`MemorySession::recall`]); what surfaced is added to the
///   prompt after the user's text, so every model call of the run sees it next to the message,
///   and a rig conversation memory keeps it;
/// - when the run finished with an answer ([`AgentHook::on_run_settled`]) its messages go to
///   [`MemorySession::after_turn`]: the session notes' check, then extraction in the
///   background.
///
/// A run that failed hands memloop nothing (memloop's own loop extracts only after a turn that
/// ended with an answer).
#[derive(Clone)]
pub struct MemoryHook {
    session: Arc<MemorySession>,
    deadline: Duration,
}

impl MemoryHook {
    /// The hook for `session`, recall waiting at most [`DEFAULT_RECALL_DEADLINE`].
    pub fn new(session: Arc<MemorySession>) -> Self {
        Self {
            session,
            deadline: DEFAULT_RECALL_DEADLINE,
        }
    }

    /// How long a run waits for recall before its first model call. rig cannot add context to
    /// a model call already under way, so what recall has not found by then is not in this run;
    /// memloop does not count it as surfaced, and a later turn may bring it.
    pub fn recall_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }
}

impl AgentHook for MemoryHook {
    fn name(&self) -> Option<String> {
        Some(format!("memloop(recall_deadline={:?})", self.deadline))
    }

    async fn on_run_start(&self, ctx: &HookContext, event: RunStart<'_>) -> RunStartAction {
        let (Message::User { content }, Some(text)) = (event.prompt, event.prompt.rag_text())
        else {
            return RunStartAction::continue_run();
        };
        let recalled = self.session.recall(&text, self.deadline).await;
        ctx.scratchpad().insert(TurnStart(recalled.message.clone()));
        if recalled.is_empty() {
            return RunStartAction::continue_run();
        }
        let mut content = content.clone();
        content.extend(recalled.blocks.into_iter().map(UserContent::text));
        RunStartAction::rewrite(Message::User { content })
    }

    async fn on_run_settled(&self, ctx: &HookContext, event: RunSettled<'_>) {
        let (SettledOutcome::Response(_), Some(messages)) = (event.outcome, event.messages) else {
            return;
        };
        let turn = match ctx.scratchpad().get::<TurnStart>() {
            // The prompt as the session has it (same id), then the rest of the run.
            Some(TurnStart(user)) => std::iter::once(user)
                .chain(convert::to_memloop(messages.get(1..).unwrap_or_default()))
                .collect::<Vec<_>>(),
            None => convert::to_memloop(messages),
        };
        self.session.after_turn(&turn).await;
    }
}
