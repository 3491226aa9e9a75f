//! A third-party provider built only on the public HTTP, SSE and retry helpers
//! (`memloop_providers::{http, sse, retry}`), for a made-up JSON wire format, against a
//! loopback server. The recipe "Add a model provider" in docs/ARCHITECTURE.md points here.
//!
//! The "parrot" wire format: `POST /v1/say` with `{"model", "max": N, "lines": [{"who", "said"}],
//! "stream": bool}`; the answer is `{"said": "...", "done": "end"|"cut", "in": N, "out": N}`, or,
//! streamed, SSE events `piece` (`{"said": "..."}`) and a final `over` (`{"done", "in", "out"}`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use memloop_core::events::{AgentEvent, VecSink};
use memloop_core::message::{ContentBlock, Role, Usage};
use memloop_core::model::{
    Model, ModelError, ModelRequest, ModelResponse, StopReason, StreamEvent,
};
use memloop_core::{Agent, CancellationToken};
use memloop_providers::http::{HttpTransport, parse_body};
use memloop_providers::retry::RetryPolicy;
use memloop_providers::sse::{SseDecoder, SseEvent, stream_error};
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// The whole provider: a transport and the wire mapping.
struct ParrotModel {
    http: HttpTransport,
    model: String,
}

impl ParrotModel {
    fn new(base_url: &str, retry: RetryPolicy) -> Self {
        let mut headers = memloop_providers::http::reqwest::header::HeaderMap::new();
        headers.insert("x-parrot-key", "cracker".parse().unwrap());
        let http = HttpTransport::new(
            base_url,
            "/v1/say",
            headers,
            retry,
            Some(Duration::from_secs(30)),
        )
        .unwrap();
        Self {
            http,
            model: "parrot-1".into(),
        }
    }

    fn body(&self, request: &ModelRequest, stream: bool) -> serde_json::Value {
        let mut lines: Vec<serde_json::Value> = request
            .system
            .iter()
            .map(|s| json!({"who": "system", "said": s}))
            .collect();
        lines.extend(request.messages.iter().map(|m| {
            let who = if m.role == Role::User {
                "user"
            } else {
                "parrot"
            };
            json!({"who": who, "said": m.text()})
        }));
        json!({"model": self.model, "max": request.max_tokens, "lines": lines, "stream": stream})
    }
}

#[derive(Deserialize)]
struct Whole {
    #[serde(default)]
    said: String,
    done: String,
    #[serde(rename = "in")]
    input: u64,
    out: u64,
}

fn response(said: String, done: &str, input: u64, out: u64) -> ModelResponse {
    let mut r = ModelResponse::text(said);
    r.stop_reason = if done == "cut" {
        StopReason::MaxTokens
    } else {
        StopReason::EndTurn
    };
    r.usage = Usage {
        input_tokens: input,
        output_tokens: out,
        ..Usage::default()
    };
    r
}

fn parse(bytes: &[u8]) -> Result<ModelResponse, ModelError> {
    let w: Whole = parse_body(bytes)?;
    Ok(response(w.said, &w.done, w.input, w.out))
}

/// Decodes the `piece` / `over` events.
#[derive(Default)]
struct ParrotDecoder {
    said: String,
    over: Option<Whole>,
}

