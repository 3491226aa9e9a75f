//! The [`Agent`] and its main loop, and what a turn returns ([`TurnOutcome`]).
//!
//! One user turn: turn-start hooks start background work (recall) → loop { consume settled
//! attachments → maybe compact → check invariants → call the model → post-sampling hooks → run
//! tool calls through the permission gate } until a response has no tool calls → stop hooks fire
//! in the background.

use crate::Hook;
use crate::background::{BackgroundTasks, DrainReport};
use crate::compaction::{CompactionOutcome, CompactionTrigger, ContextCompactor};
use crate::config::AgentConfig;
use crate::context::HookContext;
use crate::error::AgentError;
use crate::events::{AgentEvent, EventSink, ScopedSink};
use crate::hooks::PendingAttachment;
use crate::invariants::{RepairFn, check_invariants, provider_view};
use crate::loop_step::{LoopStep, ToolOutcome};
use crate::message::{ContentBlock, Message, Role, Usage};
use crate::model::{Model, ModelError, ModelResponse, StopReason};
use crate::prompt::SystemPrompt;
use crate::tokens::ConversationTokens;
use crate::tool::{AgentKind, PermissionGate, ToolContext, ToolRegistry};
pub use crate::turn_loop::TurnStop;
use crate::turn_loop::{Conversation, LoopSpec, Prepared, run_loop};
use crate::window::ContextWindow;
use async_trait::async_trait;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The result of [`Agent::run_turn`].
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    /// Text of the final assistant response.
    pub text: String,
    /// Model calls made.
    pub iterations: u32,
    /// How it ended.
    pub stop: TurnStop,
    /// Why the last response stopped: `MaxTokens` means the answer was cut off by the output
    /// cap, `Refusal` that the provider refused. `None` when the iteration guard ended the turn
    /// before a response.
    pub stop_reason: Option<StopReason>,
    /// Usage summed over the turn's model calls.
    pub usage: Usage,
}

/// The main agent. See the module docs for the loop.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use memloop_testkit::{ScriptStep, ScriptedModel};
/// use memloop_core::AgentBuilder;
/// use std::sync::Arc;
///
/// let model = ScriptedModel::new().then(ScriptStep::text("Hello!"));
/// let mut agent = AgentBuilder::new(Arc::new(model)).build();
/// let outcome = agent.run_turn("hi").await.unwrap();
/// assert_eq!(outcome.text, "Hello!");
/// # }
/// ```
pub struct Agent {
    pub(crate) model: Arc<dyn Model>,
    pub(crate) config: AgentConfig,
    pub(crate) tools: ToolRegistry,
    pub(crate) gate: Arc<dyn PermissionGate>,
    pub(crate) system: SystemPrompt,
    pub(crate) hooks: Vec<Arc<dyn Hook>>,
    pub(crate) compactor: Option<Arc<dyn ContextCompactor>>,
    /// The current turn's sink: the host's, stamped with the agent and turn.
    pub(crate) events: Arc<dyn EventSink>,
    /// The host's sink.
    pub(crate) host_events: Arc<dyn EventSink>,
    /// Where the conversation stood before the last turn's user message, while that turn is
    /// the last thing that happened and it was cancelled.
    pub(crate) rollback_point: Option<usize>,
    pub(crate) repair: Option<RepairFn>,
    pub(crate) background: BackgroundTasks,
    /// Shared so hook snapshots are cheap; mutated copy-on-write.
    pub(crate) messages: Arc<Vec<Message>>,
    pub(crate) tokens: ConversationTokens,
    pub(crate) turn: u64,
    pub(crate) recent_tools: Vec<String>,
    pub(crate) last_system: Arc<Vec<String>>,
    pub(crate) session_cancel: CancellationToken,
    pub(crate) window: ContextWindow,
    /// The agent's whole run (`invoke_agent`, see [`crate::telemetry`]): every turn's span is
    /// its child.
    pub(crate) run_span: tracing::Span,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("session_id", &self.config.session_id)
            .field("turn", &self.turn)
            .field("messages", &self.messages.len())
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// The conversation so far.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The config.
    pub fn config(&self) -> &AgentConfig {
        &self.config
    }

