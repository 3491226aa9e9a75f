//! [`ContextWindow`]: the model's context window as one shared handle.
//!
//! The agent, its compactor and every fork read the same handle. It starts at the configured
//! size; when a provider's context error names the real limit, whoever saw it calls
//! [`ContextWindow::learn`] and everyone adopts the smaller window from the next request on.
//! [`ContextWindow::output_budget`] clamps a request's `max_tokens` so prompt + output fit.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The context window assumed when nothing says otherwise.
pub const DEFAULT_CONTEXT_WINDOW: u64 = 200_000;

/// Output tokens a request is always allowed (unless it asked for fewer): enough for the model
/// to answer. A prompt so large that even this does not fit is the provider's to reject, and
/// the agent's reactive compaction to fix.
pub const MIN_OUTPUT_TOKENS: u32 = 512;

#[derive(Debug)]
struct Inner {
    configured: u64,
    /// 0 = nothing learned.
    learned: AtomicU64,
}

/// The context window, shared (cloning shares the handle).
///
/// ```
/// use memloop_core::window::ContextWindow;
/// let w = ContextWindow::new(200_000);
/// let seen_by_a_fork = w.clone();
/// assert!(seen_by_a_fork.learn(8_192)); // a provider said: 8,192 tokens
/// assert_eq!(w.tokens(), 8_192);
/// assert!(!w.learn(16_000)); // a larger limit never widens it
/// // 6,000 tokens of prompt leave 8,192 - 6,000 - 512 (margin) = 1,680 for output.
/// assert_eq!(w.output_budget(6_000, 8_192), 1_680);
/// // A prompt that leaves nothing still gets the floor.
/// assert_eq!(w.output_budget(9_000, 8_192), 512);
/// ```
#[derive(Debug, Clone)]
pub struct ContextWindow {
    inner: Arc<Inner>,
}

impl Default for ContextWindow {
    fn default() -> Self {
        Self::new(DEFAULT_CONTEXT_WINDOW)
    }
}

impl ContextWindow {
    /// A handle starting at `tokens` (the configured or documented window of the model).
    pub fn new(tokens: u64) -> Self {
        Self {
            inner: Arc::new(Inner {
                configured: tokens.max(1),
                learned: AtomicU64::new(0),
            }),
        }
    }

    /// The window to plan with: the learned limit when one was learned, else the configured one.
    pub fn tokens(&self) -> u64 {
        match self.learned() {
            Some(l) => l.min(self.inner.configured),
            None => self.inner.configured,
        }
    }

    /// The window this handle was created with.
    pub fn configured(&self) -> u64 {
        self.inner.configured
    }

    /// The limit a provider reported, if any.
    pub fn learned(&self) -> Option<u64> {
        match self.inner.learned.load(Ordering::Acquire) {
            0 => None,
            l => Some(l),
        }
    }

    /// Adopt `limit` (a window a provider reported) if it is smaller than the current one.
    /// Returns whether the window changed. Zero is ignored.
    pub fn learn(&self, limit: u64) -> bool {
        if limit == 0 || limit >= self.tokens() {
            return false;
        }
        let prev = self
            .inner
            .learned
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |cur| {
                (cur == 0 || limit < cur).then_some(limit)
            });
        if prev.is_ok() {
            tracing::info!(limit, "adopted the context window the provider reported");
        }
        prev.is_ok()
    }

    /// A safety margin kept free of prompt and output: token estimates are approximate.
    /// One sixteenth of the window, at most 4,096 tokens.
    pub fn margin(&self) -> u64 {
        (self.tokens() / 16).min(4_096)
    }

    /// Tokens a prompt may use so that `min(wanted, MIN_OUTPUT_TOKENS)` of output still fits.
    pub fn prompt_budget(&self, wanted_output: u32) -> u64 {
        let floor = u64::from(wanted_output.min(self.output_floor()));
        self.tokens().saturating_sub(self.margin() + floor)
    }

    fn output_floor(&self) -> u32 {
        // Never more than a quarter of a tiny window.
        u32::try_from(self.tokens() / 4)
            .unwrap_or(u32::MAX)
            .clamp(1, MIN_OUTPUT_TOKENS)
    }

    /// The `max_tokens` to send with a prompt of `prompt_tokens` when `wanted` was asked for:
    /// `wanted`, lowered so prompt + output + [`margin`](Self::margin) fit the window, but never
    /// below the floor ([`MIN_OUTPUT_TOKENS`], or `wanted` if smaller).
    pub fn output_budget(&self, prompt_tokens: u64, wanted: u32) -> u32 {
        let room = self
            .tokens()
            .saturating_sub(prompt_tokens.saturating_add(self.margin()));
        let room = u32::try_from(room).unwrap_or(u32::MAX);
        wanted.min(room.max(self.output_floor()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learning_only_narrows_and_is_shared() {
        let w = ContextWindow::new(200_000);
        assert_eq!(w.learned(), None);
        assert!(!w.learn(0));
        assert!(!w.learn(300_000));
        let other = w.clone();
        assert!(other.learn(16_384));
        assert!(w.learn(8_192));
        assert_eq!((other.tokens(), w.learned()), (8_192, Some(8_192)));
        assert_eq!(w.configured(), 200_000);
    }

    #[test]
    fn output_budget_fits_the_window_with_a_floor() {
        let w = ContextWindow::new(8_192);
        assert_eq!(w.margin(), 512);
        assert_eq!(w.output_budget(100, 1_000), 1_000);
        assert_eq!(w.output_budget(100, 8_192), 8_192 - 100 - 512);
        assert_eq!(w.output_budget(8_000, 8_192), MIN_OUTPUT_TOKENS);
        assert_eq!(w.output_budget(8_000, 100), 100);
        assert_eq!(w.prompt_budget(8_192), 8_192 - 512 - 512);
        let tiny = ContextWindow::new(1_000);
        assert_eq!(tiny.output_budget(2_000, 4_096), 250);
    }
}
