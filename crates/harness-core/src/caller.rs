//! The agent a tool call runs for. The loop step sets it around every tool call
//! (`LoopStep::run_one`), so a tool that starts a sub-agent ([`crate::subagent::SubAgentTool`])
//! can inherit what the calling agent has (model, tools, gate, event scope, context window,
//! background tasks) and knows how deep it is, without every tool's [`ToolContext`] carrying it.
//!
//! [`ToolContext`]: crate::tool::ToolContext

use crate::background::BackgroundTasks;
use crate::events::EventSink;
use crate::model::Model;
use crate::tool::{PermissionGate, ToolRegistry};
use crate::window::ContextWindow;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// What the calling agent has, as its loop step holds it.
#[derive(Clone)]
pub(crate) struct Caller {
    pub model: Arc<dyn Model>,
    pub tools: ToolRegistry,
    pub gate: Arc<dyn PermissionGate>,
    /// Its event scope (main agent and turn, a fork, a sub-agent).
    pub events: Arc<dyn EventSink>,
    pub window: ContextWindow,
    pub background: BackgroundTasks,
    /// 0 for the main agent and its forks, 1 for their sub-agents, ...
    pub depth: u32,
    pub tool_timeout: Duration,
    pub max_tool_output_bytes: usize,
    pub spill_dir: Option<PathBuf>,
    /// Its content capture, which a sub-agent inherits.
    pub capture: Option<crate::telemetry::ContentCapture>,
}

tokio::task_local! {
    static CALLER: Caller;
}

/// Run `fut` (one tool call) as a call of `caller`.
pub(crate) async fn scope<F: Future>(caller: Caller, fut: F) -> F::Output {
    CALLER.scope(caller, fut).await
}

/// The agent whose tool call is running, if any (none outside an agent loop).
pub(crate) fn current() -> Option<Caller> {
    CALLER.try_with(Clone::clone).ok()
}
