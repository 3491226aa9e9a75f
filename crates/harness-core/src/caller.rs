//! The agent a tool call runs for. The loop step sets it around every tool call
//! (`LoopStep::run_one`), so a tool that starts a child agent ([`crate::child`]) can inherit what
//! the calling agent has (model, tools, gate, event scope, context window, background tasks) and
//! knows how deep it is, without every tool's [`ToolContext`] carrying it.
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

/// What the agent whose tool call is running has, as its loop step holds it
/// ([`Caller::current`]): what a child agent ([`crate::child::ChildSpec`]) inherits.
#[derive(Clone)]
pub struct Caller {
    pub(crate) model: Arc<dyn Model>,
    pub(crate) tools: ToolRegistry,
    pub(crate) gate: Arc<dyn PermissionGate>,
    /// Its event scope (main agent and turn, a fork, a sub-agent).
    pub(crate) events: Arc<dyn EventSink>,
    pub(crate) window: ContextWindow,
    pub(crate) background: BackgroundTasks,
    /// 0 for the main agent and its forks, 1 for their sub-agents, ...
    pub(crate) depth: u32,
    pub(crate) tool_timeout: Duration,
    pub(crate) max_tool_output_bytes: usize,
    pub(crate) spill_dir: Option<PathBuf>,
    /// Its content capture, which a sub-agent inherits.
    pub(crate) capture: Option<crate::telemetry::ContentCapture>,
}

impl std::fmt::Debug for Caller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caller")
            .field("depth", &self.depth)
            .field("tools", &self.tools.names())
            .finish_non_exhaustive()
    }
}

impl Caller {
    /// The agent whose tool call is running, if any: `None` outside an agent loop (a tool
    /// called directly by a host).
    pub fn current() -> Option<Caller> {
        current()
    }

    /// Its model.
    pub fn model(&self) -> &Arc<dyn Model> {
        &self.model
    }

    /// Its context window.
    pub fn window(&self) -> &ContextWindow {
        &self.window
    }

    /// Its tools.
    pub fn tools(&self) -> &ToolRegistry {
        &self.tools
    }

    /// Its permission gate.
    pub fn gate(&self) -> &Arc<dyn PermissionGate> {
        &self.gate
    }

    /// Its event scope (main agent and turn, a fork, a sub-agent): where a warning about the
    /// call goes.
    pub fn events(&self) -> &Arc<dyn EventSink> {
        &self.events
    }

    /// Its background tasks: a child spawned here is waited for by the agent's `drain`.
    pub fn background(&self) -> &BackgroundTasks {
        &self.background
    }

    /// How deep it is: 0 for the main agent and its forks, 1 for their sub-agents, ...
    pub fn depth(&self) -> u32 {
        self.depth
    }
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