    /// The context-window handle shared with the compactor and forks.
    pub fn context_window(&self) -> &ContextWindow {
        &self.window
    }

    /// The tracked background tasks.
    pub fn background(&self) -> &BackgroundTasks {
        &self.background
    }

    /// Conversation size in tokens (the newest response's reported usage plus an estimate of the
    /// messages after it; cached).
    pub fn context_tokens(&mut self) -> u64 {
        self.tokens.count(&self.messages)
    }

    /// A token that cancels the whole session: the running turn, and hooks watching it.
    pub fn session_cancellation(&self) -> CancellationToken {
        self.session_cancel.clone()
    }

    /// Forget the conversation and the cached system sections (`/clear`), and tell every hook
    /// ([`Hook::on_cleared`]: recall forgets what it surfaced and refills its budget).
    pub async fn clear(&mut self) {
        self.messages = Arc::new(Vec::new());
        self.rollback_point = None;
        self.tokens.reset();
        self.system.invalidate().await;
        self.last_system = Arc::new(Vec::new());
        self.recent_tools.clear();
        if !self.hooks.is_empty() {
            let ctx = self.hook_context(self.session_cancel.child_token());
            for hook in self.hooks.clone() {
                hook.on_cleared(&ctx).await;
            }
        }
    }

    /// Wait for background work (stop hooks, extraction, ...) up to `timeout`.
    pub async fn drain(&self, timeout: Duration) -> DrainReport {
        self.background.drain(timeout).await
    }

    /// [`drain`](Self::drain) with the configured default timeout.
    pub async fn drain_default(&self) -> DrainReport {
        self.drain(self.config.drain_timeout).await
    }

    /// Run one user turn with a fresh cancellation token. `input` is the user's message: a
    /// `&str`/`String`, or a whole [`Message`] with images and documents (its role is set to
    /// user).
    pub async fn run_turn(&mut self, input: impl Into<Message>) -> Result<TurnOutcome, AgentError> {
        let cancel = self.session_cancel.child_token();
        self.run_turn_with_cancel(input, cancel).await
    }

    /// After a cancelled turn, remove what it added to the conversation (the user message and
    /// any partial exchange), so the host can let the user edit and resend. Returns whether it
    /// did: only right after a cancelled turn, and not once the conversation was compacted.
    pub fn rollback_cancelled_turn(&mut self) -> bool {
        let Some(point) = self.rollback_point.take() else {
            return false;
        };
        if point > self.messages.len() {
            return false;
        }
        Arc::make_mut(&mut self.messages).truncate(point);
        self.tokens.reset();
        true
    }

    fn hook_context(&mut self, cancel: CancellationToken) -> HookContext {
        let context_tokens = self.tokens.count(&self.messages);
        HookContext {
            session_id: self.config.session_id.clone(),
            turn: self.turn,
            agent: AgentKind::Main,
            cwd: self.config.cwd.clone(),
            model: self.model.clone(),
            system: self.last_system.clone(),
            messages: self.messages.clone(),
            tools: self.tools.clone(),
            context_tokens,
            recent_tools: self.recent_tools.clone(),
            window: self.window.clone(),
            events: self.events.clone(),
            background: self.background.clone(),
            cancel,
            capture: self.config.capture_content.clone(),
        }
    }

