//! Retries with exponential backoff and jitter, shared by every HTTP provider.
//!
//! [`run_with_retry`] runs one attempt after another until it succeeds, fails with an error that
//! is not retryable ([`AttemptError::retryable`]: the server's `x-should-retry` verdict, else
//! [`ModelError::is_retryable`]), or runs out of attempts. Between attempts it
//! waits for the server's hint (`retry-after-ms`, then `retry-after` in seconds or as an HTTP
//! date) or, without a hint, for an exponential backoff with jitter. Each attempt is bounded by the
//! per-request timeout ([`ModelError::Timeout`]) and both attempts and waits end promptly with
//! [`ModelError::Cancelled`] when the cancellation token fires. All waiting goes through
//! `tokio::time`, so tests can drive it with a paused clock.

use memloop_core::model::ModelError;
use std::future::Future;
use std::time::{Duration, SystemTime};
use tokio_util::sync::CancellationToken;

/// How often and how long to retry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Total attempts, the first one included (at least 1 is always made).
    pub max_attempts: u32,
    /// Backoff before the second attempt; doubles on every further attempt.
    pub initial_backoff: Duration,
    /// Upper bound of the computed backoff.
    pub max_backoff: Duration,
    /// The longest server `retry-after` hint we accept. A longer hint ends the retries at once
    /// with the error, rather than blocking the caller for minutes.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    /// 4 attempts, 500 ms initial backoff, 30 s max backoff, retry-after hints up to 120 s.
    fn default() -> Self {
        Self {
            max_attempts: 4,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(120),
        }
    }
}

impl RetryPolicy {
    /// No retries: exactly one attempt.
    pub fn none() -> Self {
        Self {
            max_attempts: 1,
            ..Self::default()
        }
    }

    /// The backoff before attempt `attempt + 1` (`attempt` counts from 1), with "equal jitter":
    /// half the exponential delay is fixed, the other half scaled by `jitter` in `[0, 1]`.
    ///
    /// ```
    /// use memloop_providers::retry::RetryPolicy;
    /// use std::time::Duration;
    /// let p = RetryPolicy { initial_backoff: Duration::from_millis(100), ..RetryPolicy::default() };
    /// assert_eq!(p.backoff(1, 1.0), Duration::from_millis(100));
    /// assert_eq!(p.backoff(3, 0.0), Duration::from_millis(200));
    /// ```
    pub fn backoff(&self, attempt: u32, jitter: f64) -> Duration {
        let exp = attempt.saturating_sub(1).min(20);
        let full = self
            .initial_backoff
            .saturating_mul(1u32 << exp)
            .min(self.max_backoff);
        let jitter = if jitter.is_finite() {
            jitter.clamp(0.0, 1.0)
        } else {
            0.0
        };
        full / 2 + full.mul_f64(jitter) / 2
    }
}

/// A failed attempt: the error and the server's wait hint, if it sent one.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptError {
    /// What went wrong.
    pub error: ModelError,
    /// The server's `retry-after` hint.
    pub retry_after: Option<Duration>,
    /// The server's explicit verdict (`x-should-retry: true|false`), which overrides
    /// [`ModelError::is_retryable`] when present.
    pub should_retry: Option<bool>,
}

impl AttemptError {
    /// Whether the loop may try again: the server's `x-should-retry` verdict when it sent one,
    /// else [`ModelError::is_retryable`]. A cancellation is never retried.
    pub fn retryable(&self) -> bool {
        if self.error == ModelError::Cancelled {
            return false;
        }
        self.should_retry
            .unwrap_or_else(|| self.error.is_retryable())
    }
}

impl From<ModelError> for AttemptError {
    fn from(error: ModelError) -> Self {
        Self {
            error,
            retry_after: None,
            should_retry: None,
        }
    }
}

