//! The compaction policy: an ordered list of [`Strategy`]s, tried in turn until one produces a
//! conversation. The default is [`SessionMemoryStrategy`] → [`SummaryStrategy`] →
//! [`CutStrategy`]; [`Compactor::with_strategies`](crate::Compactor::with_strategies) sets
//! another list (summary only, or a host strategy implementing [`Strategy`]).
//!
//! A strategy answers one of three ways:
//! - `Ok(Some(outcome))`: done, the agent adopts `outcome`;
//! - `Ok(None)`, or `Err(CompactionError::TooLong { .. })`: it does not apply here (declined, or
//!   its own request cannot fit the window); the next strategy is tried;
//! - any other error ends the attempt with that error (counted by the circuit breaker).
//!
//! When every strategy passed, the attempt fails with the last `TooLong` error, else
//! [`CompactionError::Declined`].

use crate::config::{SessionMemoryCompactConfig, SummaryCompactConfig, Thresholds};
use crate::notes_compaction::session_memory_compaction;
use crate::summary::summary_compaction;
use async_trait::async_trait;
use memloop_core::{
    HookContext,
    compaction::{CompactionError, CompactionOutcome, CompactionStrategy},
    fit::fit_messages,
    invariants::check_invariants,
    message::Message,
    tokens::{TokenCounter, estimate_messages},
};
use memloop_session_notes::SessionMemory;
use std::path::Path;
use std::sync::Arc;

/// What a [`Strategy`] gets from the [`Compactor`](crate::Compactor).
#[derive(Clone, Copy)]
pub struct StrategyInput<'a> {
    /// The agent's snapshot; `ctx.messages` is the conversation with messages over
    /// [`message_cap`](Self::message_cap) already cut in the middle, `ctx.context_tokens` the
    /// size before compaction.
    pub ctx: &'a HookContext,
    /// The compactor's token estimator.
    pub counter: &'a dyn TokenCounter,
    /// The limits for the current (possibly learned) window.
    pub thresholds: Thresholds,
    /// The most tokens one kept message may have.
    pub message_cap: u64,
    /// What the requests carry besides the messages (system prompt, tool specs), as far as the
    /// context size tells: a result must leave room for it.
    pub overhead: u64,
    /// Where the full text of a cut tool result is kept, if anywhere.
    pub spill_dir: Option<&'a Path>,
}

impl std::fmt::Debug for StrategyInput<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StrategyInput")
            .field("messages", &self.ctx.messages.len())
            .field("thresholds", &self.thresholds)
            .field("message_cap", &self.message_cap)
            .field("overhead", &self.overhead)
            .finish_non_exhaustive()
    }
}

impl StrategyInput<'_> {
    /// An outcome named for `strategy`, with the sizes filled in (`tokens_after` estimated with
    /// the compactor's counter).
    pub fn outcome(
        &self,
        strategy: CompactionStrategy,
        messages: Vec<Message>,
        messages_kept: usize,
    ) -> CompactionOutcome {
        CompactionOutcome {
            tokens_after: estimate_messages(self.counter, &messages),
            messages,
            strategy,
            tokens_before: self.ctx.context_tokens,
            messages_kept,
        }
    }
}

/// One way to compact a conversation; see the [module docs](self) for what its answers mean.
///
/// A host strategy that keeps only the newest two messages:
///
/// ```
/// use async_trait::async_trait;
/// use memloop_compact::policy::{Strategy, StrategyInput};
/// use memloop_compact::{CompactConfig, Compactor};
/// use memloop_core::compaction::{CompactionError, CompactionOutcome, CompactionStrategy};
/// use std::sync::Arc;
///
/// struct KeepLastTwo;
///
/// #[async_trait]
/// impl Strategy for KeepLastTwo {
///     fn name(&self) -> CompactionStrategy {
///         CompactionStrategy::custom("keep_last_two")
///     }
///     async fn compact(
///         &self,
///         input: &StrategyInput<'_>,
///     ) -> Result<Option<CompactionOutcome>, CompactionError> {
///         let all = &input.ctx.messages;
///         let kept = all[all.len().saturating_sub(2)..].to_vec();
///         Ok(Some(input.outcome(self.name(), kept, 2)))
///     }
/// }
///
/// let compactor = Compactor::new(CompactConfig::for_model(200_000, 8_192))
///     .with_strategies(vec![Arc::new(KeepLastTwo)]);
/// assert_eq!(compactor.strategies()[0].name(), "keep_last_two");
/// ```
#[async_trait]
pub trait Strategy: Send + Sync {
    /// The name outcomes and `Compacted` events carry.
    fn name(&self) -> CompactionStrategy;

    /// Try to compact `input.ctx.messages`.
    async fn compact(
        &self,
        input: &StrategyInput<'_>,
    ) -> Result<Option<CompactionOutcome>, CompactionError>;
}

