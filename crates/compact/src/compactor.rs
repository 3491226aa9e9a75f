//! The [`Compactor`]: threshold checks, the circuit breaker, and the strategies in order.

use crate::breaker::CircuitBreaker;
use crate::config::{CompactConfig, ContextLevel, Thresholds};
use crate::session_memory::session_memory_compaction;
use crate::summary::summary_compaction;
use async_trait::async_trait;
use memloop_core::{
    HookContext,
    compaction::{CompactionError, CompactionOutcome, CompactionTrigger, ContextCompactor},
    events::AgentEvent,
    fit::{cut_oversized, fit_messages},
    invariants::check_invariants,
    tokens::{CharEstimator, TokenCounter, estimate_messages},
    window::ContextWindow,
};
use memloop_session_notes::SessionMemory;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Strategy name of session-memory compaction.
pub const STRATEGY_SESSION_MEMORY: &str = "session_memory";
/// Strategy name of LLM summary compaction.
pub const STRATEGY_SUMMARY: &str = "summary";
/// Strategy name of the last resort, when not even the summary request fits the window: the
/// newest messages that fit under the auto-compact threshold (leaving room for the system prompt
/// and tools), the largest of them cut in the middle; older turns are dropped, not summarised.
pub const STRATEGY_CUT: &str = "cut";

/// Compacts the conversation once it reaches the auto-compact threshold (by default 13,000
/// tokens below the effective window): session-memory compaction first, the LLM summary when
/// that declines, and when not even the summary request fits, the conversation with its
/// oversized messages cut ([`STRATEGY_CUT`]).
///
/// ```
/// use memloop_compact::{CompactConfig, Compactor};
/// let c = Compactor::new(CompactConfig::for_model(200_000, 8_192));
/// assert_eq!(c.thresholds().auto_compact, 200_000 - 8_192 - 13_000);
/// ```
pub struct Compactor {
    config: CompactConfig,
    memory: Option<Arc<dyn SessionMemory>>,
    counter: Arc<dyn TokenCounter>,
    breaker: Mutex<CircuitBreaker>,
    warned_turn: Mutex<Option<u64>>,
    window: ContextWindow,
    spill_dir: Option<PathBuf>,
}

impl std::fmt::Debug for Compactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compactor")
            .field("config", &self.config)
            .field("session_memory", &self.memory.is_some())
            .finish_non_exhaustive()
    }
}

impl Compactor {
    /// A compactor without session memory (LLM summary only) and the chars/4 estimator.
    pub fn new(config: CompactConfig) -> Self {
        Self {
            config,
            memory: None,
            counter: Arc::new(CharEstimator),
            breaker: Mutex::new(CircuitBreaker::default()),
            warned_turn: Mutex::new(None),
            window: ContextWindow::new(config.context_window),
            spill_dir: None,
        }
    }

    /// Plan with this shared context-window handle instead of one made from
    /// `config.context_window` (builder style).
    pub fn with_context_window(mut self, window: ContextWindow) -> Self {
        self.window = window;
        self
    }

