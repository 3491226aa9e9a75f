//! Waiting for recall in a turn (feature `recall`).

use async_trait::async_trait;
use memloop_core::events::{AgentEvent, EventSink};
use memloop_core::tool::{Tool, ToolContext, ToolEffect, ToolOutput, ToolSpec};
use memloop_recall::RecallEvent;
use std::time::Duration;
use tokio::sync::Notify;

/// A tool named `wait_for_recall` that returns once recall has surfaced something, and the
/// event sink that tells it so: give the agent the same `Arc` as a tool and (beside any other
/// sink, with a `FanoutSink`) as its events. Recall never delays a turn, and a scripted model
/// answers at once; a turn whose model first calls this tool sees the recall attachment land
/// during the call, whatever the timing.
///
/// The wait is bounded (60 s by default, [`within`](Self::within)): a recall that never
/// surfaces makes the tool answer with an error, so the test fails instead of hanging.
///
/// ```
/// use memloop_core::Agent;
/// use memloop_core::events::{EventSink, FanoutSink, VecSink};
/// use memloop_testkit::{ScriptStep, ScriptedModel, WaitForRecall};
/// use std::sync::Arc;
///
/// let model = ScriptedModel::new()
///     .then(ScriptStep::tool(WaitForRecall::NAME, serde_json::json!({})))
///     .then(ScriptStep::text("I will use a real database."));
/// let wait = Arc::new(WaitForRecall::new());
/// let events = VecSink::default();
/// let sinks: Vec<Arc<dyn EventSink>> = vec![Arc::new(events.clone()), wait.clone()];
/// let agent = Agent::builder(Arc::new(model))
///     .tool(wait.clone())
///     .events(Arc::new(FanoutSink(sinks)))
///     // .hook(recall)
///     .build();
/// ```
#[derive(Debug)]
pub struct WaitForRecall {
    surfaced: Notify,
    timeout: Duration,
}

impl Default for WaitForRecall {
    fn default() -> Self {
        Self::new()
    }
}

impl WaitForRecall {
    /// The tool's name.
    pub const NAME: &str = "wait_for_recall";

    /// A tool waiting up to 60 s.
    pub fn new() -> Self {
        Self::within(Duration::from_secs(60))
    }

    /// A tool waiting up to `timeout`.
    pub fn within(timeout: Duration) -> Self {
        Self {
            surfaced: Notify::new(),
            timeout,
        }
    }
}

impl EventSink for WaitForRecall {
    /// Wakes the tool on [`RecallEvent::MemoriesSurfaced`] (or lets its next call return at
    /// once, when it is not waiting yet).
    fn emit(&self, event: AgentEvent) {
        if matches!(
            event.extension(),
            Some(RecallEvent::MemoriesSurfaced { .. })
        ) {
            self.surfaced.notify_one();
        }
    }
}

#[async_trait]
impl Tool for WaitForRecall {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: Self::NAME.into(),
            description: "Returns once recall has surfaced memories.".into(),
            input_schema: serde_json::json!({"type": "object"}),
            effect: ToolEffect::ReadOnly,
        }
    }

    async fn call(&self, _input: serde_json::Value, _ctx: &ToolContext) -> ToolOutput {
        match tokio::time::timeout(self.timeout, self.surfaced.notified()).await {
            Ok(()) => ToolOutput::ok("recall settled"),
            Err(_) => {
                ToolOutput::error(format!("recall surfaced nothing within {:?}", self.timeout))
            }
        }
    }
}