    /// Run one user turn; cancelling `cancel` stops it (and its recall prefetch).
    ///
    /// Every turn ends with exactly one terminal event: `TurnFinished`, `TurnFailed` or
    /// `TurnCancelled`.
    pub async fn run_turn_with_cancel(
        &mut self,
        input: impl Into<Message>,
        cancel: CancellationToken,
    ) -> Result<TurnOutcome, AgentError> {
        self.turn += 1;
        self.events = Arc::new(ScopedSink::main(self.host_events.clone(), self.turn));
        self.rollback_point = None;
        let start = self.messages.len();
        let span = tracing::info_span!(
            parent: &self.run_span,
            "turn",
            session = %self.config.session_id,
            turn = self.turn
        );
        let mut message = input.into();
        message.role = Role::User;
        let result = tracing::Instrument::instrument(self.turn_inner(message, cancel), span).await;
        let terminal = match &result {
            Ok(outcome) => AgentEvent::TurnFinished {
                turn: self.turn,
                iterations: outcome.iterations,
                stop_reason: outcome.stop_reason,
                usage: outcome.usage,
            },
            Err(AgentError::Cancelled) => {
                self.rollback_point = Some(start);
                AgentEvent::TurnCancelled { turn: self.turn }
            }
            Err(e) => AgentEvent::TurnFailed {
                turn: self.turn,
                error: e.to_string(),
            },
        };
        self.events.emit(terminal);
        result
    }

    async fn turn_inner(
        &mut self,
        user_message: Message,
        cancel: CancellationToken,
    ) -> Result<TurnOutcome, AgentError> {
        self.events
            .emit(AgentEvent::TurnStarted { turn: self.turn });
        let user_text = user_message.text();
        let user_text = user_text.as_str();
        Arc::make_mut(&mut self.messages).push(user_message);
        if self.last_system.is_empty() {
            self.last_system = Arc::new(self.system.render().await);
        }

        let ctx = self.hook_context(cancel.clone());
        let mut pending: Vec<PendingAttachment> = Vec::new();
        for hook in self.hooks.clone() {
            if let Some(p) = hook.on_turn_start(&ctx, user_text).await {
                pending.push(p);
            }
        }
        // Give prefetches that are already done a chance to land before the first request.
        tokio::task::yield_now().await;

        let spec = LoopSpec {
            step: self.step(cancel.clone()),
            window: &self.window.clone(),
            max_iterations: self.config.max_iterations,
            main: true,
        };
        let mut transcript = MainConversation {
            agent: self,
            cancel,
            pending,
            tool_log: BTreeMap::new(),
        };
        let result = run_loop(&spec, &mut transcript).await;
        let MainConversation {
            pending, tool_log, ..
        } = transcript;
        drop(pending);
        self.recent_tools = tool_log
            .into_iter()
            .filter(|(_, failed)| !failed)
            .map(|(name, _)| name)
            .collect();
        let outcome = result.map(|o| TurnOutcome {
            text: o.text,
            iterations: o.iterations,
            stop: o.stop,
            stop_reason: o.stop_reason,
            usage: o.usage,
        })?;
        if outcome.stop == TurnStop::Completed {
            self.fire_stop_hooks();
        }
        Ok(outcome)
    }

    /// The main agent's step: its tools and gate, the turn's sink, the configured limits.
    fn step(&self, cancel: CancellationToken) -> LoopStep {
        LoopStep {
            model: self.model.clone(),
            tools: self.tools.clone(),
            gate: self.gate.clone(),
            events: self.events.clone(),
            tool_ctx: ToolContext {
                session_id: self.config.session_id.clone(),
                cwd: self.config.cwd.clone(),
                agent: AgentKind::Main,
                cancel,
            },
            purpose: "main".to_owned(),
            max_tokens: self.config.max_tokens,
            options: self.config.request.clone(),
            tool_timeout: self.config.tool_timeout,
            max_tool_output_bytes: self.config.max_tool_output_bytes,
            spill_dir: self.config.spill_dir.clone(),
            window: self.window.clone(),
            background: self.background.clone(),
            depth: 0,
            withheld: BTreeMap::new(),
            capture: self.config.capture_content.clone(),
        }
    }