    /// Keep the full text of tool results cut during compaction under
    /// `dir/tool-results/<tool_use_id>.txt` (builder style; use the session directory). Without
    /// it, the cut marker says the full output was not kept.
    pub fn with_spill_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.spill_dir = Some(dir.into());
        self
    }

    /// The context-window handle (shared with the agent when it has none of its own).
    pub fn window(&self) -> &ContextWindow {
        &self.window
    }

    /// The most tokens one message may keep through a compaction: the session-memory keep
    /// maximum, at most half the auto-compact threshold. Larger messages are cut in the middle.
    pub fn message_cap(&self) -> u64 {
        self.config
            .session_memory
            .max_tokens
            .min(self.thresholds().auto_compact / 2)
            .max(1)
    }

    /// Use the session notes as the summary when possible (builder style).
    pub fn with_session_memory(mut self, memory: Arc<dyn SessionMemory>) -> Self {
        self.memory = Some(memory);
        self
    }

    /// Use this estimator for kept-message sizes (builder style). Use the agent's.
    pub fn with_token_counter(mut self, counter: Arc<dyn TokenCounter>) -> Self {
        self.counter = counter;
        self
    }

    /// The settings.
    pub fn config(&self) -> &CompactConfig {
        &self.config
    }

    /// The derived limits, for the current (possibly learned) window.
    pub fn thresholds(&self) -> Thresholds {
        self.config.thresholds_for(self.window.tokens())
    }

    /// Consecutive failures so far.
    pub fn consecutive_failures(&self) -> u32 {
        self.breaker.lock().map(|b| b.failures()).unwrap_or(0)
    }

    fn warn_once_per_turn(&self, ctx: &HookContext, message: String) {
        if let Ok(mut w) = self.warned_turn.lock() {
            if *w != Some(ctx.turn) {
                *w = Some(ctx.turn);
                tracing::warn!(%message, "context size");
                ctx.emit(AgentEvent::Warning { message });
            }
        }
    }

    /// Run the strategies in order, no threshold or breaker checks.
    /// Messages larger than [`message_cap`](Self::message_cap) are cut in the middle first.
    pub async fn compact(&self, ctx: &HookContext) -> Result<CompactionOutcome, CompactionError> {
        let threshold = self.thresholds().auto_compact;
        // What the requests carry besides the messages (system prompt, tool specs), as far as
        // the context size tells: the cut fallback must leave room for it.
        let overhead = ctx
            .context_tokens
            .saturating_sub(estimate_messages(self.counter.as_ref(), &ctx.messages));
        let mut cut_ctx;
        let mut ctx = ctx;
        let mut messages = ctx.messages.as_ref().clone();
        let cut = cut_oversized(
            &mut messages,
            self.message_cap(),
            self.counter.as_ref(),
            self.spill_dir.as_deref(),
        );
        if cut > 0 {
            tracing::info!(
                cut,
                cap = self.message_cap(),
                "cut oversized messages in the middle"
            );
            cut_ctx = ctx.clone();
            cut_ctx.messages = Arc::new(messages);
            ctx = &cut_ctx;
        }
        let mut sm_cfg = self.config.session_memory;
        sm_cfg.max_tokens = sm_cfg.max_tokens.min(self.message_cap().max(threshold / 2));
        sm_cfg.min_tokens = sm_cfg.min_tokens.min(sm_cfg.max_tokens / 2);
        match session_memory_compaction(
            self.memory.as_ref(),
            &ctx.messages,
            self.counter.as_ref(),
            &sm_cfg,
            threshold,
            &ctx.cancel,
        )
        .await
        {
            Ok(c) => {
                return Ok(CompactionOutcome {
                    messages_kept: c.messages.len() - 2,
                    messages: c.messages,
                    strategy: STRATEGY_SESSION_MEMORY.into(),
                    tokens_before: ctx.context_tokens,
                    tokens_after: c.tokens_after,
                });
            }
            Err(reason) => {
                tracing::info!(%reason, "session-memory compaction declined; summarizing instead");
            }
        }
        let messages =
            match summary_compaction(ctx, &self.config.summary, self.counter.as_ref()).await {
                Ok(m) => m,
                // Not even the summary request fits (a tiny window, where the system prompt and
                // the summary instructions take most of it): the conversation fitted by dropping
                // its oldest turns and cutting what is left is what can be done, and it beats a
                // session blocked for good.
                Err(e @ CompactionError::TooLong { .. }) => {
                    return self.cut_outcome(ctx, overhead).ok_or(e);
                }
                Err(e) => return Err(e),
            };
        check_invariants(&messages).map_err(CompactionError::InvalidResult)?;
        Ok(CompactionOutcome {
            tokens_after: estimate_messages(self.counter.as_ref(), &messages),
            messages,
            strategy: STRATEGY_SUMMARY.into(),
            tokens_before: ctx.context_tokens,
            messages_kept: 0,
        })
    }
}

