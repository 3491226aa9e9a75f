//! Typed events the agent emits for hosts (logging, UI, tests).
//!
//! **The event model.** Every event is an [`AgentEvent`]. Sinks receive it through
//! [`EventSink::emit_envelope`] wrapped in an [`EventEnvelope`] that says which agent emitted it
//! (the main agent, a fork with its purpose and id, or a sub-agent with its name, id and depth)
//! and in which user turn; sinks that only
//! care about the event implement [`EventSink::emit`] alone.
//!
//! One turn reads: `TurnStarted`, then per model call `ModelRequest`, the deltas as they stream
//! (`TextDelta`, `ThinkingDelta`, `ToolUseStarted`, `ToolInputDelta`), `ModelResponse`,
//! `AssistantText`, tool events; and always exactly one terminal event: `TurnFinished` (stop
//! reason and usage totals), `TurnFailed` (the error) or `TurnCancelled`.

use crate::message::Usage;
use crate::model::StopReason;
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Something that happened in the agent or one of its background activities.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum AgentEvent {
    /// A user turn began.
    TurnStarted {
        /// 1-based turn number.
        turn: u64,
    },
    /// A request is about to go to the model.
    ModelRequest {
        /// Purpose (`main`, `extractor`, ...).
        purpose: String,
        /// Loop iteration within the turn (1-based).
        iteration: u32,
        /// Estimated context tokens.
        context_tokens: u64,
    },
    /// The model answered.
    ModelResponse {
        /// Purpose.
        purpose: String,
        /// Why it stopped.
        stop_reason: StopReason,
        /// Reported usage.
        usage: Usage,
    },
    /// A piece of answer text, as it streams.
    TextDelta {
        /// Content block index within the response.
        index: usize,
        /// The new text.
        text: String,
    },
    /// A piece of reasoning text, as it streams.
    ThinkingDelta {
        /// Content block index within the response.
        index: usize,
        /// The new text.
        thinking: String,
    },
    /// The model began a tool call (its input follows as [`AgentEvent::ToolInputDelta`]s).
    ToolUseStarted {
        /// Content block index within the response.
        index: usize,
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
    },
    /// A fragment of a tool call's JSON input, as it streams.
    ToolInputDelta {
        /// Content block index within the response.
        index: usize,
        /// The fragment.
        partial_json: String,
    },
    /// A response that could not be stored as it was was repaired (an empty reply, tool calls
    /// cut off by the output cap).
    ResponseRepaired {
        /// What was done.
        action: String,
    },
    /// Assistant text of the main agent.
    AssistantText {
        /// The text.
        text: String,
    },
    /// A tool call is starting.
    ToolCallStarted {
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
        /// Input.
        input: serde_json::Value,
    },
    /// A tool call finished.
    ToolCallFinished {
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
        /// Whether it failed.
        is_error: bool,
        /// Output text (truncated to 500 bytes).
        output: String,
    },
    /// The permission gate refused a call.
    ToolDenied {
        /// Tool name.
        name: String,
        /// The gate's reason.
        reason: String,
    },
    /// Old tool results were cleared (their content replaced with a placeholder, the pairs
    /// kept) because the conversation crossed the clearing trigger; see [`crate::clearing`].
    ToolResultsCleared {
        /// Tool results cleared now.
        cleared: usize,
        /// Conversation tokens before.
        tokens_before: u64,
        /// Conversation tokens after (estimated from the last still-true usage).
        tokens_after: u64,
    },
    /// The turn hit the iteration guard.
    MaxIterationsReached {
        /// The configured limit.
        limit: u32,
    },
    /// The turn ended normally (terminal).
    TurnFinished {
        /// Turn number.
        turn: u64,
        /// Model calls made.
        iterations: u32,
        /// Why the last response stopped (`None` when the iteration guard ended the turn).
        stop_reason: Option<StopReason>,
        /// Usage summed over the turn's model calls.
        usage: Usage,
    },
    /// The turn failed (terminal).
    TurnFailed {
        /// Turn number.
        turn: u64,
        /// The error.
        error: String,
    },
    /// The turn was cancelled (terminal).
    TurnCancelled {
        /// Turn number.
        turn: u64,
    },
    /// An attachment (system reminder) was added to the conversation.
    AttachmentAdded {
        /// Its kind (`relevant_memories`, ...).
        kind: String,
        /// Bytes of text.
        bytes: usize,
    },
    /// The conversation was compacted.
    Compacted {
        /// Strategy that did it (serialised as `session_memory`, `summary`, `cut`, or a custom
        /// strategy's name).
        strategy: crate::compaction_strategy::CompactionStrategy,
        /// Tokens before.
        tokens_before: u64,
        /// Tokens after (estimate).
        tokens_after: u64,
        /// Messages kept verbatim.
        messages_kept: usize,
    },
    /// Compaction failed.
    CompactionFailed {
        /// The error.
        error: String,
        /// Consecutive failures so far.
        consecutive_failures: u32,
    },
    /// An event of a crate above core (recall, memory, session notes, a host's own): the loop
    /// carries it to the sinks without knowing its type. Match it with
    /// [`AgentEvent::extension`]; serialised as `{"event": "extension", "source": ..., "data":
    /// ...}`.
    Extension(ExtensionEvent),
    /// A provider's context error named a smaller window than assumed; thresholds and output
    /// caps now use it.
    ContextWindowLearned {
        /// The window in tokens.
        tokens: u64,
    },
    /// A forked agent (extractor, notes updater, consolidator, summariser) did not run because
    /// its prompt cannot fit the context window even trimmed.
    ForkSkipped {
        /// The fork's purpose (`extractor`, ...).
        purpose: String,
        /// Why.
        reason: String,
    },
    /// A sub-agent started (a child run, [`crate::child`]); its own events follow, stamped with
    /// [`EventAgent::SubAgent`] and the same id.
    SubAgentStarted {
        /// Its id (`agent_…`), unique per run.
        id: String,
        /// The agent definition it runs.
        name: String,
        /// Whether the parent continues without waiting for it.
        background: bool,
        /// Its nesting depth (1 for a sub-agent of the main agent).
        depth: u32,
    },
    /// A sub-agent ended (exactly one per [`AgentEvent::SubAgentStarted`]).
    SubAgentFinished {
        /// Its id.
        id: String,
        /// The agent definition it ran.
        name: String,
        /// Whether it ran in the background.
        background: bool,
        /// How it ended.
        end: SubAgentEnd,
        /// Model calls it made.
        turns: u32,
        /// Its final text (truncated to 500 bytes; the parent gets all of it).
        text: String,
    },
    /// A non-fatal problem worth showing.
    Warning {
        /// Description.
        message: String,
    },
}

