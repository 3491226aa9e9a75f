//! # memloop-session-notes
//!
//! Session memory: a per-session notes file with fixed sections, kept up to date
//! in the background by a forked agent and used as the summary when the conversation is compacted.
//!
//! - [`SessionMemory`]: the trait compaction uses (`Arc<dyn SessionMemory>`).
//! - [`FileSessionNotes`]: the default, a Markdown file per session.
//! - [`SessionNotesHook`]: the post-sampling hook that schedules updates and the compaction
//!   listener that resets the baselines.

mod config;
mod edit_tool;
mod events;
mod file;
mod fs;
mod hook;
mod notes;
mod queue;
mod template;

pub use config::{Baselines, NotesCaps, SessionNotesConfig, UpdateSignal, UpdateThresholds};
pub use edit_tool::{
    EDIT_TOOL_NAME, NOTES_UPDATER_PURPOSE, NotesEditTool, apply_notes_edit, only_this_file,
};
pub use events::NotesEvent;
pub use file::FileSessionNotes;
pub use hook::SessionNotesHook;
pub use notes::{
    CompactionNotes, SessionMemory, SessionMemoryError, UpdateFuture, UpdateReport, UpdateTrigger,
};
pub use template::{
    CONDENSE_REMINDER, DEFAULT_TEMPLATE, DEFAULT_UPDATE_PROMPT, OversizedSection, Section, frame,
    is_section_header, oversized_sections, sections,
};
