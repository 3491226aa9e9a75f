//! Compaction settings, the threshold arithmetic and the env switches.
//!
//! Effective window = context window − min(max output tokens, 20,000, a quarter of the window);
//! auto-compact 13,000 below it but never below half of it (then lowered further, never raised,
//! by a percentage override); warning 20,000 below the auto-compact threshold but never below
//! three quarters of it; blocking 3,000
//! below the effective window but never below three quarters of it. The floors keep small
//! windows (8K local models) usable instead of compacting or blocking every request.

use memloop_host::env::EnvVars;
use std::time::Duration;

/// `MEMLOOP_DISABLE_COMPACT`: turns all compaction off.
pub const ENV_DISABLE_COMPACT: &str = "MEMLOOP_DISABLE_COMPACT";
/// `MEMLOOP_DISABLE_AUTO_COMPACT`: turns automatic compaction off (manual still works).
pub const ENV_DISABLE_AUTO_COMPACT: &str = "MEMLOOP_DISABLE_AUTO_COMPACT";
/// `MEMLOOP_AUTOCOMPACT_PCT`: auto-compact at this percentage of the effective window (only
/// lowers the threshold).
pub const ENV_AUTOCOMPACT_PCT: &str = "MEMLOOP_AUTOCOMPACT_PCT";

/// Bounds of session-memory compaction: how much recent conversation is kept verbatim, how the
/// notes are cut, and how long to wait for an in-flight notes update.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SessionMemoryCompactConfig {
    /// Use the session notes at all. Default true.
    pub enabled: bool,
    /// Keep at least this many tokens of recent messages. Default 10,000.
    pub min_tokens: u64,
    /// Keep at least this many messages with text. Default 5.
    pub min_text_messages: usize,
    /// Keep at most this many tokens (unless one tool pair forces more). Default 40,000.
    pub max_tokens: u64,
    /// Each notes section is cut to about this many characters. Default 8,000.
    pub max_section_chars: usize,
    /// Wait at most this long for an in-flight notes update. Default 15 s.
    pub wait_for_update: Duration,
    /// Do not wait for an update that started longer ago than this. Default 60 s.
    pub stale_update: Duration,
    /// Poll interval while waiting. Default 1 s.
    pub poll_interval: Duration,
}

impl Default for SessionMemoryCompactConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            min_tokens: 10_000,
            min_text_messages: 5,
            max_tokens: 40_000,
            max_section_chars: 8_000,
            wait_for_update: Duration::from_secs(15),
            stale_update: Duration::from_secs(60),
            poll_interval: Duration::from_secs(1),
        }
    }
}

/// The LLM summary fallback.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SummaryCompactConfig {
    /// Retries after a prompt-too-long answer. Default 3.
    pub max_retries: u32,
    /// Share of API rounds dropped per retry when the provider does not say by how much the
    /// prompt is too long. Default 0.2.
    pub drop_fraction: f64,
    /// `max_tokens` of the summary request. Default 8,192.
    pub max_output_tokens: u32,
}

impl Default for SummaryCompactConfig {
    fn default() -> Self {
        Self {
            max_retries: 3,
            drop_fraction: 0.2,
            max_output_tokens: 8_192,
        }
    }
}

/// Every compaction setting: window, thresholds, switches, circuit breaker and both strategies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompactConfig {
    /// The model's context window. Default 200,000.
    pub context_window: u64,
    /// The model's max output tokens. Default 32,000.
    pub max_output_tokens: u64,
    /// At most this much output is reserved from the window. Default 20,000.
    pub output_reserve_cap: u64,
    /// Auto-compact this far below the effective window. Default 13,000.
    pub autocompact_buffer: u64,
    /// Warn this far below the auto-compact threshold. Default 20,000.
    pub warning_buffer: u64,
    /// Block requests this far below the effective window. Default 3,000.
    pub blocking_buffer: u64,
    /// Auto-compact at this percentage of the effective window when lower than the default
    /// threshold (`MEMLOOP_AUTOCOMPACT_PCT`). Default none.
    pub autocompact_pct: Option<f64>,
    /// All compaction off (`MEMLOOP_DISABLE_COMPACT`). Default false.
    pub disabled: bool,
    /// Automatic compaction off, manual still allowed (`MEMLOOP_DISABLE_AUTO_COMPACT`).
    pub auto_disabled: bool,
    /// Consecutive failures that open the circuit breaker. Default 3.
    pub max_consecutive_failures: u32,
    /// Session-memory compaction.
    pub session_memory: SessionMemoryCompactConfig,
    /// LLM summary compaction.
    pub summary: SummaryCompactConfig,
}

