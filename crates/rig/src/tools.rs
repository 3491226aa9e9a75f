//! memloop's memory tools as rig tools: one [`DynamicTool`] per tool the session offers, its
//! name, description and schema taken from memloop, each call handed to memloop.

use memloop::{MemorySession, SessionError};
use rig_core::message::ToolName;
use rig_core::tool::{DynamicTool, ToolExecutionError, ToolOutput};
use std::sync::Arc;

/// One rig [`DynamicTool`] per memory tool of `session` (`memory_read`, `memory_write`,
/// `memory_delete`, and `memory_log_append` in daily-log mode), for
/// `AgentBuilder::dynamic_tools`. A call runs memloop's tool through
/// [`MemorySession::call_tool`]; the tool's own failure is a failed rig tool result whose text
/// the model sees.
pub fn memory_tools(session: &Arc<MemorySession>) -> Vec<DynamicTool> {
    session
        .tools()
        .into_iter()
        .filter_map(|spec| {
            let Ok(name) = ToolName::new(spec.name.clone()) else {
                tracing::warn!("memloop-rig: a memory tool with an empty name is left out");
                return None;
            };
            let session = session.clone();
            let tool = spec.name;
            Some(DynamicTool::new(
                name,
                spec.description,
                spec.input_schema,
                move |args| {
                    let (session, tool) = (session.clone(), tool.clone());
                    Box::pin(async move {
                        match session.call_tool(&tool, &args.to_string()).await {
                            Ok(text) => Ok(ToolOutput::text(text)),
                            Err(e) => Err(tool_error(e)),
                        }
                    })
                },
            ))
        })
        .collect()
}

/// memloop's tool failure as rig's, its text for the model.
fn tool_error(error: SessionError) -> ToolExecutionError {
    match error {
        SessionError::UnknownTool(_) => ToolExecutionError::not_found(error.to_string()),
        SessionError::BadArguments { .. } => ToolExecutionError::invalid_args(error.to_string()),
        _ => ToolExecutionError::other(error.to_string()),
    }
}
