//! The shared retry loop on a paused clock, retry-after parsing, and provider construction from
//! an injected environment.
// Test helpers outside #[test] fns unwrap too; this is test code.
#![allow(clippy::unwrap_used)]

use memloop_core::{CancellationToken, model::ModelError};
use memloop_host::env::EnvVars;
use memloop_providers::retry::{AttemptError, RetryPolicy, parse_retry_after, run_with_retry};
use memloop_providers::{ProviderError, from_env_with};
use reqwest::header::{HeaderMap, HeaderValue};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tokio::time::Instant;

fn policy(max_attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        initial_backoff: Duration::from_secs(1),
        max_backoff: Duration::from_secs(8),
        max_retry_after: Duration::from_secs(60),
    }
}

/// Runs `run_with_retry` with attempts that fail with `errors` in order, then succeed; returns
/// the result and the (paused-clock) instants at which each attempt started.
async fn scripted(
    policy: &RetryPolicy,
    timeout: Option<Duration>,
    cancel: &CancellationToken,
    errors: Vec<AttemptError>,
) -> (Result<u32, ModelError>, Vec<Duration>) {
    let start = Instant::now();
    let starts = Arc::new(Mutex::new(Vec::new()));
    let errors = Arc::new(Mutex::new(errors.into_iter()));
    let result = run_with_retry(policy, timeout, cancel, |n| {
        starts.lock().unwrap().push(start.elapsed());
        let next = errors.lock().unwrap().next();
        async move {
            match next {
                Some(e) => Err(e),
                None => Ok(n),
            }
        }
    })
    .await;
    let starts = starts.lock().unwrap().clone();
    (result, starts)
}

fn rate_limited(after: Option<Duration>) -> AttemptError {
    AttemptError {
        error: ModelError::RateLimited { retry_after: after },
        retry_after: after,
        should_retry: None,
    }
}

