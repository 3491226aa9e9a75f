//! The updater's only tool: an exact, single-match replace inside the notes file that can never
//! change a section header or its italic instruction line; and the updater's gate, which lets
//! that tool (on that file) through and nothing else.
//!
//! The updater forks from the main agent and declares the main agent's tools, so the tool is
//! registered on the main agent too (`memloop::MemorySetup` does): the updater's requests then
//! share the agent's cached prefix. The main agent (or any other fork) calling it is refused by
//! the tool itself, whatever the host's gate: the notes are the updater's alone.

use super::fs::write_private;
use super::notes::SessionMemoryError;
use super::template::frame;
use async_trait::async_trait;
use memloop_core::tool::{
    AgentKind, ContainsFn, PermissionDecision, PermissionGate, Tool, ToolCallRequest, ToolContext,
    ToolEffect, ToolOutput, ToolSpec,
};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// Name of the edit tool.
pub const EDIT_TOOL_NAME: &str = "edit_session_notes";

/// The `purpose` of the notes updater's fork (and of its model requests).
pub const NOTES_UPDATER_PURPOSE: &str = "session_memory";

/// Edits one notes file (see the module docs). Only the notes updater's fork may call it; its
/// `write_targets` always name that file, so the updater's gate is the second line of defence.
#[derive(Debug, Clone)]
pub struct NotesEditTool {
    path: PathBuf,
}

#[derive(Debug, Deserialize)]
struct EditInput {
    old_string: String,
    new_string: String,
    #[serde(default)]
    file_path: Option<String>,
}

impl NotesEditTool {
    /// A tool editing `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    fn parse(input: &serde_json::Value) -> Result<EditInput, String> {
        serde_json::from_value(input.clone()).map_err(|e| {
            format!("invalid input: {e}; expected {{\"old_string\": ..., \"new_string\": ...}}")
        })
    }

    fn check_target(&self, input: &EditInput) -> Result<(), String> {
        match &input.file_path {
            Some(p) if Path::new(p) != self.path => Err(format!(
                "this tool only edits the session notes file {}, not {p}",
                self.path.display()
            )),
            _ => Ok(()),
        }
    }
}

/// Apply one edit to `current`: `old_string` must occur exactly once and the result must keep
/// every header and instruction line unchanged.
///
/// ```
/// use memloop_session_notes::apply_notes_edit;
/// let notes = "# Worklog\n_One line per step._\n\n";
/// let ok = apply_notes_edit(notes, "_One line per step._\n\n", "_One line per step._\n- read a.rs\n");
/// assert!(ok.is_ok());
/// assert!(apply_notes_edit(notes, "# Worklog", "# Log").is_err());
/// ```
pub fn apply_notes_edit(
    current: &str,
    old_string: &str,
    new_string: &str,
) -> Result<String, SessionMemoryError> {
    if old_string.is_empty() {
        return Err(SessionMemoryError::InvalidEdit(
            "old_string is empty; quote the exact text to replace".into(),
        ));
    }
    match current.matches(old_string).count() {
        0 => {
            return Err(SessionMemoryError::InvalidEdit(
                "old_string was not found in the notes; copy it exactly from the current notes"
                    .into(),
            ));
        }
        1 => {}
        n => {
            return Err(SessionMemoryError::InvalidEdit(format!(
                "old_string occurs {n} times; include more surrounding text so it is unique"
            )));
        }
    }
    let updated = current.replacen(old_string, new_string, 1);
    if frame(&updated) != frame(current) {
        return Err(SessionMemoryError::InvalidEdit(
            "the edit changes a section header (a line starting with `# `) or the italic \
             instruction line under it; those lines are fixed, edit only the text below them"
                .into(),
        ));
    }
    Ok(updated)
}

