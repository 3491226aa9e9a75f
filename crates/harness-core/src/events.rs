//! Typed events the agent emits for hosts (logging, UI, tests).

use crate::message::Usage;
use crate::model::StopReason;
use serde::Serialize;
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
    /// The turn hit the iteration guard.
    MaxIterationsReached {
        /// The configured limit.
        limit: u32,
    },
    /// The turn ended.
    TurnFinished {
        /// Turn number.
        turn: u64,
        /// Model calls made.
        iterations: u32,
    },
    /// An attachment (system reminder) was added to the conversation.
    AttachmentAdded {
        /// Its kind (`relevant_memories`, ...).
        kind: String,
        /// Bytes of text.
        bytes: usize,
    },
    /// Memories were surfaced into the conversation.
    MemoriesSurfaced {
        /// Relative paths.
        paths: Vec<String>,
        /// Bytes surfaced this time.
        bytes: usize,
    },
    /// Recall did not run this turn.
    RecallSkipped {
        /// Why.
        reason: String,
    },
    /// The extractor (or another background writer) saved memories.
    MemoriesSaved {
        /// Files written, relative to the memory dir (MEMORY.md excluded).
        paths: Vec<String>,
    },
    /// An extraction did not run.
    ExtractionSkipped {
        /// Why.
        reason: String,
    },
    /// An extraction failed (the cursor did not advance).
    ExtractionFailed {
        /// The error.
        error: String,
    },
    /// Session notes were updated.
    SessionMemoryUpdated {
        /// Notes file.
        path: String,
    },
    /// The conversation was compacted.
    Compacted {
        /// Strategy that did it (`session_memory`, `summary`).
        strategy: String,
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
    /// Consolidation ("dream") finished.
    DreamFinished {
        /// Files written.
        paths: Vec<String>,
    },
    /// Consolidation did not run.
    DreamSkipped {
        /// The gate that stopped it.
        gate: String,
    },
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
    /// A non-fatal problem worth showing.
    Warning {
        /// Description.
        message: String,
    },
}

/// Receives events. Must be cheap and non-blocking.
pub trait EventSink: Send + Sync {
    /// Handle one event.
    fn emit(&self, event: AgentEvent);
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
    events: Arc<Mutex<Vec<AgentEvent>>>,
}

impl VecSink {
    /// A copy of the events so far.
    pub fn events(&self) -> Vec<AgentEvent> {
        self.events.lock().map(|e| e.clone()).unwrap_or_default()
    }

    /// Remove and return the events so far.
    pub fn take(&self) -> Vec<AgentEvent> {
        self.events
            .lock()
            .map(|mut e| std::mem::take(&mut *e))
            .unwrap_or_default()
    }
}

impl EventSink for VecSink {
    fn emit(&self, event: AgentEvent) {
        if let Ok(mut e) = self.events.lock() {
            e.push(event);
        }
    }
}

/// Forwards events to an unbounded tokio channel.
#[derive(Debug, Clone)]
pub struct ChannelSink(pub tokio::sync::mpsc::UnboundedSender<AgentEvent>);

impl EventSink for ChannelSink {
    fn emit(&self, event: AgentEvent) {
        // A closed receiver means nobody listens any more; that is not an error.
        let _ = self.0.send(event);
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
}

/// Closure sink.
impl<F: Fn(AgentEvent) + Send + Sync> EventSink for F {
    fn emit(&self, event: AgentEvent) {
        self(event)
    }
}