/// How a sub-agent run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum SubAgentEnd {
    /// It answered without tool calls.
    Completed,
    /// Its iteration limit stopped it.
    MaxIterations,
    /// Its time limit stopped it.
    TimedOut,
    /// The parent was cancelled, and the sub-agent with it.
    Cancelled,
    /// It failed (a model error, a context too large, ...).
    Failed {
        /// The error.
        error: String,
    },
}

impl std::fmt::Display for SubAgentEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Completed => f.write_str("completed"),
            Self::MaxIterations => f.write_str("stopped by its iteration limit"),
            Self::TimedOut => f.write_str("stopped by its time limit"),
            Self::Cancelled => f.write_str("cancelled"),
            Self::Failed { error } => write!(f, "failed: {error}"),
        }
    }
}

impl AgentEvent {
    /// The event of a crate above core, when this is one of type `E`.
    ///
    /// ```
    /// use memloop_core::events::{AgentEvent, ExtensionEvent};
    /// #[derive(Debug, PartialEq, serde::Serialize)]
    /// enum BuildEvent { Started { target: String } }
    /// let event: AgentEvent = ExtensionEvent::new("my-host", BuildEvent::Started { target: "x".into() }).into();
    /// assert_eq!(event.extension::<BuildEvent>(), Some(&BuildEvent::Started { target: "x".into() }));
    /// assert_eq!(event.extension::<String>(), None);
    /// ```
    pub fn extension<E: 'static>(&self) -> Option<&E> {
        match self {
            Self::Extension(e) => e.get::<E>(),
            _ => None,
        }
    }

    /// Whether this is a streaming delta (many per response; see [`ChannelSink`]'s policy).
    pub fn is_delta(&self) -> bool {
        matches!(
            self,
            Self::TextDelta { .. } | Self::ThinkingDelta { .. } | Self::ToolInputDelta { .. }
        )
    }

    /// Whether this event ends a turn.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            Self::TurnFinished { .. } | Self::TurnFailed { .. } | Self::TurnCancelled { .. }
        )
    }
}

