//! A deterministic, **scripted** [`Model`] for tests and offline demos.
//!
//! `ScriptedModel` does not think: it replays responses you queue, or runs rules you write, and
//! records every request so tests can assert on what the agent sent. It is public so you can test
//! your own agents, hooks, selectors and tools without an API key or network.

use async_trait::async_trait;
use futures::stream::BoxStream;
use memloop_core::message::{ContentBlock, Usage};
use memloop_core::model::{Model, ModelError, ModelRequest, ModelResponse, StreamEvent};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// One scripted reaction.
#[derive(Debug, Clone)]
pub enum ScriptStep {
    /// Return this response.
    Respond(ModelResponse),
    /// Fail with this error.
    Fail(ModelError),
    /// Wait (tokio time, so tests can pause the clock), then do the inner step. Cancellation
    /// during the wait returns [`ModelError::Cancelled`].
    Delay(Duration, Box<ScriptStep>),
}

impl ScriptStep {
    /// A text response.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Respond(ModelResponse::text(text))
    }

    /// A response asking for one tool call (id generated).
    pub fn tool(name: impl Into<String>, input: serde_json::Value) -> Self {
        Self::tools(vec![(name.into(), input)])
    }

    /// A response asking for several tool calls.
    pub fn tools(calls: Vec<(String, serde_json::Value)>) -> Self {
        let blocks = calls
            .into_iter()
            .map(|(name, input)| {
                ContentBlock::tool_use(
                    format!("toolu_{}", uuid::Uuid::new_v4().simple()),
                    name,
                    input,
                )
            })
            .collect();
        Self::Respond(ModelResponse::from_blocks(blocks))
    }

    /// Attach usage to a response step (no effect on other steps).
    pub fn with_usage(self, usage: Usage) -> Self {
        match self {
            Self::Respond(r) => Self::Respond(r.with_usage(usage)),
            Self::Delay(d, inner) => Self::Delay(d, Box::new(inner.with_usage(usage))),
            other => other,
        }
    }
}

type Responder = Box<dyn Fn(&ModelRequest) -> Option<ScriptStep> + Send + Sync>;

/// A deterministic model that replays a script (see the module docs).
///
/// Lookup order for each request: rules (first that returns `Some`), then the queue for the
/// request's purpose, then the default queue. Nothing left → [`ModelError::Other`] saying the script
/// is exhausted.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use memloop_testkit::{ScriptStep, ScriptedModel};
/// use memloop_core::{message::Message, model::{Model, ModelRequest}};
/// use tokio_util::sync::CancellationToken;
///
/// let model = ScriptedModel::new()
///     .then(ScriptStep::text("hello"))
///     .on_purpose("memory_selector", |_| Some(ScriptStep::text(r#"{"selected_memories": []}"#)));
/// let r = model.complete(ModelRequest::new("main", vec![Message::user("hi")]), CancellationToken::new()).await.unwrap();
/// assert_eq!(r.text_content(), "hello");
/// assert_eq!(model.requests().len(), 1);
/// # }
/// ```
#[derive(Clone, Default)]
pub struct ScriptedModel {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    rules: Mutex<Vec<Responder>>,
    default_queue: Mutex<VecDeque<ScriptStep>>,
    queues: Mutex<HashMap<String, VecDeque<ScriptStep>>>,
    requests: Mutex<Vec<ModelRequest>>,
    /// Stream text and tool input in pieces of this many characters (0: one piece per block).
    chunk_chars: std::sync::atomic::AtomicUsize,
}

impl std::fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedModel").finish_non_exhaustive()
    }
}

impl ScriptedModel {
    /// An empty script.
    pub fn new() -> Self {
        Self::default()
    }

    /// Queue a step on the default queue (builder style).
    pub fn then(self, step: ScriptStep) -> Self {
        self.push(step);
        self
    }

    /// Stream answers in pieces of `chars` characters (builder style): text, thinking and tool
    /// input arrive as many deltas, the way a real provider streams them. Without it
    /// [`Model::stream`] sends one delta per block.
    pub fn chunked(self, chars: usize) -> Self {
        self.inner
            .chunk_chars
            .store(chars, std::sync::atomic::Ordering::Relaxed);
        self
    }

    /// Queue a step on the default queue.
    pub fn push(&self, step: ScriptStep) {
        if let Ok(mut q) = self.inner.default_queue.lock() {
            q.push_back(step);
        }
    }

    /// Queue a step used only for requests with this purpose.
    pub fn push_for(&self, purpose: &str, step: ScriptStep) {
        if let Ok(mut q) = self.inner.queues.lock() {
            q.entry(purpose.to_owned()).or_default().push_back(step);
        }
    }

