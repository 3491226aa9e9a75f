//! The HTTP plumbing every provider shares, public so a provider crate of its own reuses it:
//! [`HttpTransport`] posts a JSON body with retries ([`super::retry`]), a per-request timeout and
//! cancellation, streams server-sent events through an [`SseDecoder`], and maps HTTP failures
//! onto [`ModelError`] ([`classify`]): 401/403 → `Auth`, a prompt that does not fit →
//! `ContextTooLong` (with the excess and the limit when the message states them), 429 →
//! `RateLimited`, 503/529 → `Overloaded`, an unparsable body → `InvalidResponse` with an excerpt.
//!
//! `tests/providers_third_party.rs` implements a provider for a made-up wire format with this
//! module alone.

/// The HTTP client crate the transport is built on, re-exported so a provider crate names the
/// same version (e.g. `reqwest::header::HeaderMap` for [`HttpTransport::new`]).
pub use reqwest;

use super::retry::{
    AttemptError, RetryPolicy, parse_retry_after, parse_should_retry, run_with_retry,
};
use super::settings::ProviderError;
use super::sse::{SseDecoder, SseParser, stream_error};
use futures::stream::BoxStream;
use memloop_core::model::{ModelError, ModelResponse, StreamEvent};
use memloop_text::truncate_utf8;
use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use std::collections::VecDeque;
use std::time::{Duration, SystemTime};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// How many bytes of a body an error message quotes.
const EXCERPT_BYTES: usize = 300;

/// A short, single-line excerpt of a body for error messages.
pub fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let flat = memloop_text::one_line(&text);
    let cut = truncate_utf8(&flat, EXCERPT_BYTES);
    if cut.len() < flat.len() {
        format!("{cut}…")
    } else {
        cut.to_owned()
    }
}

/// Parse a successful body, or report it as malformed with an excerpt.
pub fn parse_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ModelError> {
    serde_json::from_slice(body)
        .map_err(|e| ModelError::InvalidResponse(format!("{e}; body starts: {:?}", excerpt(body))))
}

/// One provider endpoint: a reqwest client, the URL and headers, the retry policy and the
/// per-request timeout.
#[derive(Debug, Clone)]
pub struct HttpTransport {
    client: reqwest::Client,
    url: String,
    headers: HeaderMap,
    retry: RetryPolicy,
    timeout: Option<Duration>,
}

