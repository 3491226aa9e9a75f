//! A deterministic, **scripted** [`Model`] for tests and offline demos.
//!
//! `ScriptedModel` does not think: it replays responses you queue, or runs rules you write, and
//! records every request so tests can assert on what the agent sent. It is public so you can test
//! your own agents, hooks, selectors and tools without an API key or network.

use crate::message::{ContentBlock, Usage};
use crate::model::{Model, ModelError, ModelRequest, ModelResponse, StreamEvent};
use async_trait::async_trait;
use futures::stream::BoxStream;
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
/// use memloop_core::testing::{ScriptStep, ScriptedModel};
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

/// A [`HookContext`](crate::HookContext) for calling hooks directly in tests, with defaults:
/// session `"s1"`, turn 1, the main agent, cwd `"."`, an empty system prompt, no tools, 0 context tokens,
/// no recent tools, a [`NullSink`](crate::events::NullSink), fresh [`BackgroundTasks`](crate::BackgroundTasks)
/// and a fresh [`CancellationToken`]. Override fields with struct update syntax.
///
/// ```
/// use memloop_core::testing::{ScriptedModel, hook_context};
/// use memloop_core::{HookContext, message::Message, events::VecSink};
/// use std::sync::Arc;
/// let sink = VecSink::default();
/// let ctx = HookContext {
///     turn: 3,
///     events: Arc::new(sink.clone()),
///     ..hook_context(Arc::new(ScriptedModel::new()), vec![Message::user("hi")])
/// };
/// assert_eq!((ctx.session_id.as_str(), ctx.turn, ctx.messages.len()), ("s1", 3, 1));
/// ```
pub fn hook_context(
    model: Arc<dyn Model>,
    messages: Vec<crate::message::Message>,
) -> crate::HookContext {
    crate::HookContext {
        session_id: "s1".into(),
        turn: 1,
        agent: crate::tool::AgentKind::Main,
        cwd: ".".into(),
        model,
        system: Arc::new(Vec::new()),
        messages: Arc::new(messages),
        tools: crate::tool::ToolRegistry::new(),
        context_tokens: 0,
        recent_tools: Vec::new(),
        window: crate::window::ContextWindow::default(),
        events: Arc::new(crate::events::NullSink),
        background: crate::BackgroundTasks::new(),
        cancel: CancellationToken::new(),
        capture: None,
    }
}

/// Whether the tests run under CI: `CI` set to a non-empty value other than `0` or `false` (any
/// case). `CI=1`, `CI=true` and `CI=yes` mean CI; an unset, empty, `0` or `false` `CI` does not.
///
/// Under CI a test whose external dependency (a data set, a model, a tool) is missing must fail,
/// never skip: see [`skip_unless_ci`].
pub fn under_ci() -> bool {
    ci_value_means_ci(std::env::var("CI").ok().as_deref())
}

/// The rule of [`under_ci`] for one value of `CI` (`None` when unset).
fn ci_value_means_ci(value: Option<&str>) -> bool {
    value.is_some_and(|v| {
        let v = v.trim();
        !v.is_empty() && v != "0" && !v.eq_ignore_ascii_case("false")
    })
}

/// What a test does when an external dependency it needs is missing: outside CI it notes
/// `SKIP: {what}` on stderr so the caller can return early; under CI (see [`under_ci`]) it fails
/// the test, since CI must really run it.
///
/// ```no_run
/// # use memloop_core::testing::skip_unless_ci;
/// let data = std::path::Path::new("../shared/data/some-set");
/// if !data.is_dir() {
///     skip_unless_ci(format!("{} is absent", data.display()));
///     return;
/// }
/// ```
///
/// # Panics
///
/// Under CI, always, with `what` in the message.
#[track_caller]
#[allow(clippy::print_stderr)]
pub fn skip_unless_ci(what: impl std::fmt::Display) {
    assert!(
        !under_ci(),
        "CI: {what} (under CI a missing dependency fails the test)"
    );
    eprintln!("SKIP: {what}");
}

/// The external data sets the tests and benchmarks read (LoCoMo, CMRC 2018, XQuAD, real memory
/// dirs, CLAUDE.md files): `$MEMLOOP_TEST_DATA` when set (for checkouts that do not sit next to
/// `shared/`, such as git worktrees), else `shared/data` beside the workspace. Canonical when it
/// exists, so paths compare equal to what loaders resolve.
pub fn shared_data() -> std::path::PathBuf {
    let dir = match std::env::var_os("MEMLOOP_TEST_DATA") {
        Some(dir) if !dir.is_empty() => std::path::PathBuf::from(dir),
        _ => std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"),
    };
    dir.canonicalize().unwrap_or(dir)
}

#[cfg(test)]
mod ci_tests {
    use super::ci_value_means_ci;

    #[test]
    fn ci_is_any_value_but_empty_zero_or_false() {
        for yes in ["1", "true", "TRUE", "yes", "github"] {
            assert!(ci_value_means_ci(Some(yes)), "{yes}");
        }
        for no in [
            None,
            Some(""),
            Some(" "),
            Some("0"),
            Some("false"),
            Some("False"),
        ] {
            assert!(!ci_value_means_ci(no), "{no:?}");
        }
    }
}