    fn validate(&mut self) -> Result<(), AgentError> {
        if !self.config.validate_invariants {
            return Ok(());
        }
        match check_invariants(&self.messages) {
            Ok(()) => Ok(()),
            Err(err) => match &self.repair {
                Some(repair) => {
                    tracing::warn!(%err, "conversation invalid; applying the repair pass");
                    let messages = Arc::unwrap_or_clone(std::mem::take(&mut self.messages));
                    self.messages = Arc::new(repair(messages));
                    self.tokens.reset();
                    check_invariants(&self.messages).map_err(AgentError::InvalidConversation)
                }
                None => Err(AgentError::InvalidConversation(err)),
            },
        }
    }

    async fn attach_settled(&mut self, pending: &mut Vec<PendingAttachment>) {
        let mut i = 0;
        while i < pending.len() {
            if !pending[i].is_ready() {
                i += 1;
                continue;
            }
            let p = pending.swap_remove(i);
            if let Some(att) = p.wait().await {
                let rendered = att.render();
                self.events.emit(AgentEvent::AttachmentAdded {
                    kind: att.kind.clone(),
                    bytes: att.text.len(),
                });
                let messages = Arc::make_mut(&mut self.messages);
                match messages.last_mut() {
                    Some(last) if last.role == Role::User => {
                        last.content.push(ContentBlock::text(rendered));
                        // The message changed in place: its cached estimate is stale.
                        self.tokens.invalidate_from(messages.len() - 1);
                    }
                    _ => messages.push(Message::user(rendered)),
                }
            }
        }
    }

    fn admit(&mut self) -> Result<(), AgentError> {
        let Some(compactor) = &self.compactor else {
            return Ok(());
        };
        let tokens = self.tokens.count(&self.messages);
        compactor.admit(tokens).map_err(|reason| {
            tracing::warn!(%reason, "request blocked");
            self.events.emit(AgentEvent::Warning {
                message: reason.clone(),
            });
            AgentError::ContextBlocked(reason)
        })
    }

    /// The light step before compaction: clear old tool results when the conversation is above
    /// the configured trigger (see [`crate::clearing`]).
    fn clear_old_tool_results(&mut self) {
        let Some(cfg) = self.config.tool_result_clearing.clone() else {
            return;
        };
        let tokens_before = self.tokens.count(&self.messages);
        if tokens_before <= cfg.trigger_tokens(self.window.tokens()) {
            return;
        }
        let report = crate::clearing::clear_old_tool_results(
            Arc::make_mut(&mut self.messages).as_mut_slice(),
            cfg.keep_recent,
            &cfg.placeholder,
        );
        if report.cleared == 0 {
            return;
        }
        self.tokens.reset();
        let tokens_after = self.tokens.count(&self.messages);
        tracing::info!(
            cleared = report.cleared,
            tokens_before,
            tokens_after,
            "old tool results cleared"
        );
        self.events.emit(AgentEvent::ToolResultsCleared {
            cleared: report.cleared,
            tokens_before,
            tokens_after,
        });
    }