impl SseDecoder for ParrotDecoder {
    fn event(&mut self, event: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<bool, ModelError> {
        let data: serde_json::Value = serde_json::from_str(&event.data)
            .map_err(|e| stream_error(format!("bad event: {e}"), true))?;
        match event.event.as_str() {
            "piece" => {
                let text = data["said"].as_str().unwrap_or_default().to_owned();
                self.said.push_str(&text);
                out.push(StreamEvent::TextDelta { index: 0, text });
                Ok(false)
            }
            "over" => {
                let mut w: Whole = serde_json::from_value(data)
                    .map_err(|e| stream_error(format!("bad end: {e}"), false))?;
                w.said = std::mem::take(&mut self.said);
                self.over = Some(w);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    fn is_complete(&self) -> bool {
        self.over.is_some()
    }

    fn finish(&mut self) -> Result<ModelResponse, ModelError> {
        let w = self
            .over
            .take()
            .ok_or_else(|| stream_error("the stream ended before `over`", true))?;
        Ok(response(w.said, &w.done, w.input, w.out))
    }

    fn whole(&mut self, body: &[u8]) -> Result<ModelResponse, ModelError> {
        parse(body)
    }
}

#[async_trait]
impl Model for ParrotModel {
    fn name(&self) -> &str {
        &self.model
    }

    async fn complete(
        &self,
        request: ModelRequest,
        cancel: CancellationToken,
    ) -> Result<ModelResponse, ModelError> {
        let body = self.body(&request, false);
        self.http
            .call(
                "parrot",
                &self.model,
                &request.purpose,
                &body,
                &cancel,
                parse,
            )
            .await
    }

    fn stream(
        &self,
        request: ModelRequest,
        cancel: CancellationToken,
    ) -> BoxStream<'_, Result<StreamEvent, ModelError>> {
        let body = self.body(&request, true);
        self.http.stream(
            "parrot",
            &self.model,
            &request.purpose,
            body,
            cancel,
            ParrotDecoder::default,
        )
    }
}

fn fast_retry(max_attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        initial_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(5),
        max_retry_after: Duration::from_secs(1),
    }
}

fn sse(event: &str, data: serde_json::Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

async fn received(server: &MockServer) -> Vec<(serde_json::Value, Option<String>)> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .map(|r| {
            (
                serde_json::from_slice(&r.body).unwrap(),
                r.headers
                    .get("x-parrot-key")
                    .map(|v| v.to_str().unwrap().to_owned()),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_whole_answer_maps_the_wire_format_and_retries_an_overload() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/say"))
        .respond_with(ResponseTemplate::new(503).set_body_string("busy"))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/say"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"said": "Polly says hi", "done": "end", "in": 12, "out": 3})),
        )
        .mount(&server)
        .await;
    let model = ParrotModel::new(&server.uri(), fast_retry(3));
    let mut request = ModelRequest::new("main", vec![memloop_core::message::Message::user("hi")]);
    request.system = vec!["Be a parrot.".into()];
    request.max_tokens = 64;
    let out = model
        .complete(request, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.content, vec![ContentBlock::text("Polly says hi")]);
    assert_eq!(out.stop_reason, StopReason::EndTurn);
    assert_eq!((out.usage.input_tokens, out.usage.output_tokens), (12, 3));
    let got = received(&server).await;
    assert_eq!(got.len(), 2, "the 503 was retried once");
    assert_eq!(
        got[1].0,
        json!({"model": "parrot-1", "max": 64, "stream": false, "lines": [
            {"who": "system", "said": "Be a parrot."}, {"who": "user", "said": "hi"}]})
    );
    assert_eq!(got[1].1.as_deref(), Some("cracker"));
}

#[tokio::test]
async fn errors_map_onto_typed_model_errors() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({"error": {
            "message": "prompt is too long: 9000 tokens > 8192 maximum"}})))
        .mount(&server)
        .await;
    let model = ParrotModel::new(&server.uri(), fast_retry(3));
    let err = model
        .complete(
            ModelRequest::new("main", vec![memloop_core::message::Message::user("hi")]),
            CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err,
        ModelError::ContextTooLong {
            message: "prompt is too long: 9000 tokens > 8192 maximum".into(),
            excess_tokens: Some(808),
            limit: Some(8192),
        }
    );
    assert_eq!(
        received(&server).await.len(),
        1,
        "a context error is not retried"
    );

    let bad = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_string("squawk"))
        .mount(&bad)
        .await;
    let err = ParrotModel::new(&bad.uri(), fast_retry(1))
        .complete(
            ModelRequest::new("main", vec![memloop_core::message::Message::user("hi")]),
            CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ModelError::InvalidResponse(m) if m.contains("squawk")),
        "{err:?}"
    );
}

#[tokio::test]
async fn the_agent_streams_through_the_third_party_provider() {
    let server = MockServer::start().await;
    let body = [
        sse("piece", json!({"said": "Polly "})),
        sse("piece", json!({"said": "wants a cracker"})),
        sse("over", json!({"done": "end", "in": 20, "out": 4})),
    ]
    .concat();
    Mock::given(method("POST"))
        .and(path("/v1/say"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(body, "text/event-stream"))
        .mount(&server)
        .await;
    let sink = VecSink::default();
    let mut agent = Agent::builder(Arc::new(ParrotModel::new(&server.uri(), fast_retry(1))))
        .events(Arc::new(sink.clone()))
        .build();
    let out = agent.run_turn("hello").await.unwrap();
    assert_eq!(out.text, "Polly wants a cracker");
    assert_eq!(out.usage.input_tokens, 20);
    let deltas: Vec<String> = sink
        .events()
        .into_iter()
        .filter_map(|e| match e {
            AgentEvent::TextDelta { text, .. } => Some(text),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, ["Polly ", "wants a cracker"]);
    assert_eq!(received(&server).await[0].0["stream"], json!(true));

    // The stream type is the public one: a caller can drive it directly too.
    let model = ParrotModel::new(&server.uri(), fast_retry(1));
    let items: Vec<_> = model
        .stream(
            ModelRequest::new("main", vec![memloop_core::message::Message::user("hi")]),
            CancellationToken::new(),
        )
        .collect()
        .await;
    assert!(
        matches!(items.last(), Some(Ok(StreamEvent::Finished(r))) if r.usage.output_tokens == 4)
    );
}
