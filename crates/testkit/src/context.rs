//! A ready [`HookContext`] for calling a hook directly in a test.

use memloop_core::HookContext;
use memloop_core::model::Model;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// A [`HookContext`](HookContext) for calling hooks directly in tests, with defaults:
/// session `"s1"`, turn 1, the main agent, cwd `"."`, an empty system prompt, no tools, 0 context tokens,
/// no recent tools, a [`NullSink`](memloop_core::events::NullSink), fresh [`BackgroundTasks`](memloop_core::BackgroundTasks)
/// and a fresh [`CancellationToken`]. Override fields with struct update syntax.
///
/// ```
/// use memloop_testkit::{ScriptedModel, hook_context};
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
    messages: Vec<memloop_core::message::Message>,
) -> HookContext {
    HookContext {
        session_id: "s1".into(),
        turn: 1,
        agent: memloop_core::tool::AgentKind::Main,
        cwd: ".".into(),
        model,
        system: Arc::new(Vec::new()),
        messages: Arc::new(messages),
        tools: memloop_core::tool::ToolRegistry::new(),
        context_tokens: 0,
        recent_tools: Vec::new(),
        window: memloop_core::window::ContextWindow::default(),
        events: Arc::new(memloop_core::events::NullSink),
        background: memloop_core::BackgroundTasks::new(),
        cancel: CancellationToken::new(),
        capture: None,
    }
}

/// A [`ToolContext`](memloop_core::tool::ToolContext) for calling a tool directly in a test:
/// session `"s1"`, the system temp dir as cwd, the main agent and a fresh
/// [`CancellationToken`]. Override fields with struct update syntax.
///
/// ```
/// use memloop_core::tool::AgentKind;
/// let ctx = memloop_testkit::tool_context();
/// assert_eq!((ctx.session_id.as_str(), ctx.agent), ("s1", AgentKind::Main));
/// ```
pub fn tool_context() -> memloop_core::tool::ToolContext {
    memloop_core::tool::ToolContext {
        session_id: "s1".into(),
        cwd: std::env::temp_dir(),
        agent: memloop_core::tool::AgentKind::Main,
        cancel: CancellationToken::new(),
    }
}