/// Run `strategies` in order on `input` (see the [module docs](self)).
pub async fn run_policy(
    strategies: &[Arc<dyn Strategy>],
    input: &StrategyInput<'_>,
) -> Result<CompactionOutcome, CompactionError> {
    let mut too_long = None;
    for strategy in strategies {
        match strategy.compact(input).await {
            Ok(Some(outcome)) => return Ok(outcome),
            Ok(None) => {
                tracing::info!(strategy = %strategy.name(), "strategy declined; trying the next");
            }
            Err(e @ CompactionError::TooLong { .. }) => {
                tracing::info!(strategy = %strategy.name(), error = %e, "strategy does not fit; trying the next");
                too_long = Some(e);
            }
            Err(e) => return Err(e),
        }
    }
    Err(too_long.unwrap_or_else(|| {
        CompactionError::Declined(
            strategies
                .iter()
                .map(|s| s.name().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        )
    }))
}

/// Session-memory compaction: the session notes become the summary; the recent messages are kept
/// verbatim (see [`crate::strategies::session_memory_compaction`]). Declines without notes.
pub struct SessionMemoryStrategy {
    memory: Option<Arc<dyn SessionMemory>>,
    config: SessionMemoryCompactConfig,
}

impl std::fmt::Debug for SessionMemoryStrategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionMemoryStrategy")
            .field("memory", &self.memory.is_some())
            .field("config", &self.config)
            .finish()
    }
}

impl SessionMemoryStrategy {
    /// Over these notes (`None` always declines) with these bounds.
    pub fn new(memory: Option<Arc<dyn SessionMemory>>, config: SessionMemoryCompactConfig) -> Self {
        Self { memory, config }
    }
}

#[async_trait]
impl Strategy for SessionMemoryStrategy {
    fn name(&self) -> CompactionStrategy {
        CompactionStrategy::SessionNotes
    }

    async fn compact(
        &self,
        input: &StrategyInput<'_>,
    ) -> Result<Option<CompactionOutcome>, CompactionError> {
        let threshold = input.thresholds.auto_compact;
        let mut cfg = self.config;
        cfg.max_tokens = cfg.max_tokens.min(input.message_cap.max(threshold / 2));
        cfg.min_tokens = cfg.min_tokens.min(cfg.max_tokens / 2);
        match session_memory_compaction(
            self.memory.as_ref(),
            &input.ctx.messages,
            input.counter,
            &cfg,
            threshold,
            &input.ctx.cancel,
        )
        .await
        {
            Ok(c) => Ok(Some(CompactionOutcome {
                messages_kept: c.messages.len() - 2,
                messages: c.messages,
                strategy: self.name(),
                tokens_before: input.ctx.context_tokens,
                tokens_after: c.tokens_after,
            })),
            Err(reason) => {
                tracing::info!(%reason, "session-memory compaction declined");
                Ok(None)
            }
        }
    }
}

/// The LLM summary: one forked call, retried with the oldest rounds dropped (see
/// [`crate::strategies::summary_compaction`]). `TooLong` when not even that fits.
#[derive(Debug, Clone, Copy)]
pub struct SummaryStrategy {
    config: SummaryCompactConfig,
}

impl SummaryStrategy {
    /// With these retries and output cap.
    pub fn new(config: SummaryCompactConfig) -> Self {
        Self { config }
    }
}

#[async_trait]
impl Strategy for SummaryStrategy {
    fn name(&self) -> CompactionStrategy {
        CompactionStrategy::Summary
    }

    async fn compact(
        &self,
        input: &StrategyInput<'_>,
    ) -> Result<Option<CompactionOutcome>, CompactionError> {
        let messages = summary_compaction(input.ctx, &self.config, input.counter).await?;
        check_invariants(&messages).map_err(CompactionError::InvalidResult)?;
        Ok(Some(input.outcome(self.name(), messages, 0)))
    }
}

/// The last resort: the conversation fitted under the auto-compact threshold minus the request
/// overhead, else under the blocking limit minus the overhead (in a tiny window the system
/// prompt and tools alone can exceed the threshold), by dropping the oldest turns (pairs intact,
/// the newest turn kept) and cutting the largest messages in the middle. Declines when even that
/// cannot fit.
#[derive(Debug, Clone, Copy, Default)]
pub struct CutStrategy;

#[async_trait]
impl Strategy for CutStrategy {
    fn name(&self) -> CompactionStrategy {
        CompactionStrategy::Cut
    }

    async fn compact(
        &self,
        input: &StrategyInput<'_>,
    ) -> Result<Option<CompactionOutcome>, CompactionError> {
        let limits = input.thresholds;
        let overhead = input.overhead;
        let fitted = [limits.auto_compact, limits.blocking]
            .into_iter()
            .map(|limit| limit.saturating_sub(overhead))
            .filter(|&budget| budget > 0)
            .find_map(|budget| {
                fit_messages(&input.ctx.messages, budget, input.counter, input.spill_dir)
                    .map(|m| (budget, m))
            });
        let Some((budget, messages)) = fitted else {
            return Ok(None);
        };
        if check_invariants(&messages).is_err() {
            return Ok(None);
        }
        let kept = messages.len();
        let outcome = input.outcome(self.name(), messages, kept);
        tracing::info!(
            tokens_after = outcome.tokens_after,
            budget,
            overhead,
            kept,
            "no summary fits the window; kept the newest messages, cut to fit"
        );
        Ok(Some(outcome))
    }
}