/// Parse the server's `x-should-retry` header (`true` or `false`, any case); `None` when absent
/// or anything else.
///
/// ```
/// use memloop_providers::retry::parse_should_retry;
/// use reqwest::header::{HeaderMap, HeaderValue};
/// let mut h = HeaderMap::new();
/// h.insert("x-should-retry", HeaderValue::from_static("false"));
/// assert_eq!(parse_should_retry(&h), Some(false));
/// ```
pub fn parse_should_retry(headers: &reqwest::header::HeaderMap) -> Option<bool> {
    let value = headers.get("x-should-retry")?.to_str().ok()?.trim();
    if value.eq_ignore_ascii_case("true") {
        Some(true)
    } else if value.eq_ignore_ascii_case("false") {
        Some(false)
    } else {
        None
    }
}

/// Parse the wait hint from response headers: `retry-after-ms` (milliseconds) wins over
/// `retry-after` (delta seconds, or an HTTP date compared with `now`). A date in the past gives
/// zero; unparsable values give `None`.
///
/// ```
/// use memloop_providers::retry::parse_retry_after;
/// use reqwest::header::{HeaderMap, HeaderValue};
/// use std::time::{Duration, SystemTime};
/// let mut h = HeaderMap::new();
/// h.insert("retry-after", HeaderValue::from_static("3"));
/// assert_eq!(parse_retry_after(&h, SystemTime::now()), Some(Duration::from_secs(3)));
/// ```
pub fn parse_retry_after(
    headers: &reqwest::header::HeaderMap,
    now: SystemTime,
) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    // try_from_secs_f64 rejects negative, NaN and out-of-range values instead of panicking.
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        if let Ok(d) = Duration::try_from_secs_f64(ms / 1000.0) {
            return Some(d);
        }
    }
    let value = header("retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).ok();
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

/// A uniform number in `[0, 1)` from the process's UUID generator (no extra RNG dependency).
fn jitter_unit() -> f64 {
    let bits = uuid::Uuid::new_v4().as_u128() as u64 >> 11;
    bits as f64 / (1u64 << 53) as f64
}

/// Run `attempt` until it succeeds or the policy says stop (see the module docs).
///
/// `attempt` receives the attempt number, starting at 1. `timeout` bounds each attempt.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use memloop_providers::retry::{RetryPolicy, run_with_retry};
/// use memloop_core::{CancellationToken, model::ModelError};
/// use std::time::Duration;
/// let policy = RetryPolicy { initial_backoff: Duration::from_millis(1), ..RetryPolicy::default() };
/// let out = run_with_retry(&policy, None, &CancellationToken::new(), |n| async move {
///     if n < 3 { Err(ModelError::Transport("reset".into()).into()) } else { Ok(n) }
/// }).await;
/// assert_eq!(out, Ok(3));
/// # }
/// ```
pub async fn run_with_retry<T, F, Fut>(
    policy: &RetryPolicy,
    timeout: Option<Duration>,
    cancel: &CancellationToken,
    mut attempt: F,
) -> Result<T, ModelError>
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<T, AttemptError>>,
{
    let max = policy.max_attempts.max(1);
    let mut n = 1;
    loop {
        if cancel.is_cancelled() {
            return Err(ModelError::Cancelled);
        }
        let bounded = async {
            match timeout {
                Some(limit) => tokio::time::timeout(limit, attempt(n))
                    .await
                    .unwrap_or_else(|_| Err(ModelError::Timeout.into())),
                None => attempt(n).await,
            }
        };
        let failure = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(ModelError::Cancelled),
            r = bounded => match r {
                Ok(v) => return Ok(v),
                Err(e) => e,
            },
        };
        if !failure.retryable() || n >= max {
            if n > 1 {
                tracing::warn!(attempts = n, error = %failure.error, "model call failed");
            }
            return Err(failure.error);
        }
        let wait = match failure.retry_after {
            Some(hint) if hint > policy.max_retry_after => {
                tracing::warn!(?hint, "retry-after hint too long; giving up");
                return Err(failure.error);
            }
            Some(hint) => hint,
            None => policy.backoff(n, jitter_unit()),
        };
        tracing::info!(attempt = n, ?wait, error = %failure.error, "retrying model call");
        tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(ModelError::Cancelled),
            _ = tokio::time::sleep(wait) => {}
        }
        n += 1;
    }
}
