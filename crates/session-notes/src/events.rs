//! What the session notes tell hosts: the notes were updated.

use memloop_core::events::{AgentEvent, ExtensionEvent};
use serde::Serialize;

/// What the session notes tell hosts: the notes were updated.
///
/// Hosts see it as [`AgentEvent::Extension`] and get it back with
/// [`AgentEvent::extension`]`::<NotesEvent>()`; serialised as `{"event": "extension", "source":
/// "memloop-session-notes", "data": {"event": "<variant in snake_case>", ...}}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum NotesEvent {
    /// Session notes were updated.
    NotesUpdated {
        /// Notes file.
        path: String,
    },
}

impl From<NotesEvent> for AgentEvent {
    fn from(event: NotesEvent) -> Self {
        ExtensionEvent::new("memloop-session-notes", event).into()
    }
}
