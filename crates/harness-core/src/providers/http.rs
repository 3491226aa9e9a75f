//! The HTTP plumbing both providers share: POST a JSON body with retries, and map HTTP failures
//! onto [`ModelError`].

use super::retry::{AttemptError, RetryPolicy, parse_retry_after, run_with_retry};
use super::settings::ProviderError;
use crate::model::{ModelError, ModelResponse};
use crate::text::truncate_utf8;
use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use std::time::{Duration, SystemTime};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// How many bytes of a body an error message quotes.
const EXCERPT_BYTES: usize = 300;

/// A short, single-line excerpt of a body for error messages.
pub(crate) fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let cut = truncate_utf8(&flat, EXCERPT_BYTES);
    if cut.len() < flat.len() {
        format!("{cut}…")
    } else {
        cut.to_owned()
    }
}

/// Parse a successful body, or report it as malformed with an excerpt.
pub(crate) fn parse_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ModelError> {
    serde_json::from_slice(body)
        .map_err(|e| ModelError::InvalidResponse(format!("{e}; body starts: {:?}", excerpt(body))))
}

/// One provider endpoint: a reqwest client, the URL and headers, the retry policy and the
/// per-request timeout.
#[derive(Debug, Clone)]
pub(crate) struct HttpTransport {
    client: reqwest::Client,
    url: String,
    headers: HeaderMap,
    retry: RetryPolicy,
    timeout: Option<Duration>,
}