impl HttpTransport {
    /// A transport posting to `base_url` (a trailing `/` ignored) joined with `path`;
    /// `headers` get `content-type: application/json` added.
    pub fn new(
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

    /// One metadata request to `url` on the same server (GET, or POST `body` when given) with
    /// this transport's headers, no retries and a 10 s timeout; the JSON of a 2xx answer, `None`
    /// for anything else (the server does not offer the endpoint).
    pub async fn fetch_json(
        &self,
        url: &str,
        body: Option<&serde_json::Value>,
    ) -> Option<serde_json::Value> {
        let request = match body {
            Some(b) => self.client.post(url).json(b),
            None => self.client.get(url),
        };
        let mut headers = self.headers.clone();
        headers.remove(CONTENT_TYPE);
        let response = request
            .headers(headers)
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .map_err(|e| tracing::debug!(url, error = %e, "metadata request failed"))
            .ok()?;
        if !response.status().is_success() {
            tracing::debug!(url, status = %response.status(), "no metadata here");
            return None;
        }
        response.json().await.ok()
    }

    /// One model call: POST `body` with retries, then `parse` the 2xx body; traced as a
    /// `model_call` span.
    pub async fn call(
        &self,
        provider: &'static str,
        model: &str,
        purpose: &str,
        body: &serde_json::Value,
        cancel: &CancellationToken,
        parse: impl FnOnce(&[u8]) -> Result<ModelResponse, ModelError>,
    ) -> Result<ModelResponse, ModelError> {
        let span = tracing::debug_span!("model_call", provider, model, purpose);
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

    /// One streamed model call: POST `body` (which asks for a stream), then decode the
    /// server-sent events with `decoder`. Connection and HTTP failures are retried per the policy;
    /// a stream that breaks off (cut connection, malformed event, `error` event) is retried only
    /// when nothing was emitted yet, and otherwise ends the stream with [`ModelError::Stream`].
    /// The per-request timeout bounds each attempt from the POST to the last event. A server
    /// that answers with a plain JSON body (it ignored `"stream": true`) is accepted: its
    /// response is replayed as deltas.
    pub fn stream<D: SseDecoder>(
        &self,
        provider: &'static str,
        model: &str,
        purpose: &str,
        body: serde_json::Value,
        cancel: CancellationToken,
        decoder: impl Fn() -> D + Send + 'static,
    ) -> BoxStream<'static, Result<StreamEvent, ModelError>> {
        let span = tracing::debug_span!("model_stream", provider, model, purpose);
        let state = StreamState {
            transport: self.clone(),
            body,
            cancel,
            decoder: Box::new(decoder),
            span,
            failed_attempts: 0,
            emitted: 0,
            pending: VecDeque::new(),
            conn: None,
            error: None,
            done: false,
        };
        Box::pin(futures::stream::unfold(state, |mut st| async move {
            let item = st.next_item().await?;
            Some((item, st))
        }))
    }

    /// POST `body` with retries; the response of the first 2xx answer.
    async fn open(
        &self,
        body: &serde_json::Value,
        cancel: &CancellationToken,
    ) -> Result<reqwest::Response, ModelError> {
        run_with_retry(&self.retry, self.timeout, cancel, |attempt| {
            let request = self
                .client
                .post(&self.url)
                .headers(self.headers.clone())
                .header(reqwest::header::ACCEPT, "text/event-stream")
                .json(body);
            async move {
                tracing::debug!(attempt, "POST (stream)");
                let response = request.send().await.map_err(transport)?;
                let status = response.status();
                if status.is_success() {
                    return Ok(response);
                }
                let resp_headers = response.headers().clone();
                let bytes = response.bytes().await.map_err(transport)?;
                Err(classify(status, &resp_headers, &bytes))
            }
        })
        .await
    }

    /// POST `body`, retrying per the policy; the bytes of a 2xx body.
    pub async fn post_json(
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

/// An open streamed response.
struct Connection<D> {
    response: reqwest::Response,
    parser: SseParser,
    decoder: D,
    deadline: Option<tokio::time::Instant>,
}

/// The state of one streamed call (see [`HttpTransport::stream`]).
struct StreamState<D> {
    transport: HttpTransport,
    body: serde_json::Value,
    cancel: CancellationToken,
    decoder: Box<dyn Fn() -> D + Send>,
    span: tracing::Span,
    /// Stream attempts that broke off before emitting anything.
    failed_attempts: u32,
    emitted: u64,
    pending: VecDeque<StreamEvent>,
    conn: Option<Connection<D>>,
    /// An error to report once `pending` is drained.
    error: Option<ModelError>,
    done: bool,
}

impl<D: SseDecoder> StreamState<D> {
    async fn next_item(&mut self) -> Option<Result<StreamEvent, ModelError>> {
        loop {
            if let Some(e) = self.pending.pop_front() {
                self.emitted += 1;
                return Some(Ok(e));
            }
            if let Some(e) = self.error.take() {
                self.done = true;
                return Some(Err(e));
            }
            if self.done {
                return None;
            }
            if self.conn.is_none() {
                match self.connect().await {
                    Ok(Some(c)) => self.conn = Some(c),
                    Ok(None) => continue,
                    Err(e) => {
                        self.done = true;
                        return Some(Err(e));
                    }
                }
            }
            if let Err(e) = self.read().await {
                self.fail(e).await;
            }
        }
    }

    /// Open the stream; `None` when the server answered in one piece (already in `pending`).
    async fn connect(&mut self) -> Result<Option<Connection<D>>, ModelError> {
        let response = self
            .transport
            .open(&self.body, &self.cancel)
            .instrument(self.span.clone())
            .await?;
        let is_json = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        if is_json {
            // The server ignored `"stream": true`: take the whole answer as one replayed stream.
            let bytes = response.bytes().await.map_err(|e| {
                stream_error(format!("connection cut: {}", transport(e).error), true)
            })?;
            let whole = (self.decoder)().whole(&bytes)?;
            self.pending.extend(StreamEvent::replay(whole));
            self.done = true;
            return Ok(None);
        }
        Ok(Some(Connection {
            response,
            parser: SseParser::default(),
            decoder: (self.decoder)(),
            deadline: self
                .transport
                .timeout
                .map(|t| tokio::time::Instant::now() + t),
        }))
    }

    /// Read one chunk and decode it into `pending`.
    async fn read(&mut self) -> Result<(), ModelError> {
        let Some(conn) = self.conn.as_mut() else {
            return Ok(());
        };
        let deadline = conn.deadline;
        let read = async {
            conn.response
                .chunk()
                .await
                .map_err(|e| stream_error(format!("connection cut: {}", transport(e).error), true))
        };
        let chunk = async {
            match deadline {
                Some(d) => tokio::time::timeout_at(d, read)
                    .await
                    .unwrap_or(Err(ModelError::Timeout)),
                None => read.await,
            }
        };
        let chunk = tokio::select! {
            biased;
            _ = self.cancel.cancelled() => Err(ModelError::Cancelled),
            c = chunk => c,
        };
        let mut out = Vec::new();
        let finished = match chunk? {
            Some(bytes) => {
                let mut finished = false;
                for event in conn
                    .parser
                    .push(&bytes)
                    .map_err(|m| stream_error(m, false))?
                {
                    match conn.decoder.event(&event, &mut out) {
                        Ok(true) => {
                            finished = true;
                            break;
                        }
                        Ok(false) => {}
                        Err(e) => {
                            // Deltas decoded before the failure still reach the caller.
                            self.pending.extend(out);
                            return Err(e);
                        }
                    }
                }
                finished
            }
            None => {
                if let Some(event) = conn.parser.finish() {
                    conn.decoder.event(&event, &mut out)?;
                }
                if !conn.decoder.is_complete() {
                    return Err(stream_error(
                        "the connection closed before the response was complete",
                        true,
                    ));
                }
                true
            }
        };
        self.pending.extend(out);
        if finished {
            let response = conn.decoder.finish()?;
            tracing::debug!(
                parent: &self.span,
                stop_reason = ?response.stop_reason,
                usage = ?response.usage,
                "model response (streamed)"
            );
            self.pending.push_back(StreamEvent::Finished(response));
            self.conn = None;
            self.done = true;
        }
        Ok(())
    }

    /// A read failed: retry if nothing was emitted and the policy allows, else report it.
    async fn fail(&mut self, error: ModelError) {
        self.conn = None;
        // Deltas decoded but not yet handed over count as output: they will be emitted.
        let produced = self.emitted + self.pending.len() as u64;
        let error = match error {
            ModelError::Stream {
                message, retryable, ..
            } => ModelError::Stream {
                message,
                emitted: produced,
                retryable,
            },
            other => other,
        };
        let retryable = match &error {
            ModelError::Stream { retryable, .. } => *retryable,
            ModelError::Cancelled => false,
            e => e.is_retryable(),
        };
        self.failed_attempts += 1;
        if produced == 0
            && retryable
            && self.failed_attempts < self.transport.retry.max_attempts.max(1)
        {
            let wait = self.transport.retry.backoff(self.failed_attempts, 0.5);
            tracing::info!(parent: &self.span, attempt = self.failed_attempts, ?wait, %error, "stream broke off before any event; retrying");
            tokio::select! {
                biased;
                _ = self.cancel.cancelled() => self.error = Some(ModelError::Cancelled),
                _ = tokio::time::sleep(wait) => {}
            }
            return;
        }
        tracing::warn!(parent: &self.span, %error, emitted = produced, "stream failed");
        self.error = Some(error);
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
pub fn classify(status: StatusCode, headers: &HeaderMap, body: &[u8]) -> AttemptError {
    let retry_after = parse_retry_after(headers, SystemTime::now());
    let should_retry = parse_should_retry(headers);
    let ErrorInfo {
        message,
        kind,
        excess,
        limit,
    } = error_info(body);
    let code = status.as_u16();
    let error = if code == 401 || code == 403 {
        ModelError::Auth(message)
    } else if is_context_too_long(&message, &kind) {
        // A 413 is a request over the byte limit, not over the context window: it is a
        // context error only when the server's words say so.
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
    AttemptError {
        error,
        retry_after,
        should_retry,
    }
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
        || m.contains("exceeds context limit")
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
pub fn excess_tokens(message: &str) -> Option<u64> {
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
pub fn context_limit(message: &str) -> Option<u64> {
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