impl Default for CompactConfig {
    fn default() -> Self {
        Self {
            context_window: 200_000,
            max_output_tokens: 32_000,
            output_reserve_cap: 20_000,
            autocompact_buffer: 13_000,
            warning_buffer: 20_000,
            blocking_buffer: 3_000,
            autocompact_pct: None,
            disabled: false,
            auto_disabled: false,
            max_consecutive_failures: 3,
            session_memory: SessionMemoryCompactConfig::default(),
            summary: SummaryCompactConfig::default(),
        }
    }
}

/// The derived limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    /// Context window minus the output reserve.
    pub effective_window: u64,
    /// Auto-compact at or above this.
    pub auto_compact: u64,
    /// Warn at or above this.
    pub warning: u64,
    /// Refuse to send at or above this.
    pub blocking: u64,
}

/// Where a conversation size sits relative to the thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ContextLevel {
    /// Below the warning level.
    Ok,
    /// At or above the warning level.
    Warning,
    /// At or above the auto-compact threshold.
    Compact,
    /// At or above the blocking limit.
    Blocking,
}

impl CompactConfig {
    /// Defaults for a model with this window and output cap.
    pub fn for_model(context_window: u64, max_output_tokens: u64) -> Self {
        Self {
            context_window,
            max_output_tokens,
            ..Self::default()
        }
    }

    /// Apply the env switches `MEMLOOP_DISABLE_COMPACT`, `MEMLOOP_DISABLE_AUTO_COMPACT` and
    /// `MEMLOOP_AUTOCOMPACT_PCT`, read from an injected environment
    /// ([`EnvVars::from_process`] in production, a map in tests). A malformed percentage is
    /// ignored with a warning.
    pub fn with_env(mut self, env: &EnvVars) -> Self {
        if env.switch(ENV_DISABLE_COMPACT) {
            self.disabled = true;
        }
        if env.switch(ENV_DISABLE_AUTO_COMPACT) {
            self.auto_disabled = true;
        }
        if let Some(v) = env.get(ENV_AUTOCOMPACT_PCT) {
            match v.trim().parse::<f64>() {
                Ok(p) if p > 0.0 && p <= 100.0 => self.autocompact_pct = Some(p),
                _ => {
                    tracing::warn!(value = %v, "ignoring {ENV_AUTOCOMPACT_PCT}: expected a number in (0, 100]")
                }
            }
        }
        self
    }

    /// The limits.
    ///
    /// ```
    /// use memloop_compact::CompactConfig;
    /// let t = CompactConfig::for_model(200_000, 32_000).thresholds();
    /// assert_eq!(t.effective_window, 180_000);
    /// assert_eq!(t.auto_compact, 167_000);
    /// assert_eq!(t.warning, 147_000);
    /// assert_eq!(t.blocking, 177_000);
    /// ```
    pub fn thresholds(&self) -> Thresholds {
        self.thresholds_for(self.context_window)
    }

    /// The limits for a window other than the configured one (a window learned from a provider).
    ///
    /// ```
    /// use memloop_compact::CompactConfig;
    /// let t = CompactConfig::for_model(200_000, 8_192).thresholds_for(8_192);
    /// assert_eq!(t.effective_window, 6_144);
    /// assert_eq!((t.auto_compact, t.blocking), (3_072, 4_608));
    /// ```
    pub fn thresholds_for(&self, context_window: u64) -> Thresholds {
        let reserve = self
            .max_output_tokens
            .min(self.output_reserve_cap)
            .min(context_window / 4);
        let effective = context_window.saturating_sub(reserve);
        let mut auto = effective
            .saturating_sub(self.autocompact_buffer)
            .max(effective / 2);
        if let Some(pct) = self.autocompact_pct {
            let by_pct = (effective as f64 * pct / 100.0).floor() as u64;
            auto = auto.min(by_pct);
        }
        Thresholds {
            effective_window: effective,
            auto_compact: auto,
            warning: auto.saturating_sub(self.warning_buffer).max(auto / 4 * 3),
            blocking: effective
                .saturating_sub(self.blocking_buffer)
                .max(effective / 4 * 3),
        }
    }
}

impl Thresholds {
    /// Classify a conversation size.
    pub fn level(&self, tokens: u64) -> ContextLevel {
        if tokens >= self.blocking {
            ContextLevel::Blocking
        } else if tokens >= self.auto_compact {
            ContextLevel::Compact
        } else if tokens >= self.warning {
            ContextLevel::Warning
        } else {
            ContextLevel::Ok
        }
    }
}