#[async_trait]
impl Tool for NotesEditTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: EDIT_TOOL_NAME.into(),
            // No path in the spec: it is the same in every session, so the agents that declare
            // it keep a prompt prefix that later sessions can reuse from the cache.
            description: "Used only by the background session-notes updater (other calls are \
                refused). Edit the session notes file named in the task: replace the exact text \
                `old_string` (it must occur exactly once) with `new_string`. Section headers and \
                the italic line under each header cannot be changed."
                .into(),
            input_schema: serde_json::json!({
                "type": "object",
                "properties": {
                    "old_string": {"type": "string", "description": "Exact text to replace (unique in the file)."},
                    "new_string": {"type": "string", "description": "Replacement text."},
                    "file_path": {"type": "string", "description": "Optional; must be the notes file."}
                },
                "required": ["old_string", "new_string"]
            }),
            effect: ToolEffect::WritesFiles,
        }
    }

    fn write_targets(
        &self,
        input: &serde_json::Value,
        _ctx: &ToolContext,
    ) -> Result<Vec<PathBuf>, String> {
        let input = Self::parse(input)?;
        self.check_target(&input)?;
        Ok(vec![self.path.clone()])
    }

    async fn call(&self, input: serde_json::Value, ctx: &ToolContext) -> ToolOutput {
        if !matches!(&ctx.agent, AgentKind::Forked(p) if p == NOTES_UPDATER_PURPOSE) {
            tracing::warn!(agent = ?ctx.agent, "session notes edit refused: not the notes updater");
            return ToolOutput::error(format!(
                "{EDIT_TOOL_NAME} is reserved for the background session-notes updater; the \
                 notes are kept for you, do not edit them"
            ));
        }
        let input = match Self::parse(&input) {
            Ok(i) => i,
            Err(e) => return ToolOutput::error(e),
        };
        if let Err(e) = self.check_target(&input) {
            return ToolOutput::error(e);
        }
        let current = match tokio::fs::read_to_string(&self.path).await {
            Ok(c) => c,
            Err(e) => return ToolOutput::error(format!("cannot read the notes: {e}")),
        };
        let updated = match apply_notes_edit(&current, &input.old_string, &input.new_string) {
            Ok(u) => u,
            Err(e) => return ToolOutput::error(e.to_string()),
        };
        match write_private(&self.path, &updated).await {
            Ok(()) => ToolOutput::ok("Notes updated.").with_file_written(self.path.clone()),
            Err(e) => ToolOutput::error(format!("cannot write the notes: {e}")),
        }
    }
}

/// A containment check for `WriteScopeGate`: only the notes file itself.
pub fn only_this_file(path: PathBuf) -> impl Fn(&Path) -> Result<(), String> + Send + Sync {
    move |target: &Path| {
        let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        if canon(target) == canon(&path) {
            Ok(())
        } else {
            Err(format!(
                "{} is not the session notes file {}",
                target.display(),
                path.display()
            ))
        }
    }
}

/// The notes updater's gate: [`EDIT_TOOL_NAME`] on the notes file is allowed; every other tool
/// the updater declares (the main agent's) is denied, read-only ones included: the notes and
/// the conversation are already in its prompt.
pub(crate) struct NotesUpdaterGate {
    contains: ContainsFn,
}

impl NotesUpdaterGate {
    /// A gate for the notes file at `path`.
    pub(crate) fn new(path: PathBuf) -> Self {
        Self {
            contains: std::sync::Arc::new(only_this_file(path)),
        }
    }
}

#[async_trait]
impl PermissionGate for NotesUpdaterGate {
    async fn check(&self, call: &ToolCallRequest, _ctx: &ToolContext) -> PermissionDecision {
        let verdict = if call.name != EDIT_TOOL_NAME {
            Err(format!(
                "{} is not available to the notes updater; edit the notes only with \
                 {EDIT_TOOL_NAME}",
                call.name
            ))
        } else {
            match &call.write_targets {
                Ok(targets) if !targets.is_empty() => {
                    targets.iter().try_for_each(|t| (self.contains)(t))
                }
                Ok(_) => Err(format!("{EDIT_TOOL_NAME} did not name its target")),
                Err(why) => Err(why.clone()),
            }
        };
        match verdict {
            Ok(()) => PermissionDecision::Allow,
            Err(why) => {
                tracing::debug!(tool = %call.name, reason = %why, "notes updater: call denied");
                PermissionDecision::Deny(format!("Permission denied: {why}"))
            }
        }
    }
}