    async fn maybe_compact(&mut self, trigger: CompactionTrigger, cancel: &CancellationToken) {
        let Some(compactor) = self.compactor.clone() else {
            return;
        };
        let ctx = self.hook_context(cancel.clone());
        match compactor.maybe_compact(&ctx, trigger).await {
            Ok(Some(outcome)) => self.apply_compaction(outcome, cancel).await,
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "compaction failed"),
        }
    }

    /// Compact now (the host's `/compact`), whatever the size. Returns whether it happened.
    pub async fn compact_now(&mut self) -> Result<bool, AgentError> {
        let Some(compactor) = self.compactor.clone() else {
            return Ok(false);
        };
        let cancel = self.session_cancel.child_token();
        let ctx = self.hook_context(cancel.clone());
        match compactor
            .maybe_compact(&ctx, CompactionTrigger::Manual)
            .await
        {
            Ok(Some(outcome)) => {
                self.apply_compaction(outcome, &cancel).await;
                Ok(true)
            }
            Ok(None) => Ok(false),
            Err(e) => Err(AgentError::Compaction(e)),
        }
    }

    async fn apply_compaction(&mut self, outcome: CompactionOutcome, cancel: &CancellationToken) {
        tracing::info!(strategy = %outcome.strategy, before = outcome.tokens_before, after = outcome.tokens_after, "compacted");
        let before = self.hook_context(cancel.clone());
        for hook in self.hooks.clone() {
            hook.on_compacting(&before).await;
        }
        self.messages = Arc::new(outcome.messages);
        self.rollback_point = None;
        self.tokens.reset();
        self.system.invalidate().await;
        self.last_system = Arc::new(self.system.render().await);
        self.events.emit(AgentEvent::Compacted {
            strategy: outcome.strategy,
            tokens_before: outcome.tokens_before,
            tokens_after: outcome.tokens_after,
            messages_kept: outcome.messages_kept,
        });
        let ctx = self.hook_context(cancel.clone());
        for hook in self.hooks.clone() {
            hook.on_compacted(&ctx).await;
        }
    }

    fn fire_stop_hooks(&mut self) {
        if self.hooks.is_empty() {
            return;
        }
        let ctx = self.hook_context(self.session_cancel.clone());
        for (i, hook) in self.hooks.iter().enumerate() {
            let hook = hook.clone();
            let ctx = ctx.clone();
            self.background.spawn(
                format!("stop-hook-{i}"),
                async move { hook.on_stop(ctx).await },
            );
        }
    }
}

/// The main agent's conversation: the loop's messages are the agent's own, compacted and
/// validated before every request, with the hooks seeing each response.
struct MainConversation<'a> {
    agent: &'a mut Agent,
    cancel: CancellationToken,
    pending: Vec<PendingAttachment>,
    /// Tool name → whether any call of it failed this turn.
    tool_log: BTreeMap<String, bool>,
}

#[async_trait]
impl Conversation for MainConversation<'_> {
    async fn prepare(&mut self, step: &LoopStep) -> Result<Prepared, AgentError> {
        let agent = &mut *self.agent;
        agent.attach_settled(&mut self.pending).await;
        agent.clear_old_tool_results();
        agent
            .maybe_compact(CompactionTrigger::Auto, &self.cancel)
            .await;
        agent.admit()?;
        agent.validate()?;
        let system = agent.system.render().await;
        agent.last_system = Arc::new(system.clone());
        let context_tokens = agent.tokens.count(&agent.messages);
        Ok(Prepared {
            prompt_tokens: step.request_overhead(&system) + context_tokens,
            system,
            messages: provider_view(&agent.messages),
            context_tokens,
        })
    }

    async fn too_long(
        &mut self,
        error: ModelError,
        learned: bool,
        retried: bool,
    ) -> Result<(), AgentError> {
        // Once per turn, and only when something can change: a compactor, or a smaller window.
        if retried || !(self.agent.compactor.is_some() || learned) {
            return Err(AgentError::Model(error));
        }
        self.agent
            .maybe_compact(CompactionTrigger::PromptTooLong, &self.cancel)
            .await;
        Ok(())
    }

    async fn keep_response(&mut self, response: &ModelResponse, assistant: &Message) {
        let agent = &mut *self.agent;
        // An empty reply is never stored: it would make every later request invalid.
        if !assistant.content.is_empty() {
            Arc::make_mut(&mut agent.messages).push(assistant.clone());
        }
        if !agent.hooks.is_empty() {
            let ctx = agent.hook_context(self.cancel.clone());
            for hook in agent.hooks.clone() {
                hook.after_sampling(&ctx, response).await;
            }
        }
    }

    fn keep_results(&mut self, results: Message, outcomes: Vec<ToolOutcome>) {
        Arc::make_mut(&mut self.agent.messages).push(results);
        record_outcomes(&mut self.tool_log, outcomes);
    }
}

fn record_outcomes(log: &mut BTreeMap<String, bool>, outcomes: Vec<ToolOutcome>) {
    for o in outcomes {
        let failed = log.entry(o.name).or_insert(false);
        *failed |= o.is_error || o.denied;
    }
}