#[tokio::test(start_paused = true)]
async fn retry_after_hint_is_waited_exactly() {
    let (result, starts) = scripted(
        &policy(3),
        None,
        &CancellationToken::new(),
        vec![
            rate_limited(Some(Duration::from_secs(7))),
            rate_limited(Some(Duration::from_millis(250))),
        ],
    )
    .await;
    assert_eq!(result, Ok(3));
    assert_eq!(
        starts,
        vec![
            Duration::ZERO,
            Duration::from_secs(7),
            Duration::from_millis(7250)
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn backoff_grows_exponentially_within_jitter_and_cap() {
    let errors = (0..5)
        .map(|_| ModelError::Overloaded("busy".into()).into())
        .collect();
    let (result, starts) = scripted(&policy(6), None, &CancellationToken::new(), errors).await;
    assert_eq!(result, Ok(6));
    let waits: Vec<Duration> = starts.windows(2).map(|w| w[1] - w[0]).collect();
    // full delays 1, 2, 4, 8, 8 (capped); equal jitter keeps each in [full/2, full]
    for (wait, full) in waits.iter().zip([1u64, 2, 4, 8, 8]) {
        let full = Duration::from_secs(full);
        assert!(
            *wait >= full / 2 && *wait <= full,
            "wait {wait:?} for full {full:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn non_retryable_errors_and_exhaustion_stop_the_loop() {
    let (result, starts) = scripted(
        &policy(5),
        None,
        &CancellationToken::new(),
        vec![ModelError::Auth("bad key".into()).into()],
    )
    .await;
    assert_eq!(result, Err(ModelError::Auth("bad key".into())));
    assert_eq!(starts.len(), 1);

    let errors = (0..9)
        .map(|_| ModelError::Transport("reset".into()).into())
        .collect();
    let (result, starts) = scripted(&policy(3), None, &CancellationToken::new(), errors).await;
    assert_eq!(result, Err(ModelError::Transport("reset".into())));
    assert_eq!(starts.len(), 3);

    let (result, starts) = scripted(
        &RetryPolicy::none(),
        None,
        &CancellationToken::new(),
        vec![rate_limited(None)],
    )
    .await;
    assert_eq!(result, Err(ModelError::RateLimited { retry_after: None }));
    assert_eq!(starts.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_hint_beyond_the_cap_gives_up_without_waiting() {
    let start = Instant::now();
    let (result, starts) = scripted(
        &policy(3),
        None,
        &CancellationToken::new(),
        vec![rate_limited(Some(Duration::from_secs(61)))],
    )
    .await;
    assert_eq!(
        result,
        Err(ModelError::RateLimited {
            retry_after: Some(Duration::from_secs(61))
        })
    );
    assert_eq!(starts.len(), 1);
    assert_eq!(start.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn each_attempt_is_bounded_by_the_timeout() {
    let start = Instant::now();
    let calls = Arc::new(Mutex::new(0u32));
    let result: Result<(), ModelError> = run_with_retry(
        &policy(2),
        Some(Duration::from_secs(30)),
        &CancellationToken::new(),
        |_| {
            *calls.lock().unwrap() += 1;
            std::future::pending()
        },
    )
    .await;
    assert_eq!(result, Err(ModelError::Timeout));
    assert_eq!(*calls.lock().unwrap(), 2);
    let elapsed = start.elapsed();
    // two 30 s attempts plus one backoff of 0.5..1 s
    assert!(
        elapsed >= Duration::from_millis(60_500) && elapsed <= Duration::from_secs(61),
        "{elapsed:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn cancellation_during_a_wait_and_during_an_attempt() {
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(3)).await;
        trigger.cancel();
    });
    let start = Instant::now();
    let (result, starts) = scripted(
        &policy(3),
        None,
        &cancel,
        vec![rate_limited(Some(Duration::from_secs(50)))],
    )
    .await;
    assert_eq!(result, Err(ModelError::Cancelled));
    assert_eq!(starts.len(), 1);
    assert_eq!(start.elapsed(), Duration::from_secs(3));

    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(2)).await;
        trigger.cancel();
    });
    let start = Instant::now();
    let result: Result<(), ModelError> =
        run_with_retry(&policy(3), None, &cancel, |_| std::future::pending()).await;
    assert_eq!(result, Err(ModelError::Cancelled));
    assert_eq!(start.elapsed(), Duration::from_secs(2));

    // already cancelled: no attempt at all
    let calls = Arc::new(Mutex::new(0u32));
    let result: Result<(), ModelError> = run_with_retry(&policy(3), None, &cancel, |_| {
        *calls.lock().unwrap() += 1;
        std::future::ready(Ok(()))
    })
    .await;
    assert_eq!(result, Err(ModelError::Cancelled));
    assert_eq!(*calls.lock().unwrap(), 0);
}

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.insert(*k, HeaderValue::from_str(v).unwrap());
    }
    h
}

#[test]
fn retry_after_header_forms() {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480); // Wed, 21 Oct 2015 07:28:00 GMT
    let parse = |pairs: &[(&'static str, &str)]| parse_retry_after(&headers(pairs), now);
    assert_eq!(
        parse(&[("retry-after", "12")]),
        Some(Duration::from_secs(12))
    );
    assert_eq!(
        parse(&[("retry-after", " 1.5 ")]),
        Some(Duration::from_millis(1500))
    );
    assert_eq!(
        parse(&[("retry-after", "Wed, 21 Oct 2015 07:28:30 GMT")]),
        Some(Duration::from_secs(30))
    );
    assert_eq!(
        parse(&[("retry-after", "Wed, 21 Oct 2015 07:27:00 GMT")]),
        Some(Duration::ZERO)
    );
    assert_eq!(
        parse(&[("retry-after", "12"), ("retry-after-ms", "250")]),
        Some(Duration::from_millis(250))
    );
    assert_eq!(
        parse(&[("retry-after-ms", "junk"), ("retry-after", "2")]),
        Some(Duration::from_secs(2))
    );
    assert_eq!(parse(&[("retry-after", "soon")]), None);
    assert_eq!(parse(&[("retry-after", "-3")]), None);
    assert_eq!(parse(&[("retry-after", "NaN")]), None);
    assert_eq!(parse(&[("retry-after", "1e300")]), None);
    assert_eq!(
        parse(&[("retry-after-ms", "inf"), ("retry-after", "1")]),
        Some(Duration::from_secs(1))
    );
    assert_eq!(parse(&[]), None);
    // a hostile jitter value never panics
    let p = RetryPolicy::default();
    assert_eq!(p.backoff(1, f64::NAN), Duration::from_millis(250));
    assert_eq!(p.backoff(u32::MAX, 1.0), p.max_backoff);
}

fn env(pairs: &[(&str, &str)]) -> EnvVars {
    EnvVars::from_pairs(pairs.iter().copied())
}

#[test]
fn from_env_builds_each_provider_and_explains_missing_keys() {
    let e = env(&[
        ("ANTHROPIC_API_KEY", "sk-ant"),
        ("ANTHROPIC_MODEL", "claude-haiku-4-5"),
    ]);
    assert_eq!(
        from_env_with("anthropic", None, &e).unwrap().name(),
        "claude-haiku-4-5"
    );
    assert_eq!(
        from_env_with("Anthropic", Some("claude-opus-4-1"), &e)
            .unwrap()
            .name(),
        "claude-opus-4-1"
    );

    let err = from_env_with("anthropic", None, &env(&[])).err().unwrap();
    assert!(err.to_string().contains("ANTHROPIC_API_KEY"), "{err}");

    let err = from_env_with("openai", None, &env(&[])).err().unwrap();
    assert!(matches!(
        err,
        ProviderError::MissingEnv {
            var: "OPENAI_API_KEY",
            ..
        }
    ));
    assert!(
        err.to_string().contains("OPENAI_BASE_URL"),
        "the hint names the local-server way out: {err}"
    );

    let local = env(&[
        ("OPENAI_BASE_URL", "http://localhost:11434/v1"),
        ("OPENAI_MODEL", "llama3.1:8b"),
    ]);
    assert_eq!(
        from_env_with("openai", None, &local).unwrap().name(),
        "llama3.1:8b"
    );

    let err = from_env_with("gemini", None, &e).err().unwrap();
    assert!(matches!(err, ProviderError::UnknownProvider(ref p) if p == "gemini"));

    let err = from_env_with("anthropic", Some(" "), &e).err().unwrap();
    assert!(matches!(err, ProviderError::InvalidConfig(_)), "{err:?}");

    let bad_key = env(&[("ANTHROPIC_API_KEY", "sk\nant")]);
    let err = from_env_with("anthropic", None, &bad_key).err().unwrap();
    assert!(
        !err.to_string().contains("sk\nant"),
        "the key is never echoed: {err}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_servers_should_retry_verdict_overrides_the_error_kind() {
    // `x-should-retry: false` on a retryable error: one attempt.
    let mut no = AttemptError::from(ModelError::Overloaded("busy".into()));
    no.should_retry = Some(false);
    let (result, starts) = scripted(&policy(4), None, &CancellationToken::new(), vec![no]).await;
    assert_eq!(result, Err(ModelError::Overloaded("busy".into())));
    assert_eq!(starts.len(), 1);
    // `x-should-retry: true` on an error that is otherwise final: retried.
    let mut yes = AttemptError::from(ModelError::Http {
        status: 400,
        body: "odd".into(),
    });
    yes.should_retry = Some(true);
    let (result, starts) = scripted(&policy(4), None, &CancellationToken::new(), vec![yes]).await;
    assert_eq!(result, Ok(2));
    assert_eq!(starts.len(), 2);
    // A cancellation is never retried, whatever the header said.
    let mut cancelled = AttemptError::from(ModelError::Cancelled);
    cancelled.should_retry = Some(true);
    assert!(!cancelled.retryable());
}

#[test]
fn conflict_is_retryable_and_request_too_large_is_not() {
    let http = |status| ModelError::Http {
        status,
        body: String::new(),
    };
    assert!(http(409).is_retryable());
    assert!(!http(413).is_retryable());
    assert!(!http(400).is_retryable());
}