impl HttpTransport {
    /// A transport posting to `base_url` (a trailing `/` ignored) joined with `path`;
    /// `headers` get `content-type: application/json` added.
    pub(crate) fn new(
        base_url: &str,
        path: &str,
        mut headers: HeaderMap,
        retry: RetryPolicy,
        timeout: Option<Duration>,
    ) -> Result<Self, ProviderError> {
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let client = reqwest::Client::builder()
            .user_agent(concat!("memloop/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ProviderError::Client(e.to_string()))?;
        Ok(Self {
            client,
            url: format!("{}{path}", base_url.trim_end_matches('/')),
            headers,
            retry,
            timeout,
        })
    }

    /// One model call: POST `body` with retries, then `parse` the 2xx body; traced as a
    /// `model_call` span.
    pub(crate) async fn call(
        &self,
        provider: &'static str,
        model: &str,
        purpose: &str,
        body: &serde_json::Value,
        cancel: &CancellationToken,
        parse: impl FnOnce(&[u8]) -> Result<ModelResponse, ModelError>,
    ) -> Result<ModelResponse, ModelError> {
        let span = tracing::info_span!("model_call", provider, model, purpose);
        let bytes = self
            .post_json(body, cancel)
            .instrument(span.clone())
            .await?;
        let response = parse(&bytes)?;
        tracing::debug!(
            parent: &span,
            stop_reason = ?response.stop_reason,
            usage = ?response.usage,
            "model response"
        );
        Ok(response)
    }

    /// POST `body`, retrying per the policy; the bytes of a 2xx body.
    async fn post_json(
        &self,
        body: &serde_json::Value,
        cancel: &CancellationToken,
    ) -> Result<Vec<u8>, ModelError> {
        run_with_retry(&self.retry, self.timeout, cancel, |attempt| {
            let request = self
                .client
                .post(&self.url)
                .headers(self.headers.clone())
                .json(body);
            async move {
                tracing::debug!(attempt, "POST");
                let response = request.send().await.map_err(transport)?;
                let status = response.status();
                let resp_headers = response.headers().clone();
                let bytes = response.bytes().await.map_err(transport)?;
                if status.is_success() {
                    Ok(bytes.to_vec())
                } else {
                    Err(classify(status, &resp_headers, &bytes))
                }
            }
        })
        .await
    }
}

fn transport(e: reqwest::Error) -> AttemptError {
    let kind = if e.is_connect() {
        "connect"
    } else if e.is_body() || e.is_decode() {
        "body"
    } else {
        "request"
    };
    ModelError::Transport(format!("{kind}: {e}")).into()
}

/// What an error body says.
struct ErrorInfo {
    /// `error.message` (Anthropic, OpenAI), a string `error`, `detail`/`message` (local servers),
    /// or the excerpt of the raw body.
    message: String,
    /// `error.code` or `error.type`, when a string.
    kind: String,
    /// llama.cpp's `n_prompt_tokens - n_ctx`.
    excess: Option<u64>,
    /// llama.cpp's `n_ctx`.
    limit: Option<u64>,
}

fn error_info(body: &[u8]) -> ErrorInfo {
    let json: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let field =
        |v: &serde_json::Value, k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_owned);
    let num = |v: &serde_json::Value, k: &str| v.get(k).and_then(serde_json::Value::as_u64);
    let (mut message, mut kind, mut excess, mut limit) = (None, String::new(), None, None);
    if let Some(v) = &json {
        match v.get("error") {
            Some(serde_json::Value::String(s)) => message = Some(s.clone()),
            Some(err) => {
                message = field(err, "message");
                kind = field(err, "code")
                    .or_else(|| field(err, "type"))
                    .unwrap_or_default();
                if let (Some(used), Some(ctx)) = (num(err, "n_prompt_tokens"), num(err, "n_ctx")) {
                    excess = Some(used.saturating_sub(ctx));
                }
                limit = num(err, "n_ctx");
            }
            None => message = field(v, "detail").or_else(|| field(v, "message")),
        }
    }
    let mut message = message.unwrap_or_else(|| excerpt(body));
    if message.is_empty() {
        message = "(empty body)".to_owned();
    }
    ErrorInfo {
        message: truncate_utf8(&message, 1000).to_owned(),
        kind,
        excess,
        limit,
    }
}

/// Map a non-2xx response onto a [`ModelError`] plus the server's wait hint.
pub(crate) fn classify(status: StatusCode, headers: &HeaderMap, body: &[u8]) -> AttemptError {
    let retry_after = parse_retry_after(headers, SystemTime::now());
    let ErrorInfo {
        message,
        kind,
        excess,
        limit,
    } = error_info(body);
    let code = status.as_u16();
    let error = if code == 401 || code == 403 {
        ModelError::Auth(message)
    } else if code == 413 || is_context_too_long(&message, &kind) {
        ModelError::ContextTooLong {
            excess_tokens: excess.or_else(|| excess_tokens(&message)),
            limit: limit.or_else(|| context_limit(&message)),
            message,
        }
    } else if code == 429 {
        ModelError::RateLimited { retry_after }
    } else if code == 529 || code == 503 || kind.contains("overloaded") {
        ModelError::Overloaded(message)
    } else if code == 408 {
        ModelError::Timeout
    } else {
        ModelError::Http {
            status: code,
            body: message,
        }
    };
    AttemptError { error, retry_after }
}

fn is_context_too_long(message: &str, kind: &str) -> bool {
    let m = message.to_ascii_lowercase();
    kind == "context_length_exceeded"
        || kind == "exceed_context_size_error"
        || m.contains("prompt is too long")
        || m.contains("context_length_exceeded")
        || m.contains("maximum context length")
        || m.contains("context window")
        || m.contains("context size")
        || m.contains("exceed context limit")
}

/// The integers in `s`, in order (thousands separators `,` and `_` inside a number are skipped).
fn integers(s: &str) -> Vec<u64> {
    let mut out = Vec::new();
    let mut cur: Option<u64> = None;
    let mut prev_digit = false;
    for c in s.chars() {
        if let Some(d) = c.to_digit(10) {
            cur = Some(
                cur.unwrap_or(0)
                    .saturating_mul(10)
                    .saturating_add(u64::from(d)),
            );
            prev_digit = true;
        } else if prev_digit && (c == ',' || c == '_') {
            prev_digit = false;
        } else {
            out.extend(cur.take());
            prev_digit = false;
        }
    }
    out.extend(cur);
    out
}

/// Tokens over the limit, from the message shapes providers use:
/// Anthropic `prompt is too long: 210000 tokens > 200000 maximum`, OpenAI `maximum context length
/// is 128000 tokens. However, your messages resulted in 130000 tokens`, and llama.cpp/vLLM's
/// `requested 9000 tokens ... context of 8192`.
pub(crate) fn excess_tokens(message: &str) -> Option<u64> {
    let lower = message.to_ascii_lowercase();
    if let Some(pos) = lower.find(" tokens > ") {
        let before = integers(&lower[..pos]);
        let after = integers(&lower[pos + 10..]);
        return Some(before.last()?.saturating_sub(*after.first()?));
    }
    if let Some(pos) = lower.find("maximum context length is") {
        let nums = integers(&lower[pos..]);
        let (max, used) = (*nums.first()?, *nums.get(1)?);
        return (used > max).then(|| used - max);
    }
    let nums = integers(&lower);
    match nums.as_slice() {
        [a, b] if a != b => Some(a.max(b) - a.min(b)),
        _ => None,
    }
}

/// The context window a provider's error message names, from each documented shape:
/// Anthropic `prompt is too long: 210000 tokens > 200000 maximum` and `input length and
/// max_tokens exceed context limit: 188240 + 21333 > 200000`, OpenAI and vLLM `maximum context
/// length is 128000 tokens`, llama.cpp `exceeds the available context size (8192 tokens)` and
/// `context of 8192`.
pub(crate) fn context_limit(message: &str) -> Option<u64> {
    let lower = message.to_ascii_lowercase();
    let after = |marker: &str| {
        lower
            .find(marker)
            .and_then(|pos| integers(&lower[pos + marker.len()..]).first().copied())
    };
    if lower.contains("prompt is too long") || lower.contains("exceed context limit") {
        if let Some(pos) = lower.rfind(" > ") {
            return integers(&lower[pos + 3..]).first().copied();
        }
    }
    after("maximum context length is")
        .or_else(|| after("available context size"))
        .or_else(|| after("context size of"))
        .or_else(|| after("context of"))
        .filter(|&n| n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excess_from_known_messages() {
        assert_eq!(
            excess_tokens("prompt is too long: 210000 tokens > 200000 maximum"),
            Some(10_000)
        );
        assert_eq!(
            excess_tokens(
                "This model's maximum context length is 128000 tokens. However, your messages \
                 resulted in 130,500 tokens. Please reduce the length of the messages."
            ),
            Some(2_500)
        );
        assert_eq!(
            excess_tokens(
                "the request exceeds the available context size (4096 tokens), requested 5000"
            ),
            Some(904)
        );
        assert_eq!(excess_tokens("prompt is too long"), None);
    }

    #[test]
    fn limit_from_each_documented_shape() {
        let cases: &[(&str, Option<u64>)] = &[
            (
                "prompt is too long: 210000 tokens > 200000 maximum",
                Some(200_000),
            ),
            (
                "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, \
                 decrease input length or `max_tokens` and try again",
                Some(200_000),
            ),
            (
                "This model's maximum context length is 128000 tokens. However, your messages \
                 resulted in 130512 tokens. Please reduce the length of the messages.",
                Some(128_000),
            ),
            (
                "This model's maximum context length is 8192 tokens. However, you requested \
                 9000 tokens (800 in the messages, 8200 in the completion).",
                Some(8_192),
            ),
            (
                "'max_tokens' or 'max_completion_tokens' is too large: 8192. This model's \
                 maximum context length is 8192 tokens and your request has 120 input tokens \
                 (8192 > 8192 - 120).",
                Some(8_192),
            ),
            (
                "request (8760 tokens) exceeds the available context size (8192 tokens), try \
                 increasing it",
                Some(8_192),
            ),
            (
                "the request exceeds the available context size, try increasing it",
                None,
            ),
            ("prompt is too long", None),
        ];
        for (msg, want) in cases {
            assert_eq!(context_limit(msg), *want, "{msg}");
        }
    }

    #[test]
    fn excerpt_is_short_and_flat() {
        let body = "line one\n\n   line two ".repeat(100);
        let e = excerpt(body.as_bytes());
        assert!(e.len() <= EXCERPT_BYTES + '…'.len_utf8());
        assert!(!e.contains('\n'));
        assert!(e.ends_with('…'));
        assert_eq!(excerpt(b"\xff\xfe ok"), "\u{fffd}\u{fffd} ok");
    }
}