/// An event type of its own, defined by the crate that emits it, carried through the loop's
/// sinks inside [`AgentEvent::Extension`]. Core knows only that it can be printed, compared and
/// serialised; a host gets the typed value back with [`AgentEvent::extension`].
#[derive(Clone)]
pub struct ExtensionEvent {
    source: &'static str,
    value: Arc<dyn std::any::Any + Send + Sync>,
    debug: fn(&(dyn std::any::Any + Send + Sync), &mut std::fmt::Formatter<'_>) -> std::fmt::Result,
    json: fn(&(dyn std::any::Any + Send + Sync)) -> serde_json::Value,
    eq: fn(&(dyn std::any::Any + Send + Sync), &(dyn std::any::Any + Send + Sync)) -> bool,
}

impl ExtensionEvent {
    /// Wrap `event`, emitted by `source` (the crate or host that defines it, e.g.
    /// `"memloop-recall"`).
    pub fn new<E>(source: &'static str, event: E) -> Self
    where
        E: std::fmt::Debug + PartialEq + Serialize + Send + Sync + 'static,
    {
        fn debug<E: std::fmt::Debug + 'static>(
            v: &(dyn std::any::Any + Send + Sync),
            f: &mut std::fmt::Formatter<'_>,
        ) -> std::fmt::Result {
            match v.downcast_ref::<E>() {
                Some(e) => e.fmt(f),
                None => f.write_str("<extension event>"),
            }
        }
        fn json<E: Serialize + 'static>(
            v: &(dyn std::any::Any + Send + Sync),
        ) -> serde_json::Value {
            v.downcast_ref::<E>()
                .and_then(|e| serde_json::to_value(e).ok())
                .unwrap_or(serde_json::Value::Null)
        }
        fn eq<E: PartialEq + 'static>(
            a: &(dyn std::any::Any + Send + Sync),
            b: &(dyn std::any::Any + Send + Sync),
        ) -> bool {
            matches!((a.downcast_ref::<E>(), b.downcast_ref::<E>()), (Some(a), Some(b)) if a == b)
        }
        Self {
            source,
            value: Arc::new(event),
            debug: debug::<E>,
            json: json::<E>,
            eq: eq::<E>,
        }
    }

    /// Who defines the event (`"memloop-recall"`, `"memloop-memory"`, ...).
    pub fn source(&self) -> &'static str {
        self.source
    }

    /// The event, when it is of type `E`.
    pub fn get<E: 'static>(&self) -> Option<&E> {
        self.value.downcast_ref::<E>()
    }

    /// The event as JSON (what [`Serialize`] writes under `data`).
    pub fn to_json(&self) -> serde_json::Value {
        (self.json)(self.value.as_ref())
    }
}

impl std::fmt::Debug for ExtensionEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: ", self.source)?;
        (self.debug)(self.value.as_ref(), f)
    }
}

impl PartialEq for ExtensionEvent {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source && (self.eq)(self.value.as_ref(), other.value.as_ref())
    }
}

impl Serialize for ExtensionEvent {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("source", self.source)?;
        map.serialize_entry("data", &self.to_json())?;
        map.end()
    }
}

impl From<ExtensionEvent> for AgentEvent {
    fn from(event: ExtensionEvent) -> Self {
        Self::Extension(event)
    }
}

/// Which agent emitted an event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventAgent {
    /// The user's agent.
    Main,
    /// A forked agent.
    Fork {
        /// Its purpose (`extractor`, `session_memory`...).
        purpose: String,
        /// A unique id of this fork run.
        id: String,
    },
    /// A sub-agent the model delegated a task to ([`crate::child`]).
    SubAgent {
        /// The agent definition it runs.
        name: String,
        /// A unique id of this run (the one in its `SubAgentStarted` event).
        id: String,
        /// Its nesting depth (1 for a sub-agent of the main agent).
        depth: u32,
    },
}

/// An event with its origin.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EventEnvelope {
    /// Who emitted it.
    pub agent: EventAgent,
    /// The user turn it belongs to (1-based; 0 outside any turn, e.g. a fork run on its own).
    pub turn: u64,
    /// The event.
    #[serde(flatten)]
    pub event: AgentEvent,
}

/// Receives events. Must be cheap and non-blocking.
pub trait EventSink: Send + Sync {
    /// Handle one event.
    fn emit(&self, event: AgentEvent);

    /// Handle one event with its origin. The agent calls this; the default forwards the bare
    /// event to [`emit`](Self::emit). Override it to see which agent and turn an event is from.
    fn emit_envelope(&self, envelope: EventEnvelope) {
        self.emit(envelope.event);
    }
}

/// Stamps events with their origin before passing them on: the agent wraps the host's sink in
/// one per turn (main agent, turn n), and each fork wraps its parent's (fork purpose and id; the
/// turn is filled in by the parent's scope).
#[derive(Clone)]
pub struct ScopedSink {
    inner: Arc<dyn EventSink>,
    agent: Option<EventAgent>,
    turn: u64,
}

