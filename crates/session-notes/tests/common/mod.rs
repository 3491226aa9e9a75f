//! Shared helpers of the session-memory tests.
#![allow(dead_code)]

use memloop_core::{
    HookContext,
    events::VecSink,
    message::Message,
    model::{Model, ModelRequest},
};
use memloop_session_notes::{EDIT_TOOL_NAME, FileSessionNotes, SessionNotesConfig};
use memloop_testkit::{ScriptStep, ScriptedModel, hook_context};
use serde_json::json;
use std::sync::Arc;
use tempfile::TempDir;

pub const WORKLOG_LINE: &str = "_Terse, chronological steps taken so far, one line each._";

pub fn ctx_with(
    model: Arc<dyn Model>,
    messages: Vec<Message>,
    tokens: u64,
) -> (HookContext, VecSink) {
    let sink = VecSink::default();
    let ctx = HookContext {
        system: Arc::new(vec!["system".into()]),
        context_tokens: tokens,
        events: Arc::new(sink.clone()),
        ..hook_context(model, messages)
    };
    (ctx, sink)
}

pub fn memory(dir: &TempDir) -> FileSessionNotes {
    FileSessionNotes::new(
        SessionNotesConfig::new(dir.path().join("projects/slug")),
        "s1",
    )
    .unwrap()
}

/// An updater script: a fresh prompt gets `edit`, a tool result gets "done".
pub fn updater(
    edit: impl Fn(&ModelRequest) -> ScriptStep + Send + Sync + 'static,
) -> ScriptedModel {
    ScriptedModel::new().on_purpose("session_memory", move |req| {
        let last = req.messages.last()?;
        if last.tool_result_ids().next().is_some() {
            Some(ScriptStep::text("done"))
        } else {
            Some(edit(req))
        }
    })
}

pub fn append_worklog(line: &str) -> ScriptStep {
    ScriptStep::tool(
        EDIT_TOOL_NAME,
        json!({"old_string": WORKLOG_LINE, "new_string": format!("{WORKLOG_LINE}\n- {line}")}),
    )
}
