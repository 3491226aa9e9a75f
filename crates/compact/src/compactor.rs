//! The [`Compactor`]: threshold checks, the circuit breaker, and the strategies in order.

use crate::breaker::CircuitBreaker;
use crate::config::{CompactConfig, ContextLevel, Thresholds};
use crate::policy::{
    CutStrategy, SessionMemoryStrategy, Strategy, StrategyInput, SummaryStrategy, run_policy,
};
use async_trait::async_trait;
use memloop_core::{
    HookContext,
    compaction::{CompactionError, CompactionOutcome, CompactionTrigger, ContextCompactor},
    events::AgentEvent,
    fit::cut_oversized,
    tokens::{CharEstimator, TokenCounter, estimate_messages},
    window::ContextWindow,
};
use memloop_session_notes::SessionMemory;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Compacts the conversation once it reaches the auto-compact threshold (by default 13,000
/// tokens below the effective window) by running its policy, an ordered list of strategies
/// ([`crate::policy`]). The default: session-memory compaction first, the LLM summary when
/// that declines, and when not even the summary request fits, the conversation with its
/// oversized messages cut ([`CompactionStrategy::Cut`](memloop_core::compaction::CompactionStrategy::Cut)).
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
    strategies: Option<Vec<Arc<dyn Strategy>>>,
}

impl std::fmt::Debug for Compactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compactor")
            .field("config", &self.config)
            .field("session_memory", &self.memory.is_some())
            .field("custom_policy", &self.strategies.is_some())
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
            strategies: None,
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
    pub fn with_session_notes(mut self, memory: Arc<dyn SessionMemory>) -> Self {
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

    /// Compact with this policy instead of the default (builder style): the strategies are
    /// tried in order until one produces a conversation (see [`crate::policy`]).
    ///
    /// ```
    /// use memloop_compact::policy::SummaryStrategy;
    /// use memloop_compact::{CompactConfig, Compactor};
    /// use std::sync::Arc;
    ///
    /// let config = CompactConfig::for_model(200_000, 8_192);
    /// let summary_only = Compactor::new(config).with_strategies(vec![Arc::new(SummaryStrategy::new(config.summary))]);
    /// assert_eq!(summary_only.strategies().len(), 1);
    /// ```
    pub fn with_strategies(mut self, strategies: Vec<Arc<dyn Strategy>>) -> Self {
        self.strategies = Some(strategies);
        self
    }

    /// The policy: the strategies set with [`with_strategies`](Self::with_strategies), else the
    /// default, session-memory compaction (over the notes of
    /// [`with_session_notes`](Self::with_session_notes)) → the LLM summary → the cut.
    ///
    /// ```
    /// use memloop_compact::{CompactConfig, Compactor};
    /// let c = Compactor::new(CompactConfig::for_model(200_000, 8_192));
    /// let names: Vec<String> = c.strategies().iter().map(|s| s.name().to_string()).collect();
    /// assert_eq!(names, ["session_memory", "summary", "cut"]);
    /// ```
    pub fn strategies(&self) -> Vec<Arc<dyn Strategy>> {
        match &self.strategies {
            Some(list) => list.clone(),
            None => vec![
                Arc::new(SessionMemoryStrategy::new(
                    self.memory.clone(),
                    self.config.session_memory,
                )),
                Arc::new(SummaryStrategy::new(self.config.summary)),
                Arc::new(CutStrategy),
            ],
        }
    }

    /// Run the policy's strategies in order, no threshold or breaker checks.
    /// Messages larger than [`message_cap`](Self::message_cap) are cut in the middle first.
    pub async fn compact(&self, ctx: &HookContext) -> Result<CompactionOutcome, CompactionError> {
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
        let input = StrategyInput {
            ctx,
            counter: self.counter.as_ref(),
            thresholds: self.thresholds(),
            message_cap: self.message_cap(),
            overhead,
            spill_dir: self.spill_dir.as_deref(),
        };
        run_policy(&self.strategies(), &input).await
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
        let span = tracing::info_span!(
            "compact",
            ?trigger,
            tokens = ctx.context_tokens,
            memloop.compact.strategy = tracing::field::Empty,
            memloop.compact.tokens_before = tracing::field::Empty,
            memloop.compact.tokens_after = tracing::field::Empty,
            memloop.compact.messages_kept = tracing::field::Empty,
            error.type = tracing::field::Empty,
        );
        let result = tracing::Instrument::instrument(self.compact(ctx), span.clone()).await;
        match &result {
            Ok(o) => {
                span.record("memloop.compact.strategy", o.strategy.as_str());
                span.record("memloop.compact.tokens_before", o.tokens_before);
                span.record("memloop.compact.tokens_after", o.tokens_after);
                span.record("memloop.compact.messages_kept", o.messages_kept as u64);
            }
            Err(_) => {
                span.record("error.type", "compaction_failed");
            }
        }
        match result {
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