impl Compactor {
    /// The last resort ([`STRATEGY_CUT`]): `ctx`'s conversation fitted under the auto-compact
    /// threshold minus `overhead` (what the requests carry besides the messages), else under the
    /// blocking limit minus `overhead` (in a tiny window the system prompt and tools alone can
    /// exceed the threshold), by dropping the oldest turns (pairs intact, the newest turn kept)
    /// and cutting the largest messages in the middle. `None` when even that cannot fit.
    fn cut_outcome(&self, ctx: &HookContext, overhead: u64) -> Option<CompactionOutcome> {
        let limits = self.thresholds();
        let (budget, messages) = [limits.auto_compact, limits.blocking]
            .into_iter()
            .map(|limit| limit.saturating_sub(overhead))
            .filter(|&budget| budget > 0)
            .find_map(|budget| {
                fit_messages(
                    &ctx.messages,
                    budget,
                    self.counter.as_ref(),
                    self.spill_dir.as_deref(),
                )
                .map(|m| (budget, m))
            })?;
        check_invariants(&messages).ok()?;
        let tokens_after = estimate_messages(self.counter.as_ref(), &messages);
        tracing::info!(
            tokens_after,
            budget,
            overhead,
            kept = messages.len(),
            "no summary fits the window; kept the newest messages, cut to fit"
        );
        Some(CompactionOutcome {
            messages_kept: messages.len(),
            messages,
            strategy: STRATEGY_CUT.into(),
            tokens_before: ctx.context_tokens,
            tokens_after,
        })
    }
}

#[async_trait]
impl ContextCompactor for Compactor {
    /// Refuses requests at or over the blocking limit (effective window − 3,000 by default),
    /// unless compaction is disabled altogether (`MEMLOOP_DISABLE_COMPACT`): by then automatic
    /// compaction is off, has failed, or could not bring the context down.
    fn context_window(&self) -> Option<ContextWindow> {
        Some(self.window.clone())
    }

    fn admit(&self, context_tokens: u64) -> Result<(), String> {
        if self.config.disabled {
            return Ok(());
        }
        let t = self.thresholds();
        if t.level(context_tokens) == ContextLevel::Blocking {
            return Err(format!(
                "the context is at {context_tokens} tokens, at or over the blocking limit of {}; \
                 compact it (Agent::compact_now) or start a new session",
                t.blocking
            ));
        }
        Ok(())
    }

    async fn maybe_compact(
        &self,
        ctx: &HookContext,
        trigger: CompactionTrigger,
    ) -> Result<Option<CompactionOutcome>, CompactionError> {
        if self.config.disabled {
            return Ok(None);
        }
        // Another handle (a host that gave the agent its own) may know a smaller window.
        self.window.learn(ctx.window.tokens());
        let t = self.thresholds();
        if trigger == CompactionTrigger::Auto {
            let level = t.level(ctx.context_tokens);
            if self.config.auto_disabled {
                if level == ContextLevel::Blocking {
                    self.warn_once_per_turn(
                        ctx,
                        format!(
                            "context is at {} tokens, over the blocking limit of {}, and \
                             automatic compaction is off; compact manually",
                            ctx.context_tokens, t.blocking
                        ),
                    );
                }
                return Ok(None);
            }
            match level {
                ContextLevel::Ok => return Ok(None),
                ContextLevel::Warning => {
                    self.warn_once_per_turn(
                        ctx,
                        format!(
                            "context is at {} tokens; it will be compacted at {}",
                            ctx.context_tokens, t.auto_compact
                        ),
                    );
                    return Ok(None);
                }
                ContextLevel::Compact | ContextLevel::Blocking => {}
            }
        }
        if trigger != CompactionTrigger::Manual {
            let allowed = self
                .breaker
                .lock()
                .map(|mut b| b.allows(ctx.turn))
                .unwrap_or(true);
            if !allowed {
                tracing::debug!("compaction circuit breaker is open until the next user turn");
                return Ok(None);
            }
        }
        let span = tracing::info_span!("compact", ?trigger, tokens = ctx.context_tokens);
        match tracing::Instrument::instrument(self.compact(ctx), span).await {
            Ok(outcome) => {
                if let Ok(mut b) = self.breaker.lock() {
                    b.success();
                }
                Ok(Some(outcome))
            }
            Err(CompactionError::Cancelled) => {
                // The user stopped the turn: not a failure of compaction.
                tracing::info!("compaction cancelled");
                Err(CompactionError::Cancelled)
            }
            Err(e) => {
                let n = self
                    .breaker
                    .lock()
                    .map(|mut b| b.failure(ctx.turn, self.config.max_consecutive_failures))
                    .unwrap_or(1);
                ctx.emit(AgentEvent::CompactionFailed {
                    error: e.to_string(),
                    consecutive_failures: n,
                });
                Err(e)
            }
        }
    }
}
