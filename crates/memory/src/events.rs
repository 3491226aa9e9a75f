//! What the memory writers tell hosts: memories saved, extraction skipped or failed, the dream finished or skipped.

use memloop_core::events::{AgentEvent, ExtensionEvent};
use serde::Serialize;

/// What the memory writers tell hosts: memories saved, extraction skipped or failed, the dream finished or skipped.
///
/// Hosts see it as [`AgentEvent::Extension`] and get it back with
/// [`AgentEvent::extension`]`::<MemoryEvent>()`; serialised as `{"event": "extension", "source":
/// "memloop-memory", "data": {"event": "<variant in snake_case>", ...}}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum MemoryEvent {
    /// The extractor (or another background writer) saved memories.
    MemoriesSaved {
        /// The memories written, as memory paths relative to the store (`knowledge/x.md`;
        /// `MEMORY.md` excluded), whatever the store (a directory or not).
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
}

impl From<MemoryEvent> for AgentEvent {
    fn from(event: MemoryEvent) -> Self {
        ExtensionEvent::new("memloop-memory", event).into()
    }
}