    /// Add a rule (builder style): `responder` sees every request and may answer it.
    pub fn rule(
        self,
        responder: impl Fn(&ModelRequest) -> Option<ScriptStep> + Send + Sync + 'static,
    ) -> Self {
        if let Ok(mut r) = self.inner.rules.lock() {
            r.push(Box::new(responder));
        }
        self
    }

    /// Add a rule for one purpose (builder style).
    pub fn on_purpose(
        self,
        purpose: &str,
        responder: impl Fn(&ModelRequest) -> Option<ScriptStep> + Send + Sync + 'static,
    ) -> Self {
        let purpose = purpose.to_owned();
        self.rule(move |req| {
            if req.purpose == purpose {
                responder(req)
            } else {
                None
            }
        })
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.inner
            .requests
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }

    /// Requests received for one purpose.
    pub fn requests_for(&self, purpose: &str) -> Vec<ModelRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.purpose == purpose)
            .collect()
    }

    fn next_step(&self, req: &ModelRequest) -> Option<ScriptStep> {
        if let Ok(rules) = self.inner.rules.lock() {
            for rule in rules.iter() {
                if let Some(step) = rule(req) {
                    return Some(step);
                }
            }
        }
        if let Ok(mut queues) = self.inner.queues.lock() {
            if let Some(step) = queues.get_mut(&req.purpose).and_then(VecDeque::pop_front) {
                return Some(step);
            }
        }
        self.inner
            .default_queue
            .lock()
            .ok()
            .and_then(|mut q| q.pop_front())
    }
}

#[async_trait]
impl Model for ScriptedModel {
    fn provider(&self) -> &str {
        "memloop.scripted"
    }

    fn name(&self) -> &str {
        "scripted"
    }

    async fn complete(
        &self,
        request: ModelRequest,
        cancel: CancellationToken,
    ) -> Result<ModelResponse, ModelError> {
        let step = self.next_step(&request);
        let purpose = request.purpose.clone();
        if let Ok(mut r) = self.inner.requests.lock() {
            r.push(request);
        }
        let mut step = step.ok_or_else(|| {
            ModelError::Other(format!(
                "scripted model: script exhausted (purpose `{purpose}`)"
            ))
        })?;
        loop {
            if cancel.is_cancelled() {
                return Err(ModelError::Cancelled);
            }
            match step {
                ScriptStep::Respond(mut r) => {
                    if r.model.is_empty() {
                        r.model = "scripted".into();
                    }
                    return Ok(r);
                }
                ScriptStep::Fail(e) => return Err(e),
                ScriptStep::Delay(d, inner) => {
                    tokio::select! {
                        _ = cancel.cancelled() => return Err(ModelError::Cancelled),
                        _ = tokio::time::sleep(d) => step = *inner,
                    }
                }
            }
        }
    }

    fn stream(
        &self,
        request: ModelRequest,
        cancel: CancellationToken,
    ) -> BoxStream<'_, Result<StreamEvent, ModelError>> {
        use futures::StreamExt;
        let chars = self
            .inner
            .chunk_chars
            .load(std::sync::atomic::Ordering::Relaxed);
        futures::stream::once(self.complete(request, cancel))
            .flat_map(move |r| {
                let items: Vec<Result<StreamEvent, ModelError>> = match r {
                    Ok(resp) => chunk_events(StreamEvent::replay(resp), chars)
                        .into_iter()
                        .map(Ok)
                        .collect(),
                    Err(e) => vec![Err(e)],
                };
                futures::stream::iter(items)
            })
            .boxed()
    }
}

/// Split each text-bearing delta into pieces of `chars` characters (0 keeps them whole).
fn chunk_events(events: Vec<StreamEvent>, chars: usize) -> Vec<StreamEvent> {
    if chars == 0 {
        return events;
    }
    let pieces = |s: &str| -> Vec<String> {
        let all: Vec<char> = s.chars().collect();
        all.chunks(chars).map(|c| c.iter().collect()).collect()
    };
    let mut out = Vec::new();
    for e in events {
        match e {
            StreamEvent::TextDelta { index, text } => out.extend(
                pieces(&text)
                    .into_iter()
                    .map(|text| StreamEvent::TextDelta { index, text }),
            ),
            StreamEvent::ThinkingDelta { index, thinking } => out.extend(
                pieces(&thinking)
                    .into_iter()
                    .map(|thinking| StreamEvent::ThinkingDelta { index, thinking }),
            ),
            StreamEvent::ToolInputDelta {
                index,
                partial_json,
            } => out.extend(pieces(&partial_json).into_iter().map(|partial_json| {
                StreamEvent::ToolInputDelta {
                    index,
                    partial_json,
                }
            })),
            other => out.push(other),
        }
    }
    out
}