impl std::fmt::Debug for ScopedSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScopedSink")
            .field("agent", &self.agent)
            .field("turn", &self.turn)
            .finish_non_exhaustive()
    }
}

impl ScopedSink {
    /// Events of the main agent in `turn`.
    pub fn main(inner: Arc<dyn EventSink>, turn: u64) -> Self {
        Self {
            inner,
            agent: Some(EventAgent::Main),
            turn,
        }
    }

    /// Events of a fork; the turn comes from the scope around `inner` (0 if none).
    pub fn fork(inner: Arc<dyn EventSink>, purpose: &str, id: &str) -> Self {
        Self {
            inner,
            agent: Some(EventAgent::Fork {
                purpose: purpose.to_owned(),
                id: id.to_owned(),
            }),
            turn: 0,
        }
    }
}

impl ScopedSink {
    /// Events of a sub-agent; the turn comes from the scope around `inner` (its parent's).
    pub fn subagent(inner: Arc<dyn EventSink>, name: &str, id: &str, depth: u32) -> Self {
        Self {
            inner,
            agent: Some(EventAgent::SubAgent {
                name: name.to_owned(),
                id: id.to_owned(),
                depth,
            }),
            turn: 0,
        }
    }
}

impl EventSink for ScopedSink {
    fn emit(&self, event: AgentEvent) {
        self.inner.emit_envelope(EventEnvelope {
            agent: self.agent.clone().unwrap_or(EventAgent::Main),
            turn: self.turn,
            event,
        });
    }

    fn emit_envelope(&self, mut envelope: EventEnvelope) {
        if envelope.turn == 0 {
            envelope.turn = self.turn;
        }
        self.inner.emit_envelope(envelope);
    }
}

/// Drops every event (besides a `tracing` debug line).
#[derive(Debug, Clone, Copy, Default)]
pub struct NullSink;

impl EventSink for NullSink {
    fn emit(&self, event: AgentEvent) {
        tracing::debug!(?event, "agent event");
    }
}

/// Keeps every event in memory; handy in tests.
///
/// ```
/// use memloop_core::events::{AgentEvent, EventSink, VecSink};
/// let sink = VecSink::default();
/// sink.emit(AgentEvent::TurnStarted { turn: 1 });
/// assert_eq!(sink.events().len(), 1);
/// ```
#[derive(Debug, Clone, Default)]
pub struct VecSink {
    events: Arc<Mutex<Vec<EventEnvelope>>>,
}

impl VecSink {
    /// A copy of the events so far.
    pub fn events(&self) -> Vec<AgentEvent> {
        self.envelopes().into_iter().map(|e| e.event).collect()
    }

    /// A copy of the events so far, with their origins.
    pub fn envelopes(&self) -> Vec<EventEnvelope> {
        self.events.lock().map(|e| e.clone()).unwrap_or_default()
    }

    /// Remove and return the events so far.
    pub fn take(&self) -> Vec<AgentEvent> {
        self.events
            .lock()
            .map(|mut e| std::mem::take(&mut *e))
            .unwrap_or_default()
            .into_iter()
            .map(|e| e.event)
            .collect()
    }
}

impl EventSink for VecSink {
    fn emit(&self, event: AgentEvent) {
        self.emit_envelope(EventEnvelope {
            agent: EventAgent::Main,
            turn: 0,
            event,
        });
    }

    fn emit_envelope(&self, envelope: EventEnvelope) {
        if let Ok(mut e) = self.events.lock() {
            e.push(envelope);
        }
    }
}

/// A bounded channel of events for a host that consumes them on another task (a terminal or
/// web UI). Emitting never blocks the agent.
///
/// **Policy when the receiver falls behind** (more than `capacity` events queued):
/// - a delta (`TextDelta`, `ThinkingDelta`, `ToolInputDelta`) that continues the last queued
///   delta (same agent, turn, kind and block) is merged into it, so no text is lost and the
///   queue does not grow;
/// - any other delta is dropped and counted ([`EventReceiver::dropped_deltas`]); the whole text
///   still arrives in `AssistantText` and the tool input in `ToolCallStarted`;
/// - every other event (tool calls, terminal events...) is always queued, even beyond
///   `capacity`: there are only a few per model call, and a host must never miss a turn's end.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use memloop_core::events::{AgentEvent, ChannelSink, EventSink};
/// let (sink, mut rx) = ChannelSink::bounded(1);
/// sink.emit(AgentEvent::TextDelta { index: 0, text: "Hel".into() });
/// sink.emit(AgentEvent::TextDelta { index: 0, text: "lo".into() }); // merged: queue is full
/// drop(sink);
/// let first = rx.recv().await.unwrap();
/// assert_eq!(first.event, AgentEvent::TextDelta { index: 0, text: "Hello".into() });
/// assert!(rx.recv().await.is_none());
/// # }
/// ```
#[derive(Debug)]
pub struct ChannelSink {
    shared: Arc<ChannelShared>,
}

#[derive(Debug)]
struct ChannelShared {
    queue: Mutex<VecDeque<EventEnvelope>>,
    notify: tokio::sync::Notify,
    capacity: usize,
    senders: AtomicUsize,
    dropped: AtomicU64,
}

/// The receiving end of a [`ChannelSink`].
#[derive(Debug)]
pub struct EventReceiver {
    shared: Arc<ChannelShared>,
}

impl ChannelSink {
    /// A sink and its receiver; `capacity` (at least 1) bounds the queued deltas.
    pub fn bounded(capacity: usize) -> (Self, EventReceiver) {
        let shared = Arc::new(ChannelShared {
            queue: Mutex::new(VecDeque::new()),
            notify: tokio::sync::Notify::new(),
            capacity: capacity.max(1),
            senders: AtomicUsize::new(1),
            dropped: AtomicU64::new(0),
        });
        (
            Self {
                shared: shared.clone(),
            },
            EventReceiver { shared },
        )
    }
}

impl Clone for ChannelSink {
    fn clone(&self) -> Self {
        self.shared.senders.fetch_add(1, Ordering::SeqCst);
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl Drop for ChannelSink {
    fn drop(&mut self) {
        if self.shared.senders.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.shared.notify.notify_one();
        }
    }
}

/// `more` continues `last`: same origin, same kind of delta, same block. Merges it in if so.
fn merge_delta(last: &mut EventEnvelope, more: &EventEnvelope) -> bool {
    if last.agent != more.agent || last.turn != more.turn {
        return false;
    }
    match (&mut last.event, &more.event) {
        (AgentEvent::TextDelta { index: a, text }, AgentEvent::TextDelta { index: b, text: t })
            if a == b =>
        {
            text.push_str(t)
        }
        (
            AgentEvent::ThinkingDelta { index: a, thinking },
            AgentEvent::ThinkingDelta {
                index: b,
                thinking: t,
            },
        ) if a == b => thinking.push_str(t),
        (
            AgentEvent::ToolInputDelta {
                index: a,
                partial_json,
            },
            AgentEvent::ToolInputDelta {
                index: b,
                partial_json: p,
            },
        ) if a == b => partial_json.push_str(p),
        _ => return false,
    }
    true
}

impl EventSink for ChannelSink {
    fn emit(&self, event: AgentEvent) {
        self.emit_envelope(EventEnvelope {
            agent: EventAgent::Main,
            turn: 0,
            event,
        });
    }

    fn emit_envelope(&self, envelope: EventEnvelope) {
        let Ok(mut q) = self.shared.queue.lock() else {
            return;
        };
        if envelope.event.is_delta() && q.len() >= self.shared.capacity {
            let merged = q
                .back_mut()
                .is_some_and(|last| merge_delta(last, &envelope));
            if !merged {
                self.shared.dropped.fetch_add(1, Ordering::Relaxed);
            }
            return;
        }
        q.push_back(envelope);
        drop(q);
        self.shared.notify.notify_one();
    }
}

impl EventReceiver {
    /// The next event; `None` once every sink is dropped and the queue is empty.
    pub async fn recv(&mut self) -> Option<EventEnvelope> {
        loop {
            if let Some(e) = self.try_recv() {
                return Some(e);
            }
            if self.shared.senders.load(Ordering::SeqCst) == 0 {
                return self.try_recv();
            }
            self.shared.notify.notified().await;
        }
    }

    /// The next event if one is queued.
    pub fn try_recv(&mut self) -> Option<EventEnvelope> {
        self.shared
            .queue
            .lock()
            .ok()
            .and_then(|mut q| q.pop_front())
    }

    /// Deltas dropped because the queue was full and they could not be merged.
    pub fn dropped_deltas(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }
}

/// Sends each event to several sinks.
#[derive(Clone, Default)]
pub struct FanoutSink(pub Vec<Arc<dyn EventSink>>);

impl EventSink for FanoutSink {
    fn emit(&self, event: AgentEvent) {
        for s in &self.0 {
            s.emit(event.clone());
        }
    }

    fn emit_envelope(&self, envelope: EventEnvelope) {
        for s in &self.0 {
            s.emit_envelope(envelope.clone());
        }
    }
}

/// Closure sink.
impl<F: Fn(AgentEvent) + Send + Sync> EventSink for F {
    fn emit(&self, event: AgentEvent) {
        self(event)
    }
}
